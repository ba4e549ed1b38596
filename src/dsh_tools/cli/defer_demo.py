"""``dsh-tools demo --defer``: a decision that waits, and a batch resumed from its log.

The first run asks before each command and write, and nobody answers now: every request is
``deferred``, so the batch ends ``suspended``. The run prints the pending calls (their cards)
and the command that decides them. A later run, in another process, gives the decisions on the
command line (``--approve`` / ``--always`` / ``--reject`` with a call id, repeatable) and
resumes the batch from the same log with ``resume_tool_calls(..., approvals=...)``.
"""

from __future__ import annotations

import functools
import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

import trio
import trio.testing

from dsh_tools import (
    Approval,
    ApprovalNext,
    ApprovalOutcome,
    ApprovalRequest,
    CancelSignal,
    SessionLog,
    TextBlock,
    ToolBatch,
    ToolCallRequest,
    UserApproval,
    describe_call,
    resume_tool_calls,
    run_tool_calls,
    session_turn,
)
from dsh_tools._for_integrations import SessionReader, printable

from .demo import BATCH_3, DemoAgent, open_file_log
from .demo_tools import build_registry, sample_workspace

__all__ = ["main_defer_demo"]

NEVER = CancelSignal.never()


async def _nobody_now(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
    """Nobody is at the keyboard: every decision waits."""
    await trio.lowlevel.checkpoint()
    return ApprovalOutcome.DEFERRED


async def _suspend(session: SessionLog, calls: Sequence[ToolCallRequest]) -> ToolBatch:
    approval = UserApproval(session)
    approval.answerers.add(_nobody_now)
    registry = build_registry(sample_workspace(), approval=approval)
    async with session_turn(session, 0):
        return await run_tool_calls(
            registry, calls, signal=NEVER, agent=DemoAgent(), session=session, step=2
        )


async def _resume(session: SessionLog, approvals: Mapping[str, str | Approval]) -> ToolBatch | None:
    approval = UserApproval(session)
    approval.answerers.add(_nobody_now)  # a call the model makes meanwhile still waits
    registry = build_registry(sample_workspace(), approval=approval)
    async with session_turn(session, 1):
        return await resume_tool_calls(
            registry, session, signal=NEVER, agent=DemoAgent(), approvals=approvals
        )


def _text(batch: ToolBatch, index: int) -> str:
    blocks = batch.results[index].content
    text = " ".join(block.text for block in blocks if isinstance(block, TextBlock))
    first = text.splitlines()[0] if text else ""
    return printable(first, multiline=False)


def _print_pending(batch: ToolBatch, log: Path, out: TextIO) -> None:
    print(f"\nwaiting for a decision ({len(batch.suspended)} calls):", file=out)
    for call in batch.suspended:
        request = ApprovalRequest(
            agent=None,
            tool_name=call.tool_name,
            signal=NEVER,
            call_id=call.call_id,
            arguments=call.arguments,
            view=call.view,
        )
        print(f"\n  {printable(call.call_id, multiline=False)}  {call.tool_name}", file=out)
        for line in describe_call(request).splitlines():
            print(f"    {line}", file=out)
    ids = [call.call_id for call in batch.suspended]
    example = " ".join(
        f"--{flag} {shlex.quote(call_id)}"
        for flag, call_id in zip(("approve", "reject", "always"), ids, strict=False)
    )
    print(
        "\ndecide later, from any process:\n"
        f"  dsh-tools demo --defer --log {shlex.quote(str(log))} {example}",
        file=out,
    )


def _print_results(batch: ToolBatch, calls: Sequence[ToolCallRequest], out: TextIO) -> None:
    if batch.suspended:
        print("\nthe results so far (a pending one is not for the model):", file=out)
    else:
        print("\nwhat the model receives:", file=out)
    for index, call in enumerate(calls):
        print(f"  {call.call_id:4} {call.name:12} {_text(batch, index)}", file=out)


def _edited(given: Sequence[str], approved: Sequence[str]) -> dict[str, object] | str:
    """``--arguments`` by call id, or what is wrong with them."""
    edited: dict[str, object] = {}
    for value in given:
        if value.lstrip().startswith("{"):
            if len(approved) != 1:
                return (
                    "--arguments JSON needs exactly one --approve or --always; with several, "
                    "write --arguments CALL_ID=JSON"
                )
            call_id, text = approved[0], value
        else:
            call_id, equals, text = value.partition("=")
            if not equals:
                return f"--arguments takes CALL_ID=JSON or a JSON object, not {value!r}"
        if call_id not in approved:
            return f"--arguments for {call_id!r}, which is not approved (--approve or --always)"
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            return f"--arguments for {call_id!r} is not JSON: {exc}"
        if not isinstance(parsed, dict):
            return f"--arguments for {call_id!r} must be a JSON object"
        edited[call_id] = parsed
    return edited


def main_defer_demo(
    *,
    log: Path | None,
    approve: Sequence[str] = (),
    reject: Sequence[str] = (),
    always: Sequence[str] = (),
    arguments: Sequence[str] = (),
    out: TextIO | None = None,
) -> int:
    """Suspend the demo's asking batch (no decisions given), or resume it with the decisions.

    ``arguments``: edited arguments for approved calls, each ``CALL_ID=JSON`` (or just ``JSON``
    when one call is approved): the call runs with them, validated again.

    Returns the process exit code: 2 for a missing ``--log``, decisions that name no pending
    call of the log's suspended batch, or edited arguments that are not a JSON object of an
    approved call.
    """
    stream = out if out is not None else sys.stdout
    if log is None:
        print(
            "dsh-tools demo: error: --defer needs --log PATH (where the batch waits)",
            file=sys.stderr,
        )
        return 2
    approvals: dict[str, str] = {}
    for call_ids, outcome in (
        (approve, "allowed-once"),
        (always, "allowed-session"),
        (reject, "rejected"),
    ):
        for call_id in call_ids:
            if approvals.setdefault(call_id, outcome) != outcome:
                print(
                    f"dsh-tools demo: error: {call_id!r} is given two decisions "
                    f"({approvals[call_id]} and {outcome})",
                    file=sys.stderr,
                )
                return 2
    edited = _edited(arguments, [*approve, *always])
    if isinstance(edited, str):
        print(f"dsh-tools demo: error: {edited}", file=sys.stderr)
        return 2
    decisions: dict[str, str | Approval] = {
        call_id: Approval(ApprovalOutcome(outcome), edited[call_id])
        if call_id in edited
        else outcome
        for call_id, outcome in approvals.items()
    }
    clock = trio.testing.MockClock(autojump_threshold=0)
    with open_file_log(log) as session:
        if not approvals:
            batch = trio.run(functools.partial(_suspend, session, BATCH_3), clock=clock)
            print(
                "dsh-tools demo --defer: the agent's batch ran; its writes and commands wait for "
                "a person",
                file=stream,
            )
            _print_results(batch, BATCH_3, stream)
            if batch.suspended:
                _print_pending(batch, log, stream)
            return 0
        # checked before the resuming turn opens: a command that decides nothing writes nothing
        waiting = {
            request.call_id
            for request in SessionReader(session.events()).pending_requests().values()
            if request.call_id is not None
        }
        if not waiting:
            print(
                "dsh-tools demo: error: the log has no suspended batch to resume", file=sys.stderr
            )
            return 2
        unknown = sorted(set(approvals) - waiting)
        if unknown:
            print(
                f"dsh-tools demo: error: approvals name calls whose approval is not pending: "
                f"{', '.join(map(repr, unknown))} (waiting: {', '.join(sorted(waiting))})",
                file=sys.stderr,
            )
            return 2
        try:
            resumed = trio.run(functools.partial(_resume, session, decisions), clock=clock)
        except ValueError as exc:
            print(f"dsh-tools demo: error: {exc}", file=sys.stderr)
            return 2
    assert resumed is not None  # a pending request belongs to a suspended batch
    print("dsh-tools demo --defer: resumed the suspended batch from the log", file=stream)
    _print_results(resumed, BATCH_3, stream)
    if resumed.suspended:
        _print_pending(resumed, log, stream)
    return 0
