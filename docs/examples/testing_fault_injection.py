"""Fault injection with dsh_tools.testing: cancel a batch exactly when the second call's body
has started, and check what every call got. Run it with pytest (pytest-trio, trio_mode)."""

from __future__ import annotations

import trio
import trio.testing

from dsh_tools import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    CancelController,
    MemorySessionLog,
    ToolCallRequest,
    ToolRegistry,
    run_tool_calls,
)
from dsh_tools.testing import (
    StageReached,
    cancel_at,
    check_batch,
    fail,
    returns,
    scripted_tool,
    shielded,
    sleep,
)

CALLS = [
    ToolCallRequest(call_id="c1", name="read", arguments='{"path": "a.txt"}'),
    ToolCallRequest(call_id="c2", name="fetch", arguments='{"url": "https://example.com"}'),
    ToolCallRequest(call_id="c3", name="flush", arguments="{}"),
    ToolCallRequest(call_id="c4", name="write", arguments='{"path": "a.txt"}'),
]


async def test_cancelling_while_the_fetch_runs(
    registry: ToolRegistry,  # fixtures of the dsh_tools pytest plugin
    session_log: MemorySessionLog,
    autojump_clock: trio.testing.MockClock,  # pytest-trio: virtual time
) -> None:
    read = scripted_tool("read", sleep(1), returns("alpha"))
    fetch = scripted_tool("fetch", sleep(5), fail(ConnectionError("reset")))
    flush = scripted_tool("flush", shielded(2))  # must finish even when cancelled
    write = scripted_tool("write", sleep(1), parallel=False)
    for tool in (read, fetch, flush, write):
        tool.register(registry)
    controller = CancelController()
    cancel_at(controller, when=StageReached(call_id="c2", stage="body"), registry=registry)

    batch = await run_tool_calls(registry, CALLS, signal=controller.signal, session=session_log)

    # one result per call in model order, balanced events, contexts after results,
    # ABORTED only for bodies that started, and no body still running
    check_batch(CALLS, batch, session_log, tools=[read, fetch, flush, write])
    codes = [r.error.code if r.error else "ok" for r in batch.results]
    # c1, c2, c3 were in flight: ABORTED; the exclusive write never started
    assert codes == [TOOL_ABORTED] * 3 + [TOOL_ABORTED_BEFORE_DISPATCH]
    assert [(run.call_id, run.started, run.ended, run.ending) for run in fetch.runs] == [
        ("c2", 0.0, 0.0, "cancelled")
    ]
    # the shielded flush ran to its end before the batch returned
    assert [(run.call_id, run.started, run.ended, run.ending) for run in flush.runs] == [
        ("c3", 0.0, 2.0, "returned")
    ]
    assert write.runs == ()
