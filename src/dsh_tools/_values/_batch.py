"""The values of one batch: the calls the model emitted, what the batch produced, and what a
``batch`` hook listener is told about the batch it wraps.

They sit below :mod:`dsh_tools._pipeline._hooks` (whose ``batch`` hook is typed with them) and are
used by :mod:`dsh_tools._scheduling`, which runs batches.
"""

from __future__ import annotations

import attrs

from ._content import HookContext
from ._execution import ToolExecutionResult
from ._json import JsonValue
from ._presentation import ToolCallView
from ._signal import CancelSignal

__all__ = [
    "ToolStreamError",
    "SuspendedCall",
    "ToolBatch",
    "ToolBatchInfo",
    "ToolBatchStatistics",
    "ToolCallRequest",
]


def _str(_instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{attribute.name} must be a str, not {type(value).__name__}")


def _model_text(_instance: object, _attribute: object, value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(
            f"arguments must be the model's JSON text (str); got {type(value).__name__}"
        )


@attrs.frozen(kw_only=True)
class ToolCallRequest:
    """One tool call as the model emitted it.

    ``arguments`` is the raw JSON text; the scheduler parses it once with
    :func:`~dsh_tools.parse_call_arguments` (``""`` means ``{}``, text that is not valid JSON is
    passed on as the string itself, so the tool's validation reports it).

    Raises:
        TypeError: a field is not a ``str``; for parsed arguments:
            ``arguments must be the model's JSON text (str); got dict``.
    """

    call_id: str = attrs.field(validator=_str)
    name: str = attrs.field(validator=_str)
    arguments: str = attrs.field(validator=_model_text)


@attrs.frozen(kw_only=True)
class SuspendedCall:
    """A call whose approval was deferred: what a person needs to decide it later.

    Attributes:
        call_id: the model's id of the call (the key of ``resume_tool_calls(approvals=...)``).
        tool_name: the tool the model called.
        arguments: the validated, frozen arguments.
        view: the call's card (its tool's ``present_call``, or the generic card).
        request_id: the id of the call's pending ``approval/asked`` in the session log
            (``None`` when the batch has no session log, or the approval service logs
            elsewhere).
    """

    call_id: str
    tool_name: str
    arguments: JsonValue
    view: ToolCallView
    request_id: str | None


@attrs.frozen(kw_only=True)
class ToolBatch:
    """What one batch produced.

    Attributes:
        results: one final result per call, in model order.
        contexts: the batch's context FIFO: every result's ``additional_contexts``, in model
            order, accepted as each call committed.
        suspended: the calls whose approval was deferred, in model order. Their results are
            ``APPROVAL_PENDING`` placeholders, not results to send to the model: the batch
            ended ``suspended``, and ``resume_tool_calls(..., approvals=...)`` finishes it.
    """

    results: tuple[ToolExecutionResult, ...]
    contexts: tuple[HookContext, ...]
    suspended: tuple[SuspendedCall, ...] = ()


@attrs.frozen(kw_only=True)
class ToolBatchStatistics:
    """What :func:`~dsh_tools.batch_statistics` reports about the batch in progress: a frozen
    snapshot (trio's ``statistics()`` convention), not a live view.
    """

    calls: int
    """The calls of the batch."""
    started: int
    """Calls started so far (in model order: the first ``started`` calls)."""
    committed: int
    """Calls whose result is final (the first ``committed`` calls)."""
    in_flight: int
    """Bodies of the current parallel pool still running."""


@attrs.frozen(kw_only=True)
class ToolBatchInfo:
    """The batch a ``batch`` hook listener wraps (the arguments of
    :func:`~dsh_tools.run_tool_calls`, already checked).

    Attributes:
        agent: the agent the calls belong to (``None`` for none).
        calls: the calls, in model order.
        turn: the turn recorded on the batch's session events.
        step: the step recorded on the batch's session events.
        signal: the step's cancel signal, shared by every call.
    """

    agent: object | None
    calls: tuple[ToolCallRequest, ...]
    turn: int
    step: int
    signal: CancelSignal


class ToolStreamError(Exception):
    """The call stream a batch was reading raised: no further call started, the calls in
    flight finished, the received calls that never started got ``ABORTED_BEFORE_DISPATCH``,
    and the session log was balanced (its ``batch/end`` says ``"failed"``).

    ``batch`` is the :class:`ToolBatch` of every call received before the stream failed, one
    result per call in model order; ``__cause__`` is the stream's own exception.
    """

    batch: ToolBatch

    def __init__(self, batch: ToolBatch) -> None:
        super().__init__(
            f"the tool call stream failed after {len(batch.results)} call(s); "
            "ToolStreamError.batch holds their results"
        )
        self.batch = batch
