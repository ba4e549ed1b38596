"""Every private module's ``__all__`` is re-exported from ``dsh_tools`` or deliberately internal.

Modelled on trio's ``test_exports``: a name a private module exports either belongs to the
public namespace (re-exported flat, from exactly one private module) or is listed below as
internal with the reason it is shared between modules only.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import tomllib
import types
from pathlib import Path
from typing import Final

import dsh_tools

# the one internal module the integration subpackages import besides dsh_tools itself
SEAM: Final = "_for_integrations"

# (module, name) pairs that private modules share among themselves but never publish.
INTERNAL: Final = frozenset(
    {
        # the converter's hook for the package's own wire classes (the public face is
        # register_content_block)
        ("_values._converter", "register_wire_class"),
        # the annotation fix-up dsh_tools runs before renaming its classes' __module__
        ("_values._converter", "resolve_types"),
        # whether a class's structure hook is cattrs' own (define_tool then calls the class)
        ("_values._converter", "cattrs_generated"),
        # what a body's context reads from its call
        ("_values._execution", "ContextFields"),
        # pictures, sound and files: the pipeline's size cap and its note, the check stage 9
        # repeats, and what the presenters and adapters describe (a block's bytes, its header's
        # dimensions, its size for people)
        ("_values._media", "DEFAULT_MAX_BINARY_BYTES"),
        ("_values._media", "MediaBlock"),
        ("_values._media", "block_payload"),
        ("_values._media", "describe_media"),
        ("_values._media", "format_size"),
        ("_values._media", "image_dimensions"),
        ("_values._media", "media_problem"),
        ("_values._media", "oversized_note"),
        ("_pipeline._results", "cap_binary"),
        ("_pipeline._results", "media_inside"),
        # the registry's listener storage; users reach it through HookPoint
        ("_pipeline._hooks", "HookList"),
        ("_pipeline._hooks", "HookLists"),
        # the one builder of hook chains (pre/post_execute, execute wrappers, approval answerers)
        ("_pipeline._hooks", "waterfall"),
        # the one rule of a duration and of a count, and how a refused value is shown
        ("_values._checks", "check_seconds"),
        ("_values._checks", "check_int"),
        ("_values._checks", "shown_value"),
        # the rule of a character budget (a tool's and the output budget's)
        ("_values._definition", "check_char_budget"),
        # the options define_tool wraps, and the refusal of a keyword that is no option
        ("_values._definition", "READS_ARGUMENTS"),
        ("_values._definition", "check_option_names"),
        # what @tool(...) and @registry.tool(...) return
        ("_pipeline._tool", "tool_decorator"),
        # what a ToolScope and an ApprovalScope share
        ("_values._disposer", "AgentScope"),
        ("_values._execution", "ProgressReceiver"),
        ("_values._execution", "check_progress_amount"),
        ("_pipeline._progress", "ProgressSink"),
        ("_pipeline._progress", "ProgressState"),
        ("_pipeline._progress", "TimeoutSettings"),
        ("_scheduling._active", "current_turn"),
        ("_pipeline._results", "idle_timeout_result"),
        ("_texts", "output_omitted"),
        ("_texts", "output_spilled"),
        ("_texts", "call_budget_per_tool"),
        ("_texts", "call_budget_per_turn"),
        ("_texts", "call_budget_repeated"),
        ("_values._definition", "is_async_body"),
        # the classification rule, shared by execution_mode and the scheduler
        ("_values._definition", "runs_in_parallel"),
        # a define_tool body's validator, read by the pipeline to validate before any policy
        ("_values._definition", "argument_validator"),
        # the folds of a session log's grants and pending requests (approval, scheduler, resume)
        ("_sessions._grants", "agent_name"),
        ("_sessions._grants", "grants_in"),
        ("_sessions._grants", "pending_requests"),
        # a suspended call of a resumed batch, settled on its deferred decision
        ("_pipeline._open", "resume_suspended"),
        # the result a logged tool/result records (the Temporal runner reads batches back)
        ("_scheduling._resume", "logged_result"),
        # the testing kit's explorers see the batch a trio task runs
        ("_scheduling._observed", "ObservedBatch"),
        ("_scheduling._observed", "observed_batch"),
        # the one check of a session log's session id (SQLite, PostgreSQL, the Temporal runner)
        ("_sessions._log", "check_session_id"),
        # a database log's rows read back as events (SQLite, PostgreSQL)
        ("_sessions._wire", "events_from_rows"),
        # a FileDiff as unified-diff lines (the console answerer and replay show it)
        ("_values._presentation", "unified_diff_lines"),
        # a call's card with its fallback, for the presenter and approval requests
        ("_values._presentation", "call_view_of"),
        ("_values._presentation", "generic_call_view"),
        # the batch-setup check of approval wiring (run_tool_calls, resume_tool_calls), and
        # the ask_before policy it recognises
        ("_pipeline._approval_setup", "check_approval_setup"),
        ("_pipeline._ask_before", "AskBefore"),
        # the approval service asks its answerers through it
        ("_pipeline._answerers", "answer_chain"),
        # the placeholder of a call whose approval was deferred
        ("_pipeline._results", "approval_pending_result"),
        # define_tool's derivation of a spec from an attrs class
        ("_values._attrs_schema", "DerivedSchema"),
        ("_values._attrs_schema", "derive_attrs_schema"),
        ("_values._attrs_schema", "is_argument_class"),
        ("_values._attrs_schema", "typeddict_required_keys"),
        # the define_tool that @tool builds on
        ("_pipeline._define", "build_definition"),
        # the error an integration subpackage raises when its extra is missing
        ("_extras", "raise_missing_extra"),
        # the text for an exception whose str() raises
        ("_texts", "UNPRINTABLE"),
        # how the pipeline logs an exception: one line, the traceback at DEBUG
        ("_texts", "one_line"),
        ("_texts", "debug_traceback"),
        # the pipeline's model-facing texts, in the one module of texts
        ("_texts", "approval_cancelled"),
        ("_texts", "approval_needs_agent"),
        ("_texts", "approval_not_supported"),
        ("_texts", "approval_pending"),
        ("_texts", "approval_rejected"),
        ("_texts", "approval_unavailable"),
        ("_texts", "deny_reason_not_str"),
        ("_texts", "post_execute_returned"),
        ("_texts", "post_execute_unreadable"),
        ("_texts", "pre_execute_returned"),
        ("_texts", "sync_body_returned_awaitable"),
        # JavaScript's number printing for model-facing texts
        ("_texts", "format_js_json"),
        ("_texts", "format_js_number"),
        # the one way text from a model, a tool, a server or a log is made safe to print,
        # shared by the CLI views, the demo and the console answerer
        ("_values._printable", "printable"),
        # the JSON safe-integer bound the snapshot enforces (tests draw integers within it)
        ("_values._json", "MAX_SAFE_INTEGER"),
        # the validate-once memo: compile_spec records which validator accepted a frozen value
        ("_values._json", "CHECKED_BY"),
        ("_values._json", "mark_checked"),
        # the pipeline's constructors for a token and a fast success result
        ("_values._execution", "new_execution_token"),
        # what one batch writes to its session log (the scheduler's recorder)
        ("_sessions._batch_log", "BatchLog"),
        # what a scope uses to own the registrations made through it
        ("_values._disposer", "DisposerGroup"),
        # the one check of an approval policy, and of a turn, step or seq number
        ("_sessions._events", "BatchEndReason"),
        ("_sessions._events", "check_approval_policy"),
        # the one reading of an approval answer, shared by the approval service and the pipeline
        ("_values._execution", "read_approval_outcome"),
        ("_values._execution", "run_context"),
        ("_values._definition", "BodyPlan"),
        ("_values._definition", "register_checked_body"),
        # what the bodies of one batch share (their attempt and idempotency key)
        ("_values._execution", "RunBatch"),
        ("_values._content", "text_block"),
        ("_values._execution", "success_result"),
        ("_values._execution", "text_success"),
        ("_values._json", "flat_object"),
        ("_pipeline._call", "ALLOWED"),
        ("_pipeline._call", "HasExecution"),
        ("_pipeline._call", "PENDING"),
        ("_pipeline._call", "REPLAYED"),
        ("_pipeline._call", "SUSPENDED"),
        # the stages of one call, driven by the registry and the scheduler
        ("_pipeline._call", "CallEnv"),
        ("_pipeline._call", "CallRequest"),
        ("_pipeline._call", "PipelineHost"),
        ("_pipeline._call", "PreparedCall"),
        ("_pipeline._call", "BODY_ABANDONED"),
        ("_pipeline._call", "BODY_NOT_RUN"),
        ("_pipeline._call", "BODY_RAN"),
        ("_pipeline._call", "DISPATCHED"),
        ("_pipeline._call", "FINAL"),
        ("_pipeline._call", "InvalidArguments"),
        ("_pipeline._call", "MISSING"),
        ("_pipeline._call", "OPENED"),
        ("_pipeline._call", "log_invalid"),
        ("_pipeline._call", "log_raised"),
        ("_pipeline._call", "logger"),
        ("_pipeline._call", "violations"),
        # the stage modules: 0-6 (the opening), 7 (dispatch), the timeout rule, 8-10
        ("_pipeline._open", "apply_policies"),
        ("_pipeline._open", "open_call"),
        ("_pipeline._open", "prepare"),
        ("_pipeline._execute", "dispatch"),
        ("_pipeline._execute", "invoke"),
        ("_pipeline._timeouts", "Invoke"),
        ("_pipeline._timeouts", "run_timed"),
        ("_pipeline._timeouts", "timeouts_for"),
        ("_pipeline._complete", "complete"),
        ("_pipeline._complete", "complete_now"),
        # the canonical results and the final check (stage 9), shared by the pipeline, the
        # scheduler and the timeout policy
        ("_pipeline._results", "ABANDONED"),
        ("_pipeline._results", "ABORTED"),
        ("_pipeline._results", "ABORTED_BEFORE_DISPATCH"),
        ("_pipeline._results", "INVALID_ARGUMENTS"),
        ("_pipeline._results", "INTERRUPTED"),
        ("_pipeline._results", "INVALID_RESULT"),
        ("_pipeline._results", "TOOL_INTERRUPTED_ERROR_NAME"),
        ("_pipeline._results", "TOOL_TIMEOUT_ERROR_NAME"),
        ("_pipeline._results", "Invalid"),
        ("_pipeline._results", "describe"),
        ("_pipeline._results", "error_result"),
        ("_pipeline._results", "freeze_context"),
        ("_pipeline._results", "freeze_result"),
        ("_pipeline._results", "is_return_value"),
        ("_pipeline._results", "kind"),
        ("_pipeline._results", "normalize"),
        ("_pipeline._results", "printable"),
        ("_pipeline._results", "reason_text"),
        ("_pipeline._results", "text_error"),
        ("_pipeline._results", "timeout_result"),
        ("_pipeline._results", "valid_str"),
        # one signal for several: the pipeline (wrapper signals) and the timeout policy use it
        ("_values._signal", "fuse"),
        # the scheduling package's parts: the lane, its bracket, its checks (shared by
        # run_tool_calls, resume_tool_calls and the Temporal runner), capacity, bodies, the
        # active batch, and the lane of a batch finished from its log
        ("_scheduling._scheduler", "DEFAULT_MAX_PARALLEL_TOOL_CALLS"),
        ("_scheduling._resumed", "ResumedBatch"),
        ("_scheduling._lane", "Batch"),
        ("_scheduling._bracket", "run_batch"),
        ("_scheduling._capacity", "Capacity"),
        ("_scheduling._capacity", "capacity_of"),
        ("_values._limits", "check_capacity_limits"),
        # the registry's holds for keys, classes and rates, and the lane's use of them
        ("_values._limits", "check_rate_limits"),
        ("_values._limits", "check_conflict_keys"),
        ("_pipeline._gate", "Gate"),
        ("_pipeline._gate", "Ticket"),
        ("_pipeline._gate", "LOCAL_ONLY"),
        ("_pipeline._held", "held_dispatch"),
        ("_pipeline._held", "queue_claim"),
        ("_scheduling._bodies", "start_body"),
        ("_pipeline._held", "dispatch_holding"),
        ("_scheduling._entry", "check_approvals"),
        ("_scheduling._entry", "check_calls"),
        ("_scheduling._entry", "check_limits"),
        ("_scheduling._entry", "check_runner"),
        ("_scheduling._entry", "check_session"),
        ("_scheduling._entry", "check_signal"),
        ("_scheduling._entry", "check_trio"),
        # what conversation() takes: an adapter's tool_messages; a logged batch as results,
        # for conversation and the Temporal runner
        ("_scheduling._conversation", "ToolMessages"),
        ("_scheduling._conversation", "logged_batch"),
        ("_scheduling._bodies", "BODY_TASK"),
        ("_scheduling._bodies", "dispatch_reporting"),
        ("_scheduling._bodies", "linked_bodies"),
        ("_scheduling._bodies", "lone_as_itself"),
        ("_scheduling._active", "ACTIVE_BATCH"),
        ("_scheduling._active", "ActiveBatch"),
        ("_scheduling._stream", "READER_TASK"),
        ("_scheduling._stream", "read_calls"),
        # the scheduler's way to the pipeline host of the registry it was given
        ("_pipeline._registry", "pipeline_host"),
        # shared between the core's modules: the content and meta readers, the converter's
        # content classes and wire messages, the compiled spec validator, the error info of
        # an exception, the definition's field check, the session log's event encoding
        ("_values._content", "content_blocks"),
        ("_values._content", "unchecked_meta"),
        ("_values._converter", "content_block_classes"),
        ("_values._converter", "wire_error_messages"),
        ("_pipeline._results", "error_info"),
        ("_values._json", "json_kind"),
        ("_values._schema", "compile_spec"),
        ("_sessions._events", "check_event"),
        ("_sessions._wire", "encode_event_line"),
        ("_sessions._wire", "json_problem"),
        # the sessions package's parts: the one place stored text becomes events, the lifecycle
        # every stored log shares, the one check of a log
        ("_sessions._wire", "event_at"),
        ("_sessions._wire", "event_to_wire"),
        ("_sessions._wire", "parse_lines"),
        ("_sessions._log", "SessionLogBase"),
        ("_sessions._log", "SessionRowsLog"),
        ("_sessions._log", "MAX_SESSION_ID_BYTES"),
        ("_sessions._wire", "event_line"),
        ("_sessions._log", "check_session_log"),
        # approval bound to its arguments: the opening of an approved call (edited arguments
        # validated again, the digest the body is held to), the reading of an answer, the
        # digest a decision allows, and the texts of an edit and of a changed call
        ("_pipeline._open", "approved"),
        ("_values._execution", "read_approval"),
        ("_values._execution", "decided_digest"),
        ("_texts", "arguments_edited"),
        ("_texts", "approved_arguments_changed"),
        # a keyed log's chain: the check of a key, a chain from a log's start, and a stored
        # line made readable (verified, or its MAC taken off when there is no key)
        ("_sessions._log", "check_integrity_key"),
        # an append wakes the subscribers of its log (subscribe)
        ("_sessions._log", "notify_appended"),
        ("_sessions._log", "wait_appended"),
        ("_sessions._log", "fresh_chain"),
        ("_sessions._wire", "MacChain"),
        ("_sessions._wire", "readable_line"),
        # the one reader of a log, and what it says of one batch
        ("_sessions._reader", "BatchRecord"),
        ("_sessions._reader", "SessionReader"),
    }
)


def _private_modules() -> dict[str, types.ModuleType]:
    """Every private module of the core by its name under ``dsh_tools`` (``_values._json``): the
    private modules at the top and those of the private subpackages (``_values``, ``_sessions``,
    ...), whose ``__init__`` holds only a docstring."""
    found: dict[str, types.ModuleType] = {}
    for info in pkgutil.iter_modules(dsh_tools.__path__):
        if not info.name.startswith("_") or info.name.startswith("__"):
            continue
        module = importlib.import_module(f"dsh_tools.{info.name}")
        if not info.ispkg:
            found[info.name] = module
            continue
        assert not hasattr(module, "__all__"), f"{info.name} re-exports: the top package does"
        for inner in pkgutil.iter_modules(module.__path__):
            name = f"{info.name}.{inner.name}"
            found[name] = importlib.import_module(f"dsh_tools.{name}")
    return found


def _module_exports() -> set[tuple[str, str]]:
    return {
        (module_name, name)
        for module_name, module in _private_modules().items()
        for name in getattr(module, "__all__", ())
    }


def test_every_private_module_declares_all() -> None:
    assert [] == sorted(
        name for name, module in _private_modules().items() if not hasattr(module, "__all__")
    )


def test_every_name_a_private_module_exports_is_public_or_deliberately_internal() -> None:
    public = set(dsh_tools.__all__)

    undeclared = {
        (module, name)
        for module, name in _module_exports()
        if name not in public and module != SEAM
    }

    assert set() == undeclared - INTERNAL


def test_the_integrations_seam_only_passes_on_names_of_other_private_modules() -> None:
    # the seam holds no code of its own: each name is the very object a core module exports
    modules = _private_modules()
    seam = modules[SEAM]
    owners = {
        name: getattr(module, name)
        for module_name, module in modules.items()
        if module_name != SEAM
        for name in getattr(module, "__all__", ())
    }

    assert [] == [
        name
        for name in seam.__all__
        if name not in owners or owners[name] is not getattr(seam, name)
    ]


def test_every_public_name_comes_from_exactly_one_private_module() -> None:
    sources: dict[str, list[str]] = {}
    for module, name in _module_exports():
        if name in dsh_tools.__all__:
            sources.setdefault(name, []).append(module)

    assert dict.fromkeys(dsh_tools.__all__, 1) == {
        name: len(sources.get(name, [])) for name in dsh_tools.__all__
    }


def test_every_public_name_is_the_very_object_its_private_module_exports() -> None:
    modules = _private_modules()
    mismatched = [
        name
        for module, name in _module_exports()
        if name in dsh_tools.__all__
        and getattr(dsh_tools, name) is not getattr(modules[module], name)
    ]

    assert [] == mismatched


def test_the_internal_list_names_only_internal_exports() -> None:
    # a stale entry (renamed, removed or made public) would hide nothing and must go
    exports = _module_exports()

    assert set() == {
        entry for entry in INTERNAL if entry not in exports or entry[1] in dsh_tools.__all__
    }


def test_the_version_is_the_distribution_version_of_pyproject() -> None:
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"

    expected = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]

    assert expected == dsh_tools.__version__


def _relative_imports() -> list[tuple[str, str, str]]:
    """``(importing file, private module, name)`` for each ``from ._x import name`` (or
    ``from dsh_tools._x._y import name``) in src."""
    root = Path(dsh_tools.__file__).parent
    found: list[tuple[str, str, str]] = []
    for path in sorted(root.rglob("*.py")):
        package = path.relative_to(root.parent).with_suffix("").parts[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.module is None:
                continue
            if node.level == 0:
                if not node.module.startswith("dsh_tools."):
                    continue
                target = node.module
            else:
                base = package[: len(package) - node.level + 1]
                target = ".".join((*base, node.module))
            if target.rsplit(".", 1)[-1].startswith("_"):
                found.extend(
                    (path.name, target, alias.name) for alias in node.names if alias.name != "*"
                )
    return found


def test_a_private_module_imports_from_another_only_what_that_one_exports() -> None:
    imports = _relative_imports()
    outside = [
        (importer, target, name)
        for importer, target, name in imports
        if name not in getattr(importlib.import_module(target), "__all__", ())
    ]

    assert imports  # the walk found the package's imports
    assert [] == outside
