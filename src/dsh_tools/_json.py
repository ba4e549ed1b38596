"""The lossless JSON boundary: :func:`snapshot_json` and the immutable values it produces.

Every value that crosses the boundary between a model, a tool and a hook (a call's arguments,
a final result, a context, a session event) is snapshotted: validated as data that survives a
JSON round trip unchanged, and copied into a detached, deeply immutable value. JSON objects
become :class:`FrozenJsonObject` (an immutable ``Mapping`` that compares equal to the equal
``dict``), JSON arrays become ``tuple``.

Python decisions (the original is TypeScript):

- ``bool`` is its own JSON type, never a number.
- ``int`` must lie within ±(2**53 - 1), the range every JSON reader represents exactly.
- ``float`` must be finite and not ``-0.0`` (which JSON cannot tell from ``0``).
- ``str`` must not contain lone surrogates (they cannot be encoded as UTF-8).
- ``dict`` (and subclasses) with ``str`` keys, ``list`` and ``tuple`` are accepted; so are the
  library's own frozen values, which are returned as they are (already validated, immutable).
- Everything else is rejected, including ``bytes``, sets, ``str``/``int`` subclasses such as
  enums, attrs instances and dataclasses: a boundary that guesses silently loses data.
- Cycles are detected along the current path (a sub-object shared by two siblings is fine and
  is copied twice); nesting deeper than :data:`MAX_DEPTH` containers is rejected with a clear
  error instead of ``RecursionError``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any, Final, NoReturn, TypeAlias, cast

__all__ = [
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "FrozenJsonObject",
    "JsonSnapshotError",
    "JsonTypeError",
    "JsonValue",
    "JsonValueError",
    "dumps_json",
    "snapshot_json",
    "thaw_json",
]

MAX_DEPTH: Final = 200
"""How many containers (objects and arrays) may nest inside each other in one value."""

MAX_SAFE_INTEGER: Final = 2**53 - 1
"""The largest integer magnitude that crosses the boundary (JavaScript's safe-integer range)."""

JsonScalar: TypeAlias = bool | int | float | str | None
JsonValue: TypeAlias = "bool | int | float | str | FrozenJsonObject | tuple[JsonValue, ...] | None"
"""A snapshotted JSON value: scalars, :class:`FrozenJsonObject` and tuples of JSON values."""


class FrozenJsonObject(Mapping[str, "JsonValue"]):
    """An immutable JSON object: a read-only ``Mapping`` from ``str`` to JSON values.

    It compares equal to a ``dict`` (or any ``Mapping``) with equal items, is hashable, and
    keeps the key order it was built with. Instances come only from :func:`snapshot_json`
    (and the converter), so their content is always valid JSON data.
    """

    __slots__ = ("_data", "_hash")

    _data: dict[str, JsonValue]
    _hash: int  # unset until the first hash() (slot left empty: cheaper to build)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("FrozenJsonObject has no public constructor: use snapshot_json(mapping)")

    @classmethod
    def _wrap(cls, data: dict[str, JsonValue]) -> FrozenJsonObject:
        self = _new_object(cls)
        _set_data(self, data)
        return self

    def __getitem__(self, key: str) -> JsonValue:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenJsonObject):
            return self._data == other._data
        if isinstance(other, dict):
            return self._data == other
        if isinstance(other, Mapping):
            return self._data == dict(other)  # pyright: ignore[reportUnknownArgumentType]
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            cached = hash(frozenset(self._data.items()))
            _set_hash(self, cached)
            return cached

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("FrozenJsonObject is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("FrozenJsonObject is immutable")

    def __repr__(self) -> str:
        return f"FrozenJsonObject({self._data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_unpickle_frozen, (self._data,))

    def __copy__(self) -> FrozenJsonObject:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenJsonObject:
        return self


# Building a FrozenJsonObject is on the hot path of every snapshot: its slots are filled through
# their descriptors, bypassing the __setattr__ that makes instances immutable.
_new_object: Final = object.__new__
_set_data: Final = FrozenJsonObject.__dict__["_data"].__set__
_set_hash: Final = FrozenJsonObject.__dict__["_hash"].__set__


def _unpickle_frozen(data: dict[str, JsonValue]) -> FrozenJsonObject:
    return FrozenJsonObject._wrap(data)


class JsonSnapshotError(Exception):
    """A value is not lossless JSON data. ``path`` names where (``$``, ``$.a[2]``, ``$["a b"]``),
    ``reason`` says why; the message is ``"<path>: <reason>"``."""

    path: str
    reason: str

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class JsonTypeError(JsonSnapshotError, TypeError):
    """A value of a type that JSON cannot carry (bytes, a set, an object, a non-``str`` key)."""


class JsonValueError(JsonSnapshotError, ValueError):
    """A value of a JSON type that cannot cross losslessly (NaN, ``-0.0``, a huge ``int``, a lone
    surrogate), a cycle, or nesting deeper than :data:`MAX_DEPTH`."""


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
    try:
        return _snap(value, 0, set())
    except _Invalid as invalid:
        raise invalid.kind(_format_path(invalid.keys), invalid.reason) from None


# The walk is written for speed (it must not be slower than a json.dumps/json.loads round trip):
# exact-type checks instead of isinstance, the common scalars handled inline in the container
# loops instead of through a call, and one try block per container rather than per item. The
# ``path`` set (ids of the containers on the current path) needs no cleanup when a value is
# rejected, because the whole snapshot is abandoned then.


def _snap(value: object, depth: int, path: set[int]) -> JsonValue:
    cls = type(value)
    if cls is str:
        if not value.isascii():  # type: ignore[union-attr]
            _check_text(value)  # type: ignore[arg-type]
        return value  # type: ignore[return-value]
    if cls is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:  # type: ignore[operator]
            return value  # type: ignore[return-value]
        raise _Invalid(
            JsonValueError, f"integer {value} is outside ±(2**53 - 1) and would lose precision"
        )
    if cls is float:
        if math.isfinite(value):  # type: ignore[arg-type]
            if value == 0.0 and math.copysign(1.0, value) < 0:  # type: ignore[arg-type]
                raise _Invalid(JsonValueError, "-0.0 cannot be represented in JSON")
            return value  # type: ignore[return-value]
        raise _Invalid(JsonValueError, f"{value!r} is not a finite number")
    if value is None or cls is bool or cls is FrozenJsonObject:
        return value  # type: ignore[return-value]
    if cls is dict:
        return _snap_object(value, depth, path)  # type: ignore[arg-type]
    if cls is list or cls is tuple:
        return _snap_array(value, depth, path)  # type: ignore[arg-type]
    if isinstance(value, dict):
        return _snap_object(cast("dict[object, object]", value), depth, path)
    if isinstance(value, list):
        return _snap_array(cast("list[object]", value), depth, path)
    raise _Invalid(JsonTypeError, f"{_describe(value)} is not JSON data")


def _enter(value: object, depth: int, path: set[int]) -> int:
    if depth >= MAX_DEPTH:
        raise _Invalid(JsonValueError, f"nesting deeper than {MAX_DEPTH} levels")
    ident = id(value)
    if ident in path:
        raise _Invalid(JsonValueError, "circular reference")
    path.add(ident)
    return ident


def _is_plain_float(item: float) -> bool:
    return math.isfinite(item) and (item != 0.0 or math.copysign(1.0, item) > 0)


def _snap_object(value: dict[object, object], depth: int, path: set[int]) -> FrozenJsonObject:
    ident = _enter(value, depth, path)
    depth += 1
    out: dict[str, JsonValue] = {}
    key: object = None
    try:
        for key, item in value.items():
            if type(key) is not str:
                raise _Invalid(JsonTypeError, f"object key {key!r} is not a str", at_container=True)
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
                out[key] = _snap_object(item, depth, path)  # type: ignore[arg-type]
            else:
                out[key] = _snap(item, depth, path)
    except _Invalid as invalid:
        if invalid.at_container:
            invalid.at_container = False
        else:
            invalid.keys.append(key)  # type: ignore[arg-type]
        raise
    path.discard(ident)
    frozen = _new_object(FrozenJsonObject)
    _set_data(frozen, out)
    return frozen


def _snap_array(
    value: list[object] | tuple[object, ...], depth: int, path: set[int]
) -> tuple[JsonValue, ...]:
    ident = _enter(value, depth, path)
    depth += 1
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
                append(_snap_object(item, depth, path))  # type: ignore[arg-type]
            else:
                append(_snap(item, depth, path))
    except _Invalid as invalid:
        invalid.keys.append(index)
        raise
    path.discard(ident)
    return tuple(out)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _Invalid(
            JsonValueError, f"string contains a lone surrogate at index {exc.start}"
        ) from None


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
    if isinstance(value, FrozenJsonObject):
        return value._data
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
    number type)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "container"
