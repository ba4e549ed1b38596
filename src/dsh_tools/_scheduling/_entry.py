"""The checks at a batch's entry, one home for each: ``run_tool_calls``, ``resume_tool_calls``
and the Temporal runner take the same arguments and refuse them with the same errors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, cast

import trio

from dsh_tools._pipeline._registry import ToolRegistry
from dsh_tools._sessions._log import SessionLog, check_session_log
from dsh_tools._values._batch import ToolCallRequest
from dsh_tools._values._checks import check_int
from dsh_tools._values._execution import Approval, ApprovalOutcome, read_approval
from dsh_tools._values._limits import check_capacity_limits
from dsh_tools._values._signal import CancelSignal

__all__ = [
    "check_approvals",
    "check_calls",
    "check_limits",
    "check_runner",
    "check_session",
    "check_signal",
    "check_trio",
]

_DECISIONS: Final = (
    ApprovalOutcome.ALLOWED_ONCE,
    ApprovalOutcome.ALLOWED_SESSION,
    ApprovalOutcome.REJECTED,
)


def check_limits(
    max_parallel_tool_calls: object, capacity_limits: object
) -> tuple[int, dict[str, int]]:
    r"""The most bodies in flight (a positive ``int``) and the capacity classes (a mapping of
    class names to positive ``int``\ s, or ``None``).
    """
    cap = check_int("max_parallel_tool_calls", max_parallel_tool_calls)
    return cap, check_capacity_limits(capacity_limits)


def check_trio(entry: str) -> None:
    """Refuse a call from outside trio (asyncio, say) with an error that names the door.

    Raises:
        RuntimeError: no trio task runs this call.
    """
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        raise RuntimeError(
            f"{entry}() runs under trio (trio.run), and no trio task is running here. From "
            f"asyncio, await dsh_tools.aio.{entry}(...) instead: it runs the batch in trio's "
            "guest mode on your asyncio loop"
        ) from None


def check_signal(signal: object) -> CancelSignal:
    if not isinstance(signal, CancelSignal):
        raise TypeError(f"signal must be a CancelSignal, not {type(signal).__name__}")
    return signal


def check_calls(calls: Iterable[object]) -> tuple[ToolCallRequest, ...]:
    """The calls as a tuple, each a :class:`ToolCallRequest`."""
    requests = tuple(calls)
    for index, call in enumerate(requests):
        if not isinstance(call, ToolCallRequest):
            raise TypeError(f"calls[{index}] must be a ToolCallRequest, not {type(call).__name__}")
    return cast("tuple[ToolCallRequest, ...]", requests)


def check_runner(registry: object, session: object, turn: object, step: object) -> None:
    """``registry`` a registry, ``session`` a session log or ``None``, ``turn`` and ``step``
    ints >= 0.
    """
    if not isinstance(registry, ToolRegistry):
        raise TypeError(f"registry must be a ToolRegistry, not {type(registry).__name__}")
    check_session_log(session, optional=True)
    check_int("turn", turn, least=0)
    check_int("step", step, least=0)


def check_session(session: object) -> SessionLog:
    """A session log, which the call needs (not ``None``)."""
    log = check_session_log(session)
    assert log is not None
    return log


def check_approvals(approvals: object) -> dict[str, Approval]:
    """``resume_tool_calls``' decisions: call ids mapped to one of the three decisions (an
    outcome, or an :class:`~dsh_tools.Approval` of one).
    """
    if approvals is None:
        return {}
    if not isinstance(approvals, Mapping):
        raise TypeError(f"approvals must map call ids to outcomes, not {type(approvals).__name__}")
    checked: dict[str, Approval] = {}
    for call_id, answer in cast("Mapping[object, object]", approvals).items():
        if not isinstance(call_id, str):
            raise TypeError(f"approvals: {call_id!r} is not a call id (str)")
        outcome, approval = read_approval(answer)
        if outcome is None or outcome not in _DECISIONS:
            raise ValueError(
                f'approvals[{call_id!r}] must be one of "allowed-once", "rejected" or '
                f'"allowed-session" (or an Approval of one), not {answer!r}'
            )
        checked[call_id] = Approval(outcome) if approval is None else approval
    return checked
