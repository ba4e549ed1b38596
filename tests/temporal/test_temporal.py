"""dsh_tools.temporal against a real Temporal dev server and PostgreSQL: a worker served in
this trio run (its tool bodies run here), the agent's TemporalBatchRunner, the side-thread
bridge, and the ``dsh-tools worker`` command.

Real servers run in real time: these tests wait on them, never on trio's virtual clock.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncGenerator

import psycopg
import pytest
import trio
from psycopg.conninfo import conninfo_to_dict
from temporalio.client import WorkflowUpdateFailedError

from dsh_tools import (
    BatchEndEvent,
    BatchNext,
    BatchStartEvent,
    CancelController,
    CancelSignal,
    MemorySessionLog,
    TextBlock,
    ToolBatch,
    ToolBatchInfo,
    ToolCallEvent,
    ToolCallRequest,
    ToolRegistry,
    ToolResultEvent,
    ToolRunContext,
    define_tool,
    run_tool_calls,
)
from dsh_tools.postgres import PostgresSessionLog
from dsh_tools.temporal import (
    TemporalBatchRunner,
    TemporalClient,
    batch_from_log,
    open_temporal_client,
    serve_worker,
)
from dsh_tools.temporal._activity import Attempt, BatchActivity, last_batch
from dsh_tools.temporal._bridge import open_asyncio_thread
from dsh_tools.temporal._workflow import BatchCall, BatchRequest
from support import first_text, request


def _registry(
    started: list[str], release: trio.Event | None = None, *, idempotent: bool = False
) -> ToolRegistry:
    """``echo``, ``fail`` and ``wait`` (which sets ``release`` and waits forever on its first
    start, and echoes on a later attempt)."""
    registry = ToolRegistry()

    async def echo(args: object, context: ToolRunContext) -> str:
        started.append(context.call_id)
        return f"echo {context.call_id} attempt {context.attempt}"

    async def fail(args: object, context: ToolRunContext) -> str:
        started.append(context.call_id)
        raise ValueError("no such row")

    async def wait(args: object, context: ToolRunContext) -> str:
        started.append(context.call_id)
        if context.attempt > 1:
            return f"echo {context.call_id} attempt {context.attempt}"
        if release is not None:
            release.set()
        await trio.sleep_forever()

    for name, body in (("echo", echo), ("fail", fail), ("wait", wait)):
        registry.register(
            define_tool(
                name=name,
                description=name,
                parameters={},
                execute=body,
                is_concurrency_safe=lambda _args: True,
                idempotent=idempotent,
            )
        )
    return registry


@pytest.fixture
async def client(temporal_address: str) -> AsyncGenerator[TemporalClient]:
    async with open_temporal_client(temporal_address) as connected:
        yield connected


async def test_a_batch_run_on_a_worker_equals_the_same_batch_run_here(
    client: TemporalClient, dsn: str
) -> None:
    calls = [request("c1", "echo"), request("c2", "fail"), request("c3", "missing")]
    started: list[str] = []
    queue = f"q-{uuid.uuid4()}"
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_worker, client, queue, _registry(started), dsn)
        runner = TemporalBatchRunner(client, queue, conninfo=dsn, heartbeat_timeout=5)
        with runner:
            remote = await runner.run(
                calls, session_id=f"s-{uuid.uuid4()}", signal=CancelSignal.never()
            )
        nursery.cancel_scope.cancel()
    local = await run_tool_calls(
        _registry([]), calls, signal=CancelSignal.never(), session=MemorySessionLog()
    )
    assert (local, ["c1", "c2"]) == (remote, sorted(started))


async def test_the_worker_writes_the_batch_to_the_sessions_postgres_log(
    client: TemporalClient, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = f"s-{uuid.uuid4()}"
    queue = f"q-{uuid.uuid4()}"
    # a runner without conninfo reads the results back from libpq's environment defaults
    for key, value in conninfo_to_dict(dsn).items():
        monkeypatch.setenv(f"PG{'DATABASE' if key == 'dbname' else key.upper()}", str(value))
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_worker, client, queue, _registry([]), dsn)
        runner = TemporalBatchRunner(client, queue)
        await runner.run(
            [request("c1", "echo")], session_id=session, signal=CancelSignal.never(), turn=2, step=1
        )
        await runner.run(
            [request("d1", "echo")], session_id=session, signal=CancelSignal.never(), turn=3
        )
        await runner.close_session(session)
        runner.close()
        nursery.cancel_scope.cancel()
    events = PostgresSessionLog.read(dsn, session)
    kinds = [type(event).__name__ for event in events]
    assert ["BatchStartEvent", "ToolCallEvent", "ToolResultEvent", "BatchEndEvent"] * 2 == kinds
    assert [(2, 1), (3, 0)] == [(e.turn, e.step) for e in events if isinstance(e, BatchStartEvent)]


async def test_the_agents_signal_interrupts_the_batch_on_its_worker(
    client: TemporalClient, dsn: str
) -> None:
    started: list[str] = []
    release = trio.Event()
    controller = CancelController()
    queue = f"q-{uuid.uuid4()}"
    session = f"s-{uuid.uuid4()}"
    batch: ToolBatch | None = None
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_worker, client, queue, _registry(started, release), dsn)
        runner = TemporalBatchRunner(client, queue, conninfo=dsn, heartbeat_timeout=1)

        async def interrupt() -> None:
            await release.wait()  # the body of c2 runs on the worker (in this trio run)
            controller.cancel()

        nursery.start_soon(interrupt)
        with trio.fail_after(60):
            batch = await runner.run(
                [request("c1", "echo"), request("c2", "wait")],
                session_id=session,
                signal=controller.signal,
            )
        runner.close()
        nursery.cancel_scope.cancel()
    assert batch is not None
    assert (["echo c1 attempt 1", "Error: tool call aborted"], "aborted") == (
        [first_text(result) for result in batch.results],
        [e for e in PostgresSessionLog.read(dsn, session) if isinstance(e, BatchEndEvent)][
            -1
        ].reason,
    )


async def test_an_empty_batch_goes_nowhere(client: TemporalClient, dsn: str) -> None:
    runner = TemporalBatchRunner(client, "nobody-serves-this", conninfo=dsn)
    with trio.fail_after(30):  # a batch sent anyway would wait forever: fail instead
        batch = await runner.run([], session_id="s", signal=CancelSignal.never())
    assert ToolBatch(results=(), contexts=()) == batch


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ({"session_id": ""}, ValueError, "session_id must be a non-empty str"),
        ({"session_id": 3}, TypeError, "session_id must be a non-empty str"),
        ({"session_id": "s\ud800"}, ValueError, "lone surrogate"),
        ({"session_id": "s\0"}, ValueError, "NUL"),
        ({"session_id": "s", "signal": None}, TypeError, "signal must be a CancelSignal"),
        ({"session_id": "s", "turn": -1}, ValueError, "turn must be a non-negative int"),
        ({"session_id": "s", "max_parallel_tool_calls": 0}, ValueError, "max_parallel"),
        ({"session_id": "s", "max_parallel_tool_calls": True}, TypeError, "max_parallel"),
    ],
)
async def test_bad_arguments_are_refused_before_anything_is_sent(
    client: TemporalClient,
    dsn: str,
    arguments: dict[str, object],
    error: type[Exception],
    match: str,
) -> None:
    runner = TemporalBatchRunner(client, f"nobody-serves-{uuid.uuid4()}", conninfo=dsn)
    keywords: dict[str, object] = {"signal": CancelSignal.never()} | arguments
    # a batch sent anyway would wait forever for a worker: fail instead
    with trio.fail_after(30), pytest.raises(error, match=match):
        await runner.run([request("c1", "echo")], **keywords)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ({"heartbeat_timeout": 0}, ValueError, "heartbeat_timeout"),
        ({"batch_timeout": float("nan")}, ValueError, "batch_timeout"),
        ({"heartbeat_timeout": "2"}, TypeError, "heartbeat_timeout"),
        ({"task_queue": ""}, ValueError, "task_queue"),
        ({"pool_size": 0}, ValueError, "pool_size must be a positive int, not 0"),
        ({"read_retry": -1}, ValueError, "read_retry"),
    ],
)
async def test_a_runner_with_bad_settings_is_refused(
    client: TemporalClient,
    dsn: str,
    arguments: dict[str, object],
    error: type[Exception],
    match: str,
) -> None:
    keywords: dict[str, object] = {"task_queue": "q", "conninfo": dsn} | arguments
    with pytest.raises(error, match=match):
        TemporalBatchRunner(client, **keywords)  # type: ignore[arg-type]


# --- the batch in the log (no server) --------------------------------------------------------

CALLS = (request("c1", "echo"), request("c2", "echo"))


def _result(call_id: str, text: str) -> ToolResultEvent:
    return ToolResultEvent(
        turn=0, step=0, call_id=call_id, content=[TextBlock(text=text)], is_error=False
    )


def _call(call_id: str, attempt: int = 1) -> ToolCallEvent:
    return ToolCallEvent(
        turn=0, step=0, call_id=call_id, name="echo", arguments="{}", attempt=attempt
    )


START = BatchStartEvent(turn=0, step=0, batch_id="b1", calls=CALLS)


def test_a_resumed_batch_is_read_with_the_result_of_its_last_attempt() -> None:
    events = [
        START,
        _call("c1"),
        _result("c1", "one"),
        _call("c2"),
        _call("c2", 2),
        _result("c2", "two"),
        BatchEndEvent(turn=0, step=0, batch_id="b1", reason="completed"),
    ]
    batch = batch_from_log(events, "b1")
    assert ["one", "two"] == [first_text(result) for result in batch.results]


def test_a_batch_is_read_by_the_one_bracket_rule_even_past_a_later_batch_start() -> None:
    # another batch started on the log before this one ended: its start does not end this
    # batch (every reader of a log follows the same rule, resume's too)
    other = BatchStartEvent(
        turn=0,
        step=1,
        batch_id="b2",
        calls=(ToolCallRequest(call_id="y1", name="echo", arguments="{}"),),
    )
    events = [
        START,
        _call("c1"),
        _result("c1", "one"),
        _call("c2"),
        other,
        _call("y1"),
        _result("c2", "two"),
        BatchEndEvent(turn=0, step=0, batch_id="b1", reason="completed"),
        _result("y1", "other"),
    ]
    batch = batch_from_log(events, "b1")
    assert ["one", "two"] == [first_text(result) for result in batch.results]


def test_a_batch_without_its_end_is_not_finished() -> None:
    with pytest.raises(LookupError, match="not finished"):
        batch_from_log([START, _call("c1"), _result("c1", "one")], "b1")


def test_a_suspended_batch_says_a_deferred_approval_waits() -> None:
    suspended = BatchEndEvent(turn=0, step=0, batch_id="b1", reason="suspended")
    with pytest.raises(LookupError, match="batch b1 is suspended: a deferred approval waits"):
        batch_from_log([START, _call("c1"), _result("c1", "one"), suspended], "b1")


def test_an_unknown_batch_id_is_a_lookup_error() -> None:
    with pytest.raises(LookupError, match="no batch b2"):
        batch_from_log([START], "b2")


def test_the_last_batch_is_found_only_for_the_same_calls_turn_and_step() -> None:
    end = BatchEndEvent(turn=0, step=0, batch_id="b1", reason="completed")
    events = [START, _call("c1"), _result("c1", "one"), end]
    assert ((START, end), None, None, None) == (
        last_batch(events, CALLS, 0, 0),
        last_batch(events, CALLS[:1], 0, 0),
        last_batch(events, CALLS, 1, 0),
        last_batch([], CALLS, 0, 0),
    )


def test_an_open_last_batch_is_found_without_an_end() -> None:
    assert (START, None) == last_batch([START, _call("c1")], CALLS, 0, 0)


# --- the bridge -------------------------------------------------------------------------------


async def test_the_side_thread_returns_a_coroutines_value_and_raises_its_error() -> None:
    async def value() -> int:
        await asyncio.sleep(0)
        return 42

    async def error() -> int:
        raise KeyError("k")

    async with open_asyncio_thread() as thread:
        assert 42 == await thread.run(value)
        with pytest.raises(KeyError):
            await thread.run(error)


async def test_cancelling_the_trio_side_cancels_the_asyncio_task_and_waits_for_it() -> None:
    unwound: list[str] = []
    running = trio.Event()
    async with open_asyncio_thread() as thread:
        token = trio.lowlevel.current_trio_token()

        async def forever() -> None:
            token.run_sync_soon(running.set)
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                await asyncio.sleep(0.01)  # unwinding takes a while
                unwound.append("cancelled")
                raise

        with trio.move_on_after(30) as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(thread.run, forever)
                await running.wait()
                nursery.cancel_scope.cancel()
        assert (False, ["cancelled"]) == (scope.cancelled_caught, unwound)


# --- the command ------------------------------------------------------------------------------


def test_the_worker_command_refuses_a_registry_that_is_not_one() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dsh_tools",
            "worker",
            "--temporal",
            "127.0.0.1:1",
            "--task-queue",
            "q",
            "--postgres",
            "postgresql://x@127.0.0.1:1/db",
            "--registry",
            "json:__name__",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (
        2,
        "dsh-tools worker: error: json:__name__ is not a ToolRegistry (nor a function returning one)\n",
    ) == (
        done.returncode,
        done.stderr,
    )


def test_the_worker_command_reports_an_unreachable_server_without_a_traceback() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dsh_tools",
            "worker",
            "--temporal",
            "127.0.0.1:1",
            "--task-queue",
            "q",
            "--postgres",
            "postgresql://x@127.0.0.1:1/db",
            "--registry",
            "dsh_tools:ToolRegistry",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (1, True, False) == (
        done.returncode,
        done.stderr.startswith("dsh-tools worker: error: "),
        "Traceback" in done.stderr,
    )


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--max-concurrent-batches", "0", "must be a positive integer, not '0'"),
        ("--max-concurrent-batches", "many", "must be a positive integer, not 'many'"),
        ("--drain-timeout", "-1", "must be a finite number of seconds >= 0, not '-1'"),
        ("--drain-timeout", "nan", "must be a finite number of seconds >= 0, not 'nan'"),
        ("--max-connections", "0", "must be a positive integer, not '0'"),
        ("--sticky-timeout", "0", "must be a number of seconds > 0, not '0'"),
        ("--heartbeat-throttle", "x", "must be a finite number of seconds >= 0, not 'x'"),
        ("--log-format", "xml", "invalid choice: 'xml'"),
    ],
)
def test_the_worker_command_refuses_bad_numbers_without_a_traceback(
    flag: str, value: str, says: str
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dsh_tools",
            "worker",
            "--temporal",
            "127.0.0.1:1",
            "--task-queue",
            "q",
            "--postgres",
            "postgresql://x@127.0.0.1:1/db",
            "--registry",
            "dsh_tools:ToolRegistry",
            flag,
            value,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (2, True, False) == (done.returncode, says in done.stderr, "Traceback" in done.stderr)


@pytest.mark.parametrize(
    ("keywords", "error"),
    [
        ({"max_concurrent_batches": 0}, ValueError),
        ({"max_concurrent_batches": True}, TypeError),
        ({"drain_timeout": -1}, ValueError),
        ({"max_connections": 0}, ValueError),
        ({"sticky_timeout": 0}, ValueError),
        ({"heartbeat_throttle": float("nan")}, ValueError),
    ],
)
async def test_serve_worker_refuses_bad_settings_before_it_connects(
    client: TemporalClient, dsn: str, keywords: dict[str, object], error: type[Exception]
) -> None:
    with pytest.raises(error):
        await serve_worker(client, "q", ToolRegistry(), dsn, **keywords)  # type: ignore[arg-type]


# --- what an attempt of the batch activity finds in the log (the activity's trio side) --------


def _activity(registry: ToolRegistry, dsn: str) -> BatchActivity:
    return BatchActivity(registry, dsn, "dsh", True, trio.lowlevel.current_trio_token())


def _batch_request(session: str, calls: list[ToolCallRequest]) -> BatchRequest:
    return BatchRequest(
        session_id=session,
        calls=[BatchCall(call_id=c.call_id, name=c.name, arguments=c.arguments) for c in calls],
        turn=0,
        step=0,
        max_parallel_tool_calls=10,
        capacity_limits=None,
        heartbeat_timeout=5,
        batch_timeout=60,
    )


async def test_a_retried_attempt_of_an_ended_batch_runs_nothing_and_reports_it(dsn: str) -> None:
    started: list[str] = []
    activity = _activity(_registry(started), dsn)
    request_ = _batch_request(f"s-{uuid.uuid4()}", [request("c1", "echo")])

    first = await activity._run_on_trio(request_, CancelController(), 1)  # pyright: ignore[reportPrivateUsage]
    again = await activity._run_on_trio(request_, CancelController(), 2)  # pyright: ignore[reportPrivateUsage]

    assert (["c1"], first.batch_id, "completed") == (started, again.batch_id, again.reason)


async def test_an_attempt_that_finds_the_batch_open_resumes_it_from_the_log(dsn: str) -> None:
    session = f"s-{uuid.uuid4()}"
    calls = [request("c1", "echo"), request("c2", "echo")]
    with PostgresSessionLog(dsn, session) as log:  # what a worker killed in c2's body left
        log.append(BatchStartEvent(turn=0, step=0, batch_id="b1", calls=calls))
        log.append(_call("c1"))
        log.append(_result("c1", "before the crash"))
        log.append(_call("c2"))
    started: list[str] = []
    registry = ToolRegistry()

    async def echo(args: object, context: ToolRunContext) -> str:
        started.append(f"{context.call_id}/{context.attempt}")
        return f"echo {context.call_id} attempt {context.attempt}"

    registry.register(
        define_tool(name="echo", description="e", parameters={}, execute=echo, idempotent=True)
    )
    outcome = await _activity(registry, dsn)._run_on_trio(  # pyright: ignore[reportPrivateUsage]
        _batch_request(session, calls), CancelController(), 2
    )
    batch = batch_from_log(PostgresSessionLog.read(dsn, session), "b1")
    assert (["c2/2"], ("b1", "completed", 2)) == (
        started,
        (outcome.batch_id, outcome.reason, outcome.attempt),
    )
    assert ["before the crash", "echo c2 attempt 2"] == [first_text(r) for r in batch.results]


async def test_an_attempt_reads_the_log_from_where_its_batch_starts(dsn: str) -> None:
    # a long session: the batch is read from the workflow's from_seq, and its outcome says
    # where it starts and where the next batch will
    session = f"s-{uuid.uuid4()}"
    with PostgresSessionLog(dsn, session) as log:
        for index in range(50):
            log.append(BatchStartEvent(turn=0, step=index, batch_id=f"old{index}", calls=[]))
            log.append(
                BatchEndEvent(turn=0, step=index, batch_id=f"old{index}", reason="completed")
            )
    started: list[str] = []
    calls = [request("c1", "echo")]
    request_ = dataclasses.replace(_batch_request(session, calls), turn=1, from_seq=100)

    outcome = await _activity(_registry(started), dsn)._run_on_trio(  # pyright: ignore[reportPrivateUsage]
        request_, CancelController(), 1
    )

    assert (100, 104) == (outcome.first_seq, outcome.next_seq)  # start, call, result, end
    events = PostgresSessionLog.read(dsn, session, since=outcome.first_seq)
    assert ["echo c1 attempt 1"] == [
        first_text(result) for result in batch_from_log(events, outcome.batch_id).results
    ]
    # a retried attempt finds the ended batch from the same point and runs nothing
    again = await _activity(_registry(started), dsn)._run_on_trio(  # pyright: ignore[reportPrivateUsage]
        request_, CancelController(), 2
    )
    assert (["c1"], outcome.batch_id, 100, 104) == (
        started,
        again.batch_id,
        again.first_seq,
        again.next_seq,
    )


async def test_a_batch_that_fails_on_its_worker_raises_the_documented_error(
    client: TemporalClient, dsn: str
) -> None:
    # a batch wrapper that refuses every batch (a ValueError: not retried)
    registry = _registry([])

    async def refuse(info: ToolBatchInfo, next: BatchNext) -> ToolBatch:
        raise ValueError("this worker takes no batch today")

    registry.hooks.batch.add(refuse)
    queue = f"q-{uuid.uuid4()}"
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_worker, client, queue, registry, dsn)
        runner = TemporalBatchRunner(client, queue, conninfo=dsn, heartbeat_timeout=1)
        with runner, trio.fail_after(60), pytest.raises(WorkflowUpdateFailedError) as caught:
            await runner.run(
                [request("c1", "echo")], session_id=f"s-{uuid.uuid4()}", signal=CancelSignal.never()
            )
        nursery.cancel_scope.cancel()
    # the worker's own error is in the chain of causes (update, activity, application)
    chain: list[str] = []
    cause: BaseException | None = caught.value
    while cause is not None:
        chain.append(str(cause))
        cause = cause.__cause__
    assert any("this worker takes no batch today" in text for text in chain), chain


@pytest.mark.parametrize(
    ("postgres", "says"),
    [
        ("postgresql://x@127.0.0.1:1/db", "cannot reach the session logs' database"),
        (None, "holds no session logs; create it with"),
    ],
    ids=["unreachable", "no schema"],
)
def test_the_worker_command_checks_the_database_before_it_serves(
    temporal_address: str, dsn: str, postgres: str | None, says: str
) -> None:
    worker = _worker(
        "--temporal",
        temporal_address,
        "--postgres",
        postgres or dsn,
        "--schema",
        "dsh" if postgres else "no_such_schema",
    )
    out, err = worker.communicate(timeout=60)
    assert (1, "", False) == (worker.returncode, out, "Traceback" in err)
    assert err.startswith("dsh-tools worker: error: "), err
    assert says in err


async def test_serve_worker_checks_the_database_before_it_serves(
    client: TemporalClient, dsn: str
) -> None:
    with pytest.raises(ValueError, match="schema 'no_such_schema' holds no session logs"):
        await serve_worker(client, "q", ToolRegistry(), dsn, schema="no_such_schema")


@pytest.mark.parametrize("idempotent", [False, True], ids=["not idempotent", "idempotent"])
async def test_a_batch_a_draining_worker_left_is_finished_by_the_idempotency_rule(
    dsn: str, idempotent: bool
) -> None:
    # the drain ran out while c2's body runs and c3 has not started (one at a time): the
    # worker leaves the batch as a crash would, with no result for c2 or c3 and no batch/end
    session = f"s-{uuid.uuid4()}"
    calls = [request("c1", "echo"), request("c2", "wait"), request("c3", "echo")]
    request_ = dataclasses.replace(_batch_request(session, calls), max_parallel_tool_calls=1)
    started: list[str] = []
    waiting = trio.Event()
    attempt = Attempt()
    async with trio.open_nursery() as nursery:

        async def run_first() -> None:
            with pytest.raises(RuntimeError, match="left to the next attempt"):
                await _activity(
                    _registry(started, waiting, idempotent=idempotent), dsn
                )._run_on_trio(  # pyright: ignore[reportPrivateUsage]
                    request_, CancelController(), 1, attempt
                )

        nursery.start_soon(run_first)
        await waiting.wait()
        attempt.leave()
    left = PostgresSessionLog.read(dsn, session)
    assert [type(event).__name__ for event in left] == [
        "BatchStartEvent",
        "ToolCallEvent",
        "ToolResultEvent",
        "ToolCallEvent",
    ]
    assert ["c1", "c2"] == started

    outcome = await _activity(_registry(started, idempotent=idempotent), dsn)._run_on_trio(  # pyright: ignore[reportPrivateUsage]
        request_, CancelController(), 2
    )

    batch = batch_from_log(PostgresSessionLog.read(dsn, session), outcome.batch_id)
    second = (
        "echo c2 attempt 2"
        if idempotent
        else "Error: tool call interrupted: the process stopped while it ran; its effects are unknown"
    )
    assert (["c1", "c2", "c2", "c3"] if idempotent else ["c1", "c2", "c3"]) == started
    assert ["echo c1 attempt 1", second, "echo c3 attempt 1"] == [
        first_text(result) for result in batch.results
    ]
    assert "completed" == outcome.reason


async def test_bad_capacity_limits_are_refused_before_anything_is_sent(
    client: TemporalClient, dsn: str
) -> None:
    runner = TemporalBatchRunner(client, "nobody-serves-this", conninfo=dsn)
    with trio.fail_after(30), pytest.raises(ValueError, match="positive int, not 0"):
        await runner.run(
            [request("c1", "echo")],
            session_id="s",
            signal=CancelSignal.never(),
            capacity_limits={"net": 0},
        )


# --- connecting to a production Temporal: API key and TLS ---------------------------------------


def _worker(
    *flags: str, env: dict[str, str] | None = None, without: tuple[str, ...] = ()
) -> subprocess.Popen[str]:
    """``dsh-tools worker`` with ``flags`` (a fresh task queue, an empty registry), the
    environment plus ``env`` and without the variables ``without`` names."""
    environment = {k: v for k, v in os.environ.items() if k not in without} | (env or {})
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dsh_tools",
            "worker",
            "--task-queue",
            f"q-{uuid.uuid4()}",
            "--registry",
            "dsh_tools:ToolRegistry",
            *flags,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )


def test_the_worker_takes_its_server_and_api_key_from_the_environment_as_the_temporal_cli_does(
    temporal_address: str, dsn: str
) -> None:
    # the dev server takes any key; without TLS (it serves none), as --no-tls says
    worker = _worker(
        "--no-tls",
        "--postgres",
        dsn,
        env={"TEMPORAL_ADDRESS": temporal_address, "TEMPORAL_API_KEY": "a-key"},
    )
    try:
        assert worker.stdout is not None
        line = worker.stdout.readline()
        assert line.startswith("dsh-tools worker: serving task queue"), (
            line,
            worker.stderr.read() if worker.stderr else "",
        )
        assert temporal_address in line
        worker.send_signal(signal.SIGTERM)
        assert 0 == worker.wait(timeout=60)
    finally:
        worker.kill()
        worker.communicate()


def test_the_worker_logs_one_json_object_per_event(temporal_address: str, dsn: str) -> None:
    worker = _worker("--temporal", temporal_address, "--postgres", dsn, "--log-format", "json")
    try:
        assert worker.stdout is not None
        assert worker.stdout.readline().startswith("dsh-tools worker: serving task queue")
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
    finally:
        worker.kill()
    try:
        lines = [json.loads(line) for line in err.splitlines()]
    except json.JSONDecodeError:
        pytest.fail(f"a line of the log is not JSON:\n{err}")
    assert ["worker.serving", "worker.drain", "worker.stopped"] == [
        line["event"] for line in lines if line["logger"] == "dsh_tools.temporal"
    ]
    assert {"INFO"} == {line["level"] for line in lines}
    assert all(line["task_queue"].startswith("q-") for line in lines)


@pytest.mark.parametrize(
    ("flags", "env", "status", "says"),
    [
        (
            ["--tls-cert-path", "/no/such/cert.pem"],
            {},
            2,
            "No such file or directory: '/no/such/cert.pem'",
        ),
        ([], {"TEMPORAL_TLS": "maybe"}, 2, "TEMPORAL_TLS must be true or false, not 'maybe'"),
        (["--tls"], {}, 1, "dsh-tools worker: error: "),
        (["--api-key", "a-key"], {}, 1, "dsh-tools worker: error: "),
    ],
    ids=["missing certificate", "bad TEMPORAL_TLS", "TLS to a plain server", "a key means TLS"],
)
def test_tls_settings_that_cannot_work_end_the_worker_with_one_line(
    temporal_address: str,
    dsn: str,
    flags: list[str],
    env: dict[str, str],
    status: int,
    says: str,
) -> None:
    worker = _worker("--temporal", temporal_address, "--postgres", dsn, *flags, env=env)
    out, err = worker.communicate(timeout=120)
    assert (status, "", False) == (worker.returncode, out, "Traceback" in err), err
    assert says in err


def test_the_worker_needs_a_server_from_a_flag_or_the_environment(dsn: str) -> None:
    worker = _worker("--postgres", dsn, without=("TEMPORAL_ADDRESS",))
    _, err = worker.communicate(timeout=60)
    assert 2 == worker.returncode
    assert "--temporal HOST:PORT or $TEMPORAL_ADDRESS" in err


# --- keys every worker shares ---------------------------------------------------------------------


async def test_two_workers_with_a_shared_limiter_never_run_one_key_at_once(
    client: TemporalClient, temporal_address: str, dsn: str
) -> None:
    # two workers (each with its own limiter, as two machines would have; each on a queue of
    # its own, so that both surely run batches), four sessions whose batches write one file:
    # their bodies never overlap
    from dsh_tools.postgres import PostgresLimiter

    spans: list[tuple[str, float, float]] = []

    def keyed_registry(limiter: PostgresLimiter) -> ToolRegistry:
        registry = ToolRegistry(limiter=limiter)

        async def write(args: object, context: ToolRunContext) -> str:
            started = trio.current_time()
            await trio.sleep(0.02)
            spans.append((context.call_id, started, trio.current_time()))
            return "written"

        registry.register(
            define_tool(
                name="write",
                description="write the file",
                parameters={},
                execute=write,
                is_concurrency_safe=lambda _args: True,
                conflict_keys=lambda _args: ["the one file"],
            )
        )
        return registry

    queues = [f"q-{uuid.uuid4()}", f"q-{uuid.uuid4()}"]
    with (
        PostgresLimiter(dsn, poll_interval=0.005) as first,
        PostgresLimiter(dsn, poll_interval=0.005) as second,
    ):
        results: list[ToolBatch] = []
        async with open_temporal_client(temporal_address) as other, trio.open_nursery() as nursery:
            await nursery.start(serve_worker, client, queues[0], keyed_registry(first), dsn)
            await nursery.start(serve_worker, other, queues[1], keyed_registry(second), dsn)
            runners = [
                TemporalBatchRunner(client, queue, conninfo=dsn, heartbeat_timeout=5)
                for queue in queues
            ]

            async def one_session(name: str) -> None:
                runner = runners[name in "cd"]
                results.append(
                    await runner.run(
                        [request(f"{name}-1", "write"), request(f"{name}-2", "write")],
                        session_id=f"s-{uuid.uuid4()}",
                        signal=CancelSignal.never(),
                    )
                )

            with trio.fail_after(120):
                async with trio.open_nursery() as sessions:
                    for name in "abcd":
                        sessions.start_soon(one_session, name)
            for runner in runners:
                runner.close()
            nursery.cancel_scope.cancel()
    assert [["written", "written"]] * 4 == [[first_text(r) for r in b.results] for b in results]
    assert first.round_trips > 0
    assert second.round_trips > 0  # both workers ran calls
    ordered = sorted(spans, key=lambda span: span[1])
    assert 8 == len(ordered)
    for (_, _, end), (_, start, _) in itertools.pairwise(ordered):
        assert end <= start, ordered


async def test_the_runner_reads_through_its_pool_across_connections_the_database_dropped(
    client: TemporalClient, dsn: str
) -> None:
    # the runner's pooled connection is cut between two batches (as a restart would): the
    # second read gets a fresh connection, and close() lets every connection go
    queue = f"q-{uuid.uuid4()}"
    session = f"s-{uuid.uuid4()}"

    def runner_backends() -> list[int]:
        """This runner's connections (a runner of another test not yet collected may hold
        some of its own)."""
        with psycopg.connect(dsn, autocommit=True) as admin:
            rows = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'dsh-tools runner'"
            ).fetchall()
        return [int(row[0]) for row in rows if int(row[0]) not in others]

    others: set[int] = set()
    others.update(runner_backends())
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_worker, client, queue, _registry([]), dsn)
        with TemporalBatchRunner(client, queue, conninfo=dsn, pool_size=2) as runner:
            first = await runner.run(
                [request("c1", "echo")], session_id=session, signal=CancelSignal.never()
            )
            backends = runner_backends()
            assert 1 <= len(backends) <= 2
            with psycopg.connect(dsn, autocommit=True) as admin:
                for pid in backends:
                    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            second = await runner.run(
                [request("d1", "echo")], session_id=session, signal=CancelSignal.never(), turn=1
            )
        nursery.cancel_scope.cancel()
    assert (["echo c1 attempt 1"], ["echo d1 attempt 1"]) == (
        [first_text(r) for r in first.results],
        [first_text(r) for r in second.results],
    )
    assert [] == runner_backends()
