"""``dsh-tools worker``: serve tool batches from a Temporal task queue (extra ``[temporal]``).

``dsh-tools worker --temporal HOST:PORT --task-queue Q --postgres DSN --registry MODULE:NAME``
runs :func:`dsh_tools.temporal.serve_worker` until interrupted (Ctrl-C, ``SIGTERM``).
"""

from __future__ import annotations

import argparse
import functools
import signal
import sys
from collections.abc import Sequence

import trio

from dsh_tools.cli._loading import load_registry

__all__ = ["main_worker"]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0, not {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsh-tools worker",
        description=(
            "Serve tool batches from a Temporal task queue: each agent session is a workflow, "
            "each batch an activity this worker runs on its trio loop against the session's "
            "PostgreSQL log. When a worker dies mid-batch, another finishes the batch from the "
            "log. Needs the [temporal] extra."
        ),
    )
    parser.add_argument(
        "--temporal", required=True, metavar="HOST:PORT", help="the Temporal server"
    )
    parser.add_argument(
        "--namespace", default="default", help="the Temporal namespace (default: %(default)s)"
    )
    parser.add_argument("--task-queue", required=True, metavar="Q", help="the task queue to serve")
    parser.add_argument(
        "--postgres", required=True, metavar="DSN", help="the session logs' database"
    )
    parser.add_argument(
        "--schema", default="dsh", help="the session logs' schema (default: %(default)s)"
    )
    parser.add_argument(
        "--registry",
        required=True,
        metavar="MODULE:NAME",
        help="the ToolRegistry (or a function returning one) whose tools the batches call",
    )
    parser.add_argument(
        "--no-synchronous-commit",
        action="store_true",
        help="let PostgreSQL acknowledge an event before it is on its disk (appends wait for no "
        "disk flush; a crash of the database server may lose the last events)",
    )
    parser.add_argument(
        "--max-concurrent-batches",
        type=_positive_int,
        default=100,
        metavar="N",
        help="the most batches this worker runs at once (default: %(default)s)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="on Ctrl-C or SIGTERM, how long the batches in progress may take to finish "
        "(default: %(default)s)",
    )
    return parser


def main_worker(argv: Sequence[str]) -> int:
    """Run ``dsh-tools worker``; return the exit status (0 after Ctrl-C or ``SIGTERM``)."""
    arguments = _parser().parse_args(argv)
    try:
        from dsh_tools.temporal import open_temporal_client, serve_worker
    except ModuleNotFoundError as exc:
        print(f"dsh-tools worker: {exc}", file=sys.stderr)
        return 1
    try:
        registry = load_registry(arguments.registry)
    except (ValueError, TypeError, ImportError, AttributeError) as exc:
        print(f"dsh-tools worker: error: {exc}", file=sys.stderr)
        return 2

    try:
        # both stores before anything is served: a wrong address or a database without the
        # schema is an error now, not an hour of retried batches
        from dsh_tools.postgres import check_database

        check_database(arguments.postgres, schema=arguments.schema)
    except (ConnectionError, ValueError, TypeError) as exc:
        print(f"dsh-tools worker: error: {exc}", file=sys.stderr)
        return 1

    async def serve() -> None:
        async with open_temporal_client(
            arguments.temporal, namespace=arguments.namespace
        ) as client:
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async with trio.open_nursery() as nursery:
                    await nursery.start(
                        functools.partial(
                            serve_worker,
                            client,
                            arguments.task_queue,
                            registry,
                            arguments.postgres,
                            schema=arguments.schema,
                            synchronous_commit=not arguments.no_synchronous_commit,
                            max_concurrent_batches=arguments.max_concurrent_batches,
                            drain_timeout=arguments.drain_timeout,
                        )
                    )
                    print(
                        f"dsh-tools worker: serving task queue {arguments.task_queue!r} "
                        f"of {arguments.temporal}",
                        flush=True,
                    )
                    async for _ in signals:
                        nursery.cancel_scope.cancel()
                        break

    try:
        trio.run(serve)
    except RuntimeError as exc:  # the SDK's "failed client connect" and the like
        print(f"dsh-tools worker: error: {exc}", file=sys.stderr)
        return 1
    return 0
