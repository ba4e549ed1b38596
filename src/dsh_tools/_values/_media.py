"""Pictures, sound and files in results: :class:`ImageBlock`, :class:`AudioBlock`,
:class:`FileBlock`, and what every adapter needs to know of them.

A block carries its bytes (``data``) or a URL (``url``: ``https:``, or a ``data:`` URL whose
media type is the block's). Construction checks everything a provider would refuse later, so a
bad block is an error where it was made, not a failed request one turn on: the media type is one
of its kind's known types, the bytes start with that type's signature (text types: valid UTF-8),
a ``data:`` URL is base64 and its payload passes the same checks.

Dimensions are read from the headers of PNG, JPEG, GIF and WebP images, for descriptions such as
``[image/png 640x480, 12 kB]``; nothing decodes a picture.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Callable
from typing import Final, TypeAlias, cast
from urllib.parse import urlsplit

import attrs

__all__ = [
    "DEFAULT_MAX_BINARY_BYTES",
    "AudioBlock",
    "FileBlock",
    "ImageBlock",
    "MediaBlock",
    "block_payload",
    "describe_media",
    "format_size",
    "image_dimensions",
    "media_problem",
    "oversized_note",
]

DEFAULT_MAX_BINARY_BYTES: Final = 20 * 2**20
"""``ToolRegistry(max_binary_bytes=...)``'s default: the largest block a result carries."""


def _starts(*signatures: bytes) -> Callable[[bytes], bool]:
    return lambda data: data.startswith(signatures)


def _riff(form: bytes) -> Callable[[bytes], bool]:
    return lambda data: data[:4] == b"RIFF" and data[8:12] == form


def _mpeg_audio(data: bytes) -> bool:
    # an ID3 tag, or an MPEG frame sync (11 set bits)
    return data[:3] == b"ID3" or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0)


def _adts(data: bytes) -> bool:
    return len(data) > 1 and data[0] == 0xFF and data[1] & 0xF6 == 0xF0


def _iso_media(data: bytes) -> bool:
    return data[4:8] == b"ftyp"


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


_Check: TypeAlias = Callable[[bytes], bool]

_IMAGE_MEDIA_TYPES: Final[dict[str, _Check]] = {
    "image/png": _starts(b"\x89PNG\r\n\x1a\n"),
    "image/jpeg": _starts(b"\xff\xd8\xff"),
    "image/gif": _starts(b"GIF87a", b"GIF89a"),
    "image/webp": _riff(b"WEBP"),
}
"""The image media types a block may have (what the providers accept), each with the check of
its bytes' signature."""

_AUDIO_MEDIA_TYPES: Final[dict[str, _Check]] = {
    "audio/wav": _riff(b"WAVE"),
    "audio/mpeg": _mpeg_audio,
    "audio/ogg": _starts(b"OggS"),
    "audio/flac": _starts(b"fLaC"),
    "audio/webm": _starts(b"\x1a\x45\xdf\xa3"),
    "audio/aac": _adts,
    "audio/mp4": _iso_media,
}
"""The audio media types a block may have, each with the check of its bytes' signature."""

_FILE_MEDIA_TYPES: Final[dict[str, _Check]] = {
    "application/pdf": _starts(b"%PDF-"),
    "text/plain": _utf8,
    "text/markdown": _utf8,
    "text/csv": _utf8,
    "text/html": _utf8,
    "application/json": _utf8,
    "application/xml": _utf8,
}
"""The document media types a file block may have: PDFs (their signature is checked) and text
(it must be UTF-8)."""


def _bytes_repr(data: object) -> str:
    # a picture's bytes make a useless repr: their count says what matters
    return f"<{len(data)} bytes>" if isinstance(data, bytes) else repr(data)


def _url_repr(url: object) -> str:
    return repr(_clip(url, 80)) if isinstance(url, str) else repr(url)


