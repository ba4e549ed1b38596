"""Frozen arguments go straight to JSON libraries; jsonschema validates the thawed value.

Needs jsonschema (``pip install jsonschema``); everything else is the standard library.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request

import jsonschema
import trio

from dsh_tools import (
    CancelSignal,
    FrozenJsonObject,
    TextBlock,
    ToolExecutionInput,
    ToolRegistry,
    ToolRunContext,
    define_tool,
    thaw_json,
)

TICKET_SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "labels": {"type": "array"}},
    "required": ["title"],
}


async def file_ticket(args: FrozenJsonObject, context: ToolRunContext) -> str:
    await trio.lowlevel.checkpoint()
    # a frozen value is a dict: every JSON serializer takes it as it is
    body = json.dumps(args)
    request = urllib.request.Request(
        "https://tracker.example/api/tickets", data=body.encode(), method="POST"
    )
    # its arrays are tuples, which jsonschema does not count as arrays: validate the thawed copy
    jsonschema.validate(thaw_json(args), TICKET_SCHEMA)
    return f"{request.get_method()} {urllib.parse.urlsplit(request.full_url).path} {body}"


ticket_tool = define_tool(
    name="file_ticket",
    description="File a ticket in the tracker.",
    parameters={
        "title": {"type": "string", "required": True},
        "labels": {"type": "array", "items": {"type": "string"}},
    },
    execute=file_ticket,
)


async def main() -> None:
    registry = ToolRegistry()
    registry.register(ticket_tool)
    result = await registry.execute(
        ToolExecutionInput(
            call_id="call-1",
            name="file_ticket",
            arguments={"title": "Crash on start", "labels": ["bug", "p1"]},
            signal=CancelSignal.never(),
        )
    )
    for block in result.content:
        if isinstance(block, TextBlock):
            print(block.text)


if __name__ == "__main__":
    trio.run(main)
