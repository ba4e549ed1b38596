"""A real MCP server for the tests: ``python server.py`` serves over stdio (on trio),
``python server.py --http PORT`` over streamable HTTP on 127.0.0.1; the tests also import
``server`` to connect in-process.

``DSH_MCP_MARKER`` names a file the ``hang`` tool appends ``started`` and ``cancelled`` lines
to, so a test in another process can see what the handler saw.
"""

from __future__ import annotations

import base64
import io
import os
import struct
import sys
import wave
import zlib
from pathlib import Path

import anyio
import pydantic
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    ToolAnnotations,
)

server = MCPServer("dsh-tools-test")

# what the in-process ``hang`` handler saw (the subprocess servers write the marker file)
events: list[str] = []


def _record(event: str) -> None:
    events.append(event)
    marker = os.environ.get("DSH_MCP_MARKER")
    if marker:
        with Path(marker).open("a", encoding="utf-8") as file:
            file.write(event + "\n")


class Host(pydantic.BaseModel):
    host: str
    port: int


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def configure(servers: list[Host]) -> str:
    """Configure a list of servers."""
    return ", ".join(f"{item.host}:{item.port}" for item in servers)


def _png_pixel() -> bytes:
    """A real 1x1 red PNG, made with the standard library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def _wav() -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(8000)
        writer.writeframes(b"\0\0" * 80)
    return out.getvalue()


PNG_PIXEL = _png_pixel()
WAV = _wav()
PDF = b"%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@server.tool()
def picture() -> list[TextContent | ImageContent]:
    """A caption and a one-pixel image."""
    return [
        TextContent(type="text", text="a red pixel"),
        ImageContent(type="image", data=_b64(PNG_PIXEL), mime_type="image/png"),
    ]


@server.tool()
def media() -> list[AudioContent | EmbeddedResource | ResourceLink]:
    """A recording, a PDF and a text note embedded, and a link."""
    return [
        AudioContent(type="audio", data=_b64(WAV), mime_type="audio/wav"),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(
                uri="file:///reports/q3.pdf", mime_type="application/pdf", blob=_b64(PDF)
            ),
        ),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(
                uri="file:///shots/a.png", mime_type="image/png", blob=_b64(PNG_PIXEL)
            ),
        ),
        ResourceLink(type="resource_link", uri="file:///notes.txt", name="notes"),
    ]


@server.tool()
def odd_media() -> list[ImageContent | AudioContent | EmbeddedResource]:
    """Blocks a careless server sends: an unknown type, bytes that are not what they say, an
    alias of a known type, a blob of a type no block knows."""
    return [
        ImageContent(type="image", data=_b64(b"BM6\x00\x00\x00"), mime_type="image/bmp"),
        ImageContent(type="image", data=_b64(PNG_PIXEL), mime_type="image/jpeg"),
        AudioContent(type="audio", data=_b64(WAV), mime_type="audio/x-wav"),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(
                uri="file:///a.zip", mime_type="application/zip", blob=_b64(b"PK\x03\x04")
            ),
        ),
    ]


@server.tool()
def broken() -> str:
    """Always fails with a message for the model."""
    raise ToolError("disk full")


@server.tool()
async def hang(label: str) -> str:
    """Wait until cancelled."""
    _record(f"started {label}")
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        _record(f"cancelled {label}")
        raise
    return "unreachable"


@server.tool()
def die() -> str:
    """End the server process in the middle of the call."""
    sys.stdout.flush()
    os._exit(3)


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called ``name`` and announce the change."""

    def extra() -> str:
        return f"I am {name}"

    server.add_tool(extra, name=name, description=f"added at run time: {name}")
    await ctx.notify_tools_changed()
    return f"added {name}"


@server.tool()
async def shrink(name: str, ctx: Context) -> str:
    """Remove the tool called ``name`` and announce the change."""
    server.remove_tool(name)
    await ctx.notify_tools_changed()
    return f"removed {name}"


@server.tool()
def explode() -> str:
    """Fails with an unexpected exception (the SDK hides its message from the client)."""
    raise ValueError("the fuse blew")


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
async def steps(count: int, ctx: Context) -> str:
    """Report ``count`` progress notifications, a little apart, then answer."""
    for step in range(1, count + 1):
        await anyio.sleep(0.01)
        await ctx.report_progress(step, count, f"step {step}")
    return f"{count} steps"


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
async def flaky(label: str) -> str:
    """Hang on the first call with ``label`` (until the client gives up), answer on the next."""
    events.append(f"flaky {label}")
    if events.count(f"flaky {label}") == 1:
        await anyio.sleep_forever()
    return f"answered {label}"


def main(argv: list[str]) -> None:
    if argv[:1] == ["--http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))
    else:
        anyio.run(server.run_stdio_async, backend="trio")


if __name__ == "__main__":
    main(sys.argv[1:])
