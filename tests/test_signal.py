"""Cancellation as data: controllers, signals, fusion, deadlines and linked cancel scopes."""

from __future__ import annotations

import logging
import math
import random
from typing import Final, cast

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import (
    CancelController,
    CancelSignal,
    CancelSignalStatistics,
    DeadlineReached,
    ToolRunContext,
    linked_cancel_scope,
    run_tool_calls,
)
from support import registry_with, request, spec_tool

_IDLE: Final = CancelSignalStatistics(cancel_callbacks=0, deadline_listeners=0)

# --- controller and signal basics ----------------------------------------------------------


def test_a_fresh_signal_is_not_cancelled_and_has_no_reason() -> None:
    signal = CancelController().signal

    assert (signal.cancelled, signal.reason, signal.deadline) == (False, None, math.inf)


def test_cancelling_gives_the_signal_its_reason() -> None:
    controller = CancelController()

    controller.cancel("user pressed Esc")

    assert (controller.signal.cancelled, controller.signal.reason) == (True, "user pressed Esc")


def test_cancelling_without_a_reason_leaves_the_reason_none() -> None:
    controller = CancelController()

    controller.cancel()

    assert (controller.signal.cancelled, controller.signal.reason) == (True, None)


def test_the_first_reason_sticks() -> None:
    controller = CancelController()

    controller.cancel("first")
    controller.cancel("second")

    assert controller.signal.reason == "first"


def test_a_signal_has_no_public_constructor() -> None:
    with pytest.raises(TypeError, match="no public constructor"):
        CancelSignal()


_READ_ONLY: Final = {
    "any",
    "cancelled",
    "deadline",
    "never",
    "on_cancel",
    "reason",
    "statistics",
    "wait",
}


def test_a_signal_shows_only_read_operations() -> None:
    public = {name for name in dir(CancelController().signal) if not name.startswith("_")}

    assert _READ_ONLY == public


def test_never_cannot_be_fired_or_given_a_deadline_through_the_signal() -> None:
    never = CancelSignal.never()

    for name in ("fire", "set_deadline", "cancel", "add_callback", "on_deadline_change"):
        assert not hasattr(never, name)
    with pytest.raises(AttributeError, match="read-only"):
        setattr(never, "_state", None)  # noqa: B010 (a plain assignment would not type-check)
    assert (never.cancelled, never.deadline) == (False, math.inf)


async def test_a_tool_body_cannot_cancel_its_siblings_through_its_signal() -> None:

    async def meddle(_args: object, context: ToolRunContext) -> str:
        signal = context.signal
        for name in ("fire", "set_deadline", "cancel"):
            operation = getattr(signal, name, None)
            if operation is not None:
                operation(0)
        await trio.lowlevel.checkpoint()
        return "meddled"

    controller = CancelController()
    registry = registry_with(
        spec_tool("meddle", meddle, parallel=True), spec_tool("ok", parallel=True)
    )

    batch = await run_tool_calls(
        registry, [request("c1", "meddle"), request("c2", "ok")], signal=controller.signal
    )

    assert [False, False] == [result.is_error for result in batch.results]
    assert not controller.signal.cancelled
    assert not CancelSignal.never().cancelled


@pytest.mark.parametrize("deadline", ["soon", math.nan, True])
def test_a_deadline_that_is_not_a_number_is_rejected(deadline: object) -> None:
    with pytest.raises(TypeError, match="deadline must be a number"):
        CancelController(deadline=deadline)  # type: ignore[arg-type]


def test_a_controller_s_repr_shows_its_signal_s_state() -> None:
    controller = CancelController(deadline=5)
    before = repr(controller)
    controller.cancel("r")

    assert (before, repr(controller)) == (
        "<CancelController <CancelSignal active deadline=5.0>>",
        "<CancelController <CancelSignal cancelled reason='r' deadline=5.0>>",
    )


# --- on_cancel -----------------------------------------------------------------------------


def test_on_cancel_runs_once_with_the_reason() -> None:
    controller = CancelController()
    seen: list[object] = []
    controller.signal.on_cancel(seen.append)

    controller.cancel("r")
    controller.cancel("again")

    assert seen == ["r"]