@attrs.frozen(kw_only=True)
class ImageBlock:
    """A picture: ``image/png``, ``image/jpeg``, ``image/gif`` or ``image/webp``.

    Exactly one of ``data`` (the bytes) and ``url`` (``https:`` or a ``data:`` URL) is given.
    Wire: ``{"type": "image", "mediaType": ..., "data": <base64>}`` or ``"url"`` in place of
    ``"data"``.

    Raises:
        TypeError: ``data`` is not bytes, or ``media_type`` / ``url`` not a str.
        ValueError: an unknown media type, both or neither of ``data`` and ``url``, bytes
            without the media type's signature, or a URL of another scheme.
    """

    media_type: str
    data: bytes | None = attrs.field(default=None, repr=_bytes_repr)
    url: str | None = attrs.field(default=None, repr=_url_repr)

    def __attrs_post_init__(self) -> None:
        _raise_problem(self)


@attrs.frozen(kw_only=True)
class AudioBlock:
    """Sound: ``audio/wav``, ``audio/mpeg``, ``audio/ogg``, ``audio/flac``, ``audio/webm``,
    ``audio/aac`` or ``audio/mp4``, carried as its bytes (wire: ``{"type": "audio",
    "mediaType": ..., "data": <base64>}``).

    Raises:
        TypeError: ``data`` is not bytes, or ``media_type`` not a str.
        ValueError: an unknown media type, or bytes without its signature.
    """

    media_type: str
    data: bytes = attrs.field(repr=_bytes_repr)

    def __attrs_post_init__(self) -> None:
        _raise_problem(self)


@attrs.frozen(kw_only=True)
class FileBlock:
    """A document: a PDF (``application/pdf``) or text (``text/plain``, ``text/markdown``,
    ``text/csv``, ``text/html``, ``application/json``, ``application/xml``), with an optional
    file ``name``.

    Exactly one of ``data`` and ``url`` is given, as for :class:`ImageBlock`. Wire:
    ``{"type": "file", "mediaType": ..., "data": <base64>, "name"?: ...}``.

    Raises:
        TypeError: a field of the wrong type.
        ValueError: an unknown media type, both or neither of ``data`` and ``url``, bytes
            without the media type's signature (text: not UTF-8), or a URL of another scheme.
    """

    media_type: str
    data: bytes | None = attrs.field(default=None, repr=_bytes_repr)
    url: str | None = attrs.field(default=None, repr=_url_repr)
    name: str | None = None

    def __attrs_post_init__(self) -> None:
        _raise_problem(self)


MediaBlock: TypeAlias = ImageBlock | AudioBlock | FileBlock
"""A block that carries bytes: a picture, a sound or a document."""

_KINDS: Final[dict[type, tuple[str, dict[str, _Check]]]] = {
    ImageBlock: ("image", _IMAGE_MEDIA_TYPES),
    AudioBlock: ("audio", _AUDIO_MEDIA_TYPES),
    FileBlock: ("file", _FILE_MEDIA_TYPES),
}


def _raise_problem(block: MediaBlock) -> None:
    problem = media_problem(block)
    if problem is not None:
        raise problem


def media_problem(block: MediaBlock) -> TypeError | ValueError | None:
    """What is wrong with ``block`` (the error its constructor raises), or ``None``."""
    kind, known = _KINDS[type(block)]
    name = type(block).__name__
    media_type: object = block.media_type
    data: object = block.data
    url: object = getattr(block, "url", None)
    if type(media_type) is not str:
        return TypeError(f"{name}.media_type must be a str, not {type(media_type).__name__}")
    check = known.get(media_type)
    if check is None:
        return ValueError(
            f"{name}: unknown {kind} media type {media_type!r} (known: {', '.join(known)})"
        )
    if type(block) is FileBlock:
        file_name: object = block.name
        if file_name is not None and type(file_name) is not str:
            return TypeError(
                f"FileBlock.name must be a str or None, not {type(file_name).__name__}"
            )
    if data is not None and url is not None:
        return ValueError(f"{name}: give data or url, not both")
    if data is None and url is None:
        return ValueError(f"{name}: give data (bytes) or url (https: or data:)")
    if data is not None:
        if type(data) is not bytes:
            hint = "; a URL goes in url=" if isinstance(data, str) else ""
            return TypeError(f"{name}.data must be bytes, not {type(data).__name__}{hint}")
        return _payload_problem(name, media_type, data, check)
    if type(url) is not str:
        return TypeError(f"{name}.url must be a str, not {type(url).__name__}")
    if url.startswith("data:"):
        payload = _data_url_payload(url)
        if isinstance(payload, str):
            return ValueError(f"{name}.url: {payload}")
        url_type, raw = payload
        if url_type != media_type:
            return ValueError(
                f"{name}.url is a data: URL of {url_type!r}, but the block's media type is "
                f"{media_type!r}"
            )
        return _payload_problem(name, media_type, raw, check)
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.netloc:
        return ValueError(f"{name}.url must be an https: URL or a data: URL, not {_clip(url)!r}")
    return None


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _payload_problem(name: str, media_type: str, data: bytes, check: _Check) -> ValueError | None:
    if check(data):
        return None
    if media_type.startswith("text/") or media_type in ("application/json", "application/xml"):
        return ValueError(f"{name}: the data of a {media_type} block must be UTF-8 text")
    return ValueError(
        f"{name}: the data does not start with the signature of {media_type} "
        f"(it starts {data[:8]!r})"
    )


