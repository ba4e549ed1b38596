"""A Temporal client a trio program can hold: the SDK's client on the side thread's loop."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import opentelemetry.trace
import temporalio.client
import temporalio.service
from temporalio.contrib.opentelemetry import TracingInterceptor

from ._bridge import AsyncioThread, open_asyncio_thread

__all__ = ["TemporalClient", "open_temporal_client"]

T = TypeVar("T")


class TemporalClient:
    """A connected ``temporalio.client.Client`` and the asyncio thread it lives on (from
    :func:`open_temporal_client`).
    """

    __slots__ = ("_client", "_thread")

    def __init__(self, client: temporalio.client.Client, thread: AsyncioThread) -> None:
        self._client = client
        self._thread = thread

    @property
    def client(self) -> temporalio.client.Client:
        """The SDK's client: use it only inside :meth:`run` (it belongs to the side loop)."""
        return self._client

    async def run(self, function: Callable[[temporalio.client.Client], Awaitable[T]]) -> T:
        """Run ``function(client)`` on the client's asyncio loop and return its result.

        A checkpoint; cancelling the calling trio task cancels the asyncio task.
        """
        client = self._client

        async def call() -> T:
            return await function(client)

        return await self._thread.run(call)

    @property
    def thread(self) -> AsyncioThread:
        """The asyncio side thread (shared with a worker started on this client)."""
        return self._thread


@asynccontextmanager
async def open_temporal_client(
    target: str,
    *,
    namespace: str = "default",
    api_key: str | None = None,
    tls: bool | temporalio.service.TLSConfig | None = None,
    tracer_provider: opentelemetry.trace.TracerProvider | None = None,
) -> AsyncGenerator[TemporalClient]:
    """Connect to the Temporal server at ``target`` (``HOST:PORT``) from trio.

    Starts one asyncio loop in a side thread for the Temporal SDK (asyncio-only) and connects
    there; the loop and the thread stop when the block ends.

    Args:
        target: the server's ``HOST:PORT``.
        namespace: the Temporal namespace.
        api_key: an API key (Temporal Cloud, or a server that takes one); it turns TLS on
            unless ``tls`` is ``False``.
        tls: ``True`` (TLS with the system's roots), a ``temporalio.service.TLSConfig`` (a CA,
            a client certificate and key for mutual TLS, a server name), ``False`` (plain), or
            ``None`` (TLS when an API key is given).
        tracer_provider: where the client's and its workers' spans go (OpenTelemetry; the
            global provider by default, as set when this is called: with none installed, no
            tracing). The trace context travels in Temporal's headers: a batch run from inside
            an agent's span is one trace with the session workflow, the worker's batch
            activity and, with :func:`dsh_tools.otel.install_tracing` on the worker's
            registry, its tool calls.

    Raises:
        RuntimeError: the server cannot be reached (the SDK's error).
    """
    use_tls: bool | temporalio.service.TLSConfig = api_key is not None if tls is None else tls
    async with open_asyncio_thread() as thread:

        async def connect() -> temporalio.client.Client:
            provider = tracer_provider or opentelemetry.trace.get_tracer_provider()
            # no tracer provider installed (the API's default): no spans to link, and the
            # interceptor's work on every task would buy nothing
            traced = not isinstance(
                provider,
                opentelemetry.trace.ProxyTracerProvider | opentelemetry.trace.NoOpTracerProvider,
            )
            return await temporalio.client.Client.connect(
                target,
                namespace=namespace,
                api_key=api_key,
                tls=use_tls,
                interceptors=(
                    [TracingInterceptor(provider.get_tracer("dsh_tools.temporal"))]
                    if traced
                    else []
                ),
            )

        client = await thread.run(connect)
        yield TemporalClient(client, thread)
