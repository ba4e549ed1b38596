"""Tool batches on Temporal workers (extra ``[temporal]``: temporalio and psycopg; the core never
imports this package): one workflow per agent session, one heartbeating activity per batch that
runs on a worker's trio loop against the session's
:class:`~dsh_tools.postgres.PostgresSessionLog`. A worker that dies mid-batch is replaced by
another, which finishes the batch from the log.

The Temporal SDK is asyncio-only: it runs on one asyncio loop in one side thread
(:func:`open_temporal_client`), which hops onto trio with a trio token. No asyncio in the agent's
code: ``TemporalBatchRunner(client, task_queue, conninfo=...).run(...)`` is awaited from trio,
and ``dsh-tools worker`` (or :func:`serve_worker`) serves the batches.
"""

from dsh_tools._for_integrations import raise_missing_extra

try:
    from ._client import TemporalClient as TemporalClient
    from ._client import open_temporal_client as open_temporal_client
    from ._observe import LineFormatter as LineFormatter
    from ._runner import TemporalBatchRunner as TemporalBatchRunner
    from ._runner import batch_from_log as batch_from_log
    from ._worker import serve_worker as serve_worker
    from ._workflow import SessionWorkflow as SessionWorkflow
except ModuleNotFoundError as exc:
    raise_missing_extra(exc, "temporal", "temporalio, psycopg 3", ("temporalio", "psycopg"))

__all__ = [
    "LineFormatter",
    "SessionWorkflow",
    "TemporalBatchRunner",
    "TemporalClient",
    "batch_from_log",
    "open_temporal_client",
    "serve_worker",
]
