"""What a worker says and counts.

Logs: one record per event on the ``dsh_tools.temporal`` logger, its message the event's name
and its fields (``batch.end session='s-1' reason='completed' calls=3 ...``), the fields also
on the record (``record.dsh_event``, ``record.dsh_fields``) for :class:`LineFormatter`, which
writes each record on one line (text or JSON) and a given failure's traceback only the first
time it is seen.

Metrics: OpenTelemetry instruments on the worker's meter provider (the global one by default:
no-ops until the program installs an SDK): batches by how they ended, calls by result code, failovers, and the session
log's append latency.
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Iterable
from typing import Final

from opentelemetry import metrics

from dsh_tools import SessionEvent, ToolResultEvent

__all__ = ["LineFormatter", "WorkerMetrics", "logger", "say"]

logger: Final = logging.getLogger("dsh_tools.temporal")


def say(level: int, event: str, /, exc_info: BaseException | None = None, **fields: object) -> None:
    """Log ``event`` with ``fields``: one record, the fields in its message and on it."""
    if not logger.isEnabledFor(level):
        return
    text = " ".join([event, *(f"{name}={value!r}" for name, value in fields.items())])
    logger.log(
        level,
        "%s",
        text,
        exc_info=exc_info,
        extra={"dsh_event": event, "dsh_fields": fields},
    )


class LineFormatter(logging.Formatter):
    """One line per record: ``TIME LEVEL LOGGER MESSAGE`` (``style="text"``) or a JSON object
    (``style="json"``: ``time``, ``level``, ``logger``, ``event``, the event's fields,
    ``message``). An exception becomes ``error`` (its type and first line); its traceback
    follows (as ``traceback``) only the first time this formatter sees a failure of that type
    raised at that place, so a failure repeated on every retry costs one line each time.
    """

    def __init__(self, style: str = "text") -> None:
        if style not in ("text", "json"):
            raise ValueError(f"style must be 'text' or 'json', not {style!r}")
        super().__init__()
        self._json = style == "json"
        self._seen: set[tuple[str, str, int]] = set()

    def _failure(self, record: logging.LogRecord) -> tuple[str | None, str | None]:
        info = record.exc_info
        if not info or info[1] is None:
            return None, None
        exc = info[1]
        first = str(exc).partition("\n")[0]
        error = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
        frames = traceback.extract_tb(exc.__traceback__)
        last = frames[-1] if frames else None
        where = (
            type(exc).__qualname__,
            "" if last is None else last.filename,
            0 if last is None or last.lineno is None else last.lineno,
        )
        if where in self._seen:
            return error, None
        self._seen.add(where)
        return error, "".join(traceback.format_exception(exc)).rstrip()

    def format(self, record: logging.LogRecord) -> str:
        error, trace = self._failure(record)
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        when += f".{int(record.msecs):03d}Z"
        if self._json:
            line: dict[str, object] = {
                "time": when,
                "level": record.levelname,
                "logger": record.name,
            }
            event = getattr(record, "dsh_event", None)
            if event is not None:
                line["event"] = event
                fields: dict[str, object] = getattr(record, "dsh_fields", {})
                line.update(fields)
            line["message"] = record.getMessage()
            if error is not None:
                line["error"] = error
            if trace is not None:
                line["traceback"] = trace
            return json.dumps(line, default=str, ensure_ascii=False)
        text = f"{when} {record.levelname} {record.name} {record.getMessage()}"
        if error is not None:
            text += f" error={error!r}"
        if trace is not None:
            text += "\n" + trace
        return text


class WorkerMetrics:
    """The worker's OpenTelemetry instruments (``dsh_tools.worker.*``)."""

    __slots__ = ("append_duration", "batches", "calls", "failovers")

    def __init__(self, provider: metrics.MeterProvider | None = None) -> None:
        meter = (provider or metrics.get_meter_provider()).get_meter("dsh_tools.temporal")
        self.batches = meter.create_counter(
            "dsh_tools.worker.batches",
            unit="{batch}",
            description="Batch attempts that ended on this worker, by how (outcome: ran, "
            "resumed, reported, left, failed) and the batch's end reason",
        )
        self.calls = meter.create_counter(
            "dsh_tools.worker.calls",
            unit="{call}",
            description="Tool results of the batches this worker finished, by code (ok, "
            "error, or the harness error's code)",
        )
        self.failovers = meter.create_counter(
            "dsh_tools.worker.failovers",
            unit="{batch}",
            description="Batches this worker finished after another attempt had started them",
        )
        self.append_duration = meter.create_histogram(
            "dsh_tools.worker.append.duration",
            unit="s",
            description="How long one session log append took (the trio loop waits for it)",
        )

    def count_results(self, events: Iterable[SessionEvent]) -> None:
        """Count the batch's results (``events``: the batch's own) by code."""
        counts: dict[str, int] = {}
        for event in events:
            if isinstance(event, ToolResultEvent):
                code = (
                    event.error.code
                    if event.error is not None
                    else ("error" if event.is_error else "ok")
                )
                counts[code] = counts.get(code, 0) + 1
        for code, count in counts.items():
            self.calls.add(count, {"code": code})
