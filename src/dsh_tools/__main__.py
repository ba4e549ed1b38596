"""The ``dsh-tools`` command line (also ``python -m dsh_tools``).

Subcommands: ``demo`` (a scripted agent turn; a live ``rich`` view, or ``--plain`` ASCII),
``bench`` (the parallel-dispatch benchmark), ``replay`` (a session log through the presenter),
``watch`` (a session drawn live as another process writes it),
``acp`` (an ACP agent over stdio) and ``worker`` (a Temporal worker for tool batches).
Everything that needs ``rich`` (the ``[cli]`` extra) lives in :mod:`dsh_tools.cli` and is
imported only by the command that uses it, so ``dsh-tools demo --plain`` works with the core
dependencies alone.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]

_BROKEN_PIPE = 1
"""The exit status of a command whose stdout reader went away (``| head``): what Python's own
recipe for EPIPE and ``rich`` (which ends its views so) report."""

_INTERRUPTED = 130
"""The exit status after Ctrl-C: 128 + SIGINT, as a shell reports a process SIGINT ended."""

_NEEDS_CLI = "`dsh-tools {command}` needs the [cli] extra: python -m pip install 'dsh-tools[cli]'"


def _parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="dsh-tools", description="Tools for the dsh-tools tool-execution layer."
    )
    parser.add_argument("--version", action="version", version=f"dsh-tools {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="run a scripted agent turn through the real registry, pipeline and scheduler",
        description=(
            "Run a scripted agent turn (no model, no network) through the real registry, "
            "pipeline, timeout policy and scheduler; show its pools, barriers, timeout and "
            "interrupt live (or, with --plain, print the ASCII timeline) and write its session "
            "log as JSON Lines."
        ),
    )
    demo.add_argument(
        "--plain",
        action="store_true",
        help="print the ASCII timeline instead of the live view (no [cli] extra needed)",
    )
    demo.add_argument(
        "--log",
        type=Path,
        metavar="PATH",
        help="append the session log here: JSON Lines for a .jsonl path, else SQLite "
        "(default: a fresh SQLite file in the temp directory)",
    )
    demo.add_argument(
        "--real-time",
        action="store_true",
        help="with --plain: sleep for real (about 3 s) instead of on trio's virtual clock "
        "(the live view always runs in real time)",
    )

    bench = commands.add_parser(
        "bench",
        help="measure the scheduler against bare trio nurseries",
        description=(
            "The parallel-dispatch benchmark: per-call overhead of run_tool_calls against a "
            "bare trio nursery and a nursery with json.loads + hand validation (N = 1, 100, "
            "1,000, 10,000), overlap of 100 sleeping calls, a mixed barrier batch, and memory "
            "per in-flight call."
        ),
    )
    bench.add_argument("--json", action="store_true", help="print one JSON document")
    bench.add_argument("--quick", action="store_true", help="fewer rounds and smaller sizes")

    replay = commands.add_parser(
        "replay",
        help="show a session log through the presenter",
        description=(
            "Render a session log (JSON Lines or SQLite, e.g. the demo's) through the tool "
            "presenter: call "
            "cards, results, contexts, turns and approvals, as a UI showed them live. Text from "
            "the log is shown as written: control characters appear as visible escapes."
        ),
    )
    replay.add_argument(
        "log", type=Path, metavar="LOG", help="the session log to show (JSON Lines or SQLite)"
    )
    replay.add_argument(
        "--session",
        default="default",
        metavar="ID",
        help="which session of a SQLite log to show (default: %(default)s)",
    )
    replay.add_argument(
        "--registry",
        metavar="MODULE:NAME",
        help="the ToolRegistry (or a function returning one) whose presenters draw the cards "
        "(default: none, every call gets the generic card of its tool name and arguments)",
    )

    watch = commands.add_parser(
        "watch",
        help="draw a session live while another process writes it",
        description=(
            "Follow a session log (JSON Lines or SQLite, or PostgreSQL with --postgres) and "
            "draw each event as it is appended, with the cards replay draws, until Ctrl-C."
        ),
    )
    watch.add_argument(
        "log",
        metavar="LOG",
        help="the log to follow: a JSON Lines or SQLite file, or with --postgres a "
        "PostgreSQL connection string",
    )
    watch.add_argument(
        "--session", default="default", metavar="ID", help="which session (default: %(default)s)"
    )
    watch.add_argument(
        "--postgres", action="store_true", help="LOG is a PostgreSQL connection string"
    )
    watch.add_argument(
        "--registry",
        metavar="MODULE:NAME",
        help="the ToolRegistry whose presenters draw the cards (default: the generic card)",
    )

    commands.add_parser(
        "acp",
        help="run an ACP agent over stdio",
        description="An Agent Client Protocol agent over stdio (needs the [acp] extra).",
        add_help=False,
    )
    commands.add_parser(
        "worker",
        help="serve tool batches from a Temporal task queue",
        description="A Temporal worker for tool batches (needs the [temporal] extra).",
        add_help=False,
    )
    demo.add_argument(
        "--ask",
        action="store_true",
        help="ask on the terminal (y/n/a) before each write or command, and run two commands "
        "(prints the ASCII timeline, as --plain does)",
    )
    demo.add_argument(
        "--defer",
        action="store_true",
        help="a batch whose approvals wait: it ends suspended and prints the pending calls; "
        "run again with --approve / --always / --reject to resume it from --log",
    )
    for flag, meaning in (
        ("--approve", "allow the call once"),
        ("--always", "allow the call, and its tool for the rest of the session"),
        ("--reject", "reject the call"),
    ):
        demo.add_argument(
            flag,
            action="append",
            default=[],
            metavar="CALL_ID",
            help=f"with --defer: {meaning} (repeatable)",
        )
    demo.add_argument(
        "--arguments",
        action="append",
        default=[],
        metavar="[CALL_ID=]JSON",
        help="with --defer and --approve / --always: run the approved call with these "
        "arguments instead of the model's (validated again; repeatable, CALL_ID= needed when "
        "several calls are approved)",
    )
    return parser


def _has_rich() -> bool:
    try:
        import rich  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        return False
    return True


def _quiet_library_logs() -> None:
    """The demo provokes tool failures on purpose and shows each one in its output; without a
    logging configuration, Python's last-resort handler would print each warning's traceback to
    stderr as well. A configured root logger still gets every record.
    """
    logger = logging.getLogger("dsh_tools")
    if not any(isinstance(handler, logging.NullHandler) for handler in logger.handlers):
        logger.addHandler(logging.NullHandler())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code.

    A closed stdout (``dsh-tools demo | head``) ends any command quietly, with exit status 1;
    Ctrl-C ends it with one line on stderr and exit status 130.
    """
    arguments = sys.argv[1:] if argv is None else list(argv)
    code = 0
    broken = False
    interrupted = False
    try:
        try:
            code = _run(arguments)
        finally:
            # a closed pipe may surface only when the last buffered output is written
            sys.stdout.flush()
    except* BrokenPipeError:
        broken = True
    except* KeyboardInterrupt:
        # Ctrl-C: the batch under way ended balanced ("aborted"; a resume can finish it)
        interrupted = True
    if broken:
        _discard_stdout()
        return _BROKEN_PIPE
    if interrupted:
        print("dsh-tools: interrupted", file=sys.stderr)
        return _INTERRUPTED
    return code


