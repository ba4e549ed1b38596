"""``dsh-tools worker``: serve tool batches from a Temporal task queue (extra ``[temporal]``).

``dsh-tools worker --temporal HOST:PORT --task-queue Q --postgres DSN --registry MODULE:NAME``
runs :func:`dsh_tools.temporal.serve_worker` until interrupted (Ctrl-C, ``SIGTERM``).
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from dsh_tools.cli._loading import load_registry

if TYPE_CHECKING:
    from temporalio.service import TLSConfig

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
    environ = os.environ
    parser.add_argument(
        "--temporal",
        "--address",
        default=environ.get("TEMPORAL_ADDRESS"),
        metavar="HOST:PORT",
        help="the Temporal server (default: $TEMPORAL_ADDRESS)",
    )
    parser.add_argument(
        "--namespace",
        default=environ.get("TEMPORAL_NAMESPACE", "default"),
        help="the Temporal namespace (default: $TEMPORAL_NAMESPACE, else %(default)s)",
    )
    parser.add_argument(
        "--api-key",
        default=environ.get("TEMPORAL_API_KEY"),
        metavar="KEY",
        help="an API key for the Temporal server (default: $TEMPORAL_API_KEY); turns TLS on "
        "unless --no-tls",
    )
    tls = parser.add_mutually_exclusive_group()
    tls.add_argument(
        "--tls",
        action="store_true",
        default=None,
        help="connect to Temporal with TLS (default: $TEMPORAL_TLS, or on with an API key)",
    )
    tls.add_argument("--no-tls", dest="tls", action="store_false", help="connect without TLS")
    for flag, variable, what in (
        ("--tls-ca-path", "TEMPORAL_TLS_SERVER_CA_CERT_PATH", "the CA certificate of the server"),
        ("--tls-cert-path", "TEMPORAL_TLS_CLIENT_CERT_PATH", "this worker's certificate (mTLS)"),
        ("--tls-key-path", "TEMPORAL_TLS_CLIENT_KEY_PATH", "this worker's private key (mTLS)"),
    ):
        parser.add_argument(
            flag,
            default=environ.get(variable),
            metavar="FILE",
            help=f"{what}, PEM (default: ${variable}); implies --tls",
        )
    parser.add_argument(
        "--tls-server-name",
        default=environ.get("TEMPORAL_TLS_SERVER_NAME"),
        metavar="NAME",
        help="the server name TLS checks (default: $TEMPORAL_TLS_SERVER_NAME)",
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
        "--max-connections",
        type=_positive_int,
        default=None,
        metavar="N",
        help="the most connections this worker holds to the session logs' database; a running "
        "batch holds one, so batches past it wait for one (default: --max-concurrent-batches)",
    )
    parser.add_argument(
        "--max-concurrent-workflow-tasks",
        type=_positive_int,
        default=100,
        metavar="N",
        help="the most session workflow tasks this worker runs at once (default: %(default)s)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="on Ctrl-C or SIGTERM, how long the batches in progress may take to finish; a "
        "batch still running then is left to another worker, as after a crash (default: "
        "%(default)s)",
    )
    parser.add_argument(
        "--sticky-timeout",
        type=_positive_seconds,
        default=1.0,
        metavar="SECONDS",
        help="how long a session's workflow task waits for the worker that has it cached "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--heartbeat-throttle",
        type=_positive_seconds,
        default=0.25,
        metavar="SECONDS",
        help="the longest the SDK holds a batch's heartbeats back (at most 0.8 x the batch's "
        "heartbeat timeout); keep it short, the agent's watch reads them (default: "
        "%(default)s)",
    )
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=environ.get("DSH_TOOLS_LOG_FORMAT", "text"),
        help="the log on standard error: one line per event, as text or as JSON objects "
        "(default: $DSH_TOOLS_LOG_FORMAT, else %(default)s)",
    )
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default=environ.get("DSH_TOOLS_LOG_LEVEL", "info"),
        help="the least severe events logged (default: $DSH_TOOLS_LOG_LEVEL, else %(default)s)",
    )
    return parser


def _positive_seconds(text: str) -> float:
    value = _seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, not {text!r}")
    return value


def _configure_logging(style: str, level: str) -> None:
    """Every record on standard error, one line each (the traceback of a failure once): the
    worker's own events at ``level``, other libraries' (the Temporal SDK's) from warnings.
    """
    from dsh_tools.temporal import LineFormatter

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LineFormatter(style))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("dsh_tools").setLevel(level.upper())
    # a library's warning, an error no caller could take (a finalizer's), and a thread's
    # uncaught error are records too, each on one line
    logging.captureWarnings(True)
    sys.unraisablehook = _log_unraisable
    threading.excepthook = _log_thread_error


def _log_unraisable(info: sys.UnraisableHookArgs) -> None:
    logging.getLogger("dsh_tools").warning(
        "%s: %r",
        info.err_msg or "Exception ignored in",
        info.object,
        exc_info=None if info.exc_value is None else info.exc_value,
    )


def _log_thread_error(info: threading.ExceptHookArgs) -> None:
    name = "?" if info.thread is None else info.thread.name
    logging.getLogger("dsh_tools").error(
        "uncaught error in thread %s",
        name,
        exc_info=None if info.exc_value is None else info.exc_value,
    )


def _tls(arguments: argparse.Namespace) -> bool | TLSConfig | None:
    """What ``open_temporal_client(tls=...)`` takes for the TLS flags and variables.

    Raises:
        OSError: a certificate or key file cannot be read (its path and why).
        ValueError: ``$TEMPORAL_TLS`` is neither true nor false.
    """
    paths = (arguments.tls_ca_path, arguments.tls_cert_path, arguments.tls_key_path)
    tls: bool | None = arguments.tls
    if tls is None and os.environ.get("TEMPORAL_TLS"):
        text = os.environ["TEMPORAL_TLS"].strip().lower()
        if text not in ("true", "false", "1", "0"):
            raise ValueError(f"TEMPORAL_TLS must be true or false, not {text!r}")
        tls = text in ("true", "1")
    if tls is False or not (any(paths) or arguments.tls_server_name):
        return tls
    from temporalio.service import TLSConfig

    ca, cert, key = (None if path is None else Path(path).read_bytes() for path in paths)
    return TLSConfig(
        server_root_ca_cert=ca,
        client_cert=cert,
        client_private_key=key,
        domain=arguments.tls_server_name,
    )


def main_worker(argv: Sequence[str]) -> int:
    """Run ``dsh-tools worker``; return the exit status (0 after Ctrl-C or ``SIGTERM``)."""
    parser = _parser()
    arguments = parser.parse_args(argv)
    if not arguments.temporal:
        parser.error("the Temporal server is needed: --temporal HOST:PORT or $TEMPORAL_ADDRESS")
    try:
        from dsh_tools.temporal import open_temporal_client, serve_worker
    except ModuleNotFoundError as exc:
        print(f"dsh-tools worker: {exc}", file=sys.stderr)
        return 1
    try:
        tls = _tls(arguments)
    except (OSError, ValueError) as exc:
        print(f"dsh-tools worker: error: {exc}", file=sys.stderr)
        return 2
    _configure_logging(arguments.log_format, arguments.log_level)
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
            arguments.temporal, namespace=arguments.namespace, api_key=arguments.api_key, tls=tls
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
                            max_connections=arguments.max_connections,
                            max_concurrent_workflow_tasks=arguments.max_concurrent_workflow_tasks,
                            drain_timeout=arguments.drain_timeout,
                            sticky_timeout=arguments.sticky_timeout,
                            heartbeat_throttle=arguments.heartbeat_throttle,
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
