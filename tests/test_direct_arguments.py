"""An argument class of scalars is built by calling it: exactly what cattrs' own structuring
of the class builds, for every argument the tool's validator accepts, and cattrs still builds
every class it has a hook of the user's for."""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Literal

import attrs
from hypothesis import given
from hypothesis import strategies as st

from dsh_tools import (
    CancelSignal,
    ToolCallRequest,
    ToolRegistry,
    ToolRunContext,
    converter,
    define_tool,
    run_tool_calls,
    snapshot_json,
)
from dsh_tools._values._attrs_schema import derive_attrs_schema
from dsh_tools._values._converter import cattrs_generated

NEVER = CancelSignal.never()


@attrs.frozen(kw_only=True)
class Scalars:
    count: int
    ratio: float
    name: str
    flag: bool
    mode: Literal["fast", "slow"]
    limit: int | None = None
    scale: float = 1.5
    label: str | None = None


@dataclasses.dataclass(frozen=True)
class ScalarsDataclass:
    count: int
    ratio: float
    name: str = "n"


_numbers = st.integers(-(2**53) + 1, 2**53 - 1)
_floats = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda f: f != 0 or str(f)[0] != "-"
)
_integral = st.integers(-(2**40), 2**40).map(float)


@st.composite
def _scalars_arguments(draw: st.DrawFn) -> dict[str, object]:
    arguments: dict[str, object] = {
        "count": draw(_numbers | _integral),
        "ratio": draw(_numbers | _floats),
        "name": draw(st.text()),
        "flag": draw(st.booleans()),
        "mode": draw(st.sampled_from(["fast", "slow"])),
    }
    if draw(st.booleans()):
        arguments["limit"] = draw(_numbers | _integral)
    if draw(st.booleans()):
        arguments["scale"] = draw(_numbers | _floats)
    if draw(st.booleans()):
        arguments["unknown"] = draw(st.text())  # ignored, as in the spec form
    return arguments


def _parallel(_args: object) -> bool:
    return True


async def _received(parameters: type[object], arguments: list[dict[str, object]]) -> list[object]:
    received: dict[str, object] = {}

    async def body(args: object, context: ToolRunContext) -> str:
        received[context.call_id] = args
        return "ok"

    registry = ToolRegistry()
    registry.register(
        define_tool(
            name="t",
            description="t",
            parameters=parameters,
            execute=body,
            is_concurrency_safe=_parallel,
        )
    )
    calls = [
        ToolCallRequest(call_id=f"c{i}", name="t", arguments=json.dumps(value))
        for i, value in enumerate(arguments)
    ]
    batch = await run_tool_calls(registry, calls, signal=NEVER)
    assert all(not result.is_error for result in batch.results), batch.results
    return [received[call.call_id] for call in calls]


def _by_cattrs(cls: type, arguments: dict[str, object]) -> object:
    # what the library's converter builds from the same shaped data, through cattrs' hook
    shaped = derive_attrs_schema(cls).shape(typing.cast(typing.Any, snapshot_json(arguments)))
    return converter.get_structure_hook(cls)(dict(shaped), cls)


def test_scalar_classes_are_built_directly_and_nested_ones_by_cattrs() -> None:
    assert derive_attrs_schema(Scalars).direct
    assert derive_attrs_schema(ScalarsDataclass).direct

    @attrs.frozen
    class Nested:
        inner: Scalars

    @attrs.frozen
    class Listed:
        names: list[str]

    @attrs.frozen
    class Aliased:
        _secret: str

    assert not derive_attrs_schema(Nested).direct
    assert not derive_attrs_schema(Listed).direct
    assert not derive_attrs_schema(Aliased).direct  # its __init__ takes "secret"
    assert cattrs_generated(converter.get_structure_hook(Scalars))


@given(st.lists(_scalars_arguments(), min_size=1, max_size=4))
async def test_a_scalar_class_gets_what_cattrs_builds(arguments: list[dict[str, object]]) -> None:
    received = await _received(Scalars, arguments)
    expected = [_by_cattrs(Scalars, value) for value in arguments]
    assert expected == received
    # the same types too (an int field never holds 3.0, a float field never holds 3)
    for instance in received:
        fields = attrs.asdict(typing.cast(attrs.AttrsInstance, instance))
        assert type(fields["count"]) is int
        assert type(fields["ratio"]) is float
        assert type(fields["scale"]) is float


async def test_a_scalar_dataclass_gets_what_cattrs_builds() -> None:
    arguments: list[dict[str, object]] = [
        {"count": 3.0, "ratio": 2},
        {"count": 1, "ratio": 0.5, "name": "x"},
    ]
    received = await _received(ScalarsDataclass, arguments)
    assert [
        ScalarsDataclass(count=3, ratio=2.0),
        ScalarsDataclass(count=1, ratio=0.5, name="x"),
    ] == received
    assert [_by_cattrs(ScalarsDataclass, value) for value in arguments] == received


async def test_a_hook_of_the_users_for_the_class_still_builds_it() -> None:
    @attrs.frozen
    class Hooked:
        count: int

    converter.register_structure_hook(Hooked, lambda data, _cls: Hooked(count=data["count"] * 10))
    assert not cattrs_generated(converter.get_structure_hook(Hooked))
    assert [Hooked(count=20)] == await _received(Hooked, [{"count": 2}])


async def test_a_failing_init_reads_as_cattrs_reports_it() -> None:
    def positive(_instance: object, _attribute: object, value: int) -> None:
        if value <= 0:
            raise ValueError("count must be positive")

    @attrs.frozen
    class Positive:
        count: int = attrs.field(validator=positive)

    async def body(args: Positive, context: ToolRunContext) -> str:
        return str(args.count)

    registry = ToolRegistry()
    registry.register(define_tool(name="t", description="t", parameters=Positive, execute=body))
    batch = await run_tool_calls(
        registry, [ToolCallRequest(call_id="c", name="t", arguments='{"count": -1}')], signal=NEVER
    )
    (result,) = batch.results
    assert result.is_error
    assert (
        'Error: ClassValidationError "While structuring Positive" with 1 sub-exception: '
        "ValueError: count must be positive"
    ) == result.content[0].text  # type: ignore[union-attr]
