"""``check_batch``: the scheduler's invariants, checked on one finished batch."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

from dsh_tools import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    TOOL_INTERRUPTED,
    BatchCallEvent,
    BatchEndEvent,
    BatchStartEvent,
    ContextMessageEvent,
    SessionEvent,
    SessionLog,
    TextBlock,
    ToolBatch,
    ToolCallEvent,
    ToolCallRequest,
    ToolExecutionResult,
    ToolResultEvent,
)

from ._scripted import ScriptedTool

__all__ = ["check_batch"]

# code -> (text, error name) of each canonical result
_CANONICAL = {
    TOOL_ABORTED: ("Error: tool call aborted", "AbortError"),
    TOOL_ABORTED_BEFORE_DISPATCH: ("Error: tool call aborted before dispatch", "AbortError"),
    TOOL_INTERRUPTED: (
        "Error: tool call interrupted: the process stopped while it ran; its effects are unknown",
        "ToolInterruptedError",
    ),
}


def _text(result: ToolExecutionResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, TextBlock))


def _code(result: ToolExecutionResult) -> str:
    if not result.is_error:
        return "ok"
    return result.error.code if result.error is not None else "error"


def _describe_event(event: SessionEvent) -> str:
    if isinstance(event, ToolCallEvent):
        return f"tool/call    {event.call_id}"
    if isinstance(event, ToolResultEvent):
        code = "ok" if not event.is_error else (event.error.code if event.error else "error")
        return f"tool/result  {event.call_id} {code} <- {list(event.source_event_seqs)}"
    if isinstance(event, ContextMessageEvent):
        return "context/message"
    if isinstance(event, BatchStartEvent):
        return f"batch/start  {event.batch_id} {[call.call_id for call in event.calls]}"
    if isinstance(event, BatchCallEvent):
        return f"batch/call   {event.batch_id} {event.call.call_id}"
    if isinstance(event, BatchEndEvent):
        return f"batch/end    {event.batch_id} {event.reason}"
    return type(event).__name__  # events added by other modules (approval, turns)


def _diff(label: str, expected: Sequence[str], actual: Sequence[str]) -> str:
    lines = difflib.unified_diff(
        list(expected), list(actual), f"expected {label}", f"actual {label}", lineterm=""
    )
    return "\n".join(lines)


def _batch_events(
    events: Sequence[SessionEvent], n: int, problems: list[str]
) -> tuple[int, list[SessionEvent]]:
    """The batch's own events: the suffix holding its last ``n`` ``tool/call`` events."""
    seen = 0
    start = len(events)
    for index in range(len(events) - 1, -1, -1):
        if isinstance(events[index], ToolCallEvent):
            seen += 1
            if seen == n:
                start = index
                break
    if seen < n:
        problems.append(f"the log holds {seen} tool/call events, the batch has {n} calls")
    return start, list(events[start:])


def _last_batch_start(events: Sequence[SessionEvent]) -> int | None:
    """Where the batch's ``batch/start`` is: the last one, unless a ``tool/call`` follows the
    ``batch/end`` of its batch (then the batch was logged without a bracket).
    """
    called = False  # a tool/call seen after (scanning back: before) the bracket's end
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if isinstance(event, BatchStartEvent):
            return index
        if isinstance(event, ToolCallEvent):
            called = True
        elif isinstance(event, BatchEndEvent) and called:
            return None
    return None