def test_on_cancel_runs_immediately_when_already_cancelled() -> None:
    controller = CancelController()
    controller.cancel("early")
    seen: list[object] = []

    controller.signal.on_cancel(seen.append)

    assert seen == ["early"]


def test_on_cancel_callbacks_run_in_registration_order() -> None:
    controller = CancelController()
    seen: list[str] = []
    controller.signal.on_cancel(lambda _: seen.append("a"))
    controller.signal.on_cancel(lambda _: seen.append("b"))

    controller.cancel()

    assert seen == ["a", "b"]


def test_disposing_an_on_cancel_registration_unregisters_it() -> None:
    controller = CancelController()
    seen: list[object] = []
    dispose = controller.signal.on_cancel(seen.append)

    dispose()
    controller.cancel("r")

    assert seen == []


def test_a_failing_callback_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    controller = CancelController()
    seen: list[object] = []

    def fail(_reason: object) -> None:
        raise RuntimeError("callback broke")

    controller.signal.on_cancel(fail)
    controller.signal.on_cancel(seen.append)

    with caplog.at_level(logging.ERROR, logger="dsh_tools"):
        controller.cancel("r")

    assert (seen, [r.message for r in caplog.records]) == (
        ["r"],
        ["CancelSignal callback failed"],
    )


# --- never ---------------------------------------------------------------------------------


def test_never_is_one_shared_signal_that_is_not_cancelled() -> None:
    never = CancelSignal.never()

    assert (never is CancelSignal.never(), never.cancelled, never.deadline) == (
        True,
        False,
        math.inf,
    )


def test_on_cancel_of_never_keeps_no_callback() -> None:
    never = CancelSignal.never()

    never.on_cancel(lambda _reason: None)

    assert _IDLE == never.statistics()


# --- statistics ----------------------------------------------------------------------------


def test_a_fresh_signal_holds_no_callbacks() -> None:
    assert _IDLE == CancelController().signal.statistics()


def test_statistics_count_on_cancel_registrations_until_disposed() -> None:
    signal = CancelController().signal
    first = signal.on_cancel(lambda _reason: None)
    signal.on_cancel(lambda _reason: None)
    registered = signal.statistics()

    first()

    assert (2, 1) == (registered.cancel_callbacks, signal.statistics().cancel_callbacks)


def test_a_fused_signal_holds_one_callback_and_one_deadline_watcher_per_source() -> None:
    a, b = CancelController(), CancelController()

    CancelSignal.any(a.signal, b.signal)

    expected = CancelSignalStatistics(cancel_callbacks=1, deadline_listeners=1)
    assert (expected, expected) == (a.signal.statistics(), b.signal.statistics())


async def test_a_linked_scope_holds_a_callback_and_a_deadline_watcher_while_open() -> None:
    signal = CancelController().signal

    with linked_cancel_scope(signal):
        inside = signal.statistics()

    assert CancelSignalStatistics(cancel_callbacks=1, deadline_listeners=1) == inside


def test_a_signal_that_fired_holds_no_callbacks() -> None:
    controller = CancelController()
    controller.signal.on_cancel(lambda _reason: None)
    CancelSignal.any(controller.signal)

    controller.cancel()

    assert _IDLE == controller.signal.statistics()


def test_statistics_are_a_frozen_snapshot() -> None:
    signal = CancelController().signal
    snapshot = signal.statistics()

    signal.on_cancel(lambda _reason: None)

    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        snapshot.cancel_callbacks = 5  # type: ignore[misc]
    assert _IDLE == snapshot


# --- fusion --------------------------------------------------------------------------------


def test_a_fused_signal_is_a_fresh_signal() -> None:
    a, b = CancelController(), CancelController()

    fused = CancelSignal.any(a.signal, b.signal)

    assert fused is not a.signal
    assert fused is not b.signal


def test_a_fused_signal_fires_with_the_reason_of_the_first_source_to_fire() -> None:
    a, b = CancelController(), CancelController()
    fused = CancelSignal.any(a.signal, b.signal)

    b.cancel("b first")
    a.cancel("a second")

    assert (fused.cancelled, fused.reason) == (True, "b first")


