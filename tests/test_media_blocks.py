"""Pictures, sound and files: the blocks' checks, their wire form, their headers read for a
description, and what the pipeline does with them (bodies that return them, the size cap, the
output budget, a block hidden inside JSON data).
"""

from __future__ import annotations

import base64
import io
import json
import logging
from typing import cast

import attrs
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from dsh_tools import (
    Accept,
    AudioBlock,
    CancelController,
    ContentBlock,
    FileBlock,
    HookContext,
    ImageBlock,
    PluginSource,
    PostExecuteNext,
    PostToolDecision,
    TextBlock,
    ToolCallRequest,
    ToolExecution,
    ToolExecutionResult,
    ToolOutput,
    ToolRegistry,
    converter,
    define_tool,
    install_output_budget,
    run_tool_calls,
    tool,
)
from dsh_tools._values._media import describe_media, format_size, image_dimensions
from media_files import pdf, picture, png, wav

# --- construction --------------------------------------------------------------------------


def test_each_kind_takes_its_own_media_types() -> None:
    assert ImageBlock(media_type="image/png", data=png()).data == png()
    assert AudioBlock(media_type="audio/wav", data=wav()).media_type == "audio/wav"
    assert FileBlock(media_type="application/pdf", data=pdf(), name="r.pdf").name == "r.pdf"
    assert FileBlock(media_type="text/csv", data=b"a,b\n1,2\n").data == b"a,b\n1,2\n"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: ImageBlock(media_type="image/png", data=b"GIF89a..."),
            "ImageBlock: the data does not start with the signature of image/png "
            "(it starts b'GIF89a..')",
        ),
        (
            lambda: ImageBlock(media_type="image/bmp", data=b"BM"),
            "ImageBlock: unknown image media type 'image/bmp' (known: image/png, image/jpeg, "
            "image/gif, image/webp)",
        ),
        (
            lambda: ImageBlock(media_type="application/pdf", data=pdf()),
            "unknown image media type 'application/pdf'",
        ),
        (
            lambda: ImageBlock(media_type="image/png", url="http://example.com/a.png"),
            "ImageBlock.url must be an https: URL or a data: URL, not 'http://example.com/a.png'",
        ),
        (
            lambda: ImageBlock(media_type="image/png", url="file:///etc/passwd"),
            "must be an https: URL or a data: URL",
        ),
        (lambda: ImageBlock(media_type="image/png", url="https:///no-host"), "https: URL"),
        (
            lambda: ImageBlock(media_type="image/png", data=png(), url="https://a.example/x"),
            "ImageBlock: give data or url, not both",
        ),
        (
            lambda: ImageBlock(media_type="image/png"),
            "ImageBlock: give data (bytes) or url (https: or data:)",
        ),
        (
            lambda: ImageBlock(
                media_type="image/png",
                url="data:image/gif;base64," + base64.b64encode(png()).decode(),
            ),
            "a data: URL of 'image/gif', but the block's media type is 'image/png'",
        ),
        (
            lambda: ImageBlock(media_type="image/png", url="data:image/png;base64,!!!"),
            "the payload of the data: URL is not valid base64",
        ),
        (
            lambda: ImageBlock(media_type="image/png", url="data:image/png,plain"),
            "a data: URL must be base64",
        ),
        (
            lambda: AudioBlock(media_type="audio/wav", data=png()),
            "the data does not start with the signature of audio/wav",
        ),
        (
            lambda: FileBlock(media_type="text/plain", data=b"\xff\xfe"),
            "FileBlock: the data of a text/plain block must be UTF-8 text",
        ),
        (
            lambda: FileBlock(media_type="application/zip", data=b"PK\x03\x04"),
            "unknown file media type 'application/zip'",
        ),
    ],
)
def test_a_bad_block_is_a_value_error_that_says_what_is_wrong(make: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make()  # type: ignore[operator]


def test_a_field_of_the_wrong_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"ImageBlock\.data must be bytes, not str; a URL goes in"):
        ImageBlock(media_type="image/png", data="iVBORw0KGgo=")  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match=r"ImageBlock\.media_type must be a str, not NoneType"):
        ImageBlock(media_type=None, data=png())  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match=r"FileBlock\.name must be a str or None, not int"):
        FileBlock(media_type="application/pdf", data=pdf(), name=3)  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match=r"AudioBlock\.data must be bytes, not bytearray"):
        AudioBlock(media_type="audio/wav", data=bytearray(wav()))  # pyright: ignore[reportArgumentType]