def _check_bracket(
    calls: Sequence[ToolCallRequest], own: Sequence[SessionEvent], problems: list[str]
) -> None:
    """``own`` opens with the batch's ``batch/start``: it lists the calls, and a ``batch/end``
    of the same batch is the last event.
    """
    start = own[0]
    assert isinstance(start, BatchStartEvent)
    # a streamed batch lists the calls it knew at its start; the rest arrive as batch/call
    arrived = [
        e.call for e in own if isinstance(e, BatchCallEvent) and e.batch_id == start.batch_id
    ]
    listed = [f"{c.call_id} {c.name} {c.arguments}" for c in (*start.calls, *arrived)]
    expected = [f"{c.call_id} {c.name} {c.arguments}" for c in calls]
    if listed != expected:
        problems.append(
            "batch/start and batch/call do not list the batch's calls:\n"
            + _diff("calls", expected, listed)
        )
    ends = [(i, e) for i, e in enumerate(own) if isinstance(e, BatchEndEvent)]
    if not ends:
        problems.append(f"batch/start {start.batch_id} has no batch/end")
        return
    for _, end in ends:
        if end.batch_id != start.batch_id:
            problems.append(f"batch/end names batch {end.batch_id}, not {start.batch_id}")
    # a batch suspended on a deferred approval ends "suspended" each time, then for real
    index = ends[-1][0]
    if any(end.reason != "suspended" for _, end in ends[:-1]) or index != len(own) - 1:
        problems.append(f"batch/end of {start.batch_id} is not the batch's last event")


def _last_attempts(
    call_events: list[tuple[int, ToolCallEvent]], problems: list[str]
) -> list[tuple[int, ToolCallEvent]]:
    """The last attempt's ``tool/call`` of each call (a call re-run after an interruption logs
    one per attempt, numbered from 1), in the order of the calls' first attempts (a call run
    again when its batch was resumed may follow the first ``tool/call`` of later calls); a gap
    in the numbering is a problem.
    """
    last: dict[str, tuple[int, ToolCallEvent]] = {}
    for seq, event in call_events:
        previous = last.get(event.call_id)
        expected = 1 if previous is None else previous[1].attempt + 1
        if event.attempt != expected:
            problems.append(
                f"tool/call of {event.call_id} (event {seq}) is attempt {event.attempt}, "
                f"expected {expected}"
            )
        last[event.call_id] = (seq, event)
    return list(last.values())  # a dict keeps the order in which each call first appeared


def _committed_after_suspension(own: Sequence[SessionEvent]) -> set[str]:
    """The calls whose ``tool/result`` follows a ``batch/end`` ``"suspended"`` of the batch."""
    suspended = False
    after: set[str] = set()
    for event in own:
        if isinstance(event, BatchEndEvent) and event.reason == "suspended":
            suspended = True
        elif suspended and isinstance(event, ToolResultEvent):
            after.add(event.call_id)
    return after