def test_fusing_already_cancelled_signals_takes_the_first_in_argument_order() -> None:
    a, b, c = CancelController(), CancelController(), CancelController()
    c.cancel("c")
    b.cancel("b")

    assert CancelSignal.any(a.signal, b.signal, c.signal).reason == "b"


def test_cancelling_a_fused_signal_s_source_does_not_cancel_the_other_sources() -> None:
    a, b = CancelController(), CancelController()
    CancelSignal.any(a.signal, b.signal)

    a.cancel()

    assert b.signal.cancelled is False


def test_a_fused_signal_detaches_from_its_sources_once_it_fires() -> None:
    a, b = CancelController(), CancelController()
    CancelSignal.any(a.signal, b.signal)

    a.cancel()

    assert _IDLE == b.signal.statistics()


def test_fusing_nothing_gives_a_signal_that_never_fires() -> None:
    fused = CancelSignal.any()

    assert (fused.cancelled, fused.deadline) == (False, math.inf)


def test_fusing_with_never_ignores_it() -> None:
    a = CancelController()
    fused = CancelSignal.any(CancelSignal.never(), a.signal)

    a.cancel("a")

    assert ("a", _IDLE) == (fused.reason, CancelSignal.never().statistics())


def test_a_fused_signal_keeps_the_earliest_deadline() -> None:
    a, b = CancelController(deadline=30), CancelController(deadline=20)

    assert CancelSignal.any(a.signal, b.signal).deadline == 20


def test_a_fused_signal_follows_a_later_deadline_change_of_a_source() -> None:
    a, b = CancelController(deadline=30), CancelController()
    fused = CancelSignal.any(a.signal, b.signal)

    b.set_deadline(10)
    earlier = fused.deadline
    b.set_deadline(None)

    assert (earlier, fused.deadline) == (10, 30)


async def test_fusing_a_cancelled_source_keeps_its_reason_even_past_its_old_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    a = CancelController(deadline=trio.current_time() + 1)
    a.cancel("explicit")
    await trio.sleep(5)

    assert CancelSignal.any(a.signal).reason == "explicit"


# --- deadlines (virtual time) --------------------------------------------------------------


async def test_a_signal_is_not_cancelled_just_before_its_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    deadline = trio.current_time() + 5
    signal = CancelController(deadline=deadline).signal

    await trio.sleep_until(deadline - 0.001)

    assert signal.cancelled is False


async def test_a_signal_is_cancelled_exactly_at_its_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    deadline = trio.current_time() + 5
    signal = CancelController(deadline=deadline).signal

    await trio.sleep_until(deadline)

    assert (signal.cancelled, signal.reason) == (True, DeadlineReached(deadline=deadline))


async def test_on_cancel_runs_when_a_passed_deadline_is_observed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    deadline = trio.current_time() + 1
    signal = CancelController(deadline=deadline).signal
    seen: list[object] = []
    signal.on_cancel(seen.append)
    await trio.sleep(2)

    signal.cancelled  # noqa: B018 - observing the clock fires the signal

    assert seen == [DeadlineReached(deadline=deadline)]


async def test_a_deadline_that_passed_before_an_explicit_cancel_keeps_its_reason(
    autojump_clock: trio.testing.MockClock,
) -> None:
    deadline = trio.current_time() + 1
    controller = CancelController(deadline=deadline)
    await trio.sleep(2)

    controller.cancel("too late")

    assert controller.signal.reason == DeadlineReached(deadline=deadline)


async def test_an_explicit_cancel_before_the_deadline_keeps_its_reason(
    autojump_clock: trio.testing.MockClock,
) -> None:
    controller = CancelController(deadline=trio.current_time() + 1)
    controller.cancel("first")
    await trio.sleep(2)

    assert controller.signal.reason == "first"


async def test_moving_a_passed_deadline_later_does_not_uncancel_the_signal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    deadline = trio.current_time() + 1
    controller = CancelController(deadline=deadline)
    await trio.sleep(2)

    controller.set_deadline(trio.current_time() + 10)

    assert (controller.signal.reason, controller.signal.deadline) == (
        DeadlineReached(deadline=deadline),
        deadline,
    )


