"""Shared builders for the test suite: the one place for what several test files need.

- loading scripts: ``load_example`` and ``example_source`` (a ```` ```python ```` block of a
  Markdown page), ``load_module``, ``ROOT``;
- values to compare against: ``Agent``, ``NOTHING``, ``error_result``, ``first_text``,
  ``outcome_code``, ``plugin_context``, ``plugin_label``, ``jsonschema_accepts``;
- tools and registries: ``ok_body``, ``noting_body``, ``tool`` (a raw JSON Schema),
  ``spec_tool`` and ``string_tool`` (``define_tool``), ``registry_with``, and the
  ``post_execute`` listeners ``note_post_execute`` and ``record_post_execute``;
- approval: ``answering`` (an answerer with a fixed reply), ``approval_service`` (a
  ``UserApproval`` with its answerers, over a fresh in-memory log unless given one),
  ``run_in_turn`` (a batch inside an open turn of its session);
- calls: ``request``, ``execution_input``, ``run_calls``; session events: ``call_event``,
  ``result_event``; the durable logs the log contract tests run over: ``FileLogKind``,
  ``FILE_LOGS``, ``POSTGRES_LOG``, ``DURABLE_LOGS`` (``postgres_dsn``: the run's throwaway
  PostgreSQL cluster; ``OPEN_LOG``: opening any of them in a child process).

Import it by name (``from support import ...``) from any test, in ``tests/`` or a subfolder:
pytest puts ``tests/`` on ``sys.path`` when it imports ``tests/conftest.py`` (the default
``prepend`` import mode). It uses public names of ``dsh_tools`` only, so a rewrite of the
package's internals leaves it alone. Helpers of one folder stay there
(``providers/provider_tools.py``, ``acp/acp_editor.py``), as do ``expected.py`` (canonical
results) and ``strategies.py`` (Hypothesis strategies).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple, TypeAlias

import trio
from jsonschema import Draft202012Validator

from dsh_tools import (
    ApprovalAnswerer,
    ApprovalNext,
    ApprovalOutcome,
    ApprovalPolicy,
    ApprovalRequest,
    ApprovalService,
    CancelSignal,
    HookContext,
    JsonlSessionLog,
    MemorySessionLog,
    PluginSource,
    PostExecuteNext,
    PostToolDecision,
    SchemaSpec,
    SessionEvent,
    SessionLog,
    SqliteSessionLog,
    TextBlock,
    ToolBatch,
    ToolBody,
    ToolCallEvent,
    ToolCallRequest,
    ToolCallView,
    ToolDefinition,
    ToolErrorInfo,
    ToolExecution,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRegistry,
    ToolResult,
    ToolResultEvent,
    ToolResultView,
    ToolRunContext,
    UserApproval,
    define_tool,
    read_session_log,
    run_tool_calls,
    session_turn,
)
from dsh_tools.postgres import PostgresSessionLog, create_schema
from dsh_tools.postgres._log import describe_conninfo

ROOT = Path(__file__).resolve().parent.parent
"""The repository's root folder."""

sys.path.append(str(ROOT / "examples"))  # the throwaway servers of the many-machines example
import local_servers  # noqa: E402


def load_module(path: Path, module_name: str) -> ModuleType:
    """Import the script at ``path`` as the real module ``module_name``, once (its classes'
    annotations resolve in its own globals)."""
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


_SCRIPTS = tempfile.TemporaryDirectory(prefix="docs-examples-")  # removed when the run ends