def test_a_blocks_repr_shows_its_size_not_its_bytes() -> None:
    block = ImageBlock(media_type="image/png", data=png())
    assert repr(block) == f"ImageBlock(media_type='image/png', data=<{len(png())} bytes>, url=None)"


# --- headers and descriptions --------------------------------------------------------------


@settings(max_examples=30)
@given(
    image_format=st.sampled_from(["PNG", "JPEG", "GIF", "WEBP"]),
    width=st.integers(1, 700),
    height=st.integers(1, 700),
    variant=st.sampled_from(["plain", "progressive", "lossless", "alpha"]),
)
def test_dimensions_are_read_from_the_header_as_pillow_reads_them(
    image_format: str, width: int, height: int, variant: str
) -> None:
    options: dict[str, object] = {}
    mode = "RGB"
    if image_format == "JPEG" and variant == "progressive":
        options["progressive"] = True
    if image_format == "WEBP" and variant == "lossless":
        options["lossless"] = True
    if image_format == "WEBP" and variant == "alpha":
        mode = "RGBA"  # Pillow writes the extended (VP8X) header
    image = Image.new(mode, (width, height))
    out = io.BytesIO()
    image.save(out, format=image_format, **options)
    data = out.getvalue()
    media_type = f"image/{image_format.lower()}"
    assert ImageBlock(media_type=media_type, data=data)  # the signature check accepts it
    assert image_dimensions(media_type, data) == Image.open(io.BytesIO(data)).size


def test_a_truncated_header_has_no_dimensions_and_is_still_described() -> None:
    data = picture("JPEG")[:40]
    assert image_dimensions("image/jpeg", data) is None
    assert describe_media(ImageBlock(media_type="image/jpeg", data=data)) == "[image/jpeg, 40 B]"


def test_descriptions_name_type_dimensions_name_and_size() -> None:
    image = picture("PNG", 640, 480)
    assert describe_media(ImageBlock(media_type="image/png", data=image)) == (
        f"[image/png 640x480, {format_size(len(image))}]"
    )
    assert describe_media(FileBlock(media_type="text/plain", data=b"x" * 1500, name="a.txt")) == (
        "[text/plain a.txt, 1.5 kB]"
    )
    assert describe_media(ImageBlock(media_type="image/png", url="https://a.example/p.png")) == (
        "[image/png, https://a.example/p.png]"
    )
    data_url = "data:image/gif;base64," + base64.b64encode(picture("GIF", 3, 2)).decode()
    assert describe_media(ImageBlock(media_type="image/gif", url=data_url)).startswith(
        "[image/gif 3x2, "
    )


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 B"),
        (999, "999 B"),
        (1000, "1 kB"),
        (1500, "1.5 kB"),
        (12_345, "12 kB"),
        (3_200_000, "3.2 MB"),
        (20 * 2**20, "21 MB"),
    ],
)
def test_sizes_are_written_in_decimal_units(size: int, text: str) -> None:
    assert format_size(size) == text


# --- the wire ------------------------------------------------------------------------------

_BLOCK = cast("type[ContentBlock]", ContentBlock)


