"""The timeout policy: the registry's own enforcement of ``ToolDefinition.timeout``,
``ToolDefinition.idle_timeout`` and ``ToolRegistry(default_timeout=...)``.

A :class:`~dsh_tools.ToolRegistry` starts with it installed; the pipeline applies it around
the body (see ``_pipeline._timeouts.run_timed``): the deadline is data on a
:class:`~dsh_tools.CancelSignal`, so the body's linked cancel scope carries it as a trio
deadline, with no timer task per call and no wrapper in the ``execute`` chain. A call to a
tool without a timeout, on a registry without a default, pays one attribute read. Cooperative
like every cancellation here: a body that shields itself runs to its end, and the result is
then ``TOOL_TIMEOUT``.
"""

from __future__ import annotations

from dsh_tools._pipeline._registry import ToolRegistry, pipeline_host
from dsh_tools._values._disposer import Disposer

__all__ = ["install_timeout_policy"]


def install_timeout_policy(registry: ToolRegistry) -> Disposer:
    """Make sure the registry enforces every tool's ``timeout`` (seconds), and return the
    disposer of that policy.

    A :class:`~dsh_tools.ToolRegistry` enforces timeouts from the start, so this only matters
    after a disposer removed the policy; installing it again never stacks (one policy per
    registry). Disposing the returned disposer removes the registry's timeout enforcement:
    bodies then see the caller's signal untouched.

    For a tool with a ``timeout`` the body's signal is cancelled at ``now + timeout`` (or when
    the upstream signal is, whichever comes first). If that deadline fired first, the call's
    result is ``TOOL_TIMEOUT`` (``Error: tool call timed out after <ms>ms``,
    ``error=ToolTimeoutError/TOOL_TIMEOUT``), whatever the body returned, and a later caller
    cancellation does not change that; if the caller cancelled first, the result stays
    ``ABORTED``. The timeout applies to each run of the body, inside every ``execute``
    wrapper (a retry policy's attempts each get the whole timeout).

    Returns:
        A :class:`~dsh_tools.Disposer` that removes the policy.

    Raises:
        TypeError: ``registry`` is not a :class:`~dsh_tools.ToolRegistry`.
    """
    if not isinstance(registry, ToolRegistry):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"registry must be a ToolRegistry, not {type(registry).__name__}")
    settings = pipeline_host(registry).timeouts
    settings.enforced = True

    def remove() -> None:
        settings.enforced = False

    return Disposer(remove)
