"""The explorers of ``dsh_tools.testing``: they find the planted bugs they should (a hang, an
unbalanced log, a non-idempotent call run again, a user's check broken), find nothing in
correct scenarios, are deterministic, and respect ``max_runs``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from dsh_tools import (
    TOOL_INTERRUPTED,
    CancelSignal,
    JsonlSessionLog,
    MemorySessionLog,
    SessionEvent,
    SessionLog,
    SqliteSessionLog,
    ToolBatch,
    ToolCallRequest,
    ToolRegistry,
    ToolResultEvent,
    ToolRunContext,
    define_tool,
    run_tool_calls,
)
from dsh_tools.testing import (
    Exploration,
    ExplorationRun,
    explore_cancellations,
    explore_crashes,
)

CALLS = tuple(
    ToolCallRequest(call_id=f"c{index}", name=name, arguments="{}")
    for index, name in enumerate(("read", "read", "write", "read", "send"), 1)
)


def lab(
    ledger: list[str],
    *,
    send_idempotent: bool = False,
    shielded: bool = False,
    record: Callable[[str], None] | None = None,
) -> ToolRegistry:
    """``read`` (parallel, idempotent), ``write`` (exclusive), ``send`` (records each send in
    ``ledger``: the side effect a user's check counts)."""
    registry = ToolRegistry()

    async def read(_args: object, context: ToolRunContext) -> str:
        await trio.sleep(1)
        return f"read {context.call_id}"

    async def write(_args: object, context: ToolRunContext) -> str:
        try:
            await trio.sleep(2)
        except trio.Cancelled:
            if shielded:
                # the planted bug: cleanup that waits, under a shield, for what never comes
                with trio.CancelScope(shield=True):
                    await trio.Event().wait()
            raise
        return "written"

    async def send(_args: object, context: ToolRunContext) -> str:
        (ledger.append if record is None else record)(context.call_id)
        await trio.sleep(1)
        return "sent"

    registry.register(
        define_tool(
            name="read",
            description="read",
            parameters={},
            execute=read,
            is_concurrency_safe=lambda _args: True,
            idempotent=True,
        )
    )
    registry.register(define_tool(name="write", description="write", parameters={}, execute=write))
    registry.register(
        define_tool(
            name="send", description="send", parameters={}, execute=send, idempotent=send_idempotent
        )
    )
    return registry


def cancellation_scenario(
    *, shielded: bool = False, log: Callable[[], SessionLog] = MemorySessionLog
) -> Callable[[CancelSignal], Awaitable[ToolBatch]]:
    async def scenario(signal: CancelSignal) -> ToolBatch:
        return await run_tool_calls(lab([], shielded=shielded), CALLS, signal=signal, session=log())

    return scenario


# --- cancellations ------------------------------------------------------------------------------


def test_a_correct_scenario_has_no_failure_at_any_point() -> None:
    exploration = explore_cancellations(cancellation_scenario())
    assert exploration.ok, str(exploration)
    assert exploration.points > 20
    # the uncancelled run, then two runs per point (signal, scope)
    assert 1 + 2 * exploration.points == len(exploration.runs)
    assert {"baseline", "signal", "scope"} == {run.kind for run in exploration.runs}
    assert str(exploration).startswith(f"{len(exploration.runs)} runs over ")


def test_a_body_whose_cleanup_waits_under_a_shield_is_found_as_a_hang() -> None:
    exploration = explore_cancellations(cancellation_scenario(shielded=True))
    assert not exploration.ok
    hangs = [f for f in exploration.failures if f.problem.startswith("hang")]
    assert hangs == list(exploration.failures)
    # only the points where the write was running: its body started and had not ended
    for failure in hangs:
        point = failure.run.point
        assert point is not None
        assert "3 of 5 calls started" in point.progress or "4 of 5" in point.progress, point
    assert "a wait that no cancellation reaches" in str(exploration)
    with pytest.raises(AssertionError, match="hang"):
        exploration.reproduce(hangs[0])


class LossyLog(MemorySessionLog):
    """A user's log that drops the results of aborted calls (the planted bug)."""

    def append(self, event: SessionEvent, /) -> int:
        if isinstance(event, ToolResultEvent) and event.is_error:
            return -1
        return super().append(event)


def test_a_log_that_loses_aborted_results_is_found_unbalanced() -> None:
    exploration = explore_cancellations(cancellation_scenario(log=LossyLog))
    assert not exploration.ok
    problems = {f.problem.split(":")[0] for f in exploration.failures}
    assert problems <= {"the log is not balanced", "batch invariants broken"}
    assert any(f.run.kind == "scope" for f in exploration.failures)
    assert any(f.run.kind == "signal" for f in exploration.failures)


def test_a_users_check_runs_on_every_run_and_its_failures_are_reported() -> None:
    seen: list[ExplorationRun] = []

    def check(run: ExplorationRun) -> None:
        seen.append(run)
        # the planted expectation: "a cancelled batch never has a successful write"
        if run.kind != "baseline" and run.batch is not None:
            assert run.batch.results[2].is_error, "the write succeeded although cancelled"

    exploration = explore_cancellations(cancellation_scenario(), check=check)
    assert len(seen) == len(exploration.runs)
    assert exploration.failures
    assert all(
        f.problem.startswith("check failed: AssertionError: the write succeeded although cancelled")
        for f in exploration.failures
    )


def test_two_explorations_make_the_same_runs_and_find_the_same_failures() -> None:
    first = explore_cancellations(cancellation_scenario(shielded=True))
    second = explore_cancellations(cancellation_scenario(shielded=True))
    assert [(r.kind, r.point) for r in first.runs] == [(r.kind, r.point) for r in second.runs]
    assert [str(f) for f in first.failures] == [str(f) for f in second.failures]


def test_max_runs_spreads_the_points_over_the_run() -> None:
    whole = explore_cancellations(cancellation_scenario())
    few = explore_cancellations(cancellation_scenario(), max_runs=11)
    assert len(few.runs) <= 11
    steps = [run.point.step for run in few.runs if run.point is not None]
    assert steps[0] == 1
    assert steps[-1] == whole.points  # the last point too
    with pytest.raises(ValueError, match="max_runs must be at least 1"):
        explore_cancellations(cancellation_scenario(), max_runs=0)
    with pytest.raises(TypeError, match="max_runs must be an int"):
        explore_cancellations(cancellation_scenario(), max_runs=2.5)  # pyright: ignore[reportArgumentType]


def test_an_uncancelled_run_that_fails_is_reported_before_anything_is_explored() -> None:
    async def broken(signal: CancelSignal) -> ToolBatch:
        raise RuntimeError("no tools today")

    with pytest.raises(AssertionError, match=r"uncancelled run failed.*no tools today"):
        explore_cancellations(broken)


# --- crashes ------------------------------------------------------------------------------------


def crash_scenario(
    ledger: list[str], *, send_idempotent: bool = False
) -> Callable[[SessionLog], Awaitable[ToolBatch]]:
    async def scenario(session: SessionLog) -> ToolBatch:
        registry = lab(ledger, send_idempotent=send_idempotent)
        return await run_tool_calls(registry, CALLS, signal=CancelSignal.never(), session=session)

    return scenario


def sent_once(ledger: list[str]) -> Callable[[ExplorationRun], None]:
    def check(run: ExplorationRun) -> None:
        sent = ledger.count("c5")
        ledger.clear()  # the next run starts a new ledger
        assert sent <= 1, f"c5 was sent {sent} times"

    return check


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite"])
def test_a_correct_scenario_resumes_exactly_from_every_crash_point(kind: str) -> None:
    ledger: list[str] = []
    with tempfile.TemporaryDirectory() as directory:
        count = iter(range(10_000))

        def log() -> SessionLog:
            if kind == "memory":
                return MemorySessionLog()
            if kind == "jsonl":
                return JsonlSessionLog(Path(directory) / f"{next(count)}.jsonl")
            return SqliteSessionLog(Path(directory) / "log.db", session_id=str(next(count)))

        exploration = explore_crashes(
            crash_scenario(ledger), log=log, check=sent_once(ledger), mode="inline"
        )
    assert exploration.ok, str(exploration)
    # one crash run per append but the last (and a torn one per append for JSONL)
    per_point = 2 if kind == "jsonl" else 1
    assert 1 + per_point * (exploration.points - 1) == len(exploration.runs)
    interrupted = [
        run
        for run in exploration.runs
        if run.batch is not None
        and run.batch.results[4].error is not None
        and run.batch.results[4].error.code == TOOL_INTERRUPTED
    ]
    assert interrupted  # some kill landed while c5 ran: the resume told the model so


def test_a_tool_wrongly_marked_idempotent_is_found_running_twice() -> None:
    ledger: list[str] = []
    exploration = explore_crashes(
        crash_scenario(ledger, send_idempotent=True),
        log=MemorySessionLog,
        check=sent_once(ledger),
        mode="inline",
    )
    assert not exploration.ok
    assert all(
        f.problem.startswith("check failed: AssertionError: c5 was sent 2 times")
        for f in exploration.failures
    )
    assert all(f.run.kind == "crash" for f in exploration.failures)
    with pytest.raises(AssertionError, match="c5 was sent 2 times"):
        exploration.reproduce(exploration.failures[0])


def test_crash_explorations_are_deterministic() -> None:
    ledger: list[str] = []
    first = explore_crashes(crash_scenario(ledger), log=MemorySessionLog, mode="inline")
    second = explore_crashes(crash_scenario(ledger), log=MemorySessionLog, mode="inline")
    assert [r.survived for r in first.runs] != []
    assert [(r.kind, r.append, len(r.survived)) for r in first.runs] == [
        (r.kind, r.append, len(r.survived)) for r in second.runs
    ]


# --- the pytest plugin --------------------------------------------------------------------------


def test_the_plugins_fixtures_fail_the_test_with_the_summary(
    explore_cancellations: Callable[..., Exploration],
    explore_crashes: Callable[..., Exploration],
) -> None:
    assert explore_cancellations(cancellation_scenario()).ok
    with pytest.raises(pytest.fail.Exception, match=r"runs over \d+ points: \d+ failed\n- .*hang"):
        explore_cancellations(cancellation_scenario(shielded=True))
    ledger: list[str] = []
    with pytest.raises(pytest.fail.Exception, match="c5 was sent 2 times"):
        explore_crashes(
            crash_scenario(ledger, send_idempotent=True),
            log=MemorySessionLog,
            check=sent_once(ledger),
            mode="inline",
        )


# --- crashes in real processes ------------------------------------------------------------------


class FileLedger:
    """Side effects every process sees: one line per send, appended to a file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def record(self, call_id: str) -> None:
        with self.path.open("a", encoding="utf-8") as file:
            file.write(call_id + "\n")

    def take(self) -> list[str]:
        """The sends so far, and a fresh ledger for the next run."""
        sends = self.path.read_text(encoding="utf-8").split() if self.path.exists() else []
        self.path.unlink(missing_ok=True)
        return sends


def process_scenario(
    ledger: FileLedger, *, send_idempotent: bool = False
) -> Callable[[SessionLog], Awaitable[ToolBatch]]:
    async def scenario(session: SessionLog) -> ToolBatch:
        # the send's side effect lands in the file the moment its body runs
        registry = lab([], send_idempotent=send_idempotent, record=ledger.record)
        return await run_tool_calls(registry, CALLS, signal=CancelSignal.never(), session=session)

    return scenario


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_real_kills_find_a_tool_wrongly_marked_idempotent_and_nothing_in_a_correct_one(
    kind: str, tmp_path: Path
) -> None:
    count = iter(range(10_000))

    def log() -> SessionLog:
        if kind == "jsonl":
            return JsonlSessionLog(tmp_path / f"{next(count)}.jsonl")
        return SqliteSessionLog(tmp_path / "log.db", session_id=str(next(count)))

    ledger = FileLedger(tmp_path / "ledger")

    def check(run: ExplorationRun) -> None:
        sent = ledger.take().count("c5")
        assert sent <= 1, f"c5 was sent {sent} times"

    correct = explore_crashes(process_scenario(ledger), log=log, check=check)
    assert correct.ok, str(correct)
    per_point = 2 if kind == "jsonl" else 1
    assert 1 + per_point * (correct.points - 1) == len(correct.runs)
    assert any(run.kind == "torn" for run in correct.runs) == (kind == "jsonl")

    wrong = explore_crashes(process_scenario(ledger, send_idempotent=True), log=log, check=check)
    assert not wrong.ok
    assert all("c5 was sent 2 times" in f.problem for f in wrong.failures)
    # the children are gone: no zombie left behind
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)


def test_process_mode_refuses_a_log_no_other_process_can_open() -> None:
    with pytest.raises(ValueError, match=r'needs a log another process can open.*mode="inline"'):
        explore_crashes(crash_scenario([]), log=MemorySessionLog)
    with pytest.raises(ValueError, match='mode must be "process" or "inline"'):
        explore_crashes(crash_scenario([]), log=MemorySessionLog, mode="thread")  # pyright: ignore[reportArgumentType]
