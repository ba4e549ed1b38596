"""Session logs shared by processes: one writer appending large events to a file log while
another process reads the log in a loop (no acknowledged event may be lost, and sequence numbers
must keep matching lines: the attack that found readers cutting a live writer's last line);
writers of two sessions of one SQLite log; and a writer of either log killed with ``SIGKILL``.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_tools import SqliteSessionLog, ToolResultEvent
from support import DURABLE_LOGS, FILE_LOGS, OPEN_LOG, FileLogKind

EVENTS = 10
"""Events the writer appends: 1-4 MB each, about 25 MB in all."""

_WRITER = """
import sys
from dsh_tools import JsonlSessionLog, SqliteSessionLog, TextBlock, ToolResultEvent

path, count, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with (JsonlSessionLog if kind == "jsonl" else SqliteSessionLog)(path) as log:
    print("open", flush=True)
    sys.stdin.readline()  # wait for the reader to start
    for index in range(count):
        size = (1 + index % 4) * 1024 * 1024
        event = ToolResultEvent(
            turn=index, step=0, call_id=f"c{index}",
            content=[TextBlock(text=chr(ord("a") + index % 26) * size)],
            is_error=False, source_event_seqs=(index,),
        )
        seq = log.append(event)
        print(seq, flush=True)  # acknowledged
"""

_READER = """
import json, sys
from dsh_tools import JsonlSessionLog, SessionLogLockedError, SqliteSessionLog, read_session_log

path, count, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
writer = JsonlSessionLog if kind == "jsonl" else SqliteSessionLog
read = read_session_log if kind == "jsonl" else SqliteSessionLog.read
reads, counts, refused = 0, [], 0
print("ready", flush=True)
while True:
    events = read(path)
    reads += 1
    # every read is a prefix of the log: the event at line i is the i-th appended one
    assert [e.turn for e in events] == list(range(len(events))), [e.turn for e in events]
    assert all(e.source_event_seqs == (e.turn,) for e in events)
    counts.append(len(events))
    if reads % 5 == 1:
        try:
            writer(path).close()  # a second writer must be refused, not cut the tail
        except SessionLogLockedError:
            refused += 1
    if len(events) == count:
        break
assert counts == sorted(counts), counts
print(json.dumps({"reads": reads, "refused": refused}), flush=True)
"""


@pytest.mark.parametrize("kind", FILE_LOGS, ids=[kind.name for kind in FILE_LOGS])
def test_a_reader_process_never_loses_events_of_a_live_writer_process(
    tmp_path: Path, kind: FileLogKind
) -> None:
    path = tmp_path / kind.file_name
    with contextlib.ExitStack() as stack:
        writer = stack.enter_context(
            subprocess.Popen(
                [sys.executable, "-c", _WRITER, str(path), str(EVENTS), kind.name],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
        stack.callback(writer.kill)
        assert writer.stdin is not None
        assert writer.stdout is not None
        assert "open\n" == writer.stdout.readline()  # the writer holds the lock now
        reader = stack.enter_context(
            subprocess.Popen(
                [sys.executable, "-c", _READER, str(path), str(EVENTS), kind.name],
                stdout=subprocess.PIPE,
                text=True,
            )
        )
        stack.callback(reader.kill)
        assert reader.stdout is not None
        assert "ready\n" == reader.stdout.readline()
        writer.stdin.write("go\n")
        writer.stdin.flush()
        acknowledged = [int(line) for line in writer.stdout]
        writer_code = writer.wait(timeout=120)
        report = json.loads(reader.stdout.read())
        reader_code = reader.wait(timeout=120)
    events = kind.read(path)

    assert (0, 0) == (writer_code, reader_code)
    assert list(range(EVENTS)) == acknowledged
    assert list(range(EVENTS)) == [e.turn for e in events if isinstance(e, ToolResultEvent)]
    if kind.name == "jsonl":
        assert EVENTS == path.read_bytes().count(b"\n")
    assert report["reads"] >= 2
    # the writer held the lock for every read that tried to open the log for writing
    assert report["refused"] >= 1


# --- SQLite: writers of two sessions in two processes; SIGKILL of a writer of either log ------

_SESSION_WRITER = """
import sys
from dsh_tools import SqliteSessionLog, TextBlock, ToolResultEvent

path, session, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with SqliteSessionLog(path, session_id=session) as log:
    print("open", flush=True)
    sys.stdin.readline()  # start together
    for index in range(count):
        event = ToolResultEvent(
            turn=index, step=0, call_id=f"{session}{index}",
            content=[TextBlock(text=session * (1 + index % 500))], is_error=False,
        )
        assert log.append(event) == index
print("done", flush=True)
"""


def test_writers_of_two_sessions_in_two_processes_append_to_one_file(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite"
    count = 300
    with contextlib.ExitStack() as stack:
        writers: list[subprocess.Popen[str]] = []
        for session in ("a", "b"):
            writer = stack.enter_context(
                subprocess.Popen(
                    [sys.executable, "-c", _SESSION_WRITER, str(path), session, str(count)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
            stack.callback(writer.kill)
            assert writer.stdout is not None
            assert "open\n" == writer.stdout.readline()
            writers.append(writer)
        for writer in writers:
            assert writer.stdin is not None
            writer.stdin.write("go\n")
            writer.stdin.flush()
        outputs = [writer.communicate(timeout=120)[0] for writer in writers]
        codes = [writer.wait(timeout=120) for writer in writers]

    assert ([0, 0], ["done\n", "done\n"]) == (codes, outputs)
    for session in ("a", "b"):
        events = SqliteSessionLog.read(path, session)
        assert [f"{session}{i}" for i in range(count)] == [
            e.call_id for e in events if isinstance(e, ToolResultEvent)
        ]


_KILLED_WRITER = (
    OPEN_LOG
    + """
import sys
from dsh_tools import TextBlock, ToolResultEvent

path, kind = sys.argv[1], sys.argv[2]
log = open_log(kind, path)
for index in range(1_000_000):
    event = ToolResultEvent(
        turn=index, step=0, call_id=f"c{index}",
        content=[TextBlock(text="x" * (1 + (index * 7919) % 20_000))], is_error=False,
    )
    print(log.append(event), flush=True)  # acknowledged
"""
)


@pytest.mark.parametrize("kind", DURABLE_LOGS, ids=[kind.name for kind in DURABLE_LOGS])
@pytest.mark.parametrize("kill_after", [1, 17, 150])
def test_every_acknowledged_event_survives_a_sigkill_of_the_writer(
    tmp_path: Path, kind: FileLogKind, kill_after: int
) -> None:
    path = tmp_path / kind.file_name
    kind.start()
    with subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(path), kind.name],
        stdout=subprocess.PIPE,
        text=True,
    ) as writer:
        assert writer.stdout is not None
        acknowledged = [int(writer.stdout.readline()) for _ in range(kill_after)]
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=60)
        # what the writer printed before it died (read through the same buffer: EOF is near)
        acknowledged += [int(line) for line in writer.stdout.read().split()]
    assert -signal.SIGKILL == writer.returncode

    with kind.open(path) as reopened:
        events = reopened.events()
        turns = [e.turn for e in events if isinstance(e, ToolResultEvent)]
        # every acknowledged event, in order; at most the one being written besides
        assert list(range(len(events))) == turns
        assert list(range(len(acknowledged))) == acknowledged
        assert len(events) in (len(acknowledged), len(acknowledged) + 1)
        assert len(events) == reopened.append(events[0])
    assert len(events) + 1 == len(kind.read(path))
