"""Finishing a batch from its session log after its process stopped.

A batch's events are bracketed (``batch/start`` .. ``batch/end``), and the scheduler commits in
model order, so the log of a batch whose process stopped reads, after its ``batch/start``::

    committed   tool/call + tool/result      calls [0, committed): returned as logged
    dangling    tool/call, no tool/result    calls [committed, started): ran, or may have
    unstarted   nothing                      calls [started, n): never ran

:func:`resume_tool_calls` finishes such a batch in the same log with the scheduler's own lane
(:class:`~dsh_tools._scheduling._resumed.ResumedBatch`); :func:`recover_session` closes it without running
anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Literal

import attrs
import trio

from dsh_tools._pipeline._approval_setup import check_approval_setup
from dsh_tools._pipeline._registry import ToolRegistry, pipeline_host
from dsh_tools._pipeline._results import ABORTED_BEFORE_DISPATCH, INTERRUPTED
from dsh_tools._sessions._batch_log import BatchLog
from dsh_tools._sessions._events import (
    ApprovalAskedEvent,
    ApprovalDecidedEvent,
    BatchStartEvent,
    ContextMessageEvent,
    SessionEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from dsh_tools._sessions._log import SessionLog
from dsh_tools._sessions._reader import SessionReader
from dsh_tools._values._batch import ToolBatch, ToolCallRequest
from dsh_tools._values._content import HookContext
from dsh_tools._values._execution import Approval, ApprovalOutcome, ToolExecutionResult
from dsh_tools._values._signal import CancelSignal

from ._bracket import run_batch
from ._capacity import capacity_of
from ._entry import (
    check_approvals,
    check_limits,
    check_runner,
    check_session,
    check_signal,
    check_trio,
)
from ._resumed import ResumedBatch
from ._scheduler import DEFAULT_MAX_PARALLEL_TOOL_CALLS

__all__ = ["logged_result", "recover_session", "resume_tool_calls"]

OnInterrupted = Literal["rerun-idempotent", "abort"]
_ON_INTERRUPTED: Final = ("rerun-idempotent", "abort")


@attrs.frozen(kw_only=True)
class _OpenBatch:
    """What the log holds of a batch that has no ``batch/end`` (or a ``"suspended"`` one)."""

    start: BatchStartEvent
    # the batch's calls: its batch/start's, then its batch/call events' (a streamed batch)
    calls: tuple[ToolCallRequest, ...]
    # the logged tool/result events, by call index (a prefix of the batch, and calls after a
    # suspended one)
    results: dict[int, ToolResultEvent]
    # per started call: the seq of its last tool/call and that call's attempt
    call_seqs: tuple[int, ...]
    attempts: tuple[int, ...]
    # the batch's context/message events logged after its last tool/result
    logged_contexts: tuple[HookContext, ...]
    # the started calls without a result whose approval was deferred: the pending request's
    # id, the decision a resume logged already (None: still undecided), and the digest of
    # the arguments it asked about (None: an old log's request, or one without arguments)
    deferred: dict[int, tuple[str, ApprovalOutcome | None, str | None]]
    # its last batch/end says "suspended"
    suspended: bool
    # its calls repeat a call id (recover_session closes it; a resume refuses it)
    repeated: bool

    @property
    def prefix(self) -> list[ToolResultEvent]:
        """The committed prefix: the logged results of calls 0, 1, ... up to the first gap."""
        prefix: list[ToolResultEvent] = []
        while len(prefix) in self.results:
            prefix.append(self.results[len(prefix)])
        return prefix


@attrs.define(eq=False)
class _Resumes:
    """The resumes of one log object in progress in this process: one runs, the others wait
    (``users`` counts both; the entry goes when it reaches 0).
    """

    session: SessionLog
    lock: trio.Lock = attrs.Factory(trio.Lock)
    users: int = 0


# by the log object's id (the entry keeps the object alive, so the id is not reused)
_RESUMES: Final[dict[int, _Resumes]] = {}


def _holding(session: SessionLog) -> _Resumes:
    """Count one more resume of ``session`` (release with :func:`_released`). Its ``lock``
    lets one resume run at a time: a second resume of the same log object waits until the
    first has returned, then reads the log again (finding the batch finished, or still
    suspended). Two log objects on one file or session cannot both be writers: the stores'
    writer locks refuse the second.
    """
    entry = _RESUMES.get(id(session))
    if entry is None:
        entry = _RESUMES[id(session)] = _Resumes(session)
    entry.users += 1
    return entry


def _released(session: SessionLog, entry: _Resumes) -> None:
    entry.users -= 1
    if not entry.users:
        del _RESUMES[id(session)]


def _check_not_resuming(session: SessionLog) -> None:
    if id(session) in _RESUMES:
        raise RuntimeError(
            "a resume of this log is running in this process (resume_tool_calls); "
            "recover_session would give its calls a second result: call it after the resume "
            "has returned"
        )


def _disagrees(start: BatchStartEvent, seq: int, what: str) -> ValueError:
    return ValueError(
        f"batch {start.batch_id}: {what} (event {seq}); the log does not match its batch/start, "
        "so the batch cannot be finished from it"
    )


def _open_batch(events: Sequence[SessionEvent]) -> _OpenBatch | None:
    """The session's last open batch, read and checked; ``None`` if every batch has ended.

    The batch's events are those the reader's bracket rule gives it
    (:class:`~dsh_tools._sessions._reader.SessionReader`).

    Raises:
        ValueError: the batch's events disagree with its ``batch/start`` (a ``tool/call`` of
            a call it does not list, or with other arguments, out of model order, or a
            ``tool/result`` out of model order).
    """
    record = SessionReader(events).open_batch()
    if record is None:
        return None
    start = record.start
    calls = record.calls
    n = len(calls)
    ids = [call.call_id for call in calls]
    # each call id's calls in model order: a batch may repeat an id, and then its events are
    # told apart by position (calls start and commit in model order)
    positions: dict[str, list[int]] = {}
    for index, call_id in enumerate(ids):
        positions.setdefault(call_id, []).append(index)
    call_seqs: list[int] = []
    attempts: list[int] = []
    results: dict[int, ToolResultEvent] = {}
    asked: dict[str, ApprovalAskedEvent] = {}  # the last request per call id
    decided: dict[str, ApprovalDecidedEvent] = {}
    logged_contexts: list[HookContext] = []
    # the batch's own events, by the reader's bracket rule (another batch's are not among them)
    for seq, event in record.events:
        if isinstance(event, ToolCallEvent):
            candidates = positions.get(event.call_id)
            if candidates is None:
                raise _disagrees(start, seq, f"tool/call {event.call_id!r} is not a call of it")
            # a first attempt starts the next call; a later one, the earliest unfinished
            if event.attempt == 1:
                index = len(call_seqs) if len(call_seqs) in candidates else candidates[0]
            else:
                index = _earliest(candidates, len(call_seqs), results)
            call = calls[index]
            if (event.name, event.arguments) != (call.name, call.arguments):
                raise _disagrees(
                    start,
                    seq,
                    f"tool/call {event.call_id!r} names {event.name!r} with arguments "
                    f"{event.arguments!r}, batch/start {call.name!r} with {call.arguments!r}",
                )
            started = len(call_seqs)
            if index == started and event.attempt == 1:
                call_seqs.append(seq)
                attempts.append(1)
            elif index < started and index not in results and event.attempt == attempts[index] + 1:
                call_seqs[index] = seq
                attempts[index] = event.attempt
            else:
                raise _disagrees(
                    start,
                    seq,
                    f"tool/call {event.call_id!r} (attempt {event.attempt}) is out of model order",
                )
        elif isinstance(event, ToolResultEvent):
            candidates = positions.get(event.call_id)
            index = None if candidates is None else _earliest(candidates, len(call_seqs), results)
            # calls commit in model order, except past a call whose approval was asked (it
            # may have been deferred)
            if (
                index is None
                or index >= len(call_seqs)
                or index in results
                or any(j not in results and ids[j] not in asked for j in range(index))
            ):
                raise _disagrees(start, seq, f"tool/result {event.call_id!r} is out of model order")
            results[index] = event
        elif isinstance(event, ApprovalAskedEvent):
            if event.call_id is not None and event.call_id in positions:
                asked[event.call_id] = event
        elif isinstance(event, ApprovalDecidedEvent):
            decided[event.id] = event
        elif isinstance(event, ContextMessageEvent) and len(results) == n:
            # the batch's contexts follow its last result
            logged_contexts.append(
                HookContext(content=event.content, source=event.source, meta=event.meta)
            )
    deferred: dict[int, tuple[str, ApprovalOutcome | None, str | None]] = {}
    pending: set[str] = set()  # requests given to a call already (a repeated id asks once)
    for index in range(len(call_seqs)):
        request = asked.get(ids[index])
        if index in results or request is None or request.id in pending:
            continue
        pending.add(request.id)
        decision = decided.get(request.id)
        if decision is None:
            deferred[index] = (request.id, None, request.arguments_digest)
        elif decision.answered_by == _RESUME and decision.outcome not in _ALLOWING:
            # decided on an earlier resume that stopped before its result: the body never ran
            deferred[index] = (request.id, decision.outcome, request.arguments_digest)
    return _OpenBatch(
        start=start,
        calls=calls,
        results=results,
        call_seqs=tuple(call_seqs),
        attempts=tuple(attempts),
        logged_contexts=tuple(logged_contexts),
        deferred=deferred,
        suspended=record.end is not None and record.end.reason == "suspended",
        repeated=len(positions) != n,
    )


def _earliest(candidates: Sequence[int], started: int, results: Mapping[int, object]) -> int:
    """The earliest of a call id's ``candidates`` that started and has no result yet (the
    first candidate when none has: the caller's order checks then refuse the event).
    """
    for index in candidates:
        if index < started and index not in results:
            return index
    return candidates[0]


_RESUME: Final = "resume"
_ALLOWING: Final = (ApprovalOutcome.ALLOWED_ONCE, ApprovalOutcome.ALLOWED_SESSION)


def logged_result(event: ToolResultEvent) -> ToolExecutionResult:
    """The result a logged ``tool/result`` records (internal)."""
    return ToolExecutionResult(
        content=event.content,
        is_error=event.is_error,
        error=event.error,
        meta=event.meta,
        additional_contexts=event.contexts,
    )


def _primed_log(session: SessionLog, batch: _OpenBatch, attempts: dict[int, int]) -> BatchLog:
    start = batch.start
    n = len(batch.calls)
    call_seqs = [*batch.call_seqs, *[0] * (n - len(batch.call_seqs))]
    return BatchLog(
        session,
        batch.calls,
        start.turn,
        start.step,
        start.batch_id,
        call_seqs=call_seqs,
        attempts=attempts,
        logged_contexts=batch.logged_contexts,
    )


async def resume_tool_calls(
    registry: ToolRegistry,
    session: SessionLog,
    *,
    signal: CancelSignal,
    agent: object | None = None,
    max_parallel_tool_calls: int = DEFAULT_MAX_PARALLEL_TOOL_CALLS,
    capacity_limits: Mapping[str, int] | None = None,
    approvals: object = None,
    on_interrupted: OnInterrupted = "rerun-idempotent",
) -> ToolBatch | None:
    """Finish the session's last open batch (its process stopped before its ``batch/end``,
    it ended ``"suspended"``, or it ended ``"aborted"`` / ``"failed"`` before some of its calls
    started: Ctrl-C, a cancelled caller, a failed append) in the same log, and return it;
    ``None`` if there is none.
    Events of other batches in the log (one a tool body ran, or a later one) are told apart
    by their brackets and left alone.

    - Calls with a logged ``tool/result`` are returned as logged: no hook, guard or body runs
      again. The scheduler commits in model order, so they are a prefix of the batch.
    - A call with a ``tool/call`` but no ``tool/result`` may have run, in part or in full. If
      its tool is idempotent (``ToolDefinition.idempotent``), it runs again through the
      pipeline with the next attempt (a new ``tool/call`` with ``attempt`` N+1; its body's
      ``context.attempt`` says N+1 and ``context.idempotency_key`` is the same as before).
      Otherwise it gets ``TOOL_INTERRUPTED`` (``Error: tool call interrupted: the process
      stopped while it ran; its effects are unknown``), whose ``tool/result`` points at the
      logged ``tool/call``. With ``on_interrupted="abort"`` every such call gets
      ``TOOL_INTERRUPTED``. A call whose tool the registry lacks runs again, and gets the
      unknown-tool result.
    - Calls that never started run through the normal pipeline and scheduler (pools,
      barriers, ``signal``), as in :func:`~dsh_tools.run_tool_calls`.
    - Then the batch's ``context/message`` events not logged yet, and its ``batch/end``.

    A suspended batch that this resume leaves as it was (every call settled or waiting for a
    decision that ``approvals`` does not give) is returned as it stands, and nothing is
    appended: a loop may poll it. Exactly once holds whatever the caller does: a second
    resume of the same log object in this process waits until the first has returned, then
    reads the log again (and finds the batch finished, or still suspended); a second log
    object on the same file or session cannot be opened for writing while the first is
    (``SessionLogLockedError``), in this process or another.

    The returned batch is what an uninterrupted run would have returned for the same
    outcomes: one result per call of ``batch/start``, in model order, and the contexts rebuilt
    from the logged results' ``contexts`` followed by the resumed calls'. (A context given to
    :func:`~dsh_tools.inject_context` belongs to no result: one injected before the process
    stopped is kept, in its place, only if its ``context/message`` was logged. The logged
    ``context/message`` events are matched to the rebuilt contexts by value, in order, so each
    result's contexts reach the log exactly once.) ``batch`` hook listeners do not run for a
    resumed batch.

    Args:
        registry: the registry whose pipeline runs the calls that run (again).
        session: the log the batch was written to.
        signal: the cancel signal of the resumed batch.
        agent: the agent the calls belong to.
        max_parallel_tool_calls: as for :func:`~dsh_tools.run_tool_calls`.
        capacity_limits: as for :func:`~dsh_tools.run_tool_calls`.
        approvals: decisions for the calls whose approval was deferred, by call id:
            ``"allowed-once"``, ``"rejected"`` or ``"allowed-session"`` (a session grant), or
            an :class:`~dsh_tools.Approval` of one: with ``arguments``, the call runs with
            those (validated again) and the model is told; with ``digest``, it applies only
            when the pending request asked about arguments of that digest (its
            ``argumentsDigest``).
            Each is logged as the pending request's ``approval/decided`` (``answeredBy:
            "resume"``) and the call continues from it: allowed, its guards run and its body
            runs; rejected, it gets ``Error: the user rejected tool "<name>"``. A deferred
            call with no decision stays suspended: the batch ends ``"suspended"`` again (or,
            when nothing else changes, stays as logged) and lists it in
            ``ToolBatch.suspended``. A decision logged by an earlier resume that stopped
            before the call's result stands: giving the same one again is accepted, a
            different one is a ``ValueError``.
        on_interrupted: ``"rerun-idempotent"`` (the default) or ``"abort"``.

    Returns:
        The finished batch, or ``None`` when every batch of the session has ended (or the
        log has no batch).

    Raises:
        TypeError: ``session`` is not a :class:`~dsh_tools.SessionLog`, ``registry`` is not a
            :class:`~dsh_tools.ToolRegistry`, ``signal`` is not a
            :class:`~dsh_tools.CancelSignal`, or a limit has the wrong type.
        ValueError: the open batch's events disagree with its ``batch/start`` (nothing is
            appended), ``on_interrupted`` is unknown, or a limit is less than 1.
        TypeError, ValueError: ``approvals`` is not a mapping of call ids to one of the
            three decisions, names a call whose approval is not pending, or contradicts a
            decision the log holds (nothing is appended).
        trio.Cancelled: as for :func:`~dsh_tools.run_tool_calls`.

    This is a checkpoint on every path.
    """
    check_trio("resume_tool_calls")
    cap, limits = check_limits(max_parallel_tool_calls, capacity_limits)
    check_signal(signal)
    session = check_session(session)
    check_runner(registry, session, 0, 0)
    decisions = check_approvals(approvals)
    # a resumed batch may need no answerer: its deferred calls are decided by ``approvals``
    check_approval_setup(pipeline_host(registry), agent, answerers=False)
    if on_interrupted not in _ON_INTERRUPTED:
        raise ValueError(
            f'on_interrupted must be "rerun-idempotent" or "abort", not {on_interrupted!r}'
        )
    entry = _holding(session)
    try:
        async with entry.lock:
            return await _resume(
                registry, session, signal, agent, cap, limits, decisions, on_interrupted
            )
    finally:
        _released(session, entry)


async def _resume(
    registry: ToolRegistry,
    session: SessionLog,
    signal: CancelSignal,
    agent: object | None,
    cap: int,
    limits: dict[str, int],
    decisions: Mapping[str, Approval],
    on_interrupted: OnInterrupted,
) -> ToolBatch | None:
    batch = _open_batch(session.events())
    if batch is None:
        if decisions:
            raise ValueError(
                "approvals name calls whose approval is not pending: the session has no open "
                f"or suspended batch ({', '.join(repr(call_id) for call_id in decisions)})"
            )
        await trio.lowlevel.checkpoint()
        return None
    start = batch.start
    calls = batch.calls
    if batch.repeated:
        raise ValueError(
            f"batch {start.batch_id}: its calls repeat a call id, so a decision or an "
            "idempotency key could name two calls; it cannot be resumed. recover_session("
            "session) closes it, telling its calls apart by position; later batches are "
            "then resumed as usual"
        )
    deferred_ids = {calls[index].call_id: index for index in batch.deferred}
    unknown = sorted(set(decisions) - set(deferred_ids))
    if unknown:
        raise ValueError(
            f"approvals name calls whose approval is not pending in batch {start.batch_id}: "
            f"{', '.join(repr(call_id) for call_id in unknown)} (pending: "
            f"{', '.join(repr(call_id) for call_id in deferred_ids) or 'none'})"
        )
    host = pipeline_host(registry)
    interrupted: set[int] = set()
    attempts: dict[int, int] = {}
    env_attempts: dict[str, int] = {}
    for index in range(len(batch.call_seqs)):
        if index in batch.results or index in batch.deferred:
            continue
        call = calls[index]
        tool = host.lookup(call.name, agent)
        if on_interrupted == "abort" or (tool is not None and not tool.idempotent):
            interrupted.add(index)
        else:
            attempts[index] = env_attempts[call.call_id] = batch.attempts[index] + 1
    prefix = batch.prefix
    deferred: dict[int, tuple[str, Approval | None, bool]] = {}
    for index, (request_id, logged, asked) in batch.deferred.items():
        call_id = calls[index].call_id
        given = decisions.get(call_id)
        if given is not None and given.digest is not None and given.digest != asked:
            raise ValueError(
                f"approvals: the decision for call {call_id!r} is for arguments of digest "
                f"{given.digest}, but its pending request asked about {asked or 'no digest'}: "
                "it does not apply"
            )
        if logged is not None and given is not None and given.outcome != logged:
            raise ValueError(
                f"approvals: call {call_id!r} was decided already: {logged.value} "
                f"(its approval/decided is in the log, and a logged decision stands), so "
                f"{given.outcome.value!r} cannot apply"
            )
        # a decision already logged stands; one given now is new (its approval/decided is due)
        new = logged is None and given is not None
        decision = Approval(logged) if logged is not None else given
        deferred[index] = (request_id, decision, new)
    log = _primed_log(
        _Settled(session) if _nothing_to_decide(batch, deferred) else session, batch, attempts
    )
    resumed = ResumedBatch(
        registry=registry,
        calls=calls,
        signal=signal,
        agent=agent,
        cap=cap,
        log=log,
        capacity=capacity_of(limits),
        turn=start.turn,
        step=start.step,
        batch_id=start.batch_id,
        attempts=env_attempts,
        dangling=len(batch.call_seqs),
        interrupted=frozenset(interrupted),
        logged={
            index: logged_result(event)
            for index, event in batch.results.items()
            if index >= len(prefix)
        },
        deferred=deferred,
    )
    resumed.prime([logged_result(event) for event in prefix])
    return await run_batch(resumed)


def _nothing_to_decide(
    batch: _OpenBatch, deferred: Mapping[int, tuple[str, Approval | None, bool]]
) -> bool:
    """Whether the batch is suspended and stays so unchanged: every call has its logged
    result or waits for a decision that nobody gives now (nor logged on an earlier resume).
    """
    return (
        batch.suspended
        and all(outcome is None for _, outcome, _ in deferred.values())
        and all(index in batch.results or index in deferred for index in range(len(batch.calls)))
    )


class _Settled:
    """The log of a suspended batch a resume does not change (:func:`_nothing_to_decide`), as
    that resume sees it: read as the log, appended to never. Every call is settled, so the
    only event the lane appends is the batch's ``batch/end`` ``"suspended"``, which the log
    has already: a loop that polls a suspended batch does not grow its log.
    """

    __slots__ = ("_session",)

    def __init__(self, session: SessionLog) -> None:
        self._session = session

    def append(self, event: SessionEvent, /) -> int:
        return -1

    def events(self) -> list[SessionEvent]:
        return self._session.events()


def recover_session(session: SessionLog) -> tuple[ToolResultEvent, ...]:
    """Close the session's last open batch without running anything, for a loop that would rather
    tell the model than resume.

    Each call with a ``tool/call`` but no ``tool/result`` gets ``TOOL_INTERRUPTED`` (pointing
    at its ``tool/call``); each call that never started gets a synthetic ``tool/call`` and
    ``ABORTED_BEFORE_DISPATCH``; then the batch's ``context/message`` events not logged yet and
    a ``batch/end`` with reason ``"aborted"``. A batch whose calls repeat a call id (which
    :func:`resume_tool_calls` refuses) is closed too: its events are matched to its calls by
    position, as calls start and commit in model order.

    Returns:
        Every ``tool/result`` of the batch in model order (the logged ones and the new ones):
        what the model is told. Empty when every batch of the session has ended (or the log
        has no batch); then nothing is appended.

    Raises:
        TypeError: ``session`` is not a :class:`~dsh_tools.SessionLog`.
        ValueError: the open batch's events disagree with its ``batch/start`` (nothing is
            appended).
        RuntimeError: a :func:`resume_tool_calls` of the same log object is running in this
            process (nothing is appended: its calls would get a second result).
    """
    session = check_session(session)
    _check_not_resuming(session)
    batch = _open_batch(session.events())
    if batch is None:
        return ()
    log = _primed_log(session, batch, {})
    n = len(batch.calls)
    events: list[ToolResultEvent] = []
    for index in range(len(batch.call_seqs)):
        logged = batch.results.get(index)
        if logged is not None:
            events.append(logged)
        elif index in batch.deferred:
            # its body never ran; its pending approval is closed as cancelled
            request_id, decision, _asked = batch.deferred[index]
            if decision is None:
                log.decided(request_id, Approval(ApprovalOutcome.CANCELLED))
            events.append(log.result(index, ABORTED_BEFORE_DISPATCH))
        else:
            events.append(log.result(index, INTERRUPTED))
    for index in range(len(batch.call_seqs), n):
        log.call(index)
        events.append(log.result(index, ABORTED_BEFORE_DISPATCH))
    log.contexts([context for event in events for context in event.contexts])
    log.end("aborted")
    return tuple(events)
