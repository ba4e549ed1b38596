"""The oracle for ACP wire shapes: the ``agent-client-protocol`` package's ``acp.schema`` models.

Those models are lenient on input (an invalid optional field is silently replaced by ``None``,
unknown keys are dropped, invalid list items skipped), so "it parses" proves little. A message
is valid here when it parses *and* dumps back to exactly itself: every key we sent is a field
the model knows, with a value of the field's type, and nothing was salvaged or dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, cast

import acp.schema as schema
import pydantic

REQUEST_RESULTS: Final[dict[str, type[pydantic.BaseModel]]] = {
    "initialize": schema.InitializeResponse,
    "session/new": schema.NewSessionResponse,
    "session/prompt": schema.PromptResponse,
}
"""The result model of each request the agent answers."""

AGENT_REQUEST_PARAMS: Final[dict[str, type[pydantic.BaseModel]]] = {
    "session/request_permission": schema.RequestPermissionRequest,
}

AGENT_NOTIFICATION_PARAMS: Final[dict[str, type[pydantic.BaseModel]]] = {
    "session/update": schema.SessionNotification,
}


def assert_valid(model: type[pydantic.BaseModel], data: object) -> None:
    """``data`` is exactly an instance of ``model`` on the wire (see the module docs)."""
    parsed = model.model_validate(data)
    assert data == parsed.model_dump(mode="json", by_alias=True, exclude_unset=True)


def assert_valid_update(update: Mapping[str, object], session_id: str = "sess-1") -> None:
    """``update`` is a valid ``update`` of a ``session/update`` notification."""
    assert_valid(schema.SessionNotification, {"sessionId": session_id, "update": dict(update)})


def assert_valid_agent_message(message: object, methods: Mapping[object, str]) -> None:
    """``message`` is a valid JSON-RPC message from an ACP agent.

    ``methods`` maps the id of each request the client sent to its method, so a response is
    checked against that method's result model.
    """
    assert isinstance(message, dict)
    wire = dict(cast("dict[str, object]", message))
    assert "2.0" == wire.pop("jsonrpc")
    if "method" in wire:
        method = wire["method"]
        assert isinstance(method, str)
        if "id" in wire:
            assert {"id", "method", "params"} == set(wire)
            assert isinstance(wire["id"], int | str)
            assert_valid(AGENT_REQUEST_PARAMS[method], wire["params"])
        else:
            assert {"method", "params"} == set(wire)
            assert_valid(AGENT_NOTIFICATION_PARAMS[method], wire["params"])
        return
    if "error" in wire:
        assert {"id", "error"} == set(wire)
        assert_valid(schema.AgentErrorMessage, wire)
        return
    assert {"id", "result"} == set(wire)
    assert_valid(REQUEST_RESULTS[methods[wire["id"]]], wire["result"])
