"""What a session log says about approvals beyond one request: the session grants that stand,
and the requests still waiting for a deferred decision.

Both are folds over the log's events, so they survive a restart: a new process that opens
the same log sees the same grants and the same pending requests.

- A grant is (agent name, tool name). An ``approval/decided`` with outcome
  ``"allowed-session"`` records one (the agent and tool of its ``approval/asked``); an
  ``approval/revoked`` removes the tool's grant of the agent it names, or of every agent.
- A request is pending while its ``approval/asked`` has no ``approval/decided``: its answer
  was ``"deferred"`` (or its process stopped while an answerer waited).
"""

from __future__ import annotations

from collections.abc import Iterable

from dsh_tools._values._execution import ApprovalOutcome

from ._events import ApprovalAskedEvent, ApprovalDecidedEvent, ApprovalRevokedEvent, SessionEvent

__all__ = ["agent_name", "grants_in", "pending_requests"]


def agent_name(agent: object) -> str | None:
    """The name under which ``agent``'s grants are recorded: a ``str`` agent is its own name;
    another object is named by its ``name`` attribute when that is a non-empty ``str``;
    otherwise ``None`` (an unnamed agent: its grants are those recorded without a name).
    """
    if isinstance(agent, str):
        return str.__str__(agent)
    try:
        name = getattr(agent, "name", None)
    except Exception:
        return None
    if isinstance(name, str) and name:
        return str.__str__(name)
    return None


def grants_in(events: Iterable[SessionEvent]) -> frozenset[tuple[str | None, str]]:
    """The session grants standing at the end of ``events``: (agent name, tool name) pairs."""
    asked: dict[str, tuple[str | None, str]] = {}
    grants: set[tuple[str | None, str]] = set()
    for event in events:
        if isinstance(event, ApprovalAskedEvent):
            asked[event.id] = (event.agent, event.tool_name)
        elif isinstance(event, ApprovalDecidedEvent):
            if event.outcome is ApprovalOutcome.ALLOWED_SESSION:
                key = asked.get(event.id)
                if key is not None:
                    grants.add(key)
        elif isinstance(event, ApprovalRevokedEvent):
            if event.agent is None:
                grants = {grant for grant in grants if grant[1] != event.tool_name}
            else:
                grants.discard((event.agent, event.tool_name))
    return frozenset(grants)


def pending_requests(events: Iterable[SessionEvent]) -> dict[str, ApprovalAskedEvent]:
    """The requests of ``events`` without a decision, by id, in the order they were asked."""
    pending: dict[str, ApprovalAskedEvent] = {}
    for event in events:
        if isinstance(event, ApprovalAskedEvent):
            pending[event.id] = event
        elif isinstance(event, ApprovalDecidedEvent):
            pending.pop(event.id, None)
    return pending
