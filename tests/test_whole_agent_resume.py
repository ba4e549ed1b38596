"""The whole agent resumed from its session log alone (``examples/resumable_agent.py``): the
program is killed with a real ``SIGKILL`` after a seeded random append (in a child process),
run again until it answers, and always ends with the conversation of an uninterrupted run, in
the OpenAI and the Anthropic message shapes. Also: ``MessageEvent``, ``next_turn`` and
``conversation`` on their own.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import trio

from dsh_tools import (
    BatchEndEvent,
    BatchStartEvent,
    JsonlSessionLog,
    MemorySessionLog,
    MessageEvent,
    SessionEvent,
    ToolCallRequest,
    TurnStartEvent,
    conversation,
    next_turn,
    read_session_log,
    snapshot_json,
)
from dsh_tools.providers import openai as openai_adapter
from support import ROOT, load_module

EXAMPLE = ROOT / "examples" / "resumable_agent.py"
example = load_module(EXAMPLE, "resumable_agent_example")

# a child that runs the example on a JSON Lines log and kills itself (SIGKILL) right after the
# log's KILL_AT-th append: a crash at that exact point of the loop
CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path

    import trio

    from dsh_tools import JsonlSessionLog
    from support import load_module

    example = load_module(Path(sys.argv[1]), "resumable_agent_child")
    kill_at = int(sys.argv[4])

    class Dying:
        def __init__(self, log):
            self.log, self.appends = log, 0

        def append(self, event):
            seq = self.log.append(event)
            self.appends += 1
            if self.appends == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return seq

        def events(self):
            return self.log.events()

    with JsonlSessionLog(Path(sys.argv[2])) as log:
        trio.run(example.run_agent, Dying(log), sys.argv[3])
    """
)


def _child(log: Path, shape: str, kill_at: int) -> int:
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(EXAMPLE), str(log), shape, str(kill_at)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, -signal.SIGKILL), done.stderr
    return done.returncode


def _uninterrupted(shape: str) -> tuple[list[dict[str, Any]], int]:
    session = MemorySessionLog()
    messages = trio.run(example.run_agent, session, shape)
    return messages, len(session.events())


def _adapter(shape: str) -> Any:
    return example.anthropic_adapter if shape == "anthropic" else openai_adapter


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
def test_a_killed_agent_ends_with_the_conversation_of_an_uninterrupted_run(
    shape: str, tmp_path: Path
) -> None:
    expected, appends = _uninterrupted(shape)
    assert expected[-1]["role"] == "assistant"
    chooser = random.Random(f"whole-agent-{shape}")  # seeded: the same kill points every run
    points = sorted(chooser.sample(range(1, appends + 1), 6))
    for point in points:
        log = tmp_path / f"{shape}-{point}.jsonl"
        # killed after append number `point`, then after the first append of the run that
        # resumes it (a crash while resuming), then run to the end
        assert -signal.SIGKILL == _child(log, shape, point)
        _child(log, shape, 1)
        assert 0 == _child(log, shape, 10**9)
        with JsonlSessionLog(log) as session:
            assert expected == conversation(session, tool_messages=_adapter(shape).tool_messages)
            # and once done, running it again changes nothing
        before = log.read_bytes()
        assert 0 == _child(log, shape, 10**9)
        assert before == log.read_bytes()


def test_an_uninterrupted_run_records_its_messages_and_the_batches_results() -> None:
    expected, _appends = _uninterrupted("openai")
    assert [message["role"] for message in expected] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]


def test_next_turn_is_one_past_the_highest_turn_of_the_log() -> None:
    session = MemorySessionLog()
    assert 0 == next_turn(session)
    session.append(TurnStartEvent(turn=3))
    session.append(MessageEvent(turn=1, role="user", message={"role": "user", "content": "x"}))
    assert 4 == next_turn(session)


def test_conversation_places_a_batchs_results_where_it_ended() -> None:
    session = MemorySessionLog()
    call = ToolCallRequest(call_id="c1", name="t", arguments="{}")
    events: list[SessionEvent] = [
        MessageEvent(turn=0, role="user", message={"role": "user", "content": "hi"}),
        MessageEvent(
            turn=0,
            role="assistant",
            message={"role": "assistant", "content": None, "tool_calls": []},
        ),
        BatchStartEvent(turn=0, step=0, batch_id="b", calls=(call,)),
        BatchEndEvent(turn=0, step=0, batch_id="b", reason="completed"),
    ]
    for event in events:
        session.append(event)
    # a batch without its results (a log cut short) contributes nothing
    assert 2 == len(conversation(session, tool_messages=openai_adapter.tool_messages))
    assert [{"role": "user", "content": "hi"}] == conversation(session)[:1]


def test_a_message_event_is_a_json_object_and_reads_back_exactly(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="message must be a JSON object, not list"):
        MessageEvent(turn=0, role="user", message=[1])
    with pytest.raises(TypeError, match="role must be a non-empty str"):
        MessageEvent(turn=0, role="", message={})
    event = MessageEvent(turn=2, role="assistant", message={"role": "assistant", "content": None})
    path = tmp_path / "log.jsonl"
    with JsonlSessionLog(path) as log:
        log.append(event)
    assert (
        b'{"type":"message","turn":2,"role":"assistant","message":{"role":"assistant","content":null}}\n'
        == path.read_bytes()
    )
    assert [event] == read_session_log(path)
    assert event.message == snapshot_json({"role": "assistant", "content": None})
