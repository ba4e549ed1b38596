"""The adapters work without either SDK installed, and the core never imports them."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
sys.modules["openai"] = None  # any import of an SDK now raises ImportError
sys.modules["anthropic"] = None
import dsh_tools
assert "dsh_tools.providers" not in sys.modules, "the core imported the adapters"
from dsh_tools import ToolSchema
from dsh_tools.providers import anthropic, openai
schema = ToolSchema(name="t", description="", parameters={"type": "object", "properties": {}})
print(openai.tool_params([schema], strict=True)[0]["function"]["strict"])
print(anthropic.tool_calls([{"type": "tool_use", "id": "i", "name": "t", "input": {}}])[0].name)
"""


def test_the_adapters_run_with_the_sdks_blocked_and_the_core_does_not_import_them() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=False, timeout=60
    )
    assert ("", ["True", "t"]) == (done.stderr, done.stdout.splitlines())
