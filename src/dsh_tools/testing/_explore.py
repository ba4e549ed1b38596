"""Explorers: every point where a cancellation can land in a scenario of the user's own tools,
and every point where its process can die, each run checked against the scheduler's promises.

Each run is its own ``trio.run`` on a fresh ``MockClock`` (autojump), in a worker thread the
explorer joins with a bound: a run that does not end (a wait under a shield that no
cancellation reaches) is reported as a hang, and the exploration goes on. A deadlock detector
sleeps beside the scenario on the virtual clock: a run still going long after the uncancelled
run ended (every task waiting on something that never comes) is cancelled and reported as a
hang. trio's own scheduling randomness is pinned for every run, so two explorations of one
scenario make the same runs and find the same failures. Bodies that run in worker threads make
the step count vary, and the virtual clock jumps while they run (every task is waiting); the
detector then watches for real progress before it calls a run stuck. Keep a scenario's bodies
on the trio loop to explore it exactly.
"""

from __future__ import annotations

import collections
import os
import pickle
import select
import signal
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Literal, TypeVar, cast

import attrs
import trio
import trio.testing

from dsh_tools import (
    TOOL_INTERRUPTED,
    CancelController,
    CancelSignal,
    JsonlSessionLog,
    SessionEvent,
    SessionLog,
    SqliteSessionLog,
    ToolBatch,
    ToolCallEvent,
    ToolCallRequest,
    ToolResultEvent,
    resume_tool_calls,
)
from dsh_tools._for_integrations import (
    ObservedBatch,
    SessionReader,
    encode_event_line,
    logged_result,
    observed_batch,
)

from ._invariants import check_batch

__all__ = [
    "Exploration",
    "ExplorationFailure",
    "ExplorationPoint",
    "ExplorationRun",
    "explore_cancellations",
    "explore_crashes",
]

T = TypeVar("T")

SEED: Final = 20_261_203
"""The seed of trio's scheduling randomness in every explored run."""

RUN_BOUND: Final = 30.0
"""How long (real seconds) one run may take before the explorer calls it a hang."""

_HORIZON_FLOOR: Final = 3_600.0
"""The deadlock detector's virtual horizon: this, or ten times the uncancelled run's length."""

RunKind = Literal["baseline", "signal", "scope", "crash", "torn"]


@attrs.frozen
class ExplorationPoint:
    """A point of a scenario's uncancelled run: right before its task step number ``step``
    (from 1), at virtual time ``time``, in the task named ``task``, with the batch then at
    ``progress`` (its calls started and committed, or ``"no batch yet"``).
    """

    step: int
    time: float
    task: str
    progress: str

    def __str__(self) -> str:
        return f"step {self.step} (t={self.time:g}, task {self.task!r}, {self.progress})"


@attrs.frozen
class ExplorationRun:
    """One run of an exploration.

    Attributes:
        kind: ``"baseline"`` (uncancelled, not killed), ``"signal"`` / ``"scope"`` (cancelled
            at ``point`` through the batch's signal / the caller's scope), ``"crash"`` (killed
            after append number ``append``) or ``"torn"`` (killed while writing append number
            ``append``, which is left torn: file logs).
        point: where a cancellation run was cancelled.
        append: how many appends a crash run made before it was killed (a torn one: how
            many were whole).
        calls: the explored batch's calls (empty when no batch started).
        batch: the batch the scenario returned, or (crash runs) the one the resume returned.
        raised: what the scenario (or the resume) raised instead, if anything.
        survived: (crash runs) the log's events when the run was killed.
        events: the log's events when the run (and its resume) ended.
    """

    kind: Literal["baseline", "signal", "scope", "crash", "torn"]
    point: ExplorationPoint | None = None
    append: int | None = None
    calls: tuple[ToolCallRequest, ...] = ()
    batch: ToolBatch | None = None
    raised: BaseException | None = None
    survived: tuple[SessionEvent, ...] = ()
    events: tuple[SessionEvent, ...] = ()

    def describe(self) -> str:
        """Which run this is, in words."""
        if self.kind == "baseline":
            return "the uncancelled run"
        if self.kind in ("signal", "scope"):
            how = "its signal" if self.kind == "signal" else "the caller's scope"
            return f"cancelled through {how} before {self.point}"
        if self.kind == "crash":
            return f"killed after append {self.append}"
        return f"killed while writing append {(self.append or 0) + 1} (left torn)"