def _check_log(
    calls: Sequence[ToolCallRequest],
    batch: ToolBatch,
    events: Sequence[SessionEvent],
    problems: list[str],
) -> None:
    n = len(calls)
    bracket = _last_batch_start(events)
    if bracket is not None:
        start, own = bracket, list(events[bracket:])
        _check_bracket(calls, own, problems)
    elif n == 0:
        return
    else:
        start, own = _batch_events(events, n, problems)
    ids = [call.call_id for call in calls]
    call_events = [(start + i, e) for i, e in enumerate(own) if isinstance(e, ToolCallEvent)]
    if bracket is not None:
        call_events = _last_attempts(call_events, problems)
    result_events = [(start + i, e) for i, e in enumerate(own) if isinstance(e, ToolResultEvent)]
    context_events = [
        (start + i, e) for i, e in enumerate(own) if isinstance(e, ContextMessageEvent)
    ]
    described = [f"{start + i:>4} {_describe_event(e)}" for i, e in enumerate(own)]

    actual_calls = [f"{e.call_id} {e.name} {e.arguments}" for _, e in call_events]
    expected_calls = [f"{c.call_id} {c.name} {c.arguments}" for c in calls]
    if actual_calls != expected_calls:
        problems.append(
            "tool/call events are not one per call in model order:\n"
            + _diff("tool/call", expected_calls, actual_calls)
        )
    # calls whose approval was deferred: pending ones have no tool/result yet, decided ones
    # commit after the batch was suspended; the other results stay in model order
    pending = {call.call_id for call in batch.suspended}
    deferred = pending | _committed_after_suspension(own)
    expected_results = [call_id for call_id in ids if call_id not in pending]
    actual_results = [e.call_id for _, e in result_events]
    in_order = [i for i in actual_results if i not in deferred] == [
        i for i in expected_results if i not in deferred
    ]
    if not in_order or sorted(actual_results) != sorted(expected_results):
        problems.append(
            "tool/result events are not one per call in model order:\n"
            + _diff("tool/result", expected_results, actual_results)
        )
    if deferred:
        # paired by call id (the calls' ids are unique in a batch that can be suspended)
        call_of = {event.call_id: (seq, event) for seq, event in call_events}
        index_of = {call_id: index for index, call_id in enumerate(ids)}
        pairs = [(call_of[e.call_id], (seq, e)) for seq, e in result_events if e.call_id in call_of]
        logged = [(index_of[e.call_id], e) for _, e in result_events if e.call_id in index_of]
    else:
        pairs = list(zip(call_events, result_events, strict=False))
        logged = list(enumerate(e for _, e in result_events))
    seq_of = {id(event): seq for seq, event in call_events}
    for (call_seq, call_event), (result_seq, result_event) in pairs:
        if result_event.source_event_seqs != (seq_of[id(call_event)],):
            problems.append(
                f"tool/result of {result_event.call_id} (event {result_seq}) points at "
                f"{list(result_event.source_event_seqs)}, not at its tool/call (event {call_seq})"
            )
        if result_seq < call_seq:
            problems.append(f"tool/result of {result_event.call_id} comes before its tool/call")
    for index, event in logged:
        if index >= len(batch.results):
            continue
        result = batch.results[index]
        # a bracketed batch also logs each result's contexts (an older log has none)
        contexts = result.additional_contexts if bracket is not None else event.contexts
        if (event.content, event.is_error, event.error, event.meta, event.contexts) != (
            result.content,
            result.is_error,
            result.error,
            result.meta,
            contexts,
        ):
            problems.append(
                f"tool/result of call {index} ({event.call_id}) differs from batch.results[{index}]"
            )
    if result_events:
        last_result = result_events[-1][0]
        inside = [seq for seq, _ in context_events if seq < last_result]
        if inside:
            problems.append(
                f"context/message events {inside} come before the batch's last tool/result "
                f"(event {last_result}): call/result adjacency is broken"
            )
    logged_contexts = [(e.content, e.source, e.meta) for _, e in context_events]
    # a suspended batch logs its contexts only when it really ends
    returned = [] if pending else [(c.content, c.source, c.meta) for c in batch.contexts]
    if logged_contexts != returned:
        problems.append(
            f"the log has {len(logged_contexts)} context/message events; batch.contexts has "
            f"{len(returned)} (they must match, in order)"
        )
    if problems:
        problems.append("the batch's events:\n" + "\n".join(described))


def _check_contexts(batch: ToolBatch, problems: list[str]) -> None:
    """Every result's contexts are in the batch FIFO, in model order (injected contexts may
    come between them).
    """
    wanted = [context for result in batch.results for context in result.additional_contexts]
    position = 0
    for context in batch.contexts:
        if position < len(wanted) and context == wanted[position]:
            position += 1
    if position != len(wanted):
        problems.append(
            f"batch.contexts lacks result contexts in model order: found {position} of "
            f"{len(wanted)}"
        )


