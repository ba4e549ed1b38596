"""Cancellation through a signal, a timeout, and a caller's own trio scope."""

from __future__ import annotations

import trio
import trio.testing

from dsh_tools import (
    CancelController,
    CancelSignal,
    FrozenJsonObject,
    TextBlock,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRegistry,
    ToolRunContext,
    define_tool,
    install_timeout_policy,
)


async def fetch(args: FrozenJsonObject, context: ToolRunContext) -> str:
    # plain trio code: the registry's cancel scope stops it at its next checkpoint
    await trio.sleep(float(str(args["seconds"])))
    return "fetched"


def build_registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(
        define_tool(
            name="fetch",
            description="Fetch slowly.",
            parameters={"seconds": {"type": "number", "required": True}},
            execute=fetch,
            timeout=2.0,  # seconds; the model sees milliseconds
        )
    )
    install_timeout_policy(registry)
    return registry


def show(label: str, result: ToolExecutionResult) -> None:
    text = " ".join(block.text for block in result.content if isinstance(block, TextBlock))
    code = result.error.code if result.error else "-"
    print(f"{label}: {text} [{code}] at t={trio.current_time():g}")


def call(seconds: float, signal: CancelSignal) -> ToolExecutionInput:
    return ToolExecutionInput(
        call_id="c", name="fetch", arguments={"seconds": seconds}, signal=signal
    )


async def main() -> None:
    registry = build_registry()

    show("in time", await registry.execute(call(1, CancelSignal.never())))

    show("too slow", await registry.execute(call(10, CancelSignal.never())))

    # the user presses Esc half a second into the call
    controller = CancelController()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: _cancel_after(controller, 0.5))
        show("cancelled", await registry.execute(call(10, controller.signal)))

    show("never started", await registry.execute(call(1, controller.signal)))

    # cancelling the caller's own trio scope is not a result: trio.Cancelled propagates
    with trio.move_on_after(0.5) as scope:
        await registry.execute(call(10, CancelSignal.never()))
    print(f"caller scope cancelled: {scope.cancelled_caught}")


async def _cancel_after(controller: CancelController, seconds: float) -> None:
    await trio.sleep(seconds)
    controller.cancel("user pressed Esc")


if __name__ == "__main__":
    # virtual time: the example's sleeps take no real time
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