@attrs.frozen
class ExplorationFailure:
    """A run that broke a promise: the run, and what broke (``problem``)."""

    run: ExplorationRun
    problem: str

    def __str__(self) -> str:
        return f"{self.run.describe()}: {self.problem}"


@attrs.frozen(eq=False)
class Exploration:
    """What an exploration found.

    Attributes:
        points: how many points the uncancelled run had (task steps, or appends).
        runs: every run made, the uncancelled one first.
        failures: the runs that broke a promise, in the order they were made.
    """

    points: int
    runs: tuple[ExplorationRun, ...]
    failures: tuple[ExplorationFailure, ...]
    _replay: Callable[[ExplorationRun], ExplorationFailure | None] = attrs.field(
        repr=False, alias="replay"
    )

    @property
    def ok(self) -> bool:
        """Whether no run broke a promise."""
        return not self.failures

    def reproduce(self, failure: ExplorationFailure) -> None:
        """Make ``failure``'s run again: raise ``AssertionError`` with what broke (chained to
        the run's own exception) if it breaks again; return if it passes now.
        """
        again = self._replay(failure.run)
        if again is not None:
            raise AssertionError(str(again)) from again.run.raised

    def __str__(self) -> str:
        lines = [
            f"{len(self.runs)} runs over {self.points} points: "
            + (f"{len(self.failures)} failed" if self.failures else "no failure")
        ]
        lines += [f"- {failure}" for failure in self.failures[:20]]
        if len(self.failures) > 20:
            lines.append(f"- ... and {len(self.failures) - 20} more")
        return "\n".join(lines)


# --- running one run ---------------------------------------------------------------------------


@attrs.define
class _Hang:
    """A run that did not end within the bound."""


def _run_bounded(
    fn: Callable[[], Awaitable[T]],
    instrument: trio.abc.Instrument,
    stuck: threading.Event | None = None,
) -> T | _Hang:
    """``trio.run(fn)`` on a fresh autojumping ``MockClock`` with trio's randomness pinned, in
    a worker thread; its value, or :class:`_Hang` when the run does not end within
    :data:`RUN_BOUND` or ``stuck`` is set first (the run's own detector found it stuck). A run
    that hangs is abandoned: its thread stays blocked until the process exits.
    """
    outcome: list[tuple[bool, object]] = []
    done = threading.Event()

    def target() -> None:
        trio._core._run._r.seed(SEED)  # pyright: ignore[reportPrivateUsage]
        try:
            value = trio.run(
                fn,
                clock=trio.testing.MockClock(autojump_threshold=0),
                instruments=[instrument],
            )
        except BaseException as exc:  # handed to the explorer's thread
            outcome.append((False, exc))
        else:
            outcome.append((True, value))
        finally:
            done.set()

    thread = threading.Thread(target=target, name="dsh-tools explorer run", daemon=True)
    thread.start()
    if stuck is None:
        done.wait(RUN_BOUND)
    else:
        waited = 0.0
        while not done.wait(0.002) and not stuck.is_set() and waited < RUN_BOUND:
            waited += 0.002
    if not done.is_set() or not outcome:
        return _Hang()
    ok, value = outcome[0]
    if not ok:
        assert isinstance(value, BaseException)
        raise value
    return value  # type: ignore[return-value]


class _Watcher(trio.abc.Instrument):
    """Counts task steps; records each step's point (``record``), remembers the first batch
    seen, and cancels (``cancel``) right before step ``at``.
    """

    def __init__(self, *, record: bool = False, at: int = 0) -> None:
        self.steps = 0
        self.moved = 0
        self.record = record
        self.at = at
        self.points: list[ExplorationPoint] = []
        self.batch: ObservedBatch | None = None
        self.cancel: Callable[[], None] | None = None

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1
        if task.name != _DETECTOR and not task.name.startswith("<"):
            self.moved += 1  # a step of the scenario's own tasks (not trio's, not the detector)
        observed = observed_batch(task)
        if observed is not None and (
            self.batch is None or observed.batch_id == self.batch.batch_id
        ):
            self.batch = observed  # the first batch seen, as it is now
        if self.record:
            batch = self.batch
            progress = (
                "no batch yet"
                if batch is None
                else f"{batch.started} of {len(batch.calls)} calls started, "
                f"{batch.committed} committed"
            )
            self.points.append(
                ExplorationPoint(
                    step=self.steps, time=trio.current_time(), task=task.name, progress=progress
                )
            )
        if self.steps == self.at and self.cancel is not None:
            self.cancel()


