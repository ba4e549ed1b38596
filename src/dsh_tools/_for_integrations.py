"""The one internal seam the integration subpackages use besides the public namespace.

``acp``, ``cli``, ``mcp``, ``otel``, ``postgres``, ``providers``, ``temporal`` and ``testing``
import public names from ``dsh_tools`` and everything else from here (an import-linter contract
in ``pyproject.toml`` checks it). These names are not public API: they may change with the core,
and the integrations change with them in the same commit. Add a name here, with the reason an
integration needs it, rather than importing a private module from an integration.
"""

from __future__ import annotations

from ._extras import raise_missing_extra
from ._scheduling._conversation import logged_batch
from ._scheduling._entry import check_calls, check_limits, check_signal
from ._scheduling._observed import ObservedBatch, observed_batch
from ._scheduling._resume import logged_result
from ._sessions._log import SessionRowsLog, check_integrity_key, check_session_id, fresh_chain
from ._sessions._reader import SessionReader
from ._sessions._wire import MacChain, encode_event_line, events_from_rows
from ._values._checks import check_int, check_seconds
from ._values._json import MAX_SAFE_INTEGER
from ._values._media import block_payload, describe_media
from ._values._presentation import unified_diff_lines
from ._values._printable import printable

__all__ = [
    # every integration's __init__: the error that names the missing extra
    "raise_missing_extra",
    # the durations and counts an integration's own settings take (mcp, temporal)
    "check_int",
    "check_seconds",
    # the largest integer JSON carries exactly (testing's strategies stay inside it)
    "MAX_SAFE_INTEGER",
    # terminal-safe text and argument diffs for the command line's views
    "printable",
    "unified_diff_lines",
    # pictures, sound and files as every adapter writes them: the bytes a block carries (its
    # data or its data: URL decoded) and its one-line description ([image/png 640x480, 12 kB])
    "block_payload",
    "describe_media",
    # the PostgreSQL log: the lifecycle of a log that keeps sessions in database rows, the
    # rows read back, the id check
    "SessionRowsLog",
    "check_session_id",
    "events_from_rows",
    # ... and its MAC chain when it is kept with an integrity key
    "MacChain",
    "check_integrity_key",
    "fresh_chain",
    # reading a log back (the Temporal runner and worker, the deferred-approval demo): the
    # one reader of a log, and the result a logged tool/result records
    "SessionReader",
    "logged_batch",
    "logged_result",
    # the testing kit's explorers: the batch a trio task runs, seen from an instrument
    "ObservedBatch",
    "observed_batch",
    # ... and a torn write of a JSONL log's line (the crash explorer)
    "encode_event_line",
    # the Temporal runner's arguments, checked as run_tool_calls checks them
    "check_calls",
    "check_limits",
    "check_signal",
]