def _check_tools(
    calls: Sequence[ToolCallRequest],
    batch: ToolBatch,
    tools: Iterable[ScriptedTool],
    problems: list[str],
) -> None:
    ids = {call.call_id for call in calls}
    started: set[str] = set()
    tools = list(tools)
    scripted = {tool.name for tool in tools}
    for tool in tools:
        for run in tool.runs:
            if run.call_id not in ids:
                continue
            started.add(run.call_id)
            if run.running:
                problems.append(
                    f"the body of {tool.name} for call {run.call_id} is still running after "
                    "run_tool_calls returned"
                )
    for index, (call, result) in enumerate(zip(calls, batch.results, strict=False)):
        if call.name not in scripted:
            continue  # not a scripted tool: nothing is known about its body
        code = _code(result)
        if code == TOOL_ABORTED and call.call_id not in started:
            problems.append(
                f"call {index} ({call.call_id}) is ABORTED but its body never started "
                "(expected ABORTED_BEFORE_DISPATCH)"
            )
        elif code == TOOL_ABORTED_BEFORE_DISPATCH and call.call_id in started:
            problems.append(
                f"call {index} ({call.call_id}) is ABORTED_BEFORE_DISPATCH but its body "
                "started (expected ABORTED)"
            )


def check_batch(
    calls: Sequence[ToolCallRequest],
    batch: ToolBatch,
    log: SessionLog | Sequence[SessionEvent] | None = None,
    *,
    tools: Iterable[ScriptedTool] = (),
) -> None:
    """Assert the scheduler's invariants for one finished batch.

    Checked always: exactly one result per call; every cancellation or interruption result is
    the canonical one (``Error: tool call aborted`` / ``... before dispatch``, ``AbortError``;
    ``Error: tool call interrupted: ...``, ``ToolInterruptedError``); every result's contexts
    reach ``batch.contexts`` in model order.

    With ``log`` (the session the batch appended to, or its events; earlier events are
    ignored): one ``tool/call`` per call in model order with the model's name and arguments;
    one ``tool/result`` per call in model order, after its ``tool/call`` and pointing at it,
    equal to the returned result; no ``context/message`` before the last ``tool/result``;
    the ``context/message`` events equal ``batch.contexts``. When the log brackets the batch
    (its last ``batch/start`` opens the batch's events), also: ``batch/start`` lists exactly
    the calls, every call of it has one ``tool/call`` per attempt (numbered from 1; the checks
    above apply to the last attempt's, ordered by each call's first attempt) and one
    ``tool/result`` (whose ``contexts`` equal the
    result's ``additional_contexts``), and a ``batch/end`` of the same batch is the last event.

    A batch suspended on a deferred approval (``batch.suspended``) has no ``tool/result`` for
    its suspended calls and logs no ``context/message`` yet; once resumed, the results of the
    calls decided after a ``batch/end`` ``"suspended"`` follow the others, and each earlier
    ``batch/end`` of the batch says ``"suspended"``.

    With ``tools`` (scripted tools the calls used): no body is still running, and a call of one
    of these tools is ``ABORTED`` only if its body started and ``ABORTED_BEFORE_DISPATCH`` only
    if it did not (calls of other tools are not judged on this).

    Raises:
        AssertionError: listing every broken invariant, with a diff of expected and actual
            event sequences where that helps.
    """
    calls = list(calls)
    problems: list[str] = []
    results = batch.results
    if len(results) != len(calls):
        problems.append(f"{len(calls)} calls but {len(results)} results")
    for index, result in enumerate(results):
        code = _code(result)
        canonical = _CANONICAL.get(code)
        if canonical is not None and (
            _text(result) != canonical[0]
            or result.error is None
            or result.error.name != canonical[1]
        ):
            problems.append(
                f"result {index} has code {code} but is not the canonical result: {_text(result)!r}"
            )
    _check_contexts(batch, problems)
    _check_tools(calls, batch, tools, problems)
    if log is not None:
        events = log if isinstance(log, Sequence) else log.events()
        _check_log(calls, batch, events, problems)
    if problems:
        codes = "\n".join(
            f"  {call.call_id:<8} {call.name:<16} {_code(result)}"
            for call, result in zip(calls, results, strict=False)
        )
        raise AssertionError(
            "batch invariants violated:\n- "
            + "\n- ".join(problems)
            + "\nresults in model order:\n"
            + codes
        )