def _data_url_payload(url: str) -> tuple[str, bytes] | str:
    """A ``data:`` URL's media type and bytes, or what is wrong with it."""
    header, comma, encoded = url.partition(",")
    if not comma:
        return "a data: URL needs a comma before its payload"
    params = header[len("data:") :].split(";")
    if params[-1] != "base64":
        return "a data: URL must be base64 (data:<media type>;base64,<data>)"
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return "the payload of the data: URL is not valid base64"
    return params[0], raw


def block_payload(block: MediaBlock) -> bytes | None:
    """The bytes ``block`` carries (its ``data``, or its ``data:`` URL decoded); ``None`` for an
    ``https:`` URL, whose bytes are not here.
    """
    if block.data is not None:
        return block.data
    url = cast("str", getattr(block, "url", None))
    if url.startswith("data:"):
        payload = _data_url_payload(url)
        return payload[1] if not isinstance(payload, str) else None
    return None


# --- reading dimensions from headers -----------------------------------------------------------


def _png_size(data: bytes) -> tuple[int, int] | None:
    if len(data) >= 24 and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return width, height
    return None


def _gif_size(data: bytes) -> tuple[int, int] | None:
    if len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return width, height
    return None


# start-of-frame markers: every SOFn but DHT (C4), JPG (C8) and DAC (CC)
_JPEG_FRAMES: Final = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            at += 2
            continue
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        if marker in _JPEG_FRAMES:
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        at += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30:
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    return None


_SIZE_READERS: Final = {
    "image/png": _png_size,
    "image/gif": _gif_size,
    "image/jpeg": _jpeg_size,
    "image/webp": _webp_size,
}


def image_dimensions(media_type: str, data: bytes) -> tuple[int, int] | None:
    """``(width, height)`` read from the header of a PNG, JPEG, GIF or WebP image, or ``None``
    when the header does not say (a truncated or unusual file).
    """
    reader = _SIZE_READERS.get(media_type)
    if reader is None:
        return None
    try:
        return reader(data)
    except struct.error:
        return None


def format_size(size: int) -> str:
    """A byte count for people: ``512 B``, ``1.5 kB``, ``12 kB``, ``3.2 MB`` (decimal units)."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= scale:
            value = size / scale
            text = f"{value:.1f}" if value < 10 else f"{value:.0f}"
            return f"{text.removesuffix('.0')} {unit}"
    return f"{size} B"


def describe_media(block: MediaBlock) -> str:
    """One line for people and logs: ``[image/png 640x480, 12 kB]``,
    ``[application/pdf report.pdf, 120 kB]``, ``[image/png, https://example.com/a.png]``.
    """
    head = block.media_type
    name = getattr(block, "name", None)
    if name:
        head += f" {name}"
    payload = block_payload(block)
    if payload is None:
        return f"[{head}, {_clip(cast('str', getattr(block, 'url', '')))}]"
    if type(block) is ImageBlock:
        dimensions = image_dimensions(block.media_type, payload)
        if dimensions is not None:
            head += f" {dimensions[0]}x{dimensions[1]}"
    return f"[{head}, {format_size(len(payload))}]"


def oversized_note(block: MediaBlock, size: int, limit: int) -> str:
    """The text that replaces a block over ``max_binary_bytes``, for the model to read."""
    return (
        f"{describe_media(block)} not sent: it is {size} bytes, and one block may carry at "
        f"most {limit} bytes here"
    )
