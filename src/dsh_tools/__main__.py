"""The ``dsh-tools`` command line (also ``python -m dsh_tools``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsh-tools", description="Tools for the dsh-tools tool-execution layer."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="run a scripted agent turn through the real registry, pipeline and scheduler",
        description=(
            "Run a scripted agent turn (no model, no network) through the real registry, "
            "pipeline, timeout policy and scheduler; print its timeline and results and write "
            "its session log as JSON Lines."
        ),
    )
    demo.add_argument(
        "--log",
        type=Path,
        metavar="PATH",
        help="append the session log here (default: a fresh file in the temp directory)",
    )
    demo.add_argument(
        "--real-time",
        action="store_true",
        help="sleep for real (about 3 s) instead of on trio's virtual clock",
    )
    demo.add_argument(
        "--ask",
        action="store_true",
        help="ask on the terminal (y/n) before each write or command, and run two commands",
    )
    # listed for the help only: main() hands ``acp`` and what follows to dsh_tools.acp.main
    commands.add_parser("acp", help="serve an ACP agent over stdio to editors (dsh-tools[acp])")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments[:1] == ["acp"]:  # every option after ``acp`` (--help too) is its own
        from .acp import main as acp_main  # imported late: an optional integration

        return acp_main(arguments[1:])
    args = _parser().parse_args(arguments)
    if args.command == "demo":
        from ._demo import main_demo  # imported late: the CLI's help needs none of it

        try:
            return main_demo(log=args.log, real_time=args.real_time, ask=args.ask)
        except OSError as exc:  # the session log cannot be opened (--log in a missing folder)
            plain = exc.filename is not None and exc.strerror
            reason = f"{exc.filename}: {exc.strerror}" if plain else str(exc)
            print(f"dsh-tools demo: error: {reason}", file=sys.stderr)
            return 2
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse rejects the rest


if __name__ == "__main__":
    raise SystemExit(main())
