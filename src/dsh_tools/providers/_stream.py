"""What every provider call stream shares: an async iterator of tool calls over a model's
stream events, that yields a call the moment its arguments are complete, before it pulls the
next event, and after exhaustion gives the assembled message and the model's text.

A provider's stream implements :meth:`CallStream._feed` (one event: record text, collect
argument fragments, queue the calls it completes) and :meth:`CallStream._assembled` (the
message, as the provider's non-streaming ``tool_calls`` takes it); it names its final event
(``_final``) so that a stream that ends without it is reported truncated.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Any, Self, cast

import trio

from dsh_tools import ToolCallRequest

from ._common import JsonDict, as_mapping

__all__ = ["CallStream"]


class CallStream:
    r"""An async iterator of :class:`~dsh_tools.ToolCallRequest` over a provider's stream
    events (an async or a plain iterable of SDK objects or ``dict``\ s).
    """

    _final: str = ""
    """The ``type`` of the event that ends a complete stream."""

    def __init__(self, events: AsyncIterable[object] | Iterable[object]) -> None:
        if isinstance(events, AsyncIterable):
            self._source: AsyncIterator[object] | None = events.__aiter__()
            self._sync: Iterator[object] | None = None
        elif isinstance(events, Iterable):  # pyright: ignore[reportUnnecessaryIsInstance]
            self._source = None
            self._sync = iter(events)
        else:
            raise TypeError(
                f"{type(self).__name__} takes an iterable of stream events, "
                f"not {type(events).__name__}"
            )
        self._ready: deque[ToolCallRequest] = deque()
        self._events = 0
        self._finished = False
        self._ended = False
        self._text: list[str] = []

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> ToolCallRequest:
        while not self._ready:
            if self._ended:
                raise StopAsyncIteration
            event = await self._pull()
            if event is None:
                self._ended = True
                if not self._finished:
                    raise ValueError(
                        f"the stream ended after {self._events} event(s) without its "
                        f"{self._final!r} event: it was cut off"
                    )
                continue
            index = self._events
            self._events += 1
            data = as_mapping(event, f"stream event {index}")
            self._feed(data, f"stream event {index} ({data.get('type', data.get('object'))!r})")
        # a call the last event completed: yielded before the next event is pulled
        return self._ready.popleft()  # noqa: ASYNC910 (the pull that brought it waited)

    async def _pull(self) -> object | None:
        """The next event, or ``None`` at the end of the source."""
        if self._source is not None:
            try:
                return await self._source.__anext__()
            except StopAsyncIteration:
                return None  # noqa: ASYNC910 (the source's own __anext__ is its wait)
        assert self._sync is not None
        # a plain iterable never waits: let the other tasks run between its events
        await trio.lowlevel.checkpoint()
        return next(self._sync, None)

    async def aclose(self) -> None:
        """Close the source stream (when it can be closed); the iterator ends."""
        self._ended = True
        self._ready.clear()
        close = cast(
            "Callable[[], Awaitable[object]] | None", getattr(self._source, "aclose", None)
        )
        if callable(close):
            await close()
        else:
            await trio.lowlevel.checkpoint()

    async def __aenter__(self) -> Self:
        return self  # noqa: ASYNC910 (entering does nothing)

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def message(self) -> JsonDict:
        """The assembled assistant message (what the provider's ``tool_calls`` takes), once the
        stream is exhausted.

        Raises:
            RuntimeError: the stream is not exhausted yet.
        """
        self._check_exhausted("message")
        return self._assembled()

    @property
    def text(self) -> str:
        """The model's own text (``""`` when it said nothing), once the stream is exhausted.

        Raises:
            RuntimeError: the stream is not exhausted yet.
        """
        self._check_exhausted("text")
        return "".join(self._text)

    def _check_exhausted(self, what: str) -> None:
        if not (self._ended and self._finished):
            raise RuntimeError(
                f"{type(self).__name__}.{what} is known once the stream is exhausted: read "
                "every call first (async for call in stream: ...)"
            )

    # --- what a provider implements --------------------------------------------------------

    def _feed(self, event: Any, where: str) -> None:
        raise NotImplementedError

    def _assembled(self) -> JsonDict:
        raise NotImplementedError

    def _emit(self, call: ToolCallRequest) -> None:
        self._ready.append(call)