def test_the_wire_form_is_base64_data_or_a_url() -> None:
    image = png()
    assert converter.unstructure(ImageBlock(media_type="image/png", data=image), ContentBlock) == {
        "type": "image",
        "mediaType": "image/png",
        "data": base64.b64encode(image).decode(),
    }
    assert converter.unstructure(
        FileBlock(media_type="application/pdf", url="https://a.example/r.pdf", name="r.pdf"),
        ContentBlock,
    ) == {
        "type": "file",
        "mediaType": "application/pdf",
        "url": "https://a.example/r.pdf",
        "name": "r.pdf",
    }
    sound = wav()
    wire = converter.unstructure(AudioBlock(media_type="audio/wav", data=sound), ContentBlock)
    assert wire == {
        "type": "audio",
        "mediaType": "audio/wav",
        "data": base64.b64encode(sound).decode(),
    }
    assert converter.structure(json.loads(json.dumps(wire)), _BLOCK) == AudioBlock(
        media_type="audio/wav", data=sound
    )


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        ({"type": "image", "mediaType": "image/png", "data": "iVBO!!"}, "not valid base64"),
        ({"type": "image", "mediaType": "image/png", "data": "R0lGODlh"}, "signature of image/png"),
        ({"type": "image", "mediaType": "image/tiff", "data": "AAAA"}, "unknown image media type"),
        ({"type": "audio", "mediaType": "audio/wav", "data": 12}, "expected a base64 string"),
        ({"type": "file", "mediaType": "application/pdf"}, "give data (bytes) or url"),
    ],
)
def test_a_bad_block_on_the_wire_is_refused(wire: dict[str, object], message: str) -> None:
    with pytest.raises(Exception) as raised:
        converter.structure(wire, _BLOCK)
    assert message in repr(raised.value.__dict__) + "".join(
        str(exc) for exc in getattr(raised.value, "exceptions", (raised.value,))
    )


# --- through the pipeline ------------------------------------------------------------------


async def _run(registry: ToolRegistry, *calls: tuple[str, str]) -> list[ToolExecutionResult]:
    requests = [
        ToolCallRequest(call_id=f"c{index}", name=name, arguments=arguments)
        for index, (name, arguments) in enumerate(calls)
    ]
    batch = await run_tool_calls(registry, requests, signal=CancelController().signal)
    return list(batch.results)


async def test_tool_bodies_return_a_block_a_list_of_blocks_or_tool_output() -> None:
    image = png()
    registry = ToolRegistry()

    @tool
    def screenshot() -> ImageBlock:
        """A screenshot."""
        return ImageBlock(media_type="image/png", data=image)

    @tool
    async def chart(title: str) -> list[ContentBlock]:
        """A chart with its caption."""
        await trio.lowlevel.checkpoint()
        return [TextBlock(text=title), ImageBlock(media_type="image/png", data=image)]

    registry.register(screenshot)
    registry.register(chart)
    registry.register(
        define_tool(
            name="report",
            description="A PDF report.",
            parameters={},
            execute=lambda _args, _context: ToolOutput(
                content=[FileBlock(media_type="application/pdf", data=pdf(), name="r.pdf")],
                meta={"pages": 1},
            ),
        )
    )

    shot, charted, report = await _run(
        registry, ("screenshot", "{}"), ("chart", '{"title": "sales"}'), ("report", "{}")
    )

    assert (ImageBlock(media_type="image/png", data=image),) == shot.content
    assert not shot.is_error
    assert (TextBlock(text="sales"), ImageBlock(media_type="image/png", data=image)) == (
        charted.content
    )
    assert (FileBlock(media_type="application/pdf", data=pdf(), name="r.pdf"),) == report.content
    assert report.meta == {"pages": 1}


@pytest.mark.parametrize("over", [0, 1])
async def test_a_block_over_max_binary_bytes_becomes_a_note_and_one_of_exactly_it_is_kept(
    over: int,
) -> None:
    image = png()
    registry = ToolRegistry(max_binary_bytes=len(image) - over)

    @registry.tool
    def shot() -> list[ContentBlock]:
        """A screenshot."""
        return [TextBlock(text="here"), ImageBlock(media_type="image/png", data=image)]

    (result,) = await _run(registry, ("shot", "{}"))

    assert not result.is_error  # a replaced block does not make the result an error
    if over == 0:
        assert ImageBlock(media_type="image/png", data=image) == result.content[1]
    else:
        assert (
            TextBlock(text="here"),
            TextBlock(
                text=f"[image/png 64x48, {format_size(len(image))}] not sent: it is "
                f"{len(image)} bytes, and one block may carry at most {len(image) - 1} bytes here"
            ),
        ) == result.content


