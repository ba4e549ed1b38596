"""A JSON Lines session log shared by processes: one writer appending large events while another
process reads the log in a loop. No acknowledged event may be lost, and sequence numbers must
keep matching lines (the attack that found readers cutting a live writer's last line).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

from dsh_tools import ToolResultEvent, read_session_log

EVENTS = 10
"""Events the writer appends: 1-4 MB each, about 25 MB in all."""

_WRITER = """
import sys
from dsh_tools import JsonlSessionLog, TextBlock, ToolResultEvent

path, count = sys.argv[1], int(sys.argv[2])
with JsonlSessionLog(path) as log:
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
from dsh_tools import JsonlSessionLog, SessionLogLockedError, read_session_log

path, count = sys.argv[1], int(sys.argv[2])
reads, counts, refused = 0, [], 0
print("ready", flush=True)
while True:
    events = read_session_log(path)
    reads += 1
    # every read is a prefix of the log: the event at line i is the i-th appended one
    assert [e.turn for e in events] == list(range(len(events))), [e.turn for e in events]
    assert all(e.source_event_seqs == (e.turn,) for e in events)
    counts.append(len(events))
    if reads % 5 == 1:
        try:
            JsonlSessionLog(path).close()  # a second writer must be refused, not cut the tail
        except SessionLogLockedError:
            refused += 1
    if len(events) == count:
        break
assert counts == sorted(counts), counts
print(json.dumps({"reads": reads, "refused": refused}), flush=True)
"""


def test_a_reader_process_never_loses_events_of_a_live_writer_process(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with contextlib.ExitStack() as stack:
        writer = stack.enter_context(
            subprocess.Popen(
                [sys.executable, "-c", _WRITER, str(path), str(EVENTS)],
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
                [sys.executable, "-c", _READER, str(path), str(EVENTS)],
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
    events = read_session_log(path)

    assert (0, 0) == (writer_code, reader_code)
    assert list(range(EVENTS)) == acknowledged
    assert list(range(EVENTS)) == [e.turn for e in events if isinstance(e, ToolResultEvent)]
    assert EVENTS == path.read_bytes().count(b"\n")
    assert report["reads"] >= 2
    # the writer held the lock for every read that tried to open the log for writing
    assert report["refused"] >= 1
