"""The log bracket around a batch: ``batch/start`` before its first call, then, however the
lane ends, every started call balanced with a ``tool/result`` and one ``batch/end``: the
batch's contexts and ``completed`` / ``aborted`` / ``suspended`` when the lane returns, and
``aborted`` (the caller's scope was cancelled) or ``failed`` (the scheduler itself raised)
when it raises.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import trio

from dsh_tools._sessions._reader import SessionReader
from dsh_tools._values._batch import SuspendedCall, ToolBatch, ToolStreamError
from dsh_tools._values._content import HookContext
from dsh_tools._values._presentation import call_view_of

from ._active import ACTIVE_BATCH
from ._bodies import lone_as_itself
from ._lane import Batch
from ._stream import READER_TASK, read_calls

__all__ = ["run_batch"]


async def run_batch(batch: Batch, stream: AsyncIterator[object] | None = None) -> ToolBatch:
    """Run ``batch`` inside its log bracket, as the current task's active batch; with a call
    ``stream``, its reader runs beside the lane (``_stream``).

    Raises:
        ToolStreamError: the stream raised; the log is balanced and ends ``"failed"``.
    """
    token = ACTIVE_BATCH.set(batch)
    try:
        # a checkpoint on every path, also when no call runs (empty or pre-cancelled batch)
        await trio.lowlevel.checkpoint()
        log = batch.log
        if log is not None and not log.started:
            log.start()
        if stream is None:
            await batch.run_lane()
        else:
            await lone_as_itself(_run_streamed(batch, stream))
        result = _close(batch)
    except BaseException as exc:
        # caller-scope cancellation, or the scheduler itself failed: every tool/call we
        # appended still gets its tool/result (synchronously: no checkpoint needed), then
        # the batch its batch/end
        batch.active = False
        log = batch.log
        if log is not None:
            batch.committed += log.balance(batch.uncommitted())
            log.end_after_failure("aborted" if _interrupted(exc) else "failed")
        raise
    finally:
        batch.active = False
        ACTIVE_BATCH.reset(token)
    if batch.stream_error is not None:
        raise ToolStreamError(result) from batch.stream_error
    return result


async def _run_streamed(batch: Batch, stream: AsyncIterator[object]) -> None:
    """The lane, with the stream's reader beside it in a nursery of the batch's own."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_calls, batch, stream, name=READER_TASK)
        try:
            await batch.run_lane()
        finally:
            # the lane is done (every received call committed, or it failed): stop reading
            nursery.cancel_scope.cancel()


def _interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is an interrupt (trio's cancellation, or Ctrl-C's
    ``KeyboardInterrupt``), alone or a group of nothing else.
    """
    if isinstance(exc, BaseExceptionGroup):
        _, rest = exc.split((trio.Cancelled, KeyboardInterrupt))  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        return rest is None
    return isinstance(exc, trio.Cancelled | KeyboardInterrupt)


def _close(batch: Batch) -> ToolBatch:
    """Give every call that never started its result, then append the batch's contexts and
    its ``batch/end``; the batch.
    """
    n = len(batch.calls)
    batch.skip_unstarted()
    batch.active = False
    log = batch.log
    suspended = _suspended_calls(batch)
    contexts: Sequence[HookContext] = batch.contexts
    if log is not None:
        if suspended:
            # the contexts wait for the batch's real end: resumed, they follow every result
            log.end("suspended")
        else:
            contexts = log.contexts(contexts)
            if batch.stream_error is not None:
                log.end("failed")
            else:
                log.end("aborted" if batch.signal.cancelled else "completed")
    results = tuple(batch.results)
    assert batch.committed == n  # every call has its result
    return ToolBatch(
        results=results,  # pyright: ignore[reportArgumentType]
        contexts=tuple(contexts),
        suspended=suspended,
    )


def _suspended_calls(batch: Batch) -> tuple[SuspendedCall, ...]:
    """What a person needs to decide each suspended call (its pending request's id is
    read back from the session log).
    """
    if not batch.suspended:
        return ()
    log = batch.log
    requests: dict[str, str] = {}
    if log is not None:
        for request in SessionReader(log.events()).pending_requests().values():
            if request.call_id is not None:
                requests[request.call_id] = request.id
    suspended: list[SuspendedCall] = []
    for index, arguments in sorted(batch.suspended, key=lambda item: item[0]):
        call = batch.calls[index]
        tool = batch.host.lookup(call.name, batch.agent)
        view, _ = call_view_of(None if tool is None else tool.present_call, call.name, arguments)
        suspended.append(
            SuspendedCall(
                call_id=call.call_id,
                tool_name=call.name,
                arguments=arguments,
                view=view,
                request_id=requests.get(call.call_id),
            )
        )
    return tuple(suspended)