async def test_the_cap_holds_for_a_data_url_and_for_contexts_but_not_for_an_https_url() -> None:
    image = png()
    data_url = "data:image/png;base64," + base64.b64encode(image).decode()
    registry = ToolRegistry(max_binary_bytes=10)

    @registry.tool
    def shot() -> ToolOutput:
        """A screenshot."""
        return ToolOutput(
            content=[
                ImageBlock(media_type="image/png", url=data_url),
                ImageBlock(media_type="image/png", url="https://a.example/big.png"),
            ]
        )

    async def add_context(
        _execution: ToolExecution, _result: ToolExecutionResult, _next: PostExecuteNext
    ) -> PostToolDecision:
        return Accept(
            additional_contexts=[
                HookContext(
                    content=[ImageBlock(media_type="image/png", data=image)],
                    source=PluginSource(plugin="camera"),
                )
            ]
        )

    registry.hooks.post_execute.add(add_context)
    (result,) = await _run(registry, ("shot", "{}"))

    first, second = result.content
    assert isinstance(first, TextBlock)
    assert "not sent" in first.text
    assert ImageBlock(media_type="image/png", url="https://a.example/big.png") == second
    (context,) = result.additional_contexts
    (note,) = context.content
    assert isinstance(note, TextBlock)
    assert note.text.startswith("[image/png 64x48, ")


def test_max_binary_bytes_is_a_positive_int() -> None:
    with pytest.raises(ValueError, match="max_binary_bytes must be a positive int, not 0"):
        ToolRegistry(max_binary_bytes=0)
    with pytest.raises(TypeError, match="max_binary_bytes must be a positive int, not True"):
        ToolRegistry(max_binary_bytes=True)


async def test_a_block_inside_json_data_is_an_invalid_result_that_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = ToolRegistry()

    @registry.tool
    def bad() -> dict[str, object]:
        """Returns its picture inside a dict."""
        return {"chart": ImageBlock(media_type="image/png", data=png())}

    with caplog.at_level(logging.WARNING, logger="dsh_tools"):
        (result,) = await _run(registry, ("bad", "{}"))

    assert result.is_error
    assert "iVBOR" not in json.dumps(converter.unstructure(result))  # no base64 smuggled as text
    assert "it holds a picture, sound or file inside its data" in caplog.text


async def test_a_block_changed_behind_its_checks_is_an_invalid_result(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = ToolRegistry()

    @registry.tool
    def sneaky() -> ImageBlock:
        """Returns a block whose bytes were swapped after its checks."""
        block = ImageBlock(media_type="image/png", data=png())
        object.__setattr__(block, "data", b"not a png")
        return block

    with caplog.at_level(logging.WARNING, logger="dsh_tools"):
        (result,) = await _run(registry, ("sneaky", "{}"))
    assert (TextBlock(text="Error: tool result must be losslessly JSON-serializable"),) == (
        result.content
    )
    assert result.is_error
    assert "content[0]: ImageBlock: the data does not start with the signature" in caplog.text


async def test_the_output_budget_counts_text_only_and_keeps_every_picture() -> None:
    image = png()
    registry = ToolRegistry()
    install_output_budget(registry, max_chars=20)

    @registry.tool
    def shot() -> list[ContentBlock]:
        """A screenshot with a long caption."""
        return [TextBlock(text="x" * 10), ImageBlock(media_type="image/png", data=image)]

    @registry.tool
    def long() -> list[ContentBlock]:
        """A long caption."""
        return [TextBlock(text="y" * 100), ImageBlock(media_type="image/png", data=image)]

    short, truncated = await _run(registry, ("shot", "{}"), ("long", "{}"))
    assert (TextBlock(text="x" * 10), ImageBlock(media_type="image/png", data=image)) == (
        short.content
    )
    assert ImageBlock(media_type="image/png", data=image) in truncated.content
    text = "".join(b.text for b in truncated.content if isinstance(b, TextBlock))
    assert "y" * 100 not in text


def test_blocks_are_frozen_values() -> None:
    block = ImageBlock(media_type="image/png", data=png())
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        block.media_type = "image/gif"  # pyright: ignore[reportAttributeAccessIssue]
    assert block == ImageBlock(media_type="image/png", data=png())
    assert hash(block) == hash(ImageBlock(media_type="image/png", data=png()))