def _discard_stdout() -> None:
    """Point stdout at the null device, so the interpreter's flush at exit cannot fail again
    (it would print ``Exception ignored ... BrokenPipeError``).
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor behind sys.stdout (a test's capture)
        pass


def _run(arguments: list[str]) -> int:
    if arguments[:1] == ["acp"]:
        return _acp(arguments[1:])
    if arguments[:1] == ["worker"]:
        from .cli.worker import main_worker  # imports trio only; it names a missing extra

        return main_worker(arguments[1:])
    args = _parser().parse_args(arguments)
    command: str = args.command
    if command == "demo":
        _quiet_library_logs()
    if command == "demo" and args.defer:
        from .cli.defer_demo import main_defer_demo  # imported late, as the demo is

        try:
            return main_defer_demo(
                log=args.log,
                approve=args.approve,
                reject=args.reject,
                always=args.always,
                arguments=args.arguments,
            )
        except BrokenPipeError:
            raise
        except OSError as exc:
            return _log_error(exc)
    if command == "demo" and (args.plain or args.ask):
        # --ask prompts on the terminal (y/n): the ASCII timeline, not the live view, owns it
        from .cli.plain_demo import main_demo  # imported late: the CLI's help needs none of it

        try:
            return main_demo(log=args.log, real_time=args.real_time, ask=args.ask)
        except BrokenPipeError:
            raise  # stdout, not the log: main ends quietly
        except OSError as exc:
            return _log_error(exc)
    if command == "bench" and args.json:
        from .cli.bench import main_bench_json

        return main_bench_json(quick=args.quick)
    if not _has_rich():
        hint = " (or `dsh-tools demo --plain`)" if command == "demo" else ""
        print(_NEEDS_CLI.format(command=command) + hint, file=sys.stderr)
        return 1
    if command == "demo":
        from .cli.live_demo import main_live_demo

        try:
            return main_live_demo(log=args.log)
        except BrokenPipeError:
            raise  # stdout, not the log: main ends quietly
        except OSError as exc:
            return _log_error(exc)
    if command == "bench":
        from .cli.bench_view import main_bench

        return main_bench(quick=args.quick)
    if command == "replay":
        from .cli.replay import main_replay

        return main_replay(args.log, registry=args.registry, session=args.session)
    if command == "watch":
        from .cli.watch import main_watch

        return main_watch(
            args.log, session=args.session, postgres=args.postgres, registry=args.registry
        )
    raise AssertionError(f"unhandled command {command!r}")  # argparse rejects the rest


def _log_error(exc: OSError) -> int:
    """The demo's session log cannot be opened (``--log`` in a missing folder, a locked log)."""
    plain = exc.filename is not None and exc.strerror
    reason = f"{exc.filename}: {exc.strerror}" if plain else str(exc)
    print(f"dsh-tools demo: error: {reason}", file=sys.stderr)
    return 2


def _acp(argv: list[str]) -> int:
    # dsh_tools.acp imports only trio; its main() names the [acp] extra when that is missing
    from .acp import main as acp_main

    return acp_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
