"""OpenTelemetry tracing of tool calls: ``install_tracing`` (extra ``[otel]``; the core never
imports this package).
"""

try:
    from ._tracing import BATCH_SPAN as BATCH_SPAN
    from ._tracing import OTHER_ERROR as OTHER_ERROR
    from ._tracing import install_tracing as install_tracing
except ModuleNotFoundError as exc:
    if (exc.name or "").partition(".")[0] not in ("opentelemetry",):
        raise
    raise ModuleNotFoundError(
        f"dsh_tools.otel needs the [otel] extra (opentelemetry-api): {exc}; "
        "install it with: python -m pip install 'dsh-tools[otel]'",
        name=exc.name,
    ) from exc

__all__ = ["BATCH_SPAN", "OTHER_ERROR", "install_tracing"]
