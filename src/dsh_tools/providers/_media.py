"""Pictures, sound and files in each provider's message shapes.

Anthropic takes images and documents inside a ``tool_result``; the Responses API takes
``input_image`` / ``input_file`` items in a ``function_call_output``; a Chat Completions tool
message takes text only, so its pictures travel in a ``user`` message after the tool messages.
What a provider cannot take (sound anywhere but a Chat user message, a document URL in Chat)
is written as its one-line description, so the model still learns it was there.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import Literal, TypeAlias, cast

from dsh_tools import AudioBlock, ContentBlock, FileBlock, ImageBlock, ToolCallRequest
from dsh_tools._for_integrations import block_payload, describe_media

from ._common import JsonDict, content_text

__all__ = [
    "MediaMode",
    "anthropic_content",
    "chat_media_parts",
    "chat_user_content",
    "check_media_mode",
    "has_media",
    "media_heading",
    "responses_content",
]

MediaMode: TypeAlias = Literal["user_message", "drop"]
"""How Chat Completions carries the pictures and files of a tool result: in one following
``user`` message (``"user_message"``), or not at all (``"drop"``: the placeholder only)."""

_MEDIA: tuple[type, ...] = (ImageBlock, AudioBlock, FileBlock)

_MediaBlock: TypeAlias = ImageBlock | AudioBlock | FileBlock


def check_media_mode(media: object) -> MediaMode:
    if media != "user_message" and media != "drop":
        raise ValueError(f'media must be "user_message" or "drop", not {media!r}')
    return cast("MediaMode", media)


def has_media(content: Sequence[ContentBlock]) -> bool:
    """Whether ``content`` holds a picture, sound or file."""
    return any(isinstance(block, _MEDIA) for block in content)


def _base64(block: _MediaBlock) -> str | None:
    payload = block_payload(block)
    return None if payload is None else base64.b64encode(payload).decode("ascii")


def _data_url(block: _MediaBlock) -> str:
    """The block as a URL: its own, or a ``data:`` URL of its bytes."""
    url = getattr(block, "url", None)
    if isinstance(url, str):
        return url
    return f"data:{block.media_type};base64,{_base64(block)}"


def _filename(block: FileBlock) -> str:
    if block.name:
        return block.name
    extension = {"application/pdf": "pdf", "text/markdown": "md", "text/plain": "txt"}.get(
        block.media_type, block.media_type.rpartition("/")[2]
    )
    return f"file.{extension}"


def _text(text: str) -> JsonDict:
    return {"type": "text", "text": text}


def _mixed(
    content: Sequence[ContentBlock],
    media_item: Callable[[_MediaBlock], JsonDict],
    text_item: Callable[[str], JsonDict],
) -> list[JsonDict]:
    """``content`` as a provider's list: each run of other blocks joined into one text item (as
    the text-only form joins them; an empty run is left out), each picture, sound or file its
    own item.
    """
    items: list[JsonDict] = []
    run: list[ContentBlock] = []
    for block in [*content, None]:
        if block is not None and not isinstance(block, _MEDIA):
            run.append(block)
            continue
        text = content_text(run)
        if text:
            items.append(text_item(text))
        run.clear()
        if block is not None:
            items.append(media_item(cast("_MediaBlock", block)))
    return items


# --- Anthropic ------------------------------------------------------------------------------


def _anthropic_block(block: _MediaBlock) -> JsonDict:
    url = getattr(block, "url", None)
    remote = isinstance(url, str) and url.startswith("https:")
    if isinstance(block, ImageBlock):
        source: JsonDict = (
            {"type": "url", "url": url}
            if remote
            else {"type": "base64", "media_type": block.media_type, "data": _base64(block)}
        )
        return {"type": "image", "source": source}
    if isinstance(block, FileBlock):
        if block.media_type == "application/pdf":
            source = (
                {"type": "url", "url": url}
                if remote
                else {"type": "base64", "media_type": "application/pdf", "data": _base64(block)}
            )
        elif not remote:
            payload = cast("bytes", block_payload(block))
            # Anthropic's plain-text document: every text type is sent as its text
            source = {"type": "text", "media_type": "text/plain", "data": payload.decode()}
        else:
            return _text(describe_media(block))  # a text document by URL: not a source it takes
        document: JsonDict = {"type": "document", "source": source}
        if block.name:
            document["title"] = block.name
        return document
    return _text(describe_media(block))  # no sound in Anthropic's messages


def anthropic_content(content: Sequence[ContentBlock]) -> list[JsonDict]:
    """``content`` as Anthropic content blocks: runs of text joined into one text block (as the
    text-only form joins them), pictures and PDFs / text documents as their own blocks, sound
    as its description. Empty text is left out (the API refuses it).
    """
    return _mixed(content, _anthropic_block, _text)


# --- OpenAI Responses -----------------------------------------------------------------------


def _responses_item(block: _MediaBlock) -> JsonDict:
    if isinstance(block, ImageBlock):
        return {"type": "input_image", "image_url": _data_url(block), "detail": "auto"}
    if isinstance(block, FileBlock):
        url = block.url
        if url is not None and url.startswith("https:"):
            return {"type": "input_file", "file_url": url}
        return {"type": "input_file", "filename": _filename(block), "file_data": _data_url(block)}
    return {"type": "input_text", "text": describe_media(block)}  # no sound in tool output


def _input_text(text: str) -> JsonDict:
    return {"type": "input_text", "text": text}


def responses_content(content: Sequence[ContentBlock]) -> list[JsonDict]:
    """``content`` as Responses API input content: runs of text as ``input_text``, pictures as
    ``input_image``, files as ``input_file``, sound as its description.
    """
    return _mixed(content, _responses_item, _input_text)


# --- OpenAI Chat Completions ----------------------------------------------------------------

_CHAT_AUDIO = {"audio/wav": "wav", "audio/mpeg": "mp3"}


def _chat_part(block: _MediaBlock) -> JsonDict:
    if isinstance(block, ImageBlock):
        return {"type": "image_url", "image_url": {"url": _data_url(block)}}
    if isinstance(block, AudioBlock):
        audio_format = _CHAT_AUDIO.get(block.media_type)
        if audio_format is not None:
            return {
                "type": "input_audio",
                "input_audio": {"data": _base64(block), "format": audio_format},
            }
        return _text(describe_media(block))
    url = block.url
    if url is not None and url.startswith("https:"):
        return _text(describe_media(block))  # Chat takes a file's bytes, not its URL
    return {"type": "file", "file": {"filename": _filename(block), "file_data": _data_url(block)}}


def media_heading(call: ToolCallRequest) -> str:
    """The text part before one result's media in Chat's following user message."""
    return f"Attached to the result of {call.name} (call {call.call_id}):"


def chat_media_parts(content: Sequence[ContentBlock]) -> list[JsonDict]:
    """The Chat Completions user-message parts of ``content``'s pictures, sound and files
    (its text is in the tool message already).
    """
    return [_chat_part(cast("_MediaBlock", b)) for b in content if isinstance(b, _MEDIA)]


def chat_user_content(content: Sequence[ContentBlock], media: MediaMode) -> str | list[JsonDict]:
    """A context's content as a Chat Completions user message's: its text, or (when it holds
    pictures, sound or files and ``media="user_message"``) text parts and media parts in order.
    """
    if media == "drop" or not has_media(content):
        return content_text(content)
    return _mixed(content, _chat_part, _text)
