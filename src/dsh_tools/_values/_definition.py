"""Tool definitions: what the registry holds, and the model-facing schema it shows.

A raw :class:`ToolDefinition` validates nothing: its ``execute`` receives the frozen,
unvalidated arguments. ``define_tool`` (in :mod:`dsh_tools._pipeline._define`) builds one that validates
and types its arguments first.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import FunctionType
from typing import Any, Final, Generic, TypeAlias, TypedDict, TypeVar, cast

import attrs

from ._checks import check_int, check_seconds, shown_value
from ._content import ContentBlock, content_blocks, unchecked_meta
from ._execution import ToolResult, ToolRunContext
from ._json import FrozenJsonObject, JsonValue, snapshot_json
from ._presentation import ToolCallView, ToolResultView

__all__ = [
    "READS_ARGUMENTS",
    "BodyPlan",
    "JsonSchema",
    "ToolBody",
    "ToolDefinition",
    "ToolOptions",
    "ToolOutput",
    "ToolReturn",
    "ToolSchema",
    "argument_validator",
    "check_char_budget",
    "check_option_names",
    "is_async_body",
    "register_checked_body",
    "runs_in_parallel",
]

A = TypeVar("A")

JsonSchema: TypeAlias = dict[str, Any]
"""A JSON Schema document as plain, mutable JSON data (what provider APIs expect)."""


@attrs.frozen(kw_only=True)
class ToolOutput:
    """A body's return value with private ``meta`` (persisted on the result, hidden from the
    model). A body may instead return a sequence of content blocks, or a ``str``.

    ``meta`` is not checked here: the pipeline checks the complete result once, at final
    materialization; a ``meta`` that is not lossless JSON turns the call's result into exactly
    ``Error: tool result must be losslessly JSON-serializable`` (the detail is logged at
    WARNING on the ``dsh_tools`` logger). ``meta=None`` means "no meta": JSON ``null`` cannot be
    carried as a meta value (a deviation from the original).
    """

    content: tuple[ContentBlock, ...] = attrs.field(converter=content_blocks)
    meta: JsonValue = attrs.field(default=None, converter=unchecked_meta)


ToolReturn: TypeAlias = Sequence[ContentBlock] | ToolOutput | str
"""What a tool body may return: content blocks, a :class:`ToolOutput`, or a ``str`` (one
:class:`~dsh_tools.TextBlock`)."""

ToolBody: TypeAlias = Callable[[Any, ToolRunContext], Awaitable[ToolReturn] | ToolReturn]
"""A raw body: ``async (arguments, context) -> ToolReturn``, or a plain function
``(arguments, context) -> ToolReturn`` that the registry runs in a worker thread (see
:func:`is_async_body`)."""


def is_async_body(body: object) -> bool:
    """Whether ``body`` is awaited on the trio thread: it is a coroutine function (also through
    ``functools.partial``), or an object whose ``__call__`` is one. Anything else is a sync body
    and runs in a worker thread.
    """
    if type(body) is FunctionType and body.__code__.co_flags & inspect.CO_COROUTINE:
        return True  # the common case, without inspect's unwrapping
    if inspect.iscoroutinefunction(body):
        return True
    call = getattr(type(body), "__call__", None)  # noqa: B004 (the method, to test it)
    return call is not None and inspect.iscoroutinefunction(call)


Validator: TypeAlias = Callable[[object], list[str]]


def argument_validator(tool: ToolDefinition) -> Validator | None:
    """The validator a definition's ``execute`` applies to its arguments first (every form of
    ``define_tool``), or ``None`` (a raw definition validates nothing).
    """
    return tool._plan.validate  # pyright: ignore[reportPrivateUsage]


@attrs.frozen(kw_only=True)
class ToolSchema:
    """The model-facing part of a tool: name, description and a JSON Schema of its parameters.

    ``parameters`` is a fresh plain ``dict`` each time the registry hands one out.
    """

    name: str
    description: str
    parameters: JsonSchema


def _freeze_parameters(value: Mapping[str, object]) -> FrozenJsonObject:
    if not isinstance(value, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"parameters must be a JSON Schema mapping, not {type(value).__name__}")
    frozen = snapshot_json(value)
    assert isinstance(frozen, FrozenJsonObject)
    return frozen


def _check_seconds(
    instance: ToolDefinition, attribute: attrs.Attribute[float | None], value: object
) -> None:
    # a tool's timeouts follow the one duration rule, in messages that name the tool
    if value is not None:
        check_seconds(f'tool "{instance.name}": {attribute.name}', value)


def check_char_budget(label: str, value: object) -> None:
    """The one rule of a character budget: ``None`` or a positive ``int`` (``bool`` is not).

    Raises:
        ValueError: ``<label> must be a positive integer number of characters (got <value>)``.
    """
    if value is None:
        return
    if type(value) is not int or value < 1:
        raise ValueError(
            f"{label} must be a positive integer number of characters (got {shown_value(value)})"
        )


def _check_max_output_chars(instance: ToolDefinition, _attribute: object, value: object) -> None:
    check_char_budget(f'tool "{instance.name}": max_output_chars', value)


def _transient_errors(value: object) -> frozenset[str]:
    if isinstance(value, str):
        raise TypeError("transient_errors must be a collection of error names, not a str")
    if not isinstance(value, Iterable):
        raise TypeError(
            f"transient_errors must be a collection of error names, not {type(value).__name__}"
        )
    names = frozenset(cast("Iterable[object]", value))
    for name in names:
        if type(name) is not str or not name:
            raise TypeError(f"transient_errors must hold error names (non-empty str), not {name!r}")
    return cast("frozenset[str]", names)


def _check_name(_instance: object, _attribute: object, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise TypeError(f"tool name must be a non-empty str, not {value!r}")


def _check_description(instance: ToolDefinition, _attribute: object, value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(
            f'tool "{instance.name}": description must be a str, not {type(value).__name__}'
        )


def _check_execute(instance: ToolDefinition, _attribute: object, value: object) -> None:
    if not callable(value):
        raise TypeError(
            f'tool "{instance.name}": execute must be callable, not {type(value).__name__}'
        )


def _check_callable(
    instance: ToolDefinition, attribute: attrs.Attribute[Any], value: object
) -> None:
    if value is not None and not callable(value):
        raise TypeError(
            f'tool "{instance.name}": {attribute.name} must be callable or None, '
            f"not {type(value).__name__}"
        )


def _check_bool(_instance: object, attribute: attrs.Attribute[bool], value: object) -> None:
    if type(value) is not bool:
        raise TypeError(f"{attribute.name} must be a bool, not {type(value).__name__}")


def _check_capacity_class(instance: ToolDefinition, _attribute: object, value: object) -> None:
    if value is not None and (type(value) is not str or not value):
        raise TypeError(
            f'tool "{instance.name}": capacity_class must be a non-empty str or None, not {value!r}'
        )


def _check_capacity_weight(instance: ToolDefinition, _attribute: object, value: object) -> None:
    check_int(f'tool "{instance.name}": capacity_weight', value)


class ToolOptions(TypedDict, Generic[A], total=False):
    """The options of a tool: the keywords :func:`~dsh_tools.define_tool`, ``@tool`` and
    ``@registry.tool`` take besides the tool's name, description, parameters and body, each
    also an attribute of the :class:`ToolDefinition` they build (an option not given has the
    default that :class:`ToolDefinition`'s signature shows). ``A`` is what the tool's
    classifier and presenters receive: the argument class's instance, the frozen argument
    mapping, or (``@tool``) an object whose attributes are the function's parameters.

    ``is_concurrency_safe`` and the presenters are called with valid arguments only:
    ``define_tool`` answers ``False`` and ``None`` for arguments its tool would reject, without
    calling them.
    """

    timeout: float | None
    """Cooperative budget in seconds, enforced by the registry (its timeout policy); never
    shown to the model. ``None``: the registry's ``default_timeout``."""
    idle_timeout: float | None
    """Cooperative budget in seconds between two progress reports of the body
    (``context.report_progress``; the first runs from the body's start): when it passes, the
    call's result is ``TOOL_TIMEOUT`` (``Error: tool call made no progress for <ms>ms``).
    ``None``: no idle budget."""
    max_output_chars: int | None
    """This tool's output budget, used by ``install_output_budget`` instead of the policy's
    ``max_chars``. ``None``: the policy's."""
    transient_errors: Iterable[str]
    """Error names (``result.error.name``, e.g. ``"ConnectionError"``) that
    ``install_retry_policy`` retries by default for this tool (an idempotent one only)."""
    abandon_on_cancel: bool
    """For a plain ``def`` body only: when the call is cancelled, report it at once (``Error:
    tool call aborted (its worker thread was abandoned and may still be running)``) instead of
    waiting for the thread to return."""
    is_concurrency_safe: Callable[[A], bool] | None
    """``(arguments) -> bool``; only ``True`` lets a call join a parallel pool. Never shown to
    the model."""
    capacity_class: str | None
    """The capacity class of the tool's calls (e.g. ``"network"``): inside a parallel pool a
    call also needs a free slot of its class, whose size ``run_tool_calls(...,
    capacity_limits=...)`` (one batch) or ``ToolRegistry(capacity_limits=...)`` (every batch
    of the registry) sets, and ``ToolRegistry(rate_limits=...)`` may limit its rate. ``None``:
    no class."""
    capacity_weight: int
    """The slots a call takes of its capacity class (a positive ``int``; default ``1``): a
    heavy tool takes more of a class than a light one. A weight above the class's limit takes
    the whole class (the call runs alone in it)."""
    conflict_keys: Callable[[A], Iterable[str] | None] | None
    """``(arguments) -> keys``: the resources a call touches (e.g. ``lambda a: [a.path]``),
    computed from the arguments that will run (after validation and approval). Two calls that
    share a key never run at once: within a batch (the later call waits, model order kept),
    across the concurrent batches of one registry, and, with a shared limiter, across
    processes. A function that raises, or returns something other than a collection of
    non-empty ``str``, gives the call an ``INVALID_ARGS`` result with its text; ``None`` or
    an empty collection: no keys. Never shown to the model."""
    idempotent: bool
    """Running the body twice with the same arguments is harmless. When a batch is resumed
    after its process stopped while this tool's call ran, ``resume_tool_calls`` runs the call
    again (the body's ``context.idempotency_key`` is the same on every attempt; otherwise the
    call gets ``TOOL_INTERRUPTED``), and ``install_retry_policy`` may retry it. Never shown to
    the model."""
    present_call: Callable[[A], ToolCallView | None] | None
    """``(arguments) -> ToolCallView | None``: a pure render intent of the call for UIs."""
    present_result: Callable[[A, ToolResult], ToolResultView | None] | None
    """``(arguments, ToolResult) -> ToolResultView | None``: a pure render intent of the
    result for UIs."""
    present_progress: Callable[[A, Any], ToolResultView | None] | None
    """``(arguments, ToolProgressEvent) -> ToolResultView | None``: the render intent of a
    running call's progress (``None``: the generic progress line)."""


def check_option_names(function: str, options: Mapping[str, object]) -> None:
    """Refuse a keyword that is none of the :class:`ToolOptions`, in the words Python refuses
    a keyword a signature lacks (``function`` names the signature).

    Raises:
        TypeError: ``<function>() got an unexpected keyword argument '<keyword>'``.
    """
    for keyword in options:
        if keyword not in ToolOptions.__optional_keys__:
            raise TypeError(f"{function}() got an unexpected keyword argument '{keyword}'")


READS_ARGUMENTS: Final = "dsh_tools.reads_arguments"
"""The metadata key of a :class:`ToolDefinition` option that is called with a call's arguments:
``"classifier"`` (it answers ``False`` for arguments its tool rejects), ``"presenter"`` or
``"keys"`` (``conflict_keys``; each answers ``None``). ``define_tool`` wraps each so that it only sees arguments its tool accepts."""


@attrs.frozen(kw_only=True)
class ToolDefinition:
    """A registered tool: its schema, its body, and host-only metadata.

    Attributes:
        name: the name the model calls.
        description: what the model reads about the tool.
        parameters: the JSON Schema of the arguments (frozen at construction).
        execute: ``async (arguments, context) -> ToolReturn``. It must observe or forward
            ``context.signal`` and return only once its own work has stopped. A plain function
            ``(arguments, context) -> ToolReturn`` runs in a worker thread (one
            ``trio.CapacityLimiter`` per registry); it should poll ``context.signal.cancelled``.

    Every other attribute is one of the tool's :class:`ToolOptions`, documented there. Each
    field is checked as the definition is built: a timeout by the one duration rule
    (``ValueError`` or ``TypeError``: ``tool "<name>": timeout must be a positive finite number
    of seconds (got 0)``), every other field by its type (``TypeError``).
    """

    name: str = attrs.field(validator=_check_name)
    description: str = attrs.field(validator=_check_description)
    parameters: FrozenJsonObject = attrs.field(converter=_freeze_parameters)
    execute: ToolBody = attrs.field(repr=False, validator=_check_execute)
    timeout: float | None = attrs.field(default=None, validator=_check_seconds)
    idle_timeout: float | None = attrs.field(default=None, validator=_check_seconds)
    max_output_chars: int | None = attrs.field(default=None, validator=_check_max_output_chars)
    transient_errors: frozenset[str] = attrs.field(
        default=frozenset[str](), converter=_transient_errors
    )
    abandon_on_cancel: bool = attrs.field(default=False, validator=_check_bool)
    is_concurrency_safe: Callable[[Any], bool] | None = attrs.field(
        default=None,
        repr=False,
        validator=_check_callable,
        metadata={READS_ARGUMENTS: "classifier"},
    )
    capacity_class: str | None = attrs.field(default=None, validator=_check_capacity_class)
    capacity_weight: int = attrs.field(default=1, validator=_check_capacity_weight)
    conflict_keys: Callable[[Any], Iterable[str] | None] | None = attrs.field(
        default=None,
        repr=False,
        validator=_check_callable,
        metadata={READS_ARGUMENTS: "keys"},
    )
    idempotent: bool = attrs.field(default=False, validator=_check_bool)
    present_call: Callable[[Any], ToolCallView | None] | None = attrs.field(
        default=None,
        repr=False,
        validator=_check_callable,
        metadata={READS_ARGUMENTS: "presenter"},
    )
    present_result: Callable[[Any, ToolResult], ToolResultView | None] | None = attrs.field(
        default=None,
        repr=False,
        validator=_check_callable,
        metadata={READS_ARGUMENTS: "presenter"},
    )
    present_progress: Callable[[Any, Any], ToolResultView | None] | None = attrs.field(
        default=None,
        repr=False,
        validator=_check_callable,
        metadata={READS_ARGUMENTS: "presenter"},
    )
    # how the pipeline runs ``execute`` (internal): decided once per definition, not per call
    _plan: BodyPlan = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_plan", _plan_of(self.execute))


@attrs.frozen
class BodyPlan:
    """How the pipeline runs a definition's ``execute`` (internal).

    Attributes:
        awaited: whether ``execute`` is an async body (:func:`is_async_body`).
        validate: for a body ``define_tool`` built, the validator it applies first (the
            pipeline validates with it before any policy runs); ``None`` for a raw body.
        body: for an async spec or attrs body of ``define_tool``, the author's body behind
            ``execute``: arguments ``validate`` marked as accepted (``CHECKED_BY``) go straight
            to it, which is what ``execute`` would do after finding the mark. ``None``
            otherwise.
        convert: what ``execute`` hands the author's body instead of the frozen arguments
            (an attrs instance, say); ``None``: the frozen arguments as they are.
    """

    awaited: bool
    validate: Validator | None = None
    body: Callable[[Any, ToolRunContext], Awaitable[object]] | None = None
    convert: Callable[[object], object] | None = None


# define_tool's bodies, by the ``execute`` it built
_CHECKED_BODIES: Final[weakref.WeakKeyDictionary[Callable[..., object], BodyPlan]] = (
    weakref.WeakKeyDictionary()
)


def register_checked_body(
    execute: Callable[..., object],
    *,
    awaited: bool,
    validate: Validator,
    body: Callable[[Any, ToolRunContext], Awaitable[object]] | None = None,
    convert: Callable[[object], object] | None = None,
) -> None:
    """Record what ``execute`` (a body ``define_tool`` built) does (internal; see
    :class:`BodyPlan`): it applies ``validate`` first and, given ``body``, runs ``body`` at
    once on arguments ``validate`` marked as accepted, after ``convert``.
    """
    _CHECKED_BODIES[execute] = BodyPlan(
        awaited=awaited,
        validate=validate,
        body=body,
        convert=convert,
    )


def _plan_of(execute: object) -> BodyPlan:
    try:
        plan = _CHECKED_BODIES.get(execute)  # pyright: ignore[reportArgumentType]
    except TypeError:  # not hashable or not weakly referable: not one of define_tool's
        plan = None
    if plan is not None:
        return plan
    return _ASYNC_PLAN if is_async_body(execute) else _SYNC_PLAN


_ASYNC_PLAN: Final = BodyPlan(awaited=True)
_SYNC_PLAN: Final = BodyPlan(awaited=False)


def runs_in_parallel(tool: ToolDefinition | None, arguments: object) -> bool:
    """The classification rule: a call may join a parallel pool only when its visible tool's
    ``is_concurrency_safe(arguments)`` returns exactly ``True``. A missing tool, a missing or
    raising classifier, or any other return value means exclusive.
    """
    if tool is None:
        return False
    classify = tool.is_concurrency_safe
    if classify is None:
        return False
    try:
        return classify(arguments) is True
    except Exception:
        return False