async def test_setting_a_deadline_in_the_past_cancels_now(
    autojump_clock: trio.testing.MockClock,
) -> None:
    controller = CancelController()
    seen: list[object] = []
    controller.signal.on_cancel(seen.append)
    past = trio.current_time() - 1

    controller.set_deadline(past)

    assert seen == [DeadlineReached(deadline=past)]


async def test_removing_the_deadline_keeps_the_signal_alive(
    autojump_clock: trio.testing.MockClock,
) -> None:
    controller = CancelController(deadline=trio.current_time() + 1)

    controller.set_deadline(None)
    await trio.sleep(5)

    assert (controller.signal.cancelled, controller.signal.deadline) == (False, math.inf)


def test_a_deadline_change_after_cancelling_is_ignored() -> None:
    controller = CancelController(deadline=50)
    controller.cancel()

    controller.set_deadline(10)

    assert controller.signal.deadline == 50


async def test_a_fused_signal_reports_the_earliest_passed_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    now = trio.current_time()
    a = CancelController(deadline=now + 3)
    b = CancelController(deadline=now + 2)
    fused = CancelSignal.any(a.signal, b.signal)
    await trio.sleep(4)

    a.signal.cancelled  # noqa: B018 - a fires first, although b's deadline passed earlier

    assert fused.reason == DeadlineReached(deadline=now + 2)


# --- wait() --------------------------------------------------------------------------------


async def test_wait_is_a_checkpoint_even_when_already_cancelled() -> None:
    controller = CancelController()
    controller.cancel()

    with trio.CancelScope() as scope:
        scope.cancel()
        await controller.signal.wait()

    assert scope.cancelled_caught


async def test_wait_returns_when_the_signal_is_cancelled() -> None:
    controller = CancelController()
    woke: list[object] = []

    async def waiter() -> None:
        await controller.signal.wait()
        woke.append(controller.signal.reason)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        still_waiting = woke == []
        controller.cancel("go")

    assert (still_waiting, woke) == (True, ["go"])


async def test_wait_returns_exactly_at_the_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    deadline = trio.current_time() + 7
    signal = CancelController(deadline=deadline).signal

    await signal.wait()

    assert (trio.current_time(), signal.reason) == (deadline, DeadlineReached(deadline=deadline))


async def test_wait_follows_a_deadline_moved_earlier_while_waiting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    start = trio.current_time()
    controller = CancelController(deadline=start + 100)

    async def move() -> None:
        await trio.sleep(1)
        controller.set_deadline(start + 3)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(move)
        await controller.signal.wait()

    assert trio.current_time() == start + 3


async def test_wait_on_a_fused_signal_returns_at_a_source_s_new_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    start = trio.current_time()
    a = CancelController()
    fused = CancelSignal.any(a.signal, CancelController().signal)

    async def move() -> None:
        await trio.sleep(1)
        a.set_deadline(start + 4)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(move)
        await fused.wait()

    assert (trio.current_time(), fused.reason) == (start + 4, DeadlineReached(deadline=start + 4))


# --- linked_cancel_scope -------------------------------------------------------------------


async def test_a_linked_scope_cancels_trio_code_when_the_signal_fires() -> None:
    controller = CancelController()
    reached_end = False

    async def cancel_soon() -> None:
        await trio.testing.wait_all_tasks_blocked()
        controller.cancel("stop")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel_soon)
        with linked_cancel_scope(controller.signal) as scope:
            await trio.sleep_forever()
            reached_end = True

    assert (scope.cancelled_caught, reached_end) == (True, False)


async def test_a_linked_scope_cancels_at_the_next_checkpoint_not_before() -> None:
    controller = CancelController()
    steps: list[str] = []

    with linked_cancel_scope(controller.signal) as scope:
        controller.cancel()
        steps.append("synchronous code still runs")
        await trio.lowlevel.checkpoint()
        steps.append("after the checkpoint")

    assert (steps, scope.cancelled_caught) == (["synchronous code still runs"], True)


async def test_a_linked_scope_of_a_cancelled_signal_cancels_at_the_first_checkpoint() -> None:
    controller = CancelController()
    controller.cancel()

    with linked_cancel_scope(controller.signal) as scope:
        await trio.lowlevel.checkpoint()

    assert scope.cancelled_caught


