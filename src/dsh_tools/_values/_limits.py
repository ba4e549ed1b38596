"""What a call may need before its body starts: its conflict keys, a weighted slot of its
capacity class, a token of its class's rate. The values here are plain data; the registry's
gate (``_pipeline._gate``) holds them for the calls of every batch, and a :class:`Limiter`
(``dsh_tools.postgres.PostgresLimiter``) holds them for every process that shares it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Final, Protocol, cast

import attrs

from ._checks import check_int, check_seconds

__all__ = [
    "LimitClaim",
    "Limiter",
    "RateLimit",
    "check_capacity_limits",
    "check_conflict_keys",
    "check_rate_limits",
]

_CAPACITY_LIMITS_TYPE: Final = "capacity_limits must map class names (str) to positive integers"
_RATE_LIMITS_TYPE: Final = "rate_limits must map class names (str) to RateLimit values"


def _positive_calls(_instance: object, _attribute: object, value: object) -> None:
    check_int("RateLimit calls", value)


def _positive_seconds(_instance: object, _attribute: object, value: object) -> None:
    check_seconds("RateLimit per", value)


@attrs.frozen
class RateLimit:
    """At most ``calls`` bodies of a capacity class start in any ``per`` seconds (trio's clock;
    with a shared :class:`Limiter`, the database's).

    Each start takes a token, and the token comes back ``per`` seconds after it was taken: a
    token bucket of ``calls`` tokens that never lets a window of ``per`` seconds hold more than
    ``calls`` starts (a bucket refilled continuously would let a burst and its refill share one
    window). A call waits for a token after its policies allowed it and before its body starts;
    interrupted while it waits, it is ``ABORTED_BEFORE_DISPATCH``.

    Raises:
        TypeError, ValueError: ``calls`` is not a positive ``int``, or ``per`` is not a
            positive finite number of seconds.
    """

    calls: int = attrs.field(validator=_positive_calls)
    per: float = attrs.field(validator=_positive_seconds)


def _by_class(value: object, rule: str) -> Iterator[tuple[str, object]]:
    """The items of a mapping of capacity class names (``rule`` says what it must be)."""
    if not isinstance(value, Mapping):
        raise TypeError(f"{rule}, not {type(value).__name__}")
    for name, item in cast("Mapping[object, object]", value).items():
        if type(name) is not str or not name:
            raise TypeError(f"{rule}: {name!r} is not a class name")
        yield name, item


def check_capacity_limits(value: object) -> dict[str, int]:
    """A mapping of capacity class names to positive slot counts, as a ``dict`` (``None``:
    empty).
    """
    if value is None:
        return {}
    return {
        name: check_int(f'capacity_limits["{name}"]', limit)
        for name, limit in _by_class(value, _CAPACITY_LIMITS_TYPE)
    }


def check_rate_limits(value: object) -> dict[str, RateLimit]:
    """A mapping of capacity class names to :class:`RateLimit` values, as a ``dict``."""
    if value is None:
        return {}
    rates: dict[str, RateLimit] = {}
    for name, rate in _by_class(value, _RATE_LIMITS_TYPE):
        if not isinstance(rate, RateLimit):
            raise TypeError(
                f'{_RATE_LIMITS_TYPE}: rate_limits["{name}"] is a {type(rate).__name__}, '
                "not a RateLimit"
            )
        rates[name] = rate
    return rates


def check_conflict_keys(returned: object) -> tuple[str, ...]:
    """What a tool's ``conflict_keys`` returned, as a sorted tuple of distinct keys.

    Raises:
        TypeError: it is a ``str`` (one key must be in a collection), not iterable, or holds
            something other than a non-empty ``str``.
    """
    if isinstance(returned, str):
        raise TypeError(f"conflict_keys must return a collection of keys, not the str {returned!r}")
    if not isinstance(returned, Iterable):
        raise TypeError(
            f"conflict_keys must return a collection of keys (str), not {type(returned).__name__}"
        )
    keys = set[str]()
    for key in cast("Iterable[object]", returned):
        if type(key) is not str or not key:
            raise TypeError(f"conflict_keys must return non-empty str keys, not {key!r}")
        keys.add(key)
    return tuple(sorted(keys))


@attrs.frozen
class LimitClaim:
    """What one call needs before its body starts, as a :class:`Limiter` is asked for it.

    Attributes:
        keys: the call's conflict keys (sorted, distinct): no two holders of one key at once.
        capacity_class: the tool's capacity class, when the registry limits it.
        weight: the slots the call takes of that class (the tool's ``capacity_weight``, at most
            the class's limit); ``0`` without a limited class.
        capacity_limit: the class's slot count (``ToolRegistry(capacity_limits=...)``).
        rate: the class's :class:`RateLimit` (``ToolRegistry(rate_limits=...)``), if any.
        rate_class: the class the rate is counted for.
    """

    keys: tuple[str, ...] = ()
    capacity_class: str | None = None
    weight: int = 0
    capacity_limit: int | None = None
    rate: RateLimit | None = None
    rate_class: str | None = None

    @property
    def shares_anything(self) -> bool:
        """Whether a shared limiter has anything to hold for this claim."""
        return bool(self.keys) or self.weight > 0 or self.rate is not None


class Limiter(Protocol):
    """Holds claims for every process that shares it (``ToolRegistry(limiter=...)``).

    The registry's own gate first holds a claim among the calls of this process (in model
    order within a batch); then ``acquire`` holds it among every process sharing the limiter.
    ``acquire`` waits until it holds the whole claim and returns what releases it; cancelled
    (trio), it holds nothing. An exception it raises (a lost database connection) becomes the
    waiting call's error result: the body never runs unguarded. The returned release is
    awaited once, shielded, when the body is done.
    """

    async def acquire(self, claim: LimitClaim) -> Callable[[], Awaitable[None]]: ...
