"""The public namespace: ``dsh_tools.__all__`` is exactly the public names, and they say so."""

from __future__ import annotations

import inspect
import pickle
import types

import dsh_tools


def _public_attributes() -> set[str]:
    return {
        name
        for name, value in vars(dsh_tools).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }


def _exported_classes_and_functions() -> dict[str, object]:
    exported = {name: getattr(dsh_tools, name) for name in dsh_tools.__all__}
    return {
        name: value
        for name, value in exported.items()
        if isinstance(value, type) or inspect.isfunction(value)
    }


def test_all_is_sorted() -> None:
    assert sorted(dsh_tools.__all__) == list(dsh_tools.__all__)


def test_all_has_no_duplicates() -> None:
    assert len(set(dsh_tools.__all__)) == len(dsh_tools.__all__)


def test_all_equals_the_public_attributes_of_the_package() -> None:
    assert _public_attributes() == set(dsh_tools.__all__)


def test_every_exported_class_and_function_reports_the_package_as_its_module() -> None:
    elsewhere = {
        name: getattr(value, "__module__", None)
        for name, value in _exported_classes_and_functions().items()
        if getattr(value, "__module__", None) != "dsh_tools"
    }

    assert elsewhere == {}


def test_exported_classes_keep_their_own_qualname() -> None:
    mismatched = {
        name: getattr(value, "__qualname__", None)
        for name, value in _exported_classes_and_functions().items()
        if getattr(value, "__qualname__", None) != name
    }

    assert mismatched == {}


def test_a_public_value_pickles_through_its_public_module_path() -> None:
    block = dsh_tools.ToolResultBlock(
        tool_call_id="call-1", content=[dsh_tools.TextBlock(text="done")], is_error=True
    )

    assert block == pickle.loads(pickle.dumps(block))


def test_the_public_names_of_the_core_are_exported() -> None:
    core = {
        "CancelController",
        "CancelSignal",
        "ContentBlock",
        "Disposer",
        "FrozenJsonObject",
        "HarnessError",
        "HookContext",
        "OutputSchemaError",
        "PluginSource",
        "ReasoningBlock",
        "TOOL_ABORTED",
        "TOOL_ABORTED_BEFORE_DISPATCH",
        "TOOL_INTERRUPTED",
        "TOOL_TIMEOUT",
        "TextBlock",
        "ToolArgsError",
        "ToolCallBlock",
        "ToolErrorInfo",
        "ToolNotFoundError",
        "ToolResultBlock",
        "UserSource",
        "converter",
        "error_message",
        "register_content_block",
        "snapshot_json",
    }

    assert set() == core - set(dsh_tools.__all__)


def test_the_durable_batch_names_are_exported() -> None:
    durable = {
        "BatchEndEvent",
        "BatchStartEvent",
        "TOOL_INTERRUPTED",
        "recover_session",
        "resume_tool_calls",
    }

    assert set() == durable - set(dsh_tools.__all__)


def test_the_presenter_and_user_approval_names_are_exported() -> None:
    seed_completion = {
        "ApprovalAskedEvent",
        "ApprovalDecidedEvent",
        "ApprovalPolicyEvent",
        "ToolPresenter",
        "TurnEndEvent",
        "TurnStartEvent",
        "UserApproval",
        "console_answerer",
        "console_block",
        "parse_call_arguments",
        "session_turn",
        "tool_result_from_event",
    }

    assert set() == seed_completion - set(dsh_tools.__all__)


def test_the_session_log_names_are_exported() -> None:
    session = {"SessionLogLockedError", "read_session_log", "session_event_from_json"}

    assert set() == session - set(dsh_tools.__all__)


def test_the_batch_bracket_events_are_exported() -> None:
    assert set() == {"BatchEndEvent", "BatchStartEvent"} - set(dsh_tools.__all__)
