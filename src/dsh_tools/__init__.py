"""dsh-tools: the trio-native tool-execution layer of an LLM agent loop.

The public namespace only re-exports names from private modules; see the docs for the API.
"""

# Layer map, top to bottom (imports point down only; modules on one line do not import each
# other). pyproject.toml's import-linter contracts check it, TYPE_CHECKING imports included.
#
#   CLI          __main__
#   deprecated   demo (an alias of cli.demo)
#   ACP          acp (its dsh-tools acp agent runs the demo's tools, cli.demo_tools)
#   command line cli (the demo and the views; its worker command runs temporal)
#   integrations mcp otel providers testing temporal (subpackages, most behind optional
#                extras; never imported from the core)
#   session logs postgres (the PostgreSQL session log temporal's workers write)
#   seam         _for_integrations (the internal names integrations may import; nothing else
#                private is theirs to import)
#   _policies    what a loop installs on a registry: _call_budget, then _timeout _retry
#                _output_budget _timeline (execute wrappers) _presenter (views for events)
#                _console_answerer (the terminal prompt of an approval)
#   _scheduling  _resume (resume_tool_calls, recover_session), then _scheduler (run_tool_calls)
#                _resumed, then _bracket (the log bracket) _entry (argument checks), then _lane
#                (which call starts now) _active (inject_context), then _bodies _capacity
#   _pipeline    one call: _registry _approval_setup (the batch's approval check), then _tool
#                (@tool) _approval (UserApproval) _ask_before, then the stages _open (0-6)
#                _execute (7) _complete (8-10) and _define (define_tool) _answerers (the
#                answerer chain), then _timeouts, then _call (PreparedCall, a call's state;
#                gets a PipelineHost, never the registry), then _results _hooks _progress
#   _sessions    the events and their logs: the stores _jsonl _sqlite _memory, _batch_log,
#                _turn (session_turn) and _reader (the one reader of a log), then _log (the protocol, the base) _grants,
#                then _wire, then _events
#   _values      frozen values: _batch, _converter, _definition, _execution ..., _json
#   _errors      every exception, in one tree
#   _texts       result codes, error_message, JavaScript's number and JSON text; _extras (the
#                error an integration subpackage raises when its extra is missing)

__version__ = "0.1.0"  # the distribution version; tests/test_exports.py keeps it equal

