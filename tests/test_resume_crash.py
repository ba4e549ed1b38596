"""Real crashes: a child process runs a batch into a durable log (a file, or PostgreSQL) and is killed with ``SIGKILL``
while it runs; the parent reopens the log and finishes the batch with ``resume_tool_calls``.

The bodies record each start in a file (``<process> <call id> <attempt>``, one line, written
before the body's work), so the parent knows which bodies ran in the child, and kills it right
after the k-th start.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio
import trio.testing

from dsh_tools import (
    CancelSignal,
    ToolBatch,
    ToolCallEvent,
    ToolDefinition,
    ToolRegistry,
    ToolResultEvent,
    ToolRunContext,
    resume_tool_calls,
)
from dsh_tools.testing import check_batch
from support import DURABLE_LOGS, OPEN_LOG, FileLogKind, first_text, request

CALLS = (
    request("c1", "put"),  # parallel, idempotent
    request("c2", "send"),  # parallel
    request("c3", "rm"),  # exclusive
    request("c4", "get"),  # exclusive, idempotent
    request("c5", "put"),
    request("c6", "send"),
)
IDEMPOTENT = frozenset({"put", "get"})
INTERRUPTED_TEXT = (
    "Error: tool call interrupted: the process stopped while it ran; its effects are unknown"
)

# the tools of both processes: ``process`` names the writer of the start lines
_TOOLS = """
import trio
from dsh_tools import ToolDefinition, ToolRegistry

def registry(starts, process, seconds):
    def tool(name, parallel, idempotent):
        async def body(args, context):
            with open(starts, "a") as file:
                file.write(f"{process} {context.call_id} {context.attempt}\\n")
            await trio.sleep(seconds)
            return f"{name} {context.call_id}"
        return ToolDefinition(
            name=name, description=name, parameters={}, execute=body,
            is_concurrency_safe=(lambda _args: True) if parallel else None,
            idempotent=idempotent,
        )
    registry = ToolRegistry()
    registry.register(tool("put", True, True))
    registry.register(tool("send", True, False))
    registry.register(tool("rm", False, False))
    registry.register(tool("get", False, True))
    return registry
"""

_CHILD = (
    _TOOLS
    + OPEN_LOG
    + """
import sys
from dsh_tools import CancelSignal, ToolCallRequest, run_tool_calls

path, kind, starts = sys.argv[1], sys.argv[2], sys.argv[3]
calls = [ToolCallRequest(call_id=f"c{i}", name=name, arguments="{}")
         for i, name in enumerate(["put", "send", "rm", "get", "put", "send"], 1)]

async def main():
    log = open_log(kind, path)
    await run_tool_calls(registry(starts, "child", 0.15), calls, signal=CancelSignal.never(),
                         session=log)
    print("finished", flush=True)

trio.run(main)
"""
)


def _parent_registry(starts: Path) -> ToolRegistry:
    def tool(name: str, *, parallel: bool, idempotent: bool) -> ToolDefinition:
        async def body(_args: object, context: ToolRunContext) -> str:
            with starts.open("a") as file:
                file.write(f"parent {context.call_id} {context.attempt}\n")
            await trio.sleep(0.3)
            return f"{name} {context.call_id}"

        return ToolDefinition(
            name=name,
            description=name,
            parameters={},
            execute=body,
            is_concurrency_safe=(lambda _args: True) if parallel else None,
            idempotent=idempotent,
        )

    registry = ToolRegistry()
    registry.register(tool("put", parallel=True, idempotent=True))
    registry.register(tool("send", parallel=True, idempotent=False))
    registry.register(tool("rm", parallel=False, idempotent=False))
    registry.register(tool("get", parallel=False, idempotent=True))
    return registry


def _starts(path: Path, process: str) -> list[str]:
    if not path.exists():
        return []
    return [line.split()[1] for line in path.read_text().splitlines() if line.startswith(process)]


def _run_and_kill(log_path: Path, kind: FileLogKind, starts: Path, kill_after: int) -> None:
    """Run the batch in a child; SIGKILL it once ``kill_after`` bodies have started."""
    kind.start()
    with subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(log_path), kind.name, str(starts)],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        deadline = time.monotonic() + 30  # bounded: a child that hangs fails the test
        while len(_starts(starts, "child")) < kill_after:
            assert child.poll() is None, "the child finished before the kill"
            assert time.monotonic() < deadline, "the child never started enough bodies"
            time.sleep(0.002)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert -signal.SIGKILL == child.returncode


@pytest.mark.parametrize("kind", DURABLE_LOGS, ids=[kind.name for kind in DURABLE_LOGS])
@pytest.mark.parametrize("kill_after", [1, 3, 5])
def test_a_batch_killed_mid_run_is_finished_by_resume_in_another_process(
    tmp_path: Path, kind: FileLogKind, kill_after: int
) -> None:
    log_path = tmp_path / kind.file_name
    starts = tmp_path / "starts.txt"
    _run_and_kill(log_path, kind, starts, kill_after)
    ran_in_child = _starts(starts, "child")
    assert len(ran_in_child) >= kill_after

    with kind.open(log_path) as log:
        before = log.events()
        committed = {e.call_id for e in before if isinstance(e, ToolResultEvent)}
        called = {e.call_id for e in before if isinstance(e, ToolCallEvent)}
        # a body starts only after its tool/call was acknowledged
        assert set(ran_in_child) <= called

        async def main() -> ToolBatch | None:
            return await resume_tool_calls(
                _parent_registry(starts), log, signal=CancelSignal.never()
            )

        resumed = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
        assert resumed is not None
        check_batch(CALLS, resumed, log)
        after = log.events()

    ran_in_parent = _starts(starts, "parent")
    for index, call in enumerate(CALLS):
        text = first_text(resumed.results[index])
        if call.call_id in committed:
            # no committed call's body runs again
            assert call.call_id not in ran_in_parent
            assert f"{call.name} {call.call_id}" == text
        elif call.call_id in called:
            rerun = call.name in IDEMPOTENT
            assert (rerun, INTERRUPTED_TEXT if not rerun else f"{call.name} {call.call_id}") == (
                call.call_id in ran_in_parent,
                text,
            )
        else:
            assert (True, f"{call.name} {call.call_id}") == (call.call_id in ran_in_parent, text)
    # every call of batch/start has exactly one result, read back from the file
    assert [call.call_id for call in CALLS] == [
        e.call_id for e in kind.read(log_path) if isinstance(e, ToolResultEvent)
    ]
    assert after == kind.read(log_path)
