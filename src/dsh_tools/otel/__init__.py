"""OpenTelemetry tracing of tool calls: ``install_tracing`` (extra ``[otel]``; the core never
imports this package).
"""

from dsh_tools._for_integrations import raise_missing_extra

try:
    from ._tracing import BATCH_SPAN as BATCH_SPAN
    from ._tracing import OTHER_ERROR as OTHER_ERROR
    from ._tracing import install_tracing as install_tracing
except ModuleNotFoundError as exc:
    raise_missing_extra(exc, "otel", "opentelemetry-api", ("opentelemetry",))

__all__ = ["BATCH_SPAN", "OTHER_ERROR", "install_tracing"]
