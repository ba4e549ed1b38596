"""The one preconfigured cattrs converter: every public value type to and from the wire JSON.

The wire shape is the original's: camelCase keys (``toolCallId``, ``isError``,
``additionalContexts``, ``rawInput``, ``oldText``, ``exitCode`` …), a tag key on every member of
a closed or extensible union (``type`` on content blocks, ``kind`` on sources and decisions,
``card`` on views), optional fields whose value is absent (``None``, or an empty
``additional_contexts``) omitted, arrays as lists, and JSON payloads (``meta``, ``rawInput``) as
plain ``dict`` / ``list`` data.

Structuring is strict, because a boundary that guesses silently loses data: a key the class does
not know, a missing required key, a value of the wrong JSON type (``"1"`` for an ``int``, ``1``
for a ``bool``, a string where an array belongs) and an unknown tag all raise. Errors inside a
value are collected by cattrs into a :class:`cattrs.ClassValidationError` (an
``ExceptionGroup``); :func:`cattrs.transform_error` turns it into messages with paths.

Other modules make their own value types wire types with :func:`register_wire_class` (and
content-block types with :func:`register_content_block`), so one set of rules covers the whole
library.
"""

from __future__ import annotations

import base64
import binascii
import enum
import re
import sys
import types
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import (
    Any,
    Final,
    NotRequired,
    TypeAlias,
    TypedDict,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

import attrs
import cattrs
from cattrs.errors import IterableValidationError, IterableValidationNote
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.gen.typeddicts import (
    make_dict_structure_fn as make_typeddict_structure_fn,  # pyright: ignore[reportUnknownVariableType]
)

from dsh_tools._texts import ToolErrorInfo

from ._attrs_schema import typeddict_required_keys
from ._content import (
    ContentBlock,
    HookContext,
    MessageSource,
    PluginSource,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserSource,
)
from ._definition import ToolSchema
from ._execution import (
    Accept,
    Allow,
    Ask,
    Block,
    Deny,
    PostToolDecision,
    PreToolDecision,
    ToolExecutionMode,
    ToolExecutionResult,
    ToolResult,
)
from ._json import FrozenJsonObject, JsonValue, snapshot_json, thaw_json
from ._media import AudioBlock, FileBlock, ImageBlock
from ._presentation import (
    DiffCallView,
    DiffResultView,
    FileDiff,
    FileLocation,
    GenericCallView,
    GenericResultView,
    TerminalCallView,
    TerminalResultView,
    ToolCallView,
    ToolResultView,
)

__all__ = [
    "cattrs_generated",
    "content_block_classes",
    "converter",
    "register_content_block",
    "register_wire_class",
    "resolve_types",
    "wire_error_messages",
]

T = TypeVar("T")

converter: Final = cattrs.Converter(forbid_extra_keys=True)
"""The preconfigured converter for every public value type.

``converter.unstructure(value)`` gives the original's wire JSON (plain ``dict`` / ``list`` /
scalars, ready for ``json.dumps``); ``converter.structure(data, cls)`` reads it back and raises on
anything it would otherwise have to drop or guess. Union aliases work as targets too:
``converter.structure(data, ContentBlock)`` picks the class from the ``type`` tag.
"""


# --- type resolution -----------------------------------------------------------------------


def resolve_types(cls: type) -> None:
    """Resolve the string annotations of attrs class ``cls`` into real types, in place.

    The library's modules use ``from __future__ import annotations``, so annotations are
    strings evaluated in the defining module's globals. Called before ``dsh_tools`` renames
    ``__module__`` of its public classes, which would point the evaluation at the wrong
    namespace (the public one, which lacks the private names some annotations use).
    """
    attrs.resolve_types(cls, globalns=vars(sys.modules[cls.__module__]))


def _union_members(tp: object) -> tuple[object, ...]:
    if isinstance(tp, types.UnionType) or get_origin(tp) is Union:
        return get_args(tp)
    return ()


# --- strict scalars, arrays and JSON payloads ----------------------------------------------


def _type_name(value: object) -> str:
    return type(value).__name__


def _structure_str(value: object, _tp: object) -> str:
    if type(value) is not str:
        raise TypeError(f"expected a string, got {_type_name(value)}")
    return value


def _structure_bool(value: object, _tp: object) -> bool:
    if type(value) is not bool:
        raise TypeError(f"expected a boolean, got {_type_name(value)}")
    return value


def _structure_int(value: object, _tp: object) -> int:
    if type(value) is not int:
        raise TypeError(f"expected an integer, got {_type_name(value)}")
    return value


def _structure_float(value: object, _tp: object) -> float:
    if type(value) is not float and type(value) is not int:
        raise TypeError(f"expected a number, got {_type_name(value)}")
    return float(value)


_SCALAR_HOOKS: Final = {
    str: _structure_str,
    bool: _structure_bool,
    int: _structure_int,
    float: _structure_float,
}


def cattrs_generated(hook: object) -> bool:
    """Whether ``hook`` is the structure function cattrs generated for a class, and the
    converter still structures ``str``, ``bool``, ``int`` and ``float`` with the library's own
    hooks (internal): then such a class's scalar fields are passed through as they are checked.
    A hook of the user's, or anything unsure, is ``False``.
    """
    code = getattr(hook, "__code__", None)
    filename = getattr(code, "co_filename", None)
    if not (isinstance(filename, str) and filename.startswith("<cattrs generated structure ")):
        return False
    return all(converter.get_structure_hook(tp) is own for tp, own in _SCALAR_HOOKS.items())


def _is_json_value(tp: object) -> bool:
    return FrozenJsonObject in _union_members(tp)


def _structure_json_value(value: object, _tp: object) -> JsonValue:
    return snapshot_json(value)


def _unstructure_json_value(value: JsonValue) -> Any:
    return thaw_json(value)


def _is_json_schema(tp: object) -> bool:
    return get_origin(tp) is dict and get_args(tp) == (str, Any)


def _structure_json_schema(value: object, _tp: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"expected a JSON object, got {_type_name(value)}")
    return thaw_json(snapshot_json(cast("Mapping[str, object]", value)))


def _unstructure_json_schema(value: Mapping[str, object]) -> dict[str, Any]:
    # a detached copy: the wire dict must not alias the value's own schema
    return thaw_json(snapshot_json(value))


def _is_homogeneous_tuple(tp: object) -> bool:
    args = get_args(tp)
    return get_origin(tp) is tuple and len(args) == 2 and args[1] is Ellipsis


def _make_tuple_structure(tp: Any) -> Callable[[object, object], tuple[Any, ...]]:
    item_type = get_args(tp)[0]
    item_hook = converter.get_structure_hook(item_type)

    def structure(value: object, _tp: object) -> tuple[Any, ...]:
        # cattrs' own hook accepts any iterable and would split a string into characters
        if not isinstance(value, list | tuple):
            raise TypeError(f"expected a JSON array, got {_type_name(value)}")
        items: list[Any] = []
        errors: list[Exception] = []
        for index, item in enumerate(value):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            try:
                items.append(item_hook(item, item_type))
            except Exception as exc:
                note = IterableValidationNote(f"Structuring {tp} @ index {index}", index, item_type)
                exc.add_note(note)
                errors.append(exc)
        if errors:
            raise IterableValidationError(f"While structuring {tp!r}", errors, tp)  # pyright: ignore[reportCallIssue] - cattrs types it as a bare ExceptionGroup
        return tuple(items)

    return structure


def _is_typeddict(tp: object) -> bool:
    return isinstance(tp, type) and is_typeddict(tp)


def _make_typeddict_structure(cls: Any) -> Callable[[Any, Any], Any]:
    # cattrs reads __required_keys__, which Python 3.11 gets wrong for a NotRequired key under
    # ``from __future__ import annotations``: it structures a twin whose keys say it right
    # (a TypedDict is a plain dict at run time, so the result is the same object either way)
    make = cast(
        "Callable[[Any, cattrs.Converter], Callable[[Any, Any], Any]]",
        make_typeddict_structure_fn,
    )
    try:
        hints = get_type_hints(cls)
        required = typeddict_required_keys(cls)
    except NameError:
        return make(cls, converter)
    fields = {name: hint if name in required else NotRequired[hint] for name, hint in hints.items()}
    twin: Any = TypedDict(cls.__name__, fields)  # pyright: ignore[reportArgumentType]
    return make(twin, converter)


class _SaysWhy(ValueError):
    """A value a hook refused with a message that says more than cattrs' generic one."""


def _structure_bytes(value: object, _tp: object) -> bytes:
    # bytes travel as standard base64, decoded strictly: a stray character is an error, not
    # a silently shorter payload
    if type(value) is not str:
        raise _SaysWhy(f"expected a base64 string, got {_type_name(value)}")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise _SaysWhy("not valid base64") from None


def _unstructure_bytes(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _structure_enum(value: object, tp: type[enum.Enum]) -> enum.Enum:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise TypeError(f"expected a {tp.__name__} value, got {_type_name(value)}")
    return tp(value)


def _unstructure_enum(member: enum.Enum) -> object:
    return member.value


# Scalars are strict (cattrs' defaults would turn 5 into "5" and "false" into True). Hooks are
# looked up along the MRO, so ``StrEnum`` / ``IntEnum`` get their own before ``str`` / ``int``
# can claim them; enums travel as their plain values.
converter.register_structure_hook(str, _structure_str)
converter.register_structure_hook(bool, _structure_bool)
converter.register_structure_hook(int, _structure_int)
converter.register_structure_hook(float, _structure_float)
converter.register_structure_hook(bytes, _structure_bytes)
converter.register_unstructure_hook(bytes, _unstructure_bytes)
for _enum_base in (enum.Enum, enum.StrEnum, enum.IntEnum):
    converter.register_structure_hook(_enum_base, _structure_enum)
    converter.register_unstructure_hook(_enum_base, _unstructure_enum)
converter.register_structure_hook_func(_is_json_value, _structure_json_value)
converter.register_unstructure_hook_func(_is_json_value, _unstructure_json_value)
converter.register_structure_hook_func(_is_json_schema, _structure_json_schema)
converter.register_unstructure_hook_func(_is_json_schema, _unstructure_json_schema)
converter.register_structure_hook_factory(_is_homogeneous_tuple, _make_tuple_structure)
converter.register_structure_hook_factory(_is_typeddict, _make_typeddict_structure)


# --- wire classes and tagged unions --------------------------------------------------------

_CAMEL: Final = re.compile(r"_([a-z0-9])")


def _camel(name: str) -> str:
    return _CAMEL.sub(lambda match: match.group(1).upper(), name)


def wire_error_messages(exc: BaseException, path: str = "$") -> list[str]:
    """Like :func:`cattrs.transform_error`, but a path names the wire keys (``$.callId``), not
    the Python fields (``$.call_id``).
    """
    if isinstance(exc, IterableValidationError):
        with_notes, without = exc.group_exceptions()
        return [
            *(
                message
                for sub, note in with_notes
                for message in _note_messages(sub, f"{path}[{note.index!r}]", note.type)
            ),
            *(f"{cattrs.v.format_exception(sub, None)} @ {path}" for sub in without),
        ]
    if isinstance(exc, cattrs.ClassValidationError):
        with_notes, without = exc.group_exceptions()
        return [
            *(
                message
                for sub, note in with_notes
                for message in _note_messages(sub, f"{path}.{_camel(note.name)}", note.type)
            ),
            *(f"{_class_error(sub)} @ {path}" for sub in without),
        ]
    return [f"{_class_error(exc)} @ {path}"]


def _class_error(exc: BaseException) -> str:
    # a class's own validator says what is wrong better than cattrs' generic "invalid value"
    if type(exc) in (ValueError, TypeError) and str(exc):
        return str(exc)
    return cattrs.v.format_exception(exc, None)


def _note_messages(exc: BaseException, path: str, tp: Any) -> list[str]:
    if isinstance(exc, cattrs.ClassValidationError | IterableValidationError):
        return wire_error_messages(exc, path)
    if isinstance(exc, _SaysWhy):
        return [f"{exc} @ {path}"]
    return [f"{cattrs.v.format_exception(exc, tp)} @ {path}"]


@attrs.define(eq=False)
class _TaggedUnion:
    """The members of one union alias, keyed by the value of their tag."""

    name: str
    tag_key: str
    by_tag: dict[str, type] = attrs.field(factory=lambda: dict[str, type]())

    def structure(self, value: object, _tp: object) -> object:
        if not isinstance(value, Mapping):
            raise TypeError(f"expected a JSON object ({self.name}), got {_type_name(value)}")
        tag = cast("Mapping[str, object]", value).get(self.tag_key)
        if tag is None:
            raise ValueError(f'{self.name} is missing its "{self.tag_key}" tag')
        cls = self.by_tag.get(tag) if isinstance(tag, str) else None
        if cls is None:
            known = ", ".join(f'"{known}"' for known in self.by_tag)
            raise ValueError(f"unknown {self.name} {self.tag_key} {tag!r} (known: {known})")
        return converter.structure(value, cast("type[object]", cls))

    def unstructure(self, value: object) -> object:
        if type(value) not in self.by_tag.values():
            raise TypeError(f"{_type_name(value)} is not a registered {self.name} type")
        return converter.unstructure(value, type(value))


_unions: dict[object, _TaggedUnion] = {}


def register_wire_class(
    cls: type[T],
    *,
    tag_key: str | None = None,
    tag: str | None = None,
    union: object = None,
    union_name: str | None = None,
    keep: Iterable[str] = (),
    omit: Iterable[str] = (),
) -> type[T]:
    """Make attrs class ``cls`` a wire type of :data:`converter`, with the library's rules.

    Keys are the camelCase field names (``tool_call_id`` → ``toolCallId``). A field whose
    default is ``None`` or ``()`` is omitted while it has that value (an absent optional),
    unless it is named in ``keep``. With ``tag_key`` and ``tag``, the wire object carries
    ``{tag_key: tag}`` first, and structuring checks it. With ``union`` (a union alias such as
    ``ContentBlock``), ``cls`` joins that union: structuring the union picks the member by its
    tag. The first registration of a union fixes its tag key.

    The hooks generated for ``cls`` capture the hooks of its field types at this moment, so
    register a class after the wire classes its fields use (``HookContext`` before a class with
    a ``tuple[HookContext, ...]`` field). Union members may join later: a union's hook looks its
    members up on every call.

    Args:
        cls: an attrs class (its string annotations are resolved now).
        tag_key: the key of the tag, such as ``"type"``, ``"kind"`` or ``"card"``.
        tag: the tag value of ``cls``, such as ``"tool-call"``.
        union: the union alias ``cls`` belongs to, if any (requires a tag).
        union_name: how errors name the union (default: the tag key's owner, e.g.
            ``"ContentBlock"`` is passed by :func:`register_content_block`).
        keep: names of fields that are always written, even when at their default.
        omit: names of fields whose default is another value (such as ``attempt=1``) that are
            omitted too while they have it.

    Returns:
        ``cls`` itself, so this can be used as a decorator through ``functools.partial``.

    Raises:
        TypeError: ``cls`` is not an attrs class.
        ValueError: ``tag`` without ``tag_key`` (or the reverse), ``union`` without a tag, a
            tag already taken in the union, or a tag key different from the union's.
    """
    if not attrs.has(cls):
        raise TypeError(f"{cls!r} is not an attrs class")
    if (tag_key is None) != (tag is None):
        raise ValueError("tag_key and tag go together")
    resolve_types(cls)
    kept, omitted = frozenset(keep), frozenset(omit)
    renames: dict[str, Any] = {}
    for field in attrs.fields(cls):
        absent = field.name in omitted or (
            field.name not in kept and (field.default is None or field.default == ())
        )
        renames[field.name] = override(rename=_camel(field.name), omit_if_default=absent)
    unstructure_fields = make_dict_unstructure_fn(cls, converter, **renames)
    structure_fields = make_dict_structure_fn(cls, converter, **renames)

    if tag_key is None:
        converter.register_unstructure_hook(cls, unstructure_fields)

        def structure_untagged(value: object, _tp: object) -> T:
            if not isinstance(value, Mapping):
                raise TypeError(f"expected a JSON object ({cls.__name__}), got {_type_name(value)}")
            return structure_fields(value, cls)  # pyright: ignore[reportUnknownArgumentType]

        converter.register_structure_hook(cls, structure_untagged)
    else:
        key, value_of_tag = tag_key, tag

        def unstructure_tagged(value: T) -> dict[str, Any]:
            return {key: value_of_tag, **unstructure_fields(value)}

        def structure_tagged(value: object, _tp: object) -> T:
            if not isinstance(value, Mapping):
                raise TypeError(f"expected a JSON object ({cls.__name__}), got {_type_name(value)}")
            data = cast("Mapping[str, object]", value)
            found = data.get(key)
            if found != value_of_tag:
                raise ValueError(
                    f'expected {key} "{value_of_tag}" for {cls.__name__}, got {found!r}'
                )
            fields = {k: v for k, v in data.items() if k != key}
            return structure_fields(fields, cls)

        converter.register_unstructure_hook(cls, unstructure_tagged)
        converter.register_structure_hook(cls, structure_tagged)

    if union is not None:
        if tag_key is None or tag is None:
            raise ValueError("a union member needs a tag_key and a tag")
        tagged = _unions.get(union)
        if tagged is None:
            tagged = _unions[union] = _TaggedUnion(name=union_name or tag_key, tag_key=tag_key)
            converter.register_structure_hook(union, tagged.structure)
            converter.register_unstructure_hook(union, tagged.unstructure)
        if tagged.tag_key != tag_key:
            raise ValueError(
                f'{tagged.name} members are tagged by "{tagged.tag_key}", not "{tag_key}"'
            )
        taken = tagged.by_tag.get(tag)
        if taken is not None and taken is not cls:
            raise ValueError(f'{tagged.name} tag "{tag}" is taken by {taken.__name__}')
        tagged.by_tag[tag] = cls
    return cls


def register_content_block(cls: type[T], tag: str) -> type[T]:
    """Add attrs class ``cls`` to the :data:`~dsh_tools.ContentBlock` union on the wire.

    Its wire form is ``{"type": tag, <camelCase fields>}``; wherever content blocks are read
    (a result's ``content``, a context, a tool-result block), ``{"type": tag, …}`` now
    structures into ``cls``. Returns ``cls``.

    Raises:
        ValueError: ``tag`` is already used by another block type.
    """
    return register_wire_class(
        cls, tag_key="type", tag=tag, union=ContentBlock, union_name="ContentBlock"
    )


def content_block_classes() -> Collection[type]:
    """Every class of the :data:`~dsh_tools.ContentBlock` union: the library's own and those
    added with :func:`register_content_block` (a live view).
    """
    return _unions[ContentBlock].by_tag.values()


# --- the library's own wire types ----------------------------------------------------------

# The library's tagged unions: (the union, its name in errors, its tag key, each member with its
# tag on the wire).
_TaggedUnions: TypeAlias = tuple[tuple[object, str, str, tuple[tuple[type, str], ...]], ...]

_BLOCKS_AND_SOURCES: Final[_TaggedUnions] = (
    (
        ContentBlock,
        "ContentBlock",
        "type",
        (
            (TextBlock, "text"),
            (ReasoningBlock, "reasoning"),
            (ToolCallBlock, "tool-call"),
            (ToolResultBlock, "tool-result"),
            (ImageBlock, "image"),
            (AudioBlock, "audio"),
            (FileBlock, "file"),
        ),
    ),
    (MessageSource, "MessageSource", "kind", ((UserSource, "user"), (PluginSource, "plugin"))),
)

_DECISIONS_AND_VIEWS: Final[_TaggedUnions] = (
    (PreToolDecision, "PreToolDecision", "kind", ((Allow, "allow"), (Deny, "deny"), (Ask, "ask"))),
    (PostToolDecision, "PostToolDecision", "kind", ((Accept, "accept"), (Block, "block"))),
    (
        ToolCallView,
        "ToolCallView",
        "card",
        ((GenericCallView, "generic"), (TerminalCallView, "terminal"), (DiffCallView, "diff")),
    ),
    (
        ToolResultView,
        "ToolResultView",
        "card",
        (
            (GenericResultView, "generic"),
            (TerminalResultView, "terminal"),
            (DiffResultView, "diff"),
        ),
    ),
)


def _register_unions(unions: _TaggedUnions) -> None:
    for union, name, tag_key, members in unions:
        for cls, tag in members:
            # the original's diff result always carries its (possibly empty) ``diffs``
            keep = ("diffs",) if cls is DiffResultView else ()
            register_wire_class(
                cls, tag_key=tag_key, tag=tag, union=union, union_name=name, keep=keep
            )


# a class's hooks capture the hooks of its field types when they are generated: dependencies first
_register_unions(_BLOCKS_AND_SOURCES)
for _cls in (HookContext, ToolErrorInfo, FileLocation, FileDiff, ToolExecutionMode):
    register_wire_class(_cls)
for _cls in (ToolExecutionResult, ToolResult, ToolSchema):
    register_wire_class(_cls)
_register_unions(_DECISIONS_AND_VIEWS)

del _cls, _enum_base
