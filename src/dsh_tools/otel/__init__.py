"""OpenTelemetry tracing of tool calls: ``install_tracing`` (extra ``[otel]``; the core never
imports this package).
"""

from ._tracing import OTHER_ERROR as OTHER_ERROR
from ._tracing import install_tracing as install_tracing

__all__ = ["OTHER_ERROR", "install_tracing"]