_DETECTOR: Final = "dsh-tools deadlock detector"

_STILL: Final = 0.25
"""How long (real seconds) the detector watches a run that reached its horizon for a step."""


def _moved_within(watcher: _Watcher, seen: int, seconds: float) -> bool:
    """Whether the run takes a step of its own within ``seconds`` (polled, on a worker thread)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if watcher.moved != seen:
            return True
        time.sleep(0.002)
    return watcher.moved != seen


async def _until_still(watcher: _Watcher, horizon: float) -> None:
    """Return once the run has reached ``horizon`` virtual seconds from now and then taken no
    step of its own for :data:`_STILL` real seconds. The clock jumps whenever every task
    waits, also while a body runs in a worker thread: a run that moves during the real pause
    (a thread finished, a task's own deadline came) is watched for another horizon.
    """
    while True:
        await trio.sleep(horizon)
        seen = watcher.moved
        if not await trio.to_thread.run_sync(_moved_within, watcher, seen, _STILL):
            return


def _spread(count: int, most: int) -> list[int]:
    """``most`` of the numbers 1..``count`` spread evenly (all of them if they fit)."""
    if count <= most:
        return list(range(1, count + 1))
    if most <= 1:
        return [1][:most]
    return sorted({1 + round(i * (count - 1) / (most - 1)) for i in range(most)})


def _leaf(exc: BaseException) -> BaseException:
    """``exc``, out of the one-exception groups trio's nurseries (the explorer's own included)
    wrap it in.
    """
    while isinstance(exc, BaseExceptionGroup):
        inner = cast("Sequence[BaseException]", exc.exceptions)
        if len(inner) != 1:
            break
        exc = inner[0]
    return cast(BaseException, exc)


def _close(session: object) -> None:
    """Close a log the explorer made (a store's log has ``close``; a memory log has not)."""
    close = getattr(session, "close", None)
    if callable(close):
        close()


def _check_max_runs(max_runs: object) -> int:
    if isinstance(max_runs, bool) or not isinstance(max_runs, int):
        raise TypeError(f"max_runs must be an int, not {max_runs!r}")
    if max_runs < 1:
        raise ValueError(f"max_runs must be at least 1, not {max_runs}")
    return max_runs


def _problems_of_check(
    check: Callable[[ExplorationRun], object] | None, run: ExplorationRun
) -> str | None:
    if check is None:
        return None
    try:
        check(run)
    except Exception as exc:
        return f"check failed: {type(exc).__name__}: {exc}"
    return None


# --- cancellations ------------------------------------------------------------------------------


def explore_cancellations(
    scenario: Callable[[CancelSignal], Awaitable[ToolBatch]],
    *,
    check: Callable[[ExplorationRun], object] | None = None,
    max_runs: int = 10_000,
) -> Exploration:
    """Cancel a scenario at every point where a cancellation can land, and check every run.

    ``scenario(signal)`` builds its tools afresh and runs one batch under ``signal`` (it may
    give the batch a session log). The explorer runs it once uncancelled on trio's virtual
    clock, recording each task step (every scheduling point, in any task, with its virtual
    time); then once per point, cancelled right before that step, through the signal and
    again through the caller's scope. Every run must end (no hang, no deadlock) and either
    return a batch that passes :func:`check_batch` (against its log, when it has one) or,
    cancelled through the scope, end with its log balanced (every ``tool/call`` answered);
    nothing else may be raised; and ``check(run)`` must not raise.

    Call it from synchronous code (a plain test function): each run is its own ``trio.run``.

    Args:
        scenario: an async function of the batch's :class:`~dsh_tools.CancelSignal`.
        check: called with each :class:`ExplorationRun`; an exception is a failure.
        max_runs: the most runs, the uncancelled one included; when the points need more,
            they are spread evenly over the run.

    Returns:
        The :class:`Exploration`.

    Raises:
        TypeError, ValueError: ``max_runs`` is not a positive ``int``.
        AssertionError: the uncancelled run itself hangs, raises or breaks a check (with
            what broke): there is nothing to explore from.
    """
    most = _check_max_runs(max_runs)

    def one(kind: RunKind, step: int) -> tuple[ExplorationRun, str | None, _Watcher]:
        watcher = _Watcher(record=kind == "baseline", at=step)
        horizon = [_HORIZON_FLOOR]
        if kind != "baseline":
            horizon[0] = max(_HORIZON_FLOOR, 10 * baseline_length[0])

        stuck = threading.Event()

        async def harness() -> tuple[ToolBatch | None, bool]:
            controller = CancelController()
            caller = trio.CancelScope()
            hung = False
            batch: ToolBatch | None = None
            if kind == "signal":
                watcher.cancel = lambda: controller.cancel("explored")
            elif kind == "scope":
                watcher.cancel = caller.cancel
            async with trio.open_nursery() as outer:

                async def detector() -> None:
                    nonlocal hung
                    await _until_still(watcher, horizon[0])
                    hung = True  # a deadlock: cancel it
                    caller.cancel()
                    await _until_still(watcher, horizon[0])
                    stuck.set()  # the cancellation did not end it either: under a shield

                outer.start_soon(detector, name=_DETECTOR)
                with caller:
                    batch = await scenario(controller.signal)
                outer.cancel_scope.cancel()
            return batch, hung

        raised: BaseException | None = None
        batch: ToolBatch | None = None
        problem: str | None = None
        try:
            outcome = _run_bounded(harness, watcher, stuck)
        except BaseException as exc:
            raised = _leaf(exc)
            outcome = None
            problem = f"raised {type(raised).__name__}: {raised}"
        observed = watcher.batch
        session = None if observed is None else observed.session
        if isinstance(outcome, _Hang):
            problem = (
                "hang: the run did not end, even cancelled (a wait that no cancellation "
                "reaches, such as one under a shield)"
            )
        elif outcome is not None:
            batch, hung = outcome
            if hung:
                problem = (
                    f"hang: the run had not ended at virtual time {horizon[0]:g} (a deadlock: "
                    "every task waiting on something that never comes)"
                )
        events = () if session is None or isinstance(outcome, _Hang) else tuple(session.events())
        run = ExplorationRun(
            kind=kind,
            point=None if kind == "baseline" or step > len(points) else points[step - 1],
            calls=() if observed is None else observed.calls,
            batch=batch,
            raised=raised,
            events=events,
        )
        if problem is None:
            problem = _cancellation_problem(run, observed, kind)
        if problem is None:
            problem = _problems_of_check(check, run)
        return run, problem, watcher

    points: list[ExplorationPoint] = []
    baseline_length = [0.0]
    baseline, problem, watcher = one("baseline", 0)
    if problem is not None:
        raise AssertionError(f"the uncancelled run failed, so nothing was explored: {problem}")
    points = watcher.points
    baseline_length[0] = points[-1].time if points else 0.0
    runs: list[ExplorationRun] = [baseline]
    failures: list[ExplorationFailure] = []
    for step in _spread(len(points), (most - 1) // 2):
        for kind in ("signal", "scope"):
            run, problem, _ = one(kind, step)
            runs.append(run)
            if problem is not None:
                failures.append(ExplorationFailure(run, problem))

    def replay(run: ExplorationRun) -> ExplorationFailure | None:
        step = 0 if run.point is None else run.point.step
        again, problem, _ = one(run.kind, step)
        return None if problem is None else ExplorationFailure(again, problem)

    return Exploration(
        points=len(points), runs=tuple(runs), failures=tuple(failures), replay=replay
    )


def _cancellation_problem(
    run: ExplorationRun, observed: ObservedBatch | None, kind: RunKind
) -> str | None:
    if run.batch is None:
        if kind != "scope":
            return "the scenario returned no batch"
        return _unbalanced(run.events, run.calls, None if observed is None else observed.batch_id)
    if observed is not None:
        try:
            check_batch(run.calls, run.batch, run.events if observed.session is not None else None)
        except AssertionError as exc:
            return f"batch invariants broken: {exc}"
    return None


def _unbalanced(
    events: Sequence[SessionEvent], calls: Sequence[ToolCallRequest], batch_id: str | None
) -> str | None:
    """Whether every ``tool/call`` of ``calls`` in ``events`` has its ``tool/result``."""
    ids = {call.call_id for call in calls}
    started = collections.Counter(
        e.call_id for e in events if isinstance(e, ToolCallEvent) and e.call_id in ids
    )
    answered = collections.Counter(
        e.call_id for e in events if isinstance(e, ToolResultEvent) and e.call_id in ids
    )
    missing = sorted(call_id for call_id in started if answered[call_id] < 1)
    if missing:
        return f"the log is not balanced: tool/call without a tool/result: {missing}"
    record = None if batch_id is None else SessionReader(events).batch(batch_id)
    if record is not None and record.end is None:
        return "the log is not balanced: the batch has no batch/end"
    return None


# --- crashes ------------------------------------------------------------------------------------


class _Killed(BaseException):
    """The process of a crash run dies here (no handler of the library catches it)."""


class _Dying:
    """A session log whose process dies after ``after`` appends: the next append writes part
    of its line (when ``torn``: a JSONL log) and then raises :class:`_Killed` (and so does every
    later one), or, with ``kill``, ``SIGKILL``s this process. Each append also notes the batch
    appending (``batch``: its registry and agent, for the resume).
    """

    def __init__(self, inner: SessionLog, after: int, *, torn: bool, kill: bool = False) -> None:
        self.inner = inner
        self.after = after
        self.torn = torn
        self.kill = kill
        self.appends = 0
        self.dead = False
        self.batch: ObservedBatch | None = None

    def append(self, event: SessionEvent, /) -> int:
        if self.batch is None:
            self.batch = observed_batch(trio.lowlevel.current_task())
        if self.dead or self.appends >= self.after:
            if not self.dead and self.torn and isinstance(self.inner, JsonlSessionLog):
                line = encode_event_line(event)
                with self.inner.path.open("ab") as file:
                    file.write(line[: max(1, len(line) // 2)])
            self.dead = True
            if self.kill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise _Killed
        self.appends += 1
        return self.inner.append(event)

    def events(self) -> list[SessionEvent]:
        return self.inner.events()


def explore_crashes(
    scenario: Callable[[SessionLog], Awaitable[ToolBatch]],
    *,
    log: Callable[[], SessionLog],
    check: Callable[[ExplorationRun], object] | None = None,
    mode: Literal["process", "inline"] = "process",
) -> Exploration:
    """Kill a scenario after every append to its session log, resume it, and check the resume.

    ``scenario(session)`` builds its tools afresh and runs one batch appending to ``session``.
    The explorer runs it once whole, counting its appends; then once per append number k,
    killed right after append k, and, for a :class:`~dsh_tools.JsonlSessionLog`, once more
    killed while writing append k+1 (its line left torn). Then
    :func:`~dsh_tools.resume_tool_calls` finishes the batch, with the registry and agent the
    scenario builds, and the explorer checks: the resume ends every batch; its batch passes
    :func:`check_batch`; a result logged before the kill is returned as logged and its call does
    not run again; a call that started but has no logged result gets ``TOOL_INTERRUPTED``
    unless its tool is idempotent; and ``check(run)`` (a ledger of side effects, say) does not
    raise.

    ``mode="process"`` (the default): each run is a child process that ``SIGKILL``s itself at
    the append, and each resume another fresh child (which runs the scenario up to its
    ``batch/start``, never further, to build the registry): the log must be one another
    process can open, a :class:`~dsh_tools.JsonlSessionLog` or a
    :class:`~dsh_tools.SqliteSessionLog` (POSIX: the children are forked). Side effects a
    ``check`` counts must be kept where every process sees them (a file). ``mode="inline"``:
    in this process, faster, any log: the log refuses the append and every later one and the
    batch is torn down, then the same registry resumes it.

    Args:
        scenario: an async function of the session log.
        log: makes a fresh, empty session log for each run.
        check: called with each :class:`ExplorationRun`; an exception is a failure.
        mode: ``"process"`` or ``"inline"``.

    Returns:
        The :class:`Exploration`.

    Raises:
        ValueError: ``mode`` is neither, or ``"process"`` with a log no other process can open.
        AssertionError: the whole run itself fails.
    """
    if mode == "process":
        return _crashes_in_processes(scenario, log, check)
    if mode != "inline":
        raise ValueError(f'mode must be "process" or "inline", not {mode!r}')

    def one(kind: RunKind, after: int) -> tuple[ExplorationRun, str | None, int]:
        session = log()
        dying = _Dying(session, after, torn=kind == "torn")
        watcher = _Watcher()

        async def crashing() -> ToolBatch | None:
            try:
                return await scenario(dying)
            except BaseException:
                if kind == "baseline" or not dying.dead:
                    raise
            # killed: what it raised on the way down is not seen by anyone
            await trio.lowlevel.checkpoint()
            return None

        try:
            outcome = _run_bounded(crashing, watcher)
        except BaseException as exc:
            leaf = _leaf(exc)
            _close(session)
            run = ExplorationRun(kind=kind, append=after, raised=leaf)
            return run, f"raised {type(leaf).__name__}: {leaf}", dying.appends
        if isinstance(outcome, _Hang):
            run = ExplorationRun(kind=kind, append=after)
            return run, f"hang: the run did not end within {RUN_BOUND:g} s", dying.appends
        is_jsonl[0] = isinstance(session, JsonlSessionLog)
        observed = watcher.batch
        if kind == "baseline":
            run = ExplorationRun(
                kind=kind,
                calls=() if observed is None else observed.calls,
                batch=outcome,
                events=tuple(session.events()),
            )
            _close(session)
            return run, _problems_of_check(check, run), dying.appends
        if observed is None:
            run = ExplorationRun(kind=kind, append=after, survived=tuple(session.events()))
            _close(session)
            return run, _problems_of_check(check, run), dying.appends
        if kind == "torn" and isinstance(session, JsonlSessionLog):
            path = session.path
            session.close()
            session = JsonlSessionLog(path)  # a new process: it cuts the torn line
        survived = tuple(session.events())
        record = SessionReader(survived).open_batch()
        calls = record.calls if record is not None else observed.calls
        registry, agent, resumed_log = observed.registry, observed.agent, session

        async def resume() -> ToolBatch | None:
            return await resume_tool_calls(
                registry, resumed_log, signal=CancelSignal.never(), agent=agent
            )

        raised: BaseException | None = None
        resumed: ToolBatch | None = None
        problem: str | None = None
        try:
            got = _run_bounded(resume, _Watcher())
        except BaseException as exc:
            raised = _leaf(exc)
            problem = f"the resume raised {type(raised).__name__}: {raised}"
        else:
            if isinstance(got, _Hang):
                problem = f"hang: the resume did not end within {RUN_BOUND:g} s"
            else:
                resumed = got
        run = ExplorationRun(
            kind=kind,
            append=after,
            calls=tuple(calls),
            batch=resumed,
            raised=raised,
            survived=survived,
            events=tuple(session.events()),
        )
        _close(session)
        if problem is None:
            problem = _resume_problem(run, record is not None, observed)
        if problem is None:
            problem = _problems_of_check(check, run)
        return run, problem, dying.appends

    is_jsonl = [False]
    baseline, problem, appends = one("baseline", 1 << 62)
    if problem is not None:
        raise AssertionError(f"the whole run failed, so nothing was explored: {problem}")
    return _every_append(baseline, appends, one, torn=is_jsonl[0])


def _every_append(
    baseline: ExplorationRun,
    appends: int,
    one: Callable[[RunKind, int], tuple[ExplorationRun, str | None, int]],
    *,
    torn: bool,
) -> Exploration:
    """The crash runs after the whole one: one per append but the last (and a torn one per
    append, for a JSONL log), each checked; the exploration.
    """
    runs: list[ExplorationRun] = [baseline]
    failures: list[ExplorationFailure] = []
    for after in range(1, appends):
        for kind in ("crash", "torn") if torn else ("crash",):
            run, problem, _ = one(kind, after)
            runs.append(run)
            if problem is not None:
                failures.append(ExplorationFailure(run, problem))

    def replay(run: ExplorationRun) -> ExplorationFailure | None:
        again, problem, _ = one(run.kind, run.append or 0)
        return None if problem is None else ExplorationFailure(again, problem)

    return Exploration(points=appends, runs=tuple(runs), failures=tuple(failures), replay=replay)


def _resume_problem(run: ExplorationRun, was_open: bool, observed: ObservedBatch) -> str | None:
    events = run.events
    if SessionReader(events).open_batch() is not None:
        return "a batch is still open after the resume"
    if not was_open:
        return None if run.batch is None else "the resume ran a batch that had ended"
    resumed = run.batch
    if resumed is None:
        return "the resume returned nothing for the open batch"
    try:
        check_batch(run.calls, resumed, events)
    except AssertionError as exc:
        return f"batch invariants broken after the resume: {exc}"
    survived = run.survived
    logged = {e.call_id: e for e in survived if isinstance(e, ToolResultEvent)}
    started = {e.call_id for e in survived if isinstance(e, ToolCallEvent)}
    again = {e.call_id for e in events[len(survived) :] if isinstance(e, ToolCallEvent)}
    for call, result in zip(run.calls, resumed.results, strict=True):
        event = logged.get(call.call_id)
        if event is not None:
            if logged_result(event) != result:
                return f"call {call.call_id!r}: its logged result was not returned as logged"
            if call.call_id in again:
                return f"call {call.call_id!r} committed before the kill, and ran again"
            continue
        if call.call_id not in started:
            continue
        tool = observed.registry.get(call.name, observed.agent)
        if tool is not None and not tool.idempotent:
            code = None if result.error is None else result.error.code
            if code != TOOL_INTERRUPTED:
                return (
                    f"call {call.call_id!r} of the non-idempotent tool {call.name!r} may have "
                    f"run before the kill, and its result is {code or 'a success'}, not "
                    f"{TOOL_INTERRUPTED}"
                )
    return None


# --- crashes in child processes ---------------------------------------------------------------


@attrs.frozen
class _Store:
    """How another process opens a log: a JSONL file, or a session of an SQLite file."""

    path: str
    session_id: str | None

    @classmethod
    def of(cls, session: SessionLog) -> _Store:
        if isinstance(session, JsonlSessionLog):
            return cls(str(session.path), None)
        if isinstance(session, SqliteSessionLog):
            return cls(str(session.path), session.session_id)
        raise ValueError(
            'explore_crashes(mode="process") needs a log another process can open (a '
            f"JsonlSessionLog or an SqliteSessionLog), not {type(session).__name__}: use "
            'mode="inline" for it'
        )

    def open(self) -> SessionLog:
        if self.session_id is None:
            return JsonlSessionLog(self.path)
        return SqliteSessionLog(self.path, session_id=self.session_id)

    def read(self) -> list[SessionEvent]:
        if self.session_id is None:
            from dsh_tools import read_session_log

            return read_session_log(self.path)
        try:
            return SqliteSessionLog.read(self.path, self.session_id)
        except LookupError:
            return []


def _in_child(work: Callable[[], bytes]) -> tuple[bool, bytes] | _Hang:
    """Run ``work`` in a forked child process: whether the child was ``SIGKILL``ed, and what
    it returned (``b""`` if it died first); :class:`_Hang` (the child killed and reaped) when
    it does not end within :data:`RUN_BOUND`.
    """
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        # the parent may have threads (earlier runs' workers, now idle): the child only runs
        # the explorer's own code, on a thread of its own, and a child that blocks on a lock
        # held at the fork is bounded like any hang
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child, measured by what it writes
        code = 0
        try:
            os.close(read_end)
            data = work()
            with os.fdopen(write_end, "wb") as out:
                out.write(data)
        except BaseException:
            code = 70
        finally:
            os._exit(code)
    os.close(write_end)
    chunks: list[bytes] = []
    deadline = time.monotonic() + RUN_BOUND
    with os.fdopen(read_end, "rb", buffering=0) as pipe:
        while True:
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([pipe], [], [], max(0.0, remaining))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return _Hang()
            chunk = pipe.read(65536)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    return killed, b"".join(chunks)


def _in_thread(fn: Callable[[], Awaitable[T]]) -> T:
    """``fn`` run to its end by :func:`_run_bounded` (a hang raises ``TimeoutError``)."""
    outcome = _run_bounded(fn, _Watcher())
    if isinstance(outcome, _Hang):
        raise TimeoutError(f"did not end within {RUN_BOUND:g} s")
    return outcome


def _crashes_in_processes(
    scenario: Callable[[SessionLog], Awaitable[ToolBatch]],
    log: Callable[[], SessionLog],
    check: Callable[[ExplorationRun], object] | None,
) -> Exploration:
    def crashed(kind: RunKind, after: int) -> tuple[_Store, bool | _Hang]:
        """A run in a child killed at its append ``after``; the log and whether it died."""
        session = log()
        store = _Store.of(session)
        _close(session)

        def work() -> bytes:
            reopened = store.open()
            dying = _Dying(reopened, after, torn=kind == "torn", kill=True)
            _in_thread(lambda: scenario(dying))
            _close(reopened)
            return b""

        outcome = _in_child(work)
        return store, outcome if isinstance(outcome, _Hang) else outcome[0]

    def resumed(store: _Store) -> tuple[ToolBatch | None, str | None] | _Hang:
        """The resume, in a fresh child: its batch, or what it raised."""

        def work() -> bytes:
            # the scenario up to its batch/start, to build its registry: nothing runs
            observed = _probe(scenario)
            reopened = store.open()
            try:
                batch = _in_thread(
                    lambda: resume_tool_calls(
                        observed.registry,
                        reopened,
                        signal=CancelSignal.never(),
                        agent=observed.agent,
                    )
                )
                return pickle.dumps((batch, None))
            except BaseException as exc:
                leaf = _leaf(exc)
                return pickle.dumps((None, f"{type(leaf).__name__}: {leaf}"))
            finally:
                _close(reopened)

        outcome = _in_child(work)
        if isinstance(outcome, _Hang):
            return outcome
        data = outcome[1]
        if not data:
            return None, "the resuming process died without an answer"
        return pickle.loads(data)  # the explorer's own child wrote it

    def one(kind: RunKind, after: int) -> tuple[ExplorationRun, str | None, int]:
        store, died = crashed(kind, after)
        if isinstance(died, _Hang):
            return ExplorationRun(kind=kind, append=after), "hang: the run did not end", 0
        survived = tuple(store.read())
        if kind == "baseline":
            run = ExplorationRun(kind=kind, events=survived)
            return run, _problems_of_check(check, run), len(survived)
        record = SessionReader(survived).open_batch()
        got = resumed(store)
        if isinstance(got, _Hang):
            run = ExplorationRun(kind=kind, append=after, survived=survived)
            return run, "hang: the resume did not end", after
        batch, error = got
        events = tuple(store.read())
        run = ExplorationRun(
            kind=kind,
            append=after,
            calls=() if record is None else record.calls,
            batch=batch,
            survived=survived,
            events=events,
        )
        if error is not None:
            return run, f"the resume raised {error}", after
        problem = _resume_problem(run, record is not None, tools)
        if problem is None:
            problem = _problems_of_check(check, run)
        return run, problem, after

    tools = _probe(scenario)  # the tools' idempotency, for the checks
    baseline, problem, appends = one("baseline", 1 << 62)
    if problem is not None:
        raise AssertionError(f"the whole run failed, so nothing was explored: {problem}")
    probe = log()
    torn = isinstance(probe, JsonlSessionLog)
    _close(probe)
    return _every_append(baseline, appends, one, torn=torn)


class _Probe:
    """A log in memory that stops the scenario at its batch's first append (``batch/start``):
    what the scenario built (its registry, its agent) is then known, and no body has run.
    """

    def __init__(self) -> None:
        self._events: list[SessionEvent] = []
        self.batch: ObservedBatch | None = None

    def append(self, event: SessionEvent, /) -> int:
        self.batch = observed_batch(trio.lowlevel.current_task())
        if self.batch is not None:
            raise _Killed
        self._events.append(event)
        return len(self._events) - 1

    def events(self) -> list[SessionEvent]:
        return list(self._events)


def _probe(scenario: Callable[[SessionLog], Awaitable[ToolBatch]]) -> ObservedBatch:
    """The batch ``scenario`` builds, stopped before anything of it runs."""
    probe = _Probe()
    try:
        _in_thread(lambda: scenario(probe))
    except BaseException:
        if probe.batch is None:
            raise
    if probe.batch is None:
        raise AssertionError("the scenario ran no batch with a session log")
    return probe.batch