from ._errors import ApprovalSetupWarning as ApprovalSetupWarning
from ._errors import HarnessError as HarnessError
from ._errors import JsonSnapshotError as JsonSnapshotError
from ._errors import JsonTypeError as JsonTypeError
from ._errors import JsonValueError as JsonValueError
from ._errors import OutputSchemaError as OutputSchemaError
from ._errors import SessionLogCorruptError as SessionLogCorruptError
from ._errors import SessionLogIntegrityError as SessionLogIntegrityError
from ._errors import SessionLogLockedError as SessionLogLockedError
from ._errors import ToolArgsError as ToolArgsError
from ._errors import ToolNotFoundError as ToolNotFoundError
from ._pipeline._answerers import ApprovalAnswerer as ApprovalAnswerer
from ._pipeline._answerers import ApprovalNext as ApprovalNext
from ._pipeline._approval import ApprovalScope as ApprovalScope
from ._pipeline._approval import UserApproval as UserApproval
from ._pipeline._approval import UserApprovalStatistics as UserApprovalStatistics
from ._pipeline._ask_before import ask_before as ask_before
from ._pipeline._define import define_tool as define_tool
from ._pipeline._hooks import BatchHook as BatchHook
from ._pipeline._hooks import BatchNext as BatchNext
from ._pipeline._hooks import ChangeListener as ChangeListener
from ._pipeline._hooks import ExecuteHook as ExecuteHook
from ._pipeline._hooks import ExecuteNext as ExecuteNext
from ._pipeline._hooks import HookPoint as HookPoint
from ._pipeline._hooks import PostExecuteHook as PostExecuteHook
from ._pipeline._hooks import PostExecuteNext as PostExecuteNext
from ._pipeline._hooks import PreExecuteHook as PreExecuteHook
from ._pipeline._hooks import PreExecuteNext as PreExecuteNext
from ._pipeline._hooks import ProgressObserver as ProgressObserver
from ._pipeline._hooks import ResultObserver as ResultObserver
from ._pipeline._hooks import ToolHooks as ToolHooks
from ._pipeline._registry import ToolRegistry as ToolRegistry
from ._pipeline._registry import ToolRegistryStatistics as ToolRegistryStatistics
from ._pipeline._registry import ToolScope as ToolScope
from ._pipeline._tool import ToolDecorator as ToolDecorator
from ._pipeline._tool import ToolFunction as ToolFunction
from ._pipeline._tool import tool as tool
from ._policies._call_budget import install_call_budget as install_call_budget
from ._policies._console_answerer import console_answerer as console_answerer
from ._policies._console_answerer import describe_call as describe_call
from ._policies._output_budget import install_output_budget as install_output_budget
from ._policies._presenter import ToolPresenter as ToolPresenter
from ._policies._presenter import console_block as console_block
from ._policies._presenter import progress_text as progress_text
from ._policies._presenter import tool_result_from_event as tool_result_from_event
from ._policies._retry import install_retry_policy as install_retry_policy
from ._policies._timeline import TimelineRecorder as TimelineRecorder
from ._policies._timeline import TimelineSpan as TimelineSpan
from ._policies._timeout import install_timeout_policy as install_timeout_policy
from ._scheduling._active import batch_statistics as batch_statistics
from ._scheduling._active import inject_context as inject_context
from ._scheduling._conversation import conversation as conversation
from ._scheduling._conversation import next_turn as next_turn
from ._scheduling._resume import recover_session as recover_session
from ._scheduling._resume import resume_tool_calls as resume_tool_calls
from ._scheduling._scheduler import run_tool_calls as run_tool_calls
from ._sessions._events import ApprovalAskedEvent as ApprovalAskedEvent
from ._sessions._events import ApprovalDecidedEvent as ApprovalDecidedEvent
from ._sessions._events import ApprovalPolicy as ApprovalPolicy
from ._sessions._events import ApprovalPolicyEvent as ApprovalPolicyEvent
from ._sessions._events import ApprovalRevokedEvent as ApprovalRevokedEvent
from ._sessions._events import BatchCallEvent as BatchCallEvent
from ._sessions._events import BatchEndEvent as BatchEndEvent
from ._sessions._events import BatchStartEvent as BatchStartEvent
from ._sessions._events import ContextMessageEvent as ContextMessageEvent
from ._sessions._events import MessageEvent as MessageEvent
from ._sessions._events import SessionEvent as SessionEvent
from ._sessions._events import ToolCallEvent as ToolCallEvent
from ._sessions._events import ToolProgressEvent as ToolProgressEvent
from ._sessions._events import ToolResultEvent as ToolResultEvent
from ._sessions._events import TurnEndEvent as TurnEndEvent
from ._sessions._events import TurnStartEvent as TurnStartEvent
from ._sessions._follow import subscribe as subscribe
from ._sessions._jsonl import JsonlSessionLog as JsonlSessionLog
from ._sessions._jsonl import read_session_log as read_session_log
from ._sessions._log import SessionLog as SessionLog
from ._sessions._memory import MemorySessionLog as MemorySessionLog
from ._sessions._sqlite import SqliteSessionLog as SqliteSessionLog
from ._sessions._turn import session_turn as session_turn
from ._sessions._wire import session_event_from_json as session_event_from_json
from ._texts import APPROVAL_PENDING as APPROVAL_PENDING
from ._texts import TOOL_ABORTED as TOOL_ABORTED
from ._texts import TOOL_ABORTED_BEFORE_DISPATCH as TOOL_ABORTED_BEFORE_DISPATCH
from ._texts import TOOL_INTERRUPTED as TOOL_INTERRUPTED
from ._texts import TOOL_TIMEOUT as TOOL_TIMEOUT
from ._texts import ToolErrorInfo as ToolErrorInfo
from ._texts import error_message as error_message
from ._values._arguments import parse_call_arguments as parse_call_arguments
from ._values._batch import SuspendedCall as SuspendedCall
from ._values._batch import ToolBatch as ToolBatch
from ._values._batch import ToolBatchInfo as ToolBatchInfo
from ._values._batch import ToolBatchStatistics as ToolBatchStatistics
from ._values._batch import ToolCallRequest as ToolCallRequest
from ._values._batch import ToolStreamError as ToolStreamError
from ._values._content import ContentBlock as ContentBlock
from ._values._content import HookContext as HookContext
from ._values._content import MessageSource as MessageSource
from ._values._content import PluginSource as PluginSource
from ._values._content import ReasoningBlock as ReasoningBlock
from ._values._content import TextBlock as TextBlock
from ._values._content import ToolCallBlock as ToolCallBlock
from ._values._content import ToolResultBlock as ToolResultBlock
from ._values._content import UserSource as UserSource
from ._values._converter import converter as converter
from ._values._converter import register_content_block as register_content_block
from ._values._definition import JsonSchema as JsonSchema
from ._values._definition import ToolBody as ToolBody
from ._values._definition import ToolDefinition as ToolDefinition
from ._values._definition import ToolOptions as ToolOptions
from ._values._definition import ToolOutput as ToolOutput
from ._values._definition import ToolReturn as ToolReturn
from ._values._definition import ToolSchema as ToolSchema
from ._values._disposer import Disposer as Disposer
from ._values._execution import Accept as Accept
from ._values._execution import Allow as Allow
from ._values._execution import Approval as Approval
from ._values._execution import ApprovalOutcome as ApprovalOutcome
from ._values._execution import ApprovalRequest as ApprovalRequest
from ._values._execution import ApprovalService as ApprovalService
from ._values._execution import Ask as Ask
from ._values._execution import Block as Block
from ._values._execution import Deny as Deny
from ._values._execution import PostToolDecision as PostToolDecision
from ._values._execution import PreToolDecision as PreToolDecision
from ._values._execution import ToolDispatchExecution as ToolDispatchExecution
from ._values._execution import ToolExecution as ToolExecution
from ._values._execution import ToolExecutionInput as ToolExecutionInput
from ._values._execution import ToolExecutionMode as ToolExecutionMode
from ._values._execution import ToolExecutionResult as ToolExecutionResult
from ._values._execution import ToolExecutionToken as ToolExecutionToken
from ._values._execution import ToolGuard as ToolGuard
from ._values._execution import ToolResult as ToolResult
from ._values._execution import ToolRunContext as ToolRunContext
from ._values._execution import arguments_digest as arguments_digest
from ._values._json import MAX_DEPTH as MAX_DEPTH
from ._values._json import FrozenJsonObject as FrozenJsonObject
from ._values._json import JsonValue as JsonValue
from ._values._json import dumps_json as dumps_json
from ._values._json import snapshot_json as snapshot_json
from ._values._json import thaw_json as thaw_json
from ._values._limits import LimitClaim as LimitClaim
from ._values._limits import Limiter as Limiter
from ._values._limits import RateLimit as RateLimit
from ._values._media import AudioBlock as AudioBlock
from ._values._media import FileBlock as FileBlock
from ._values._media import ImageBlock as ImageBlock
from ._values._output_schema import StructuredOutputSchema as StructuredOutputSchema
from ._values._output_schema import StructuredScalar as StructuredScalar
from ._values._output_schema import StructuredSchemaNode as StructuredSchemaNode
from ._values._output_schema import StructuredSchemaType as StructuredSchemaType
from ._values._output_schema import assert_supported_output_schema as assert_supported_output_schema
from ._values._output_schema import validate_structured_value as validate_structured_value
from ._values._presentation import DiffCallView as DiffCallView
from ._values._presentation import DiffResultView as DiffResultView
from ._values._presentation import FileDiff as FileDiff
from ._values._presentation import FileLocation as FileLocation
from ._values._presentation import GenericCallView as GenericCallView
from ._values._presentation import GenericResultView as GenericResultView
from ._values._presentation import TerminalCallView as TerminalCallView
from ._values._presentation import TerminalResultView as TerminalResultView
from ._values._presentation import ToolCallKind as ToolCallKind
from ._values._presentation import ToolCallView as ToolCallView
from ._values._presentation import ToolResultView as ToolResultView
from ._values._schema import SchemaProp as SchemaProp
from ._values._schema import SchemaSpec as SchemaSpec
from ._values._schema import SchemaType as SchemaType
from ._values._schema import schema_spec_to_json_schema as schema_spec_to_json_schema
from ._values._schema import validate_args as validate_args
from ._values._signal import CancelController as CancelController
from ._values._signal import CancelSignal as CancelSignal
from ._values._signal import CancelSignalStatistics as CancelSignalStatistics
from ._values._signal import DeadlineReached as DeadlineReached
from ._values._signal import linked_cancel_scope as linked_cancel_scope

