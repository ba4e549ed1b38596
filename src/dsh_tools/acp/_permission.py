"""An approval answerer that asks the ACP client (``session/request_permission``)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Final, TypeAlias, cast

import trio

from dsh_tools import Approval, ApprovalNext, ApprovalOutcome, ApprovalRequest, error_message

__all__ = ["ALLOW_ALWAYS", "ALLOW_ONCE", "REJECT_ONCE", "AcpPermissionAnswerer", "SendRequest"]

logger: Final = logging.getLogger("dsh_tools.acp")

ALLOW_ONCE: Final = "allow-once"
ALLOW_ALWAYS: Final = "allow-always"
REJECT_ONCE: Final = "reject-once"

_ALLOW_ONCE_OPTION: Final = {"optionId": ALLOW_ONCE, "name": "Allow once", "kind": "allow_once"}
_ALLOW_ALWAYS_OPTION: Final = {
    "optionId": ALLOW_ALWAYS,
    "name": "Allow always (this session)",
    "kind": "allow_always",
}
_REJECT_OPTION: Final = {"optionId": REJECT_ONCE, "name": "Reject", "kind": "reject_once"}

SendRequest: TypeAlias = Callable[[str, Mapping[str, object]], Awaitable[object]]
"""``async (method, params) -> result``: send a JSON-RPC request to the client; raising means
the request failed."""


class AcpPermissionAnswerer:
    """Answers approval requests for its own agents' calls by asking the ACP client.

    Add it to a :class:`~dsh_tools.UserApproval` (``approval.answerers.add(answerer)``). For a
    request whose ``agent`` *is* (by identity) one of ``agents`` and that names a call, it sends
    ``session/request_permission`` for that call in the agent's ACP session, offering
    ``allow-once`` and ``reject-once``, and with ``allow_always=True`` also ``allow-always``
    (kind ``allow_always``: the tool is granted to the agent for the rest of the session).
    Every other request goes to ``next()``.

    Args:
        send_request: sends a request to the client and returns its ``result``; raising means
            the request failed (``unavailable``).
        agents: each agent this bridge owns → its ACP session id. Read on every request, so
            agents added later are heard.
        allow_always: also offer ``allow-always`` (the original offers only the two).

    The client's answer maps to an outcome: ``cancelled`` → ``cancelled``, the ``allow-once``
    option → ``allowed-once``, ``allow-always`` (when offered) → ``allowed-session``, any other
    option → ``rejected``; a request that fails (or a result that is not a
    ``RequestPermissionResponse``) → ``unavailable``.
    """

    __slots__ = ("_agents", "_allow_always", "_options", "_send_request")

    def __init__(
        self, send_request: SendRequest, agents: Mapping[object, str], *, allow_always: bool = False
    ) -> None:
        if type(allow_always) is not bool:
            raise TypeError(f"allow_always must be a bool, not {type(allow_always).__name__}")
        self._send_request = send_request
        self._agents = agents
        self._allow_always = allow_always
        self._options = (
            (_ALLOW_ONCE_OPTION, _ALLOW_ALWAYS_OPTION, _REJECT_OPTION)
            if allow_always
            else (_ALLOW_ONCE_OPTION, _REJECT_OPTION)
        )

    def session_id_for(self, agent: object) -> str | None:
        """The ACP session of ``agent`` if this answerer owns it (identity, not equality)."""
        for owned, session_id in self._agents.items():
            if owned is agent:
                return session_id
        return None

    async def __call__(
        self, request: ApprovalRequest, next: ApprovalNext
    ) -> ApprovalOutcome | Approval:
        """Answer ``request`` (see the class docs).

        A checkpoint on every path. Cancellation propagates (the request's pending RPC is
        abandoned; a late answer is discarded by the connection).
        """
        call_id = request.call_id  # callers other than the registry may leave it out
        session_id = self.session_id_for(request.agent)
        if session_id is None or call_id is None:
            return await next()
        params: dict[str, object] = {
            "sessionId": session_id,
            "toolCall": {"toolCallId": call_id},
            "options": [dict(option) for option in self._options],
        }
        try:
            result = await self._send_request("session/request_permission", params)
        except Exception as exc:
            logger.warning(
                "session/request_permission for call %r failed: %s", call_id, error_message(exc)
            )
            await trio.lowlevel.checkpoint()  # it may have failed before checkpointing
            return ApprovalOutcome.UNAVAILABLE
        outcome = _outcome(result, always=self._allow_always)
        if outcome is None:
            logger.warning(
                "session/request_permission for call %r: not a permission response: %.200r",
                call_id,
                result,
            )
            return ApprovalOutcome.UNAVAILABLE
        return outcome


def _field(value: object, key: str) -> object:
    return cast("dict[object, object]", value).get(key) if isinstance(value, dict) else None


def _outcome(result: object, *, always: bool) -> ApprovalOutcome | None:
    outcome = _field(result, "outcome")
    kind = _field(outcome, "outcome")
    if kind == "cancelled":
        return ApprovalOutcome.CANCELLED
    if kind != "selected":
        return None
    option = _field(outcome, "optionId")
    if not isinstance(option, str):
        return None
    if option == ALLOW_ONCE:
        return ApprovalOutcome.ALLOWED_ONCE
    if always and option == ALLOW_ALWAYS:
        return ApprovalOutcome.ALLOWED_SESSION
    return ApprovalOutcome.REJECTED