def example_source(page: str, marker: str) -> str:
    """The one ```` ```python ```` block of the Markdown page ``page`` (a path from the
    repository's root) that contains ``marker``: the code exactly as a reader sees it."""
    text = (ROOT / page).read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```$", text, flags=re.M | re.S)
    found = [block for block in blocks if marker in block]
    assert 1 == len(found), f"{len(found)} python blocks of {page} contain {marker!r}"
    return found[0]


def load_example(page: str, marker: str) -> ModuleType:
    """Import the ```` ```python ```` block of ``page`` that contains ``marker`` as a real module,
    once (its classes' annotations resolve in its own globals; ``__main__`` code does not run)."""
    name = "docs_example_" + re.sub(r"\W", "_", f"{page}_{marker}")
    if name in sys.modules:
        return sys.modules[name]
    source = example_source(page, marker)
    # a script that starts itself as a subprocess finds itself: the block, saved as a file
    script = Path(_SCRIPTS.name) / f"{name}.py"
    script.write_text(source, encoding="utf-8")
    module = ModuleType(name)
    module.__file__ = str(script)
    sys.modules[name] = module
    exec(compile(source, str(ROOT / page), "exec"), module.__dict__)
    return module


# --- values that tests compare against ----------------------------------------------------------


class Agent:
    """An agent object for a call: tests pass one down and check it arrives as is."""


NOTHING: list[str] = []
"""Nothing ran (compare a list of what ran against it; never append to it)."""


def plugin_context(label: str, meta: object = None) -> HookContext:
    """A context message of one text block, ``label``, from the plugin named ``label``."""
    return HookContext(
        content=(TextBlock(text=label),), source=PluginSource(plugin=label), meta=meta
    )


def plugin_label(context: HookContext) -> str:
    """The name of the plugin ``context`` came from (it must come from a plugin)."""
    assert isinstance(context.source, PluginSource)
    return context.source.plugin


def error_result(text: str, error: ToolErrorInfo | None = None) -> ToolExecutionResult:
    """The error result whose one text block is ``text``."""
    return ToolExecutionResult(content=(TextBlock(text=text),), is_error=True, error=error)


def first_text(result: ToolExecutionResult) -> str:
    """The text of ``result``'s first block, which must be a text block."""
    block = result.content[0]
    assert isinstance(block, TextBlock)
    return block.text


def texts(batch: ToolBatch) -> list[str]:
    """Each result's text blocks joined by a space, in model order."""
    return [
        " ".join(block.text for block in result.content if isinstance(block, TextBlock))
        for result in batch.results
    ]


def outcome_code(result: ToolExecutionResult) -> str:
    """``"ok"`` for a success, else the error's code (``"error"`` when it carries none)."""
    if not result.is_error:
        return "ok"
    return result.error.code if result.error is not None else "error"


def jsonschema_accepts(schema: Mapping[str, Any], value: Any) -> bool:
    """Whether the reference JSON Schema validator (draft 2020-12) accepts ``value``."""
    return Draft202012Validator(schema).is_valid(value)  # pyright: ignore[reportUnknownMemberType]


# --- tools and registries -----------------------------------------------------------------------


async def ok_body(args: object, context: ToolRunContext) -> str:
    """A tool body that returns ``"ok"``."""
    return "ok"


def noting_body(ran: list[str], reply: str = "ok") -> ToolBody:
    """A tool body that appends ``"body"`` to ``ran`` and returns ``reply``."""

    async def body(args: object, context: ToolRunContext) -> str:
        ran.append("body")
        return reply

    return body


def tool(
    name: str = "t",
    execute: ToolBody = ok_body,
    *,
    description: str = "d",
    parameters: Mapping[str, object] | None = None,
    parallel: bool = False,
    timeout: float | None = None,
    present_call: Callable[[Any], ToolCallView | None] | None = None,
    present_result: Callable[[Any, ToolResult], ToolResultView | None] | None = None,
) -> ToolDefinition:
    """A tool whose JSON Schema is ``parameters`` (default ``{}``: any arguments); ``parallel``
    makes it concurrency-safe for every call."""
    return ToolDefinition(
        name=name,
        description=description,
        parameters={} if parameters is None else parameters,
        execute=execute,
        timeout=timeout,
        is_concurrency_safe=(lambda _args: True) if parallel else None,
        present_call=present_call,
        present_result=present_result,
    )


def spec_tool(
    name: str,
    execute: ToolBody = ok_body,
    *,
    parameters: SchemaSpec | None = None,
    description: str = "d",
    parallel: bool = False,
) -> ToolDefinition:
    """A ``define_tool`` tool whose arguments are the schema-DSL ``parameters`` (default: none);
    ``parallel`` makes it concurrency-safe for every call."""
    return define_tool(
        name=name,
        description=description,
        parameters={} if parameters is None else parameters,
        execute=execute,
        is_concurrency_safe=(lambda _args: True) if parallel else None,
    )


def string_tool(
    name: str,
    execute: ToolBody,
    *,
    field: str = "text",
    description: str = "d",
    parallel: bool = False,
) -> ToolDefinition:
    """A ``define_tool`` tool whose one argument, ``field``, is a required string."""
    parameters: SchemaSpec = {field: {"type": "string", "required": True}}
    return spec_tool(
        name, execute, parameters=parameters, description=description, parallel=parallel
    )


def registry_with(
    *definitions: ToolDefinition, approval: ApprovalService | None = None
) -> ToolRegistry:
    """A registry holding ``definitions``, in that order."""
    registry = ToolRegistry(approval=approval)
    for definition in definitions:
        registry.register(definition)
    return registry


def note_post_execute(registry: ToolRegistry, notes: list[str], note: str = "post") -> None:
    """Add a ``post_execute`` listener to ``registry`` that appends ``note`` to ``notes`` each
    time it is heard, and passes on."""

    async def post(
        execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
    ) -> PostToolDecision:
        notes.append(note)
        return await next()

    registry.hooks.post_execute.add(post)


def record_post_execute(registry: ToolRegistry) -> list[ToolExecutionResult]:
    """Add a ``post_execute`` listener to ``registry`` that notes each result it sees and passes
    on; returns the list it notes them in."""
    seen: list[ToolExecutionResult] = []

    async def post(
        execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
    ) -> PostToolDecision:
        seen.append(result)
        return await next()

    registry.hooks.post_execute.add(post)
    return seen


# --- calls ----------------------------------------------------------------------------------------


def request(call_id: str, name: str, arguments: str = "{}") -> ToolCallRequest:
    """The model's request to call ``name`` (with no arguments unless given)."""
    return ToolCallRequest(call_id=call_id, name=name, arguments=arguments)


def execution_input(
    name: str = "t",
    arguments: object = None,
    *,
    call_id: str = "c1",
    signal: CancelSignal | None = None,
    agent: object = None,
) -> ToolExecutionInput:
    """One call for ``ToolRegistry.execute``: no arguments (``{}``) and a signal that never
    fires unless given."""
    return ToolExecutionInput(
        call_id=call_id,
        name=name,
        arguments={} if arguments is None else arguments,
        signal=CancelSignal.never() if signal is None else signal,
        agent=agent,
    )


async def run_calls(
    registry: ToolRegistry,
    *calls: ToolCallRequest,
    signal: CancelSignal | None = None,
    agent: object = None,
    session: SessionLog | None = None,
    turn: int = 0,
) -> ToolBatch:
    """``run_tool_calls`` on ``calls``, as one batch, with a signal that never fires unless
    given."""
    return await run_tool_calls(
        registry,
        calls,
        signal=CancelSignal.never() if signal is None else signal,
        agent=agent,
        session=session,
        turn=turn,
    )


# --- approval ------------------------------------------------------------------------------------


def answering(outcome: object, heard: list[str] | None = None, name: str = "") -> ApprovalAnswerer:
    """An answerer that notes ``name`` in ``heard`` (when given), checkpoints, and answers
    ``outcome`` as it is (a rogue value too: the service reads it)."""

    async def answer(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
        if heard is not None:
            heard.append(name)
        await trio.lowlevel.checkpoint()
        return outcome  # pyright: ignore[reportReturnType]

    return answer


def approval_service(
    *answerers: ApprovalAnswerer, session: SessionLog | None = None, policy: ApprovalPolicy = "ask"
) -> UserApproval:
    """A ``UserApproval`` over ``session`` (a fresh ``MemorySessionLog`` unless given; read it back
    as ``approval.session``) with ``answerers`` added as global answerers, in order."""
    approval = UserApproval(MemorySessionLog() if session is None else session, policy=policy)
    for answerer in answerers:
        approval.answerers.add(answerer)
    return approval


async def run_in_turn(
    registry: ToolRegistry,
    calls: Sequence[ToolCallRequest],
    *,
    session: SessionLog,
    agent: object = None,
    turn: int = 1,
    signal: CancelSignal | None = None,
) -> ToolBatch:
    """``run_tool_calls`` on ``calls`` as batch ``turn`` of ``session``, inside
    ``session_turn(session, turn)`` (where approval answers), with a signal that never fires
    unless given."""
    async with session_turn(session, turn):
        return await run_calls(
            registry, *calls, signal=signal, agent=agent, session=session, turn=turn
        )


# --- session events -------------------------------------------------------------------------------


def call_event(
    name: str = "t", arguments: str = "{}", *, call_id: str = "c1", turn: int = 0, step: int = 0
) -> ToolCallEvent:
    """The session's record of a call."""
    return ToolCallEvent(turn=turn, step=step, call_id=call_id, name=name, arguments=arguments)


def result_event(
    *texts: str,
    call_id: str = "c1",
    is_error: bool = False,
    meta: object = None,
    turn: int = 0,
    step: int = 0,
) -> ToolResultEvent:
    """The session's record of a result whose content is one text block per ``texts``."""
    return ToolResultEvent(
        turn=turn,
        step=step,
        call_id=call_id,
        content=[TextBlock(text=text) for text in texts],
        is_error=is_error,
        meta=meta,
    )


FileLog: TypeAlias = JsonlSessionLog | SqliteSessionLog | PostgresSessionLog
"""A durable session log: kept in a file, or in PostgreSQL."""


def _no_server() -> None:
    return None


class FileLogKind(NamedTuple):
    """One kind of durable log, for the contract tests every durable log must pass.

    ``open(path)`` is its writer, ``read(path)`` its lock-free reader, ``class_name`` the name
    its messages use, ``file_name`` a file name for it. A PostgreSQL log is named by a path too:
    the path is its session id (a test's ``tmp_path`` is unique), and ``where(path)`` is what a
    ``SessionLogLockedError`` names, ``missing`` what reading a log that was never written
    raises. ``start()`` starts what the log needs before a child process opens it.
    """

    name: str
    open: Callable[[Path], FileLog]
    read: Callable[[Path], list[SessionEvent]]
    class_name: str
    file_name: str
    where: Callable[[Path], str] = str
    missing: type[Exception] = FileNotFoundError
    start: Callable[[], object] = _no_server


POSTGRES_ENV = "DSH_TEST_POSTGRES"
"""The environment variable that hands the tests' PostgreSQL cluster to child processes."""

_cluster: list[contextlib.ExitStack] = []


def postgres_dsn() -> str:
    """The connection URI of this test run's throwaway PostgreSQL cluster (with the session
    logs' schema), started on first use and stopped when the run ends
    (:func:`stop_postgres`, from ``tests/conftest.py``). Also set in ``DSH_TEST_POSTGRES``
    for child processes. Fails, never skips, when the cluster cannot start.
    """
    if not _cluster:
        stack = contextlib.ExitStack()
        try:
            dsn = stack.enter_context(local_servers.postgres_cluster())
            create_schema(dsn)
        except BaseException:
            stack.close()
            raise
        _cluster.append(stack)
        os.environ[POSTGRES_ENV] = dsn
    return os.environ[POSTGRES_ENV]


def stop_postgres() -> None:
    """Stop the cluster :func:`postgres_dsn` started (nothing if it did not)."""
    while _cluster:
        _cluster.pop().close()
    os.environ.pop(POSTGRES_ENV, None)


def _open_postgres(path: Path) -> PostgresSessionLog:
    return PostgresSessionLog(postgres_dsn(), str(path))


def _read_postgres(path: Path) -> list[SessionEvent]:
    return PostgresSessionLog.read(postgres_dsn(), str(path))


def _postgres_place(_path: Path) -> str:
    return describe_conninfo(postgres_dsn())


OPEN_LOG = """
import os
from dsh_tools import JsonlSessionLog, SqliteSessionLog

def open_log(kind, path):
    if kind == "jsonl":
        return JsonlSessionLog(path)
    if kind == "sqlite":
        return SqliteSessionLog(path)
    from dsh_tools.postgres import PostgresSessionLog
    return PostgresSessionLog(os.environ["DSH_TEST_POSTGRES"], path)
"""
"""Source for a child process: ``open_log(kind_name, path)`` opens the writer of any durable
log kind (a PostgreSQL one on the cluster the parent started: call ``kind.start()`` first)."""


def _read_sqlite(path: Path) -> list[SessionEvent]:
    return SqliteSessionLog.read(path)


FILE_LOGS = (
    FileLogKind("jsonl", JsonlSessionLog, read_session_log, "JsonlSessionLog", "log.jsonl"),
    FileLogKind("sqlite", SqliteSessionLog, _read_sqlite, "SqliteSessionLog", "log.sqlite"),
)
"""The file logs: ``JsonlSessionLog`` and ``SqliteSessionLog`` (default session)."""

POSTGRES_LOG = FileLogKind(
    "postgres",
    _open_postgres,
    _read_postgres,
    "PostgresSessionLog",
    "session",
    where=_postgres_place,
    missing=LookupError,
    start=postgres_dsn,
)
"""``PostgresSessionLog`` on the tests' throwaway cluster, a session per path."""

DURABLE_LOGS = (*FILE_LOGS, POSTGRES_LOG)
"""Every durable log: the file logs and ``PostgresSessionLog``."""


def run_in_a_terminal(
    *argv: str,
    columns: int,
    lines: int,
    answers: Sequence[str] = (),
    prompt: bytes = b"",
    timeout: float = 120,
) -> bytes:
    """Run ``dsh-tools argv`` on a pseudo-terminal of ``columns`` x ``lines`` (the stdlib
    ``pty``, colour allowed) and return all it wrote; type the next of ``answers`` each time
    ``prompt`` appears. Fails when the command exits with a status other than 0.
    """
    import fcntl
    import pty
    import select
    import struct
    import subprocess
    import termios
    import time

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES", "TERM")
    }
    env["TERM"] = "xterm-256color"
    process = subprocess.Popen(
        [sys.executable, "-m", "dsh_tools", *argv],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    output = bytearray()
    remaining = list(answers)
    answered = 0
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
            while remaining and output.count(prompt) > answered:
                os.write(master, remaining.pop(0).encode() + b"\n")
                answered += 1
    finally:
        os.close(master)
        process.wait(timeout=30)
    assert 0 == process.returncode, output.decode(errors="replace")
    return bytes(output)