__all__ = [
    "APPROVAL_PENDING",
    "Accept",
    "Allow",
    "Approval",
    "ApprovalAnswerer",
    "ApprovalAskedEvent",
    "ApprovalDecidedEvent",
    "ApprovalNext",
    "ApprovalOutcome",
    "ApprovalPolicy",
    "ApprovalPolicyEvent",
    "ApprovalRequest",
    "ApprovalRevokedEvent",
    "ApprovalScope",
    "ApprovalService",
    "ApprovalSetupWarning",
    "Ask",
    "AudioBlock",
    "BatchCallEvent",
    "BatchEndEvent",
    "BatchHook",
    "BatchNext",
    "BatchStartEvent",
    "Block",
    "CancelController",
    "CancelSignal",
    "CancelSignalStatistics",
    "ChangeListener",
    "ContentBlock",
    "ContextMessageEvent",
    "DeadlineReached",
    "Deny",
    "DiffCallView",
    "DiffResultView",
    "Disposer",
    "ExecuteHook",
    "ExecuteNext",
    "FileBlock",
    "FileDiff",
    "FileLocation",
    "FrozenJsonObject",
    "GenericCallView",
    "GenericResultView",
    "HarnessError",
    "HookContext",
    "HookPoint",
    "ImageBlock",
    "JsonSchema",
    "JsonSnapshotError",
    "JsonTypeError",
    "JsonValue",
    "JsonValueError",
    "JsonlSessionLog",
    "LimitClaim",
    "Limiter",
    "MAX_DEPTH",
    "MemorySessionLog",
    "MessageEvent",
    "MessageSource",
    "OutputSchemaError",
    "PluginSource",
    "PostExecuteHook",
    "PostExecuteNext",
    "PostToolDecision",
    "PreExecuteHook",
    "PreExecuteNext",
    "PreToolDecision",
    "ProgressObserver",
    "RateLimit",
    "ReasoningBlock",
    "ResultObserver",
    "SchemaProp",
    "SchemaSpec",
    "SchemaType",
    "SessionEvent",
    "SessionLog",
    "SessionLogCorruptError",
    "SessionLogIntegrityError",
    "SessionLogLockedError",
    "SqliteSessionLog",
    "StructuredOutputSchema",
    "StructuredScalar",
    "StructuredSchemaNode",
    "StructuredSchemaType",
    "SuspendedCall",
    "TOOL_ABORTED",
    "TOOL_ABORTED_BEFORE_DISPATCH",
    "TOOL_INTERRUPTED",
    "TOOL_TIMEOUT",
    "TerminalCallView",
    "TerminalResultView",
    "TextBlock",
    "TimelineRecorder",
    "TimelineSpan",
    "ToolArgsError",
    "ToolBatch",
    "ToolBatchInfo",
    "ToolBatchStatistics",
    "ToolBody",
    "ToolCallBlock",
    "ToolCallEvent",
    "ToolCallKind",
    "ToolCallRequest",
    "ToolCallView",
    "ToolDecorator",
    "ToolDefinition",
    "ToolDispatchExecution",
    "ToolErrorInfo",
    "ToolExecution",
    "ToolExecutionInput",
    "ToolExecutionMode",
    "ToolExecutionResult",
    "ToolExecutionToken",
    "ToolFunction",
    "ToolGuard",
    "ToolHooks",
    "ToolNotFoundError",
    "ToolOptions",
    "ToolOutput",
    "ToolPresenter",
    "ToolProgressEvent",
    "ToolRegistry",
    "ToolRegistryStatistics",
    "ToolResult",
    "ToolResultBlock",
    "ToolResultEvent",
    "ToolResultView",
    "ToolReturn",
    "ToolRunContext",
    "ToolSchema",
    "ToolScope",
    "ToolStreamError",
    "TurnEndEvent",
    "TurnStartEvent",
    "UserApproval",
    "UserApprovalStatistics",
    "UserSource",
    "arguments_digest",
    "ask_before",
    "assert_supported_output_schema",
    "batch_statistics",
    "console_answerer",
    "console_block",
    "conversation",
    "converter",
    "define_tool",
    "describe_call",
    "dumps_json",
    "error_message",
    "inject_context",
    "install_call_budget",
    "install_output_budget",
    "install_retry_policy",
    "install_timeout_policy",
    "linked_cancel_scope",
    "next_turn",
    "parse_call_arguments",
    "progress_text",
    "read_session_log",
    "recover_session",
    "register_content_block",
    "resume_tool_calls",
    "run_tool_calls",
    "schema_spec_to_json_schema",
    "session_event_from_json",
    "session_turn",
    "snapshot_json",
    "subscribe",
    "thaw_json",
    "tool",
    "tool_result_from_event",
    "validate_args",
    "validate_structured_value",
]


def _fixup_module_metadata() -> None:
    # Public classes and functions report ``dsh_tools`` (reprs, docs, pickles) rather than the
    # private module that defines them, as trio does. attrs classes resolve their string
    # annotations first, while ``__module__`` still names the module whose globals define them
    # (cattrs and ``attrs.resolve_types`` read them through ``__module__``).
    import contextlib
    import inspect

    import attrs

    from ._values._converter import resolve_types

    for name in __all__:
        obj = globals()[name]
        if not (isinstance(obj, type) or inspect.isfunction(obj)):
            continue  # constants and type aliases have no module of their own
        if obj.__module__.startswith(f"{__name__}._"):
            if isinstance(obj, type) and attrs.has(obj):
                # an annotation naming a TYPE_CHECKING-only import stays a string
                with contextlib.suppress(NameError):
                    resolve_types(obj)
            obj.__module__ = __name__


_fixup_module_metadata()
del _fixup_module_metadata
