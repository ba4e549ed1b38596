"""Public constructors and functions refuse arguments of the wrong type with a ``TypeError``
naming the argument, instead of accepting them and failing later (per call, when a signal
fires) or with an ``AttributeError`` far from the cause."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_tools import (
    CancelController,
    CancelSignal,
    JsonlSessionLog,
    MemorySessionLog,
    ToolCallRequest,
    ToolPresenter,
    ToolRegistry,
    UserApproval,
    install_timeout_policy,
    linked_cancel_scope,
    run_tool_calls,
)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: ToolRegistry(approval="yes"),  # pyright: ignore[reportArgumentType]
            "approval must be an approval service (with a request method) or None, not str",
        ),
        (
            lambda: UserApproval(None),  # pyright: ignore[reportArgumentType]
            "session must be a SessionLog (with append and events), not NoneType",
        ),
        (
            lambda: UserApproval("log.jsonl"),  # pyright: ignore[reportArgumentType]
            "session must be a SessionLog (with append and events), not str",
        ),
        (
            lambda: ToolPresenter(None),  # pyright: ignore[reportArgumentType]
            "registry must be a ToolRegistry, not NoneType",
        ),
        (
            lambda: ToolPresenter(ToolRegistry(), on_error=5),  # pyright: ignore[reportArgumentType]
            "on_error must be callable or None, not int",
        ),
        (
            lambda: CancelController().signal.on_cancel(5),  # pyright: ignore[reportArgumentType]
            "callback must be callable, not int",
        ),
        (
            lambda: CancelSignal.never().on_cancel(None),  # pyright: ignore[reportArgumentType]
            "callback must be callable, not NoneType",
        ),
        (
            lambda: CancelSignal.any(CancelSignal.never(), CancelController()),  # pyright: ignore[reportArgumentType]
            "signals[1] must be a CancelSignal, not CancelController",
        ),
        (
            lambda: install_timeout_policy(None),  # pyright: ignore[reportArgumentType]
            "registry must be a ToolRegistry, not NoneType",
        ),
        (
            lambda: linked_cancel_scope(None),  # pyright: ignore[reportArgumentType]
            "signal must be a CancelSignal, not NoneType",
        ),
        (
            lambda: ToolPresenter(ToolRegistry()).present_call({"name": "x"}),  # pyright: ignore[reportArgumentType]
            "event must be a ToolCallEvent, not dict",
        ),
        (
            lambda: ToolPresenter(ToolRegistry()).present_result({"callId": "x"}),  # pyright: ignore[reportArgumentType]
            "event must be a ToolResultEvent, not dict",
        ),
    ],
)
def test_a_wrongly_typed_argument_is_refused_with_a_type_error_naming_it(
    build: Callable[[], object], message: str
) -> None:
    with pytest.raises(TypeError) as caught:
        build()

    assert message == str(caught.value)


def test_a_fired_signal_does_not_run_a_refused_callback() -> None:
    controller = CancelController()
    heard: list[object] = []
    controller.signal.on_cancel(heard.append)

    with pytest.raises(TypeError):
        controller.signal.on_cancel("not a callback")  # pyright: ignore[reportArgumentType]
    controller.cancel("stop")

    assert 1 == len(heard)


@pytest.mark.parametrize("fsync", ["yes", 1, None])
def test_a_jsonl_log_refuses_a_non_bool_fsync_without_creating_the_file(
    tmp_path: Path, fsync: object
) -> None:
    path = tmp_path / "log.jsonl"

    with pytest.raises(TypeError) as caught:
        JsonlSessionLog(path, fsync=fsync)  # pyright: ignore[reportArgumentType]

    assert f"fsync must be a bool, not {fsync!r}" == str(caught.value)
    assert not path.exists()


def test_the_well_typed_forms_are_still_accepted(tmp_path: Path) -> None:
    log = MemorySessionLog()
    approval = UserApproval(log)
    registry = ToolRegistry(approval=approval)
    presenter = ToolPresenter(registry, on_error=lambda exc, call_id: None)
    fused = CancelSignal.any(CancelSignal.never(), CancelController().signal)

    with JsonlSessionLog(tmp_path / "log.jsonl", fsync=True) as jsonl:
        assert [] == jsonl.events()
    assert approval is registry.approval
    assert () == presenter.pending_call_ids
    assert not fused.cancelled


_CALL = [ToolCallRequest(call_id="c", name="x", arguments="{}")]


@pytest.mark.parametrize(
    ("registry", "kwargs", "message"),
    [
        (None, {}, "registry must be a ToolRegistry, not NoneType"),
        (
            ToolRegistry(),
            {"session": "log.jsonl"},
            "session must be a SessionLog (with append and events) or None, not str",
        ),
    ],
)
async def test_run_tool_calls_refuses_a_wrong_registry_or_session(
    registry: object, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(TypeError) as caught:
        await run_tool_calls(
            registry,  # pyright: ignore[reportArgumentType]
            _CALL,
            signal=CancelSignal.never(),
            **kwargs,  # pyright: ignore[reportArgumentType]
        )

    assert message == str(caught.value)


async def test_run_tool_calls_refuses_no_registry_even_for_an_empty_batch() -> None:
    with pytest.raises(TypeError) as caught:
        await run_tool_calls(None, [], signal=CancelSignal.never())  # pyright: ignore[reportArgumentType]

    assert "registry must be a ToolRegistry, not NoneType" == str(caught.value)
