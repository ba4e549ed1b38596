"""``dsh-tools acp`` as a command: its help, the missing-extra message, and stdio itself."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import pytest
from acp_wire import assert_valid_agent_message

from dsh_tools.__main__ import main as dsh_tools_main
from dsh_tools.acp import main


def test_acp_help_is_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        dsh_tools_main(["acp", "--help"])
    assert 0 == exited.value.code
    assert capsys.readouterr().out.startswith("usage: dsh-tools acp [-h]")


def _through_dsh_tools(argv: list[str]) -> int:
    return dsh_tools_main(["acp", *argv])


@pytest.mark.parametrize("entry", [main, _through_dsh_tools], ids=["acp-main", "dsh-tools-acp"])
def test_without_the_acp_extra_the_command_says_what_to_install(
    entry: Callable[[list[str]], int],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, "acp", None)
    monkeypatch.setitem(sys.modules, "acp.schema", None)
    assert 2 == entry([])
    expected = (
        "dsh-tools acp needs the [acp] extra (the agent-client-protocol package): "
        "pip install 'dsh-tools[acp]'\n"
    )
    assert ("", expected) == capsys.readouterr()


def test_over_real_stdio_bad_input_gets_error_objects_and_a_closed_stdin_exits_cleanly() -> None:
    lines = [
        b"{not json",
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}',
        b'{"jsonrpc": "2.0", "id": 2, "method": "no/such/method", "params": {}}',
        b'{"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {"cwd": 7}}',
    ]
    done = subprocess.run(
        [sys.executable, "-m", "dsh_tools", "acp"],
        input=b"\n".join(lines) + b"\n",
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert (0, b"") == (done.returncode, done.stderr)
    messages = [json.loads(line) for line in done.stdout.splitlines()]
    methods: dict[object, str] = {1: "initialize", 2: "no/such/method", 3: "session/new"}
    for message in messages:
        assert_valid_agent_message(message, methods)
    errors = {m["id"]: m["error"]["code"] for m in messages if "error" in m}
    assert {None: -32700, 2: -32601, 3: -32602} == errors
    assert [1] == [m["id"] for m in messages if "result" in m]


def test_python_m_dsh_tools_acp_is_the_same_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dsh_tools.acp", "--help"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert (0, b"") == (done.returncode, done.stderr)
    assert done.stdout.startswith(b"usage: dsh-tools acp [-h]")
