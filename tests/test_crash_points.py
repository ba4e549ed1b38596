"""A crash after every append: random batches (a fixed seed) whose bodies defer contexts and
inject them, cut after each of their events in every log kind, reopened as a new process would,
and finished by ``resume_tool_calls``.

A log cut at an event boundary is what a process killed at that moment leaves: events are
appended one at a time, in order, and an acknowledged append survives a ``SIGKILL`` (the
``SIGKILL`` tests in ``test_resume_crash.py`` show that part with real processes). This sweep
is bounded and deterministic; it checks, at every crash point: one result per call in model
order; a result logged before the crash is returned as logged; no body of a non-idempotent
call whose ``tool/call`` was logged runs again; every context of every committed result
reaches the log exactly once, and the returned batch's contexts are the log's.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Generator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from dsh_tools import (
    CancelSignal,
    ContextMessageEvent,
    FrozenJsonObject,
    JsonlSessionLog,
    MemorySessionLog,
    SessionEvent,
    SessionLog,
    SqliteSessionLog,
    TextBlock,
    ToolBatch,
    ToolCallEvent,
    ToolCallRequest,
    ToolDefinition,
    ToolRegistry,
    ToolResultEvent,
    ToolRunContext,
    inject_context,
    resume_tool_calls,
    run_tool_calls,
)
from dsh_tools.testing import check_batch, explore_crashes
from support import plugin_context, postgres_dsn

NEVER = CancelSignal.never()
SEED = 20261203
BATCHES = 10

# name: (parallel, idempotent)
TOOLS = {"put": (True, True), "send": (True, False), "rm": (False, False), "get": (False, True)}


@attrs.define
class Lab:
    """The sweep's tools: each body sleeps, may inject a context and may defer one, as its
    arguments say, and records that it ran."""

    runs: list[str] = attrs.Factory(lambda: list[str]())

    def registry(self) -> ToolRegistry:
        registry = ToolRegistry()
        for name, (parallel, idempotent) in TOOLS.items():
            registry.register(
                ToolDefinition(
                    name=name,
                    description=name,
                    parameters={"type": "object"},
                    execute=self._body,
                    is_concurrency_safe=(lambda _args: True) if parallel else None,
                    idempotent=idempotent,
                )
            )
        return registry

    async def _body(self, args: object, context: ToolRunContext) -> str:
        assert isinstance(args, FrozenJsonObject)
        self.runs.append(context.call_id)
        sleep = args["sleep"]
        assert isinstance(sleep, int)
        await trio.sleep(sleep)
        if args["inject"]:
            inject_context(plugin_context(f"injected by {context.call_id}"))
        if args["defer"]:
            context.defer_context(plugin_context(f"deferred by {context.call_id}"))
        if args["same"]:
            # equal by value to an injected context of another call (the matching is by value)
            inject_context(plugin_context("shared"))
            context.defer_context(plugin_context("shared"))
        return f"{context.call_id} done"


def random_batch(rng: random.Random, number: int) -> tuple[ToolCallRequest, ...]:
    calls: list[ToolCallRequest] = []
    for index in range(rng.randint(1, 6)):
        arguments = (
            f'{{"sleep": {rng.randint(0, 3)}, "inject": {str(rng.random() < 0.4).lower()}, '
            f'"defer": {str(rng.random() < 0.6).lower()}, '
            f'"same": {str(rng.random() < 0.15).lower()}}}'
        )
        calls.append(
            ToolCallRequest(
                call_id=f"b{number}c{index}", name=rng.choice(sorted(TOOLS)), arguments=arguments
            )
        )
    return tuple(calls)


def batches() -> list[tuple[ToolCallRequest, ...]]:
    rng = random.Random(SEED)
    return [random_batch(rng, number) for number in range(BATCHES)]


Store = Callable[[Path, Sequence[SessionEvent]], AbstractContextManager[SessionLog]]


@contextmanager
def memory_store(_path: Path, events: Sequence[SessionEvent]) -> Generator[SessionLog]:
    session = MemorySessionLog()
    for event in events:
        session.append(event)
    yield session


@contextmanager
def jsonl_store(path: Path, events: Sequence[SessionEvent]) -> Generator[SessionLog]:
    file = path / "log.jsonl"
    file.unlink(missing_ok=True)
    with JsonlSessionLog(file) as writer:
        for event in events:
            writer.append(event)
    with JsonlSessionLog(file) as session:  # reopened, as the resuming process does
        yield session


@contextmanager
def sqlite_store(path: Path, events: Sequence[SessionEvent]) -> Generator[SessionLog]:
    file = path / "log.db"
    for leftover in path.glob("log.db*"):
        if leftover.is_file():
            leftover.unlink()
    with SqliteSessionLog(file, session_id="s") as writer:
        for event in events:
            writer.append(event)
    with SqliteSessionLog(file, session_id="s") as session:
        yield session


@contextmanager
def postgres_store(_path: Path, events: Sequence[SessionEvent]) -> Generator[SessionLog]:
    from dsh_tools.postgres import PostgresSessionLog

    dsn = postgres_dsn()
    session_id = f"crash-{uuid.uuid4()}"
    with PostgresSessionLog(dsn, session_id) as writer:
        for event in events:
            writer.append(event)
    with PostgresSessionLog(dsn, session_id) as session:
        yield session


STORES: dict[str, Store] = {
    "memory": memory_store,
    "jsonl": jsonl_store,
    "sqlite": sqlite_store,
    "postgres": postgres_store,
}


async def recorded(calls: Sequence[ToolCallRequest]) -> list[SessionEvent]:
    session = MemorySessionLog()
    batch = await run_tool_calls(Lab().registry(), calls, signal=NEVER, session=session)
    check_batch(calls, batch, session)
    return session.events()


def check_resumed(
    calls: Sequence[ToolCallRequest],
    before: Sequence[SessionEvent],
    resumed: ToolBatch,
    session: SessionLog,
    runs: list[str],
) -> None:
    """What must hold of a batch finished from a log cut at ``before``."""
    check_batch(calls, resumed, session)
    logged = {e.call_id: e for e in before if isinstance(e, ToolResultEvent)}
    started = {e.call_id for e in before if isinstance(e, ToolCallEvent)}
    for call, result in zip(calls, resumed.results, strict=True):
        event = logged.get(call.call_id)
        if event is not None:
            assert (event.content, event.contexts) == (result.content, result.additional_contexts)
            assert call.call_id not in runs
        elif call.call_id in started and not TOOLS[call.name][1]:
            assert call.call_id not in runs  # it may have run: never twice
    # every context of every result reaches the log once (check_batch: the log's
    # context/message events are the returned contexts, which hold every result's in order)
    messages = [e for e in session.events() if isinstance(e, ContextMessageEvent)]
    assert len(messages) == len(resumed.contexts)


@pytest.mark.parametrize("kind", sorted(STORES))
async def test_every_crash_point_of_random_batches_resumes_exactly_once(
    kind: str, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    store = STORES[kind]
    points = 0
    for calls in batches():
        events = await recorded(calls)
        for cut in range(len(events) + 1):
            lab = Lab()
            with store(tmp_path, events[:cut]) as session:
                resumed = await resume_tool_calls(lab.registry(), session, signal=NEVER)
                if cut in (0, len(events)):
                    assert resumed is None  # no batch, or one that ended
                    continue
                assert resumed is not None, f"cut {cut} of {calls}"
                check_resumed(calls, events[:cut], resumed, session, lab.runs)
                points += 1
    assert points > 100  # the sweep is not vacuous


async def test_a_result_context_after_a_logged_injected_one_is_not_lost(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # b injects a context while it runs, then both results defer one: the FIFO is
    # [injected by b, deferred by a, deferred by b]; the process stops after two of them
    calls = (
        ToolCallRequest(
            call_id="a",
            name="put",
            arguments='{"sleep": 2, "inject": false, "defer": true, "same": false}',
        ),
        ToolCallRequest(
            call_id="b",
            name="put",
            arguments='{"sleep": 1, "inject": true, "defer": true, "same": false}',
        ),
    )
    events = await recorded(calls)
    first = next(i for i, e in enumerate(events) if isinstance(e, ContextMessageEvent))
    with memory_store(Path(), events[: first + 2]) as session:
        resumed = await resume_tool_calls(Lab().registry(), session, signal=NEVER)
        assert resumed is not None
        check_batch(calls, resumed, session)
        labels = [
            block.text
            for e in session.events()
            if isinstance(e, ContextMessageEvent)
            for block in e.content
            if isinstance(block, TextBlock)
        ]
        assert ["injected by b", "deferred by a", "deferred by b"] == labels


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_real_kills_of_random_batches_resume_exactly_once(kind: str, tmp_path: Path) -> None:
    """The same promises with real processes: ``explore_crashes`` kills a child at each append
    (and tears the next JSONL line) and resumes in a fresh child."""
    count = iter(range(1_000_000))

    def log() -> SessionLog:
        if kind == "jsonl":
            return JsonlSessionLog(tmp_path / f"{next(count)}.jsonl")
        return SqliteSessionLog(tmp_path / "log.db", session_id=str(next(count)))

    for calls in batches()[:3]:

        async def scenario(
            session: SessionLog, calls: Sequence[ToolCallRequest] = calls
        ) -> ToolBatch:
            return await run_tool_calls(Lab().registry(), calls, signal=NEVER, session=session)

        exploration = explore_crashes(scenario, log=log)
        assert exploration.ok, str(exploration)
        assert exploration.points > len(calls)
