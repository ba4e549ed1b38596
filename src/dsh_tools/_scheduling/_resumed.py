"""A batch finished from its session log: the lane's own rules, with the calls the log
already settled taken as logged.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from dsh_tools._pipeline._call import PreparedCall
from dsh_tools._pipeline._complete import complete_now
from dsh_tools._pipeline._open import resume_suspended
from dsh_tools._pipeline._results import ABORTED_BEFORE_DISPATCH, INTERRUPTED
from dsh_tools._values._arguments import parse_call_arguments
from dsh_tools._values._execution import Approval, ToolExecutionResult, decided_digest

from ._lane import Batch

__all__ = ["ResumedBatch"]


@attrs.define(eq=False, slots=True)
class ResumedBatch(Batch):
    """A batch finished from its session log after its process stopped, or after it was
    suspended (``resume_tool_calls``).

    The caller primes it with :meth:`prime`: the committed prefix (results as logged, their
    contexts in the FIFO). Each call in ``[committed, dangling)`` had its ``tool/call`` logged:
    one in ``logged`` has its ``tool/result`` too (a call after a suspended one) and is taken
    as logged; one in ``deferred`` waits for its deferred approval (the request id, the
    decision or ``None``, and whether the decision is new: then its ``approval/decided`` is
    appended) and continues from the decision; one in ``interrupted`` commits
    ``TOOL_INTERRUPTED`` (pointing at its logged ``tool/call``, no stage runs); the others run
    again through the pipeline with their next attempt. Calls from ``dangling`` on start as
    in a fresh batch. The lane, the pools and the barriers are the fresh batch's own.
    """

    dangling: int = 0
    interrupted: frozenset[int] = frozenset()
    logged: dict[int, ToolExecutionResult] = attrs.field(
        factory=lambda: dict[int, ToolExecutionResult]()
    )
    deferred: dict[int, tuple[str, Approval | None, bool]] = attrs.field(
        factory=lambda: dict[int, tuple[str, Approval | None, bool]]()
    )

    def prime(self, results: list[ToolExecutionResult]) -> None:
        """Take the committed prefix: ``results`` as logged, in model order."""
        count = len(results)
        self.results[:count] = results
        self.committed = self.started = count
        for result in results:
            self.contexts.extend(result.additional_contexts)

    def _take_arguments(self, index: int) -> object:
        self.started = index + 1
        if self.next_index == index:
            arguments = self.next_arguments
            self.next_index = -1
            self.next_arguments = None
            return arguments
        return parse_call_arguments(self.calls[index].arguments)

    def _start(self, index: int) -> PreparedCall:
        call = self.calls[index]
        if index in self.logged:
            self._take_arguments(index)
            prepared = PreparedCall(self.env, call, None).replay(self.logged[index])
        elif index in self.deferred:
            arguments = self._take_arguments(index)
            request_id, decision, new = self.deferred[index]
            if new:
                # a resumed batch always has its log; a new decision always has an outcome
                assert self.log is not None
                assert decision is not None
                self.log.decided(
                    request_id, decision, decided_digest(call.name, arguments, decision)
                )
            prepared = resume_suspended(self.env, call, arguments, decision)
        elif index in self.interrupted:
            self._take_arguments(index)
            prepared = PreparedCall(self.env, call, None).final_result(INTERRUPTED)
        else:
            return super()._start(index)
        self.prepared[index] = prepared
        return prepared

    def uncommitted(self) -> Iterator[tuple[int, ToolExecutionResult]]:
        for index, result in super().uncommitted():
            if index not in self.logged:
                yield index, (INTERRUPTED if index in self.interrupted else result)
        # the dangling calls not started again also have a tool/call without its tool/result
        for index in range(self.started, self.dangling):
            if index not in self.logged:
                yield index, (ABORTED_BEFORE_DISPATCH if index in self.deferred else INTERRUPTED)

    def skip_unstarted(self) -> None:
        # a dangling call that did not start again (the signal fired) may have run before the
        # process stopped: TOOL_INTERRUPTED, pointing at its logged tool/call; a logged one
        # keeps its result, a deferred one stays suspended
        for index in range(self.started, self.dangling):
            call = self.calls[index]
            if index in self.logged:
                self.results[index] = self.logged[index]
            elif index in self.deferred:
                prepared = resume_suspended(
                    self.env, call, parse_call_arguments(call.arguments), None
                )
                self.results[index] = complete_now(prepared)
                self.suspended.append((index, prepared.arguments))
            else:
                if self.log is not None:
                    self.log.result(index, INTERRUPTED)
                self.results[index] = INTERRUPTED
        if self.started < self.dangling:
            self.started = self.committed = self.dangling
        super().skip_unstarted()