async def test_a_linked_scope_cancels_exactly_at_the_signal_s_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    deadline = trio.current_time() + 5

    with linked_cancel_scope(CancelController(deadline=deadline).signal):
        await trio.sleep_forever()

    assert trio.current_time() == deadline


async def test_a_linked_scope_follows_a_deadline_change(
    autojump_clock: trio.testing.MockClock,
) -> None:
    start = trio.current_time()
    controller = CancelController(deadline=start + 100)

    with linked_cancel_scope(controller.signal):
        await trio.sleep(1)
        controller.set_deadline(start + 3)
        await trio.sleep_forever()

    assert trio.current_time() == start + 3


async def test_a_linked_scope_on_a_fused_signal_follows_its_earliest_source(
    autojump_clock: trio.testing.MockClock,
) -> None:
    start = trio.current_time()
    a, b = CancelController(deadline=start + 9), CancelController()
    fused = CancelSignal.any(a.signal, b.signal)

    with linked_cancel_scope(fused):
        await trio.sleep(1)
        b.set_deadline(start + 2)
        await trio.sleep_forever()

    assert trio.current_time() == start + 2


async def test_a_linked_scope_unlinks_on_exit() -> None:
    controller = CancelController()

    with linked_cancel_scope(controller.signal) as scope:
        await trio.lowlevel.checkpoint()
    controller.cancel()

    assert (False, _IDLE) == (scope.cancel_called, controller.signal.statistics())


async def test_a_linked_scope_does_not_hide_an_outer_cancellation() -> None:
    controller = CancelController()

    with trio.CancelScope() as outer, linked_cancel_scope(controller.signal) as inner:
        outer.cancel()
        await trio.lowlevel.checkpoint()

    assert (outer.cancelled_caught, inner.cancelled_caught) == (True, False)


async def test_no_task_outlives_a_cancelled_linked_scope(
    autojump_clock: trio.testing.MockClock,
) -> None:
    baseline = trio.lowlevel.current_statistics().tasks_living
    controller = CancelController(deadline=trio.current_time() + 2)

    with linked_cancel_scope(controller.signal):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
            nursery.start_soon(controller.signal.wait)
            await trio.sleep_forever()

    assert trio.lowlevel.current_statistics().tasks_living == baseline


async def test_no_task_is_started_to_watch_a_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    baseline = trio.lowlevel.current_statistics().tasks_living
    controller = CancelController(deadline=trio.current_time() + 2)

    with linked_cancel_scope(CancelSignal.any(controller.signal)):
        during = trio.lowlevel.current_statistics().tasks_living
        await trio.sleep_forever()

    assert during == baseline


# --- a model of fusion and deadlines, checked on random operation sequences ----------------

_ACTIVE = object()


@attrs.define
class _Model:
    """What every signal should say, recomputed eagerly after each operation."""

    sources: tuple[int, ...] | None  # None: a controller's own signal
    deadline: float
    reason: object = _ACTIVE


# small ranges on purpose: indices collide, and one sleep often passes several deadlines
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("cancel"), st.integers(0, 3), st.integers(0, 3)),
        st.tuples(st.just("deadline"), st.integers(0, 3), st.none() | st.integers(-1, 6)),
        st.tuples(st.just("sleep"), st.integers(0, 8), st.randoms(use_true_random=False)),
        st.tuples(st.just("fuse"), st.lists(st.integers(0, 5), min_size=1, max_size=3)),
        st.tuples(st.just("controller"), st.none() | st.integers(1, 6)),
    ),
    min_size=4,
    max_size=30,
)


