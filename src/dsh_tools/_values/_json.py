"""The lossless JSON boundary: :func:`snapshot_json` and the immutable values it produces.

Every value that crosses the boundary between a model, a tool and a hook (a call's arguments,
a final result, a context, a session event) is snapshotted: validated as data that survives a
JSON round trip unchanged, and copied into a detached, deeply immutable value. JSON objects
become :class:`FrozenJsonObject` (an immutable ``dict`` subclass, so every JSON serializer takes
it as it is), JSON arrays become ``tuple``.

Python decisions (the original is TypeScript):

- ``bool`` is its own JSON type, never a number.
- ``int`` must lie within ±(2**53 - 1), the range every JSON reader represents exactly.
- ``float`` must be finite and not ``-0.0`` (which JSON cannot tell from ``0``).
- ``str`` (values and object keys) must not contain lone surrogates (they cannot be encoded as
  UTF-8).
- ``dict`` (and subclasses) with ``str`` keys, ``list`` and ``tuple`` are accepted; so are the
  library's own frozen values, which are returned as they are (already validated, immutable).
- A frozen value is trusted only when the snapshot itself built it (see
  :class:`FrozenJsonObject`); one made around the constructor is checked like a ``dict``.
- Everything else is rejected, including ``bytes``, sets, ``str``/``int`` subclasses such as
  enums, attrs instances and dataclasses: a boundary that guesses silently loses data.
- Cycles are detected along the current path (a sub-object shared by two siblings is fine and
  is copied twice); nesting deeper than :data:`MAX_DEPTH` containers is rejected with a clear
  error instead of ``RecursionError``. A frozen value nested again counts with its full depth.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, Final, NoReturn, SupportsIndex, TypeAlias, cast, final

from dsh_tools._errors import JsonSnapshotError, JsonTypeError, JsonValueError

__all__ = [
    "CHECKED_BY",
    "FrozenJsonObject",
    "JsonValue",
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "dumps_json",
    "flat_object",
    "json_kind",
    "mark_checked",
    "snapshot_json",
    "thaw_json",
]

MAX_DEPTH: Final = 200
"""How many containers (objects and arrays) may nest inside each other in one value."""

MAX_SAFE_INTEGER: Final = 2**53 - 1
"""The largest integer magnitude that crosses the boundary (JavaScript's safe-integer range)."""


@final
class FrozenJsonObject(dict[str, "JsonValue"]):
    """An immutable JSON object: a ``dict`` from ``str`` to JSON values that cannot change.

    Being a ``dict``, it is JSON data to every Python JSON serializer as it is (``json.dumps``,
    ``orjson.dumps``, ``httpx.Request(..., json=value)``). Every mutating method
    (``__setitem__``, ``__delitem__``, ``update``, ``pop``, ``popitem``, ``clear``,
    ``setdefault``, ``|=``) raises ``TypeError`` and leaves it unchanged. It is hashable and keeps
    the key order it was built with. Its arrays are ``tuple``, so it equals a ``dict`` only
    when that dict's arrays are tuples too: ``snapshot_json({"a": [1]}) == {"a": (1,)}``, and
    ``thaw_json(value)`` gives the plain ``dict`` / ``list`` data (what ``jsonschema`` expects).

    Copying never hands out a mutable view of it: ``copy.copy`` returns the value itself,
    ``copy.deepcopy`` (like :func:`thaw_json`) a plain mutable deep copy, ``dict(value)`` and
    ``value.copy()`` a new plain ``dict``; pickling rebuilds an equal frozen value. Instances come
    only from :func:`snapshot_json` (and the converter), so their content is always valid JSON
    data, and each knows how deeply it nests, which counts against :data:`MAX_DEPTH` when it is
    nested again.

    Only the snapshot's own construction seals an instance (it sets its validation slot,
    ``CHECKED_BY``). An instance made around it (``dict.__new__(FrozenJsonObject)`` filled
    through ``dict`` methods) has no seal, so :func:`snapshot_json` checks and copies it like
    any ``dict`` instead of trusting it.
    """

    __slots__ = ("_checked_by", "_depth", "_hash")

    # how many container levels it spans, itself included (unset: 1, an object of scalars:
    # one slot write less for the most common arguments)
    _depth: int
    _hash: int  # unset until the first hash() (slot left empty: cheaper to build)
    # the last argument validator that accepted it (see mark_checked); None when the snapshot
    # built it (being set is the seal), unset on an instance made around the constructor
    _checked_by: object

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("FrozenJsonObject has no public constructor: use snapshot_json(mapping)")

    def __hash__(self) -> int:  # pyright: ignore[reportIncompatibleVariableOverride]
        try:
            return self._hash
        except AttributeError:
            cached = hash(frozenset(self.items()))
            _set_hash(self, cached)
            return cached

    def _immutable(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("FrozenJsonObject is immutable")

    __setitem__ = _immutable
    __delitem__ = _immutable
    update = _immutable  # pyright: ignore[reportAssignmentType]
    pop = _immutable
    popitem = _immutable
    clear = _immutable
    setdefault = _immutable  # pyright: ignore[reportAssignmentType]
    __ior__ = _immutable

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("FrozenJsonObject is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("FrozenJsonObject is immutable")

    def __repr__(self) -> str:
        return f"FrozenJsonObject({super().__repr__()})"

    def __reduce__(self) -> tuple[Any, ...]:
        # a fresh plain dict (its values are immutable); unpickling validates it again
        return (_unpickle_frozen, (dict(self),))

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        return self.__reduce__()

    def __getstate__(self) -> None:
        return None

    def __copy__(self) -> FrozenJsonObject:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw_json(self)


JsonValue: TypeAlias = bool | int | float | str | FrozenJsonObject | tuple["JsonValue", ...] | None
"""A snapshotted JSON value: scalars, :class:`FrozenJsonObject` and tuples of JSON values."""


# Building a FrozenJsonObject is on the hot path of every snapshot: the dict is filled and its
# slots set through the base class and the slot descriptors, bypassing the methods that make
# instances immutable.
_new_object: Final = dict.__new__
_fill: Final = cast(
    "Callable[[dict[str, JsonValue], dict[str, JsonValue]], None]",
    dict.update,  # pyright: ignore[reportUnknownMemberType]
)
_set_depth: Final = FrozenJsonObject.__dict__["_depth"].__set__
_set_hash: Final = FrozenJsonObject.__dict__["_hash"].__set__
CHECKED_BY: Final = "_checked_by"
"""The slot where :func:`mark_checked` records the last argument validator that accepted a
frozen object (internal). Read it as ``getattr(value, CHECKED_BY, None)``: ``None`` (set when
the object is built, so that the read never raises and catches an ``AttributeError``) means
none. Being set is the object's seal: the snapshot built it.

A frozen value cannot change, so a validator that accepted it once accepts it again: the
classifier and the body of a ``define_tool`` tool validate a call's arguments once between them
this way.
"""

mark_checked: Final[Callable[[FrozenJsonObject, object], None]] = FrozenJsonObject.__dict__[
    CHECKED_BY
].__set__
"""Record that a validator accepted a frozen object (internal; see :data:`CHECKED_BY`)."""


def _unpickle_frozen(data: object) -> FrozenJsonObject:
    frozen = snapshot_json(data)
    if type(frozen) is not FrozenJsonObject:
        raise TypeError("a pickled FrozenJsonObject must hold a dict")
    return frozen


class _Invalid(Exception):
    """Raised at the offending value; each container frame on the way out adds its key."""

    def __init__(
        self, kind: type[JsonSnapshotError], reason: str, *, at_container: bool = False
    ) -> None:
        self.kind = kind
        self.reason = reason
        self.keys: list[str | int] = []
        # a bad object key is reported at the object itself, not at the key being visited
        self.at_container = at_container


def _format_path(keys: list[str | int]) -> str:
    parts = ["$"]
    for key in reversed(keys):
        if isinstance(key, int):
            parts.append(f"[{key}]")
        elif key.isidentifier():
            parts.append(f".{key}")
        else:
            parts.append(f"[{json.dumps(key)}]")
    return "".join(parts)


def snapshot_json(value: object) -> JsonValue:
    """Validate ``value`` as lossless JSON data and return a detached, deeply immutable copy.

    Args:
        value: ``None``, ``bool``, ``str``, ``int``, ``float``, ``dict`` with ``str`` keys,
            ``list``, ``tuple``, or a value this function returned before, nested freely.

    Returns:
        The same data with objects as :class:`FrozenJsonObject` and arrays as ``tuple``.
        The caller's object is never changed or frozen.

    Raises:
        JsonTypeError: a value of a type JSON cannot carry (a ``TypeError``).
        JsonValueError: a value that cannot cross losslessly, a cycle, or too deep a nesting
            (a ``ValueError``). Both name the path of the offending value.
    """
    if type(value) is FrozenJsonObject and hasattr(value, CHECKED_BY):
        return value  # sealed: valid, immutable, and no deeper than MAX_DEPTH by construction
    if type(value) is dict:
        flat = flat_object(value)  # pyright: ignore[reportUnknownArgumentType]
        if flat is not None:
            return flat
    try:
        return _snap(cast(object, value), 0, _Walk())
    except _Invalid as invalid:
        raise invalid.kind(_format_path(invalid.keys), invalid.reason) from None


# The walk is written for speed (it must not be slower than a json.dumps/json.loads round trip):
# exact-type checks instead of isinstance, the common scalars handled inline in the container
# loops instead of through a call, and one try block per container rather than per item. The
# walk's ``path`` set (ids of the containers on the current path) needs no cleanup when a value
# is rejected, because the whole snapshot is abandoned then. ``deepest`` is the deepest level
# (root container = 0) reached so far; each object records how many levels it spans.


class _Walk:
    __slots__ = ("deepest", "path")

    def __init__(self) -> None:
        self.path: set[int] = set()
        self.deepest = 0


def _snap(value: object, depth: int, walk: _Walk) -> JsonValue:
    cls = type(value)
    if cls is str:
        if not value.isascii():  # type: ignore[union-attr]
            _check_text(value)  # type: ignore[arg-type]
        return value  # type: ignore[return-value]
    if cls is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:  # type: ignore[operator]
            return value  # type: ignore[return-value]
        raise _Invalid(
            JsonValueError,
            f"integer {_int_text(value)} is outside ±(2**53 - 1) and would lose precision",  # type: ignore[arg-type]
        )
    if cls is float:
        if math.isfinite(value):  # type: ignore[arg-type]
            if value == 0.0 and math.copysign(1.0, value) < 0:  # type: ignore[arg-type]
                raise _Invalid(JsonValueError, "-0.0 cannot be represented in JSON")
            return value  # type: ignore[return-value]
        raise _Invalid(JsonValueError, f"{value!r} is not a finite number")
    if value is None or cls is bool:
        return value  # type: ignore[return-value]
    if cls is FrozenJsonObject and hasattr(value, CHECKED_BY):
        # sealed: already valid and immutable; only its depth below this level needs checking
        reach = depth + getattr(value, "_depth", 1) - 1
        if reach >= MAX_DEPTH:
            raise _Invalid(JsonValueError, f"nesting deeper than {MAX_DEPTH} levels")
        if reach > walk.deepest:
            walk.deepest = reach
        return value  # type: ignore[return-value]
    if cls is dict:
        return _snap_object(value, depth, walk)  # type: ignore[arg-type]
    if cls is list or cls is tuple:
        return _snap_array(value, depth, walk)  # type: ignore[arg-type]
    if isinstance(value, dict):
        return _snap_object(cast("dict[object, object]", value), depth, walk)
    if isinstance(value, list):
        return _snap_array(cast("list[object]", value), depth, walk)
    raise _Invalid(JsonTypeError, f"{_describe(value)} is not JSON data")


def flat_object(value: dict[object, object]) -> FrozenJsonObject | None:
    """:func:`snapshot_json`'s fast path for the most common arguments (internal): the frozen
    copy of an object whose keys are ASCII ``str`` and whose values are ASCII strings, ``None``,
    ``bool`` or numbers the walk accepts as they are; ``None`` for anything else (the full walk
    then decides).
    """
    for key, item in value.items():
        if type(key) is not str or not key.isascii():
            return None
        cls = type(item)
        if cls is str:
            if not item.isascii():  # type: ignore[union-attr]
                return None
        elif cls is int:
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:  # type: ignore[operator]
                return None
        elif cls is float:
            if not _is_plain_float(item):  # type: ignore[arg-type]
                return None
        elif item is not None and cls is not bool:
            return None
    frozen = _new_object(FrozenJsonObject)
    _fill(frozen, value)  # type: ignore[arg-type]
    # the seal (and set: reading an unset slot would raise and catch an error); no depth: 1
    mark_checked(frozen, None)
    return frozen


def _enter(value: object, depth: int, walk: _Walk) -> int:
    if depth >= MAX_DEPTH:
        raise _Invalid(JsonValueError, f"nesting deeper than {MAX_DEPTH} levels")
    ident = id(value)
    path = walk.path
    if ident in path:
        raise _Invalid(JsonValueError, "circular reference")
    path.add(ident)
    return ident


def _is_plain_float(item: float) -> bool:
    return math.isfinite(item) and (item != 0.0 or math.copysign(1.0, item) > 0)


def _snap_object(value: dict[object, object], depth: int, walk: _Walk) -> FrozenJsonObject:
    ident = _enter(value, depth, walk)
    outer_deepest = walk.deepest
    walk.deepest = depth
    child = depth + 1
    out: dict[str, JsonValue] = {}
    key: object = None
    try:
        for key, item in value.items():
            if type(key) is not str:
                raise _Invalid(JsonTypeError, f"object key {key!r} is not a str", at_container=True)
            if not key.isascii():
                _check_key(key)
            cls = type(item)
            if cls is str:
                if not item.isascii():  # type: ignore[union-attr]
                    _check_text(item)  # type: ignore[arg-type]
                out[key] = item  # type: ignore[assignment]
            elif (
                item is None
                or cls is bool
                or (cls is int and -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER)  # type: ignore[operator]
                or (cls is float and _is_plain_float(item))  # type: ignore[arg-type]
            ):
                out[key] = item  # type: ignore[assignment]
            elif cls is dict:
                out[key] = _snap_object(item, child, walk)  # type: ignore[arg-type]
            else:
                out[key] = _snap(item, child, walk)
    except _Invalid as invalid:
        if invalid.at_container:
            invalid.at_container = False
        else:
            invalid.keys.append(key)  # type: ignore[arg-type]
        raise
    walk.path.discard(ident)
    deepest = walk.deepest
    frozen = _new_object(FrozenJsonObject)
    _fill(frozen, out)
    _set_depth(frozen, deepest - depth + 1)
    mark_checked(frozen, None)
    if outer_deepest > deepest:
        walk.deepest = outer_deepest
    return frozen


def _snap_array(
    value: list[object] | tuple[object, ...], depth: int, walk: _Walk
) -> tuple[JsonValue, ...]:
    ident = _enter(value, depth, walk)
    if depth > walk.deepest:
        walk.deepest = depth
    child = depth + 1
    out: list[JsonValue] = []
    append = out.append
    index = -1
    try:
        for index, item in enumerate(value):  # noqa: B007 - the except clause reads index
            cls = type(item)
            if cls is str:
                if not item.isascii():  # type: ignore[union-attr]
                    _check_text(item)  # type: ignore[arg-type]
                append(item)  # type: ignore[arg-type]
            elif (
                item is None
                or cls is bool
                or (cls is int and -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER)  # type: ignore[operator]
                or (cls is float and _is_plain_float(item))  # type: ignore[arg-type]
            ):
                append(item)  # type: ignore[arg-type]
            elif cls is dict:
                append(_snap_object(item, child, walk))  # type: ignore[arg-type]
            else:
                append(_snap(item, child, walk))
    except _Invalid as invalid:
        invalid.keys.append(index)
        raise
    walk.path.discard(ident)
    return tuple(out)


def _check_key(key: str) -> None:
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _Invalid(
            JsonValueError,
            f"object key {key!r} contains a lone surrogate at index {exc.start}",
            at_container=True,
        ) from None


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _Invalid(
            JsonValueError, f"string contains a lone surrogate at index {exc.start}"
        ) from None


def _int_text(value: int) -> str:
    # str() refuses integers of more than 4300 digits (sys.get_int_max_str_digits)
    if value.bit_length() <= 1000:
        return str(value)
    return f"of {value.bit_length()} bits"


def _describe(value: object) -> str:
    cls = type(value)
    return (
        f"a value of type {cls.__module__}.{cls.__qualname__}"
        if cls.__module__ != "builtins"
        else f"a value of type {cls.__qualname__}"
    )


def thaw_json(value: JsonValue) -> Any:
    """Return a plain mutable copy of a snapshotted value (``dict`` / ``list`` / scalars)."""
    if isinstance(value, FrozenJsonObject):
        return {k: thaw_json(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw_json(v) for v in value]
    return value


def _json_default(value: object) -> Any:
    raise TypeError(f"{_describe(value)} is not JSON serializable")


def dumps_json(value: object, *, compact: bool = True) -> str:
    """Serialize JSON data (including snapshotted values) to text.

    ``compact=True`` gives the original's compact form (``["red","green"]``), as used in
    model-facing messages. Non-ASCII text is kept as is.
    """
    separators = (",", ":") if compact else (", ", ": ")
    return json.dumps(
        value, separators=separators, ensure_ascii=False, default=_json_default, allow_nan=False
    )


def json_kind(value: object) -> str:
    """The JSON type of a scalar: ``"null"``, ``"boolean"``, ``"number"``, ``"string"``, or
    ``"container"`` for anything else. ``bool`` is never a number, so comparing
    ``(json_kind(a), a)`` pairs never treats ``True == 1``; ``1 == 1.0`` stays equal (one JSON
    number type).
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "container"
