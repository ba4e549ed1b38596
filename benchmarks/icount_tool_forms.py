"""Instructions per call of one tool in each definition form: ``@tool`` on a plain function against
``define_tool`` with an attrs class (and the ``SchemaSpec`` form), counted by valgrind.

Issue 24 asks that a ``@tool`` function tool cost no more per call than the attrs-class form of
the same tool. Wall and CPU time on a shared machine swing too much to compare two forms that
close; instruction counts do not (within ~1% between runs). The workload is the per-call
benchmark's: one parallel batch of N calls of the trivial ``tool(a: int, b: str) -> str``
returning ``f"{a}:{b}"``, with ``CancelSignal.never()``.

Usage:
    python -m benchmarks.icount_tool_forms [N] [R]    # needs valgrind; prints a table

It runs this file under ``valgrind --tool=cachegrind`` once with one batch and once with 1 + R
batches (every batch's calls prepared in both runs, so only running them differs), and divides
the difference by R * N: the instructions one call costs, start-up and imports excluded.
Inside valgrind it runs as ``python -m benchmarks.icount_tool_forms --run FORM N K K_MAX``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import attrs
import trio

from dsh_tools import (
    CancelSignal,
    RateLimit,
    ToolCallRequest,
    ToolDefinition,
    ToolRegistry,
    ToolRunContext,
    define_tool,
    tool,
)

FORMS = ("tool", "attrs", "spec", "keyed", "classed")
"""``keyed``: the ``tool`` form with a conflict key per call (all distinct, so no call waits);
``classed``: the ``tool`` form in a registry-wide capacity class with a rate, neither ever full
(what holding through the registry's gate costs a call)."""


@attrs.frozen(kw_only=True)
class Args:
    a: int
    b: str


async def _attrs_body(args: Args, context: ToolRunContext) -> str:
    return f"{args.a}:{args.b}"


async def _spec_body(args: Any, context: ToolRunContext) -> str:
    return f"{args['a']}:{args['b']}"


def _definition(form: str) -> ToolDefinition:
    if form == "tool":

        @tool(name="tool", is_concurrency_safe=lambda _args: True)
        async def trivial(a: int, b: str) -> str:
            """Trivial tool: returns 'a:b'."""
            return f"{a}:{b}"

        return trivial
    if form in ("keyed", "classed"):

        @tool(
            name="tool",
            is_concurrency_safe=lambda _args: True,
            conflict_keys=(lambda args: [args.b]) if form == "keyed" else None,
            capacity_class="class" if form == "classed" else None,
        )
        async def limited(a: int, b: str) -> str:
            """Trivial tool: returns 'a:b'."""
            return f"{a}:{b}"

        return limited
    if form == "attrs":
        return define_tool(
            name="tool",
            description="Trivial tool: returns 'a:b'.",
            parameters=Args,
            execute=_attrs_body,
            is_concurrency_safe=lambda _args: True,
        )
    return define_tool(
        name="tool",
        description="Trivial tool: returns 'a:b'.",
        parameters={
            "a": {"type": "integer", "required": True},
            "b": {"type": "string", "required": True},
        },
        execute=_spec_body,
        is_concurrency_safe=lambda _args: True,
    )


def _run(form: str, n: int, k: int, k_max: int) -> None:
    from dsh_tools import run_tool_calls

    registry = (
        ToolRegistry(
            capacity_limits={"class": n}, rate_limits={"class": RateLimit(10 * n, per=1.0)}
        )
        if form == "classed"
        else ToolRegistry()
    )
    registry.register(_definition(form))
    batches = [
        [
            ToolCallRequest(
                call_id=f"call_{i}", name="tool", arguments=json.dumps({"a": i, "b": f"x{i}"})
            )
            for i in range(n)
        ]
        for _ in range(k_max + 1)
    ]
    signal = CancelSignal.never()

    async def main() -> None:
        for calls in batches[: k + 1]:  # the first batch warms up
            batch = await run_tool_calls(registry, calls, signal=signal, max_parallel_tool_calls=n)
            texts = [result.content[0] for result in batch.results]
            assert len(texts) == n
            assert not any(r.is_error for r in batch.results)

    trio.run(main)


def _instructions(form: str, n: int, k: int, k_max: int) -> int:
    done = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            "-m",
            "benchmarks.icount_tool_forms",
            "--run",
            form,
            str(n),
            str(k),
            str(k_max),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    assert found is not None, done.stderr
    return int(found.group(1).replace(",", ""))


def measure(n: int, r: int, forms: tuple[str, ...] = FORMS) -> dict[str, int]:
    """Instructions per call of each form."""
    per_call: dict[str, int] = {}
    for form in forms:
        one = _instructions(form, n, 1, 1 + r)
        more = _instructions(form, n, 1 + r, 1 + r)
        per_call[form] = (more - one) // (r * n)
    return per_call


def main(argv: list[str]) -> int:
    if argv[:1] == ["--run"]:
        _run(argv[1], int(argv[2]), int(argv[3]), int(argv[4]))
        return 0
    if shutil.which("valgrind") is None:
        print("needs valgrind (the distribution's package of that name)")
        return 2
    n = int(argv[0]) if argv else 1000
    r = int(argv[1]) if len(argv) > 1 else 4
    per_call = measure(n, r)
    show: Callable[[str], str] = lambda form: f"{per_call[form]:>10,}"  # noqa: E731
    print(f"instructions per call, N={n}, R={r}")
    for form in FORMS:
        ratio = per_call[form] / per_call["attrs"]
        print(
            f"{form:>7} {show(form)}  ({ratio:.3f}x attrs, {per_call[form] / per_call['tool']:.3f}x tool)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