def _check(ops: list[tuple[object, ...]]) -> None:
    clock = trio.testing.MockClock()

    async def main() -> None:
        start = trio.current_time()
        controllers: list[CancelController] = [CancelController(), CancelController()]
        signals: list[CancelSignal] = [c.signal for c in controllers]
        owner: list[int | None] = [0, 1]  # controller index of each signal, if any
        model = [_Model(None, math.inf), _Model(None, math.inf)]

        def now() -> float:
            return trio.current_time() - start

        def refresh_deadlines() -> None:
            for m in model:
                if m.sources is not None and m.reason is _ACTIVE:
                    m.deadline = min(model[s].deadline for s in m.sources)

        def fire_descendants(index: int, reason: object) -> None:
            for position, m in enumerate(model):
                if m.sources is not None and m.reason is _ACTIVE and index in m.sources:
                    m.reason = reason
                    fire_descendants(position, reason)

        def observe_deadlines() -> None:
            for m in model:
                if m.reason is _ACTIVE and m.deadline <= now():
                    m.reason = DeadlineReached(deadline=start + m.deadline)

        for op in ops:
            kind = op[0]
            if kind == "cancel":
                ctl = cast(int, op[1]) % len(controllers)
                reason = f"r{op[2]}"
                index = owner.index(ctl)
                controllers[ctl].cancel(reason)
                if model[index].reason is _ACTIVE:
                    model[index].reason = reason
                    fire_descendants(index, reason)
            elif kind == "deadline":
                ctl = cast(int, op[1]) % len(controllers)
                offset = cast("int | None", op[2])
                index = owner.index(ctl)
                when = None if offset is None else now() + offset
                controllers[ctl].set_deadline(None if when is None else start + when)
                if model[index].reason is _ACTIVE:
                    model[index].deadline = math.inf if when is None else when
                    refresh_deadlines()
                    observe_deadlines()
            elif kind == "sleep":
                clock.jump(cast(int, op[1]))
                observe_deadlines()
                # whoever looks first must not change any signal's reason
                for signal in cast(random.Random, op[2]).sample(signals, len(signals)):
                    signal.cancelled  # noqa: B018
            elif kind == "fuse":
                chosen = tuple(p % len(signals) for p in cast("list[int]", op[1]))
                signals.append(CancelSignal.any(*(signals[c] for c in chosen)))
                owner.append(None)
                fused = _Model(chosen, min(model[c].deadline for c in chosen))
                for c in chosen:
                    if model[c].reason is not _ACTIVE:
                        fused.reason = model[c].reason
                        break
                model.append(fused)
            else:
                assert kind == "controller", op
                offset = cast("int | None", op[1])
                deadline = None if offset is None else now() + offset
                controller = CancelController(
                    deadline=None if deadline is None else start + deadline
                )
                controllers.append(controller)
                signals.append(controller.signal)
                owner.append(len(controllers) - 1)
                model.append(_Model(None, math.inf if deadline is None else deadline))

            actual = [(s.cancelled, s.reason) for s in signals]
            expected = [
                (m.reason is not _ACTIVE, None if m.reason is _ACTIVE else m.reason) for m in model
            ]
            assert expected == actual, op
            assert [m.deadline for m in model] == [s.deadline - start for s in signals], op

    trio.run(main, clock=clock)


@settings(max_examples=100, deadline=None)
@given(_ops)
def test_signals_agree_with_a_model_of_fusion_and_deadlines(
    ops: list[tuple[object, ...]],
) -> None:
    _check(ops)


@settings(max_examples=100, deadline=None)
@given(
    deadlines=st.lists(st.integers(1, 20), min_size=1, max_size=5),
    elapsed=st.integers(0, 25),
    rng=st.randoms(use_true_random=False),
)
def test_a_fused_signal_reports_its_earliest_passed_deadline_whoever_looks_first(
    deadlines: list[int], elapsed: int, rng: random.Random
) -> None:
    async def main() -> None:
        controllers = [CancelController(deadline=d) for d in deadlines]
        fused = CancelSignal.any(*(c.signal for c in controllers))
        await trio.sleep(elapsed)
        everyone = [fused, *(c.signal for c in controllers)]
        for signal in rng.sample(everyone, len(everyone)):
            signal.cancelled  # noqa: B018 - observe in a random order

        expected = DeadlineReached(deadline=min(deadlines)) if min(deadlines) <= elapsed else None
        assert expected == fused.reason

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_the_model_check_runs_a_known_sequence() -> None:
    ops: list[tuple[object, ...]] = [
        ("controller", 5),
        ("fuse", [0, 2]),
        ("sleep", 3, random.Random(0)),
        ("deadline", 1, 1),
        ("fuse", [3, 1]),
        ("sleep", 2, random.Random(0)),
        ("cancel", 0, 1),
    ]

    _check(ops)
