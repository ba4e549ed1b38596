"""The "Scheduling a batch" page's example runs and prints exactly what the page shows."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from support import load_example


def test_the_scheduling_example_prints_results_timing_and_events(
    capsys: pytest.CaptureFixture[str],
) -> None:
    trio.run(
        load_example("docs/scheduling.md", "Scheduling a batch: parallel reads aroun").main,
        clock=trio.testing.MockClock(autojump_threshold=0),
    )
    expected = [
        "c1: alpha",
        "c2: beta",
        "c3: wrote a.txt",
        "c4: ALPHA",
        "done at t=3s",
        '{"type":"batch/start","turn":0,"step":0,"batchId":"...","calls":[{"callId":"c1","name":"read","arguments":"{\\"path\\": \\"a.txt\\"}"},{"callId":"c2","name":"read","arguments":"{\\"path\\": \\"b.txt\\"}"},{"callId":"c3","name":"write","arguments":"{\\"path\\": \\"a.txt\\", \\"text\\": \\"ALPHA\\"}"},{"callId":"c4","name":"read","arguments":"{\\"path\\": \\"a.txt\\"}"}]}',
        '{"type":"tool/call","turn":0,"step":0,"callId":"c1","name":"read","arguments":"{\\"path\\": \\"a.txt\\"}"}',
        '{"type":"tool/call","turn":0,"step":0,"callId":"c2","name":"read","arguments":"{\\"path\\": \\"b.txt\\"}"}',
        '{"type":"tool/result","turn":0,"step":0,"callId":"c1","content":[{"type":"text","text":"alpha"}],"isError":false,"sourceEventSeqs":[1]}',
        '{"type":"tool/result","turn":0,"step":0,"callId":"c2","content":[{"type":"text","text":"beta"}],"isError":false,"sourceEventSeqs":[2]}',
        '{"type":"tool/call","turn":0,"step":0,"callId":"c3","name":"write","arguments":"{\\"path\\": \\"a.txt\\", \\"text\\": \\"ALPHA\\"}"}',
        '{"type":"tool/result","turn":0,"step":0,"callId":"c3","content":[{"type":"text","text":"wrote a.txt"}],"isError":false,"sourceEventSeqs":[5]}',
        '{"type":"tool/call","turn":0,"step":0,"callId":"c4","name":"read","arguments":"{\\"path\\": \\"a.txt\\"}"}',
        '{"type":"tool/result","turn":0,"step":0,"callId":"c4","content":[{"type":"text","text":"ALPHA"}],"isError":false,"sourceEventSeqs":[7]}',
        '{"type":"batch/end","turn":0,"step":0,"batchId":"...","reason":"completed"}',
    ]
    assert expected == capsys.readouterr().out.splitlines()
