"""The per-call fast paths (issue 10) give exactly what the general paths give.

The pipeline builds a call's run context, its text block and its success without attrs'
``__init__``, copies flat arguments without the full snapshot walk, parses argument text with the
decoder's scanner, validates a call's arguments once for its classifier and its body, and builds a
call's ``ToolExecution`` only when a hook, guard or observer needs it. Each test below holds one
of these to the behaviour of the path it shortcuts.
"""

from __future__ import annotations

import json
import typing
from unittest import mock

import attrs
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

import dsh_tools._values._schema
from dsh_tools import (
    TOOL_ABORTED,
    BatchEndEvent,
    BatchStartEvent,
    CancelController,
    CancelSignal,
    FrozenJsonObject,
    HookContext,
    JsonValueError,
    MemorySessionLog,
    SchemaSpec,
    TextBlock,
    ToolCallEvent,
    ToolCallRequest,
    ToolDefinition,
    ToolExecution,
    ToolExecutionResult,
    ToolExecutionToken,
    ToolRegistry,
    ToolResultEvent,
    ToolRunContext,
    UserSource,
    define_tool,
    parse_call_arguments,
    run_tool_calls,
    snapshot_json,
    validate_args,
)
from dsh_tools._scheduling._lane import _STEPS_PER_CHECKPOINT  # pyright: ignore[reportPrivateUsage]
from dsh_tools._values._content import text_block
from dsh_tools._values._execution import (
    ContextFields,
    new_execution_token,
    run_context,
    success_result,
    text_success,
)
from dsh_tools._values._json import MAX_SAFE_INTEGER

NEVER = CancelSignal.never()
SPEC: SchemaSpec = {
    "a": {"type": "integer", "required": True},
    "b": {"type": "string", "required": True},
}


class _Call:
    """A stand-in for the pipeline's call: what a body's context reads from it."""

    runs = 1
    batch = None

    def __init__(self, token: ToolExecutionToken, deferred: list[HookContext]) -> None:
        self.token = token
        self.deferred = deferred
        self.reads = 0

    def context_fields(self) -> ContextFields:
        self.reads += 1
        return self.token, "c1", "echo", snapshot_json({"a": 1}), "agent", None, self.deferred

    def report_progress(
        self,
        message: str | None,
        progress: float | None,
        total: float | None,
        output: str | None,
        /,
    ) -> _Call:
        return self


def test_run_context_reads_from_its_call_what_the_attrs_constructor_is_given() -> None:
    token = new_execution_token()
    deferred: list[HookContext] = []
    call = _Call(token, deferred)

    fast = run_context(NEVER, call)
    slow = ToolRunContext(
        token=token,
        call_id="c1",
        name="echo",
        arguments=snapshot_json({"a": 1}),
        signal=NEVER,
        agent="agent",
        parent=None,
        _deferred=deferred,
        _receiver=call,
    )

    assert call.reads == 0  # nothing is read from the call until a field is
    assert fast.signal is NEVER
    assert call.reads == 0
    assert fast.call_id == "c1"
    assert fast.token is token
    assert call.reads == 1  # read once, then kept
    assert slow == fast
    assert repr(slow) == repr(fast)
    assert attrs.asdict(slow, recurse=False) == attrs.asdict(fast, recurse=False)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        fast.name = "other"  # type: ignore[misc]
    context = HookContext(content=(TextBlock(text="note"),), source=UserSource())
    fast.defer_context(context)
    assert [context] == deferred
    # a name that is no field is missing as on any object (no lookup of the call)
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        fast.missing  # type: ignore[attr-defined]  # noqa: B018
    assert not hasattr(fast, "missing")
    assert call.reads == 1


def test_a_context_reads_nothing_from_a_call_it_does_not_have() -> None:
    # built around the constructor (as copy or pickle machinery would): no call to read
    bare = object.__new__(ToolRunContext)
    with pytest.raises(AttributeError, match="call_id"):
        bare.call_id  # noqa: B018
    assert getattr(bare, "__deepcopy__", None) is None


async def test_a_context_read_after_progress_and_after_its_call_ended() -> None:
    kept: list[ToolRunContext] = []

    async def body(args: object, context: ToolRunContext) -> str:
        context.report_progress(message="one")
        context.report_progress(message="two")  # the call's progress state takes it
        kept.append(context)
        return f"{context.call_id}:{context.name}"

    registry = ToolRegistry()
    registry.register(define_tool(name="echo", description="d", parameters={}, execute=body))
    batch = await run_tool_calls(
        registry,
        [ToolCallRequest(call_id="c9", name="echo", arguments="{}")],
        signal=NEVER,
    )
    assert batch.results[0].content == (TextBlock(text="c9:echo"),)
    (context,) = kept
    assert (context.call_id, context.name, context.arguments) == ("c9", "echo", {})
    assert isinstance(context.token, ToolExecutionToken)


def test_text_block_and_success_result_build_what_the_constructors_build() -> None:
    block = text_block("hello")
    result = success_result((block,), None)

    assert TextBlock(text="hello") == block
    assert ToolExecutionResult(content=(TextBlock(text="hello"),), is_error=False) == result
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        block.text = "other"  # type: ignore[misc]


_ascii_keys = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=5)
_flat_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER),
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x != 0.0 or str(x) == "0.0"),
    st.text(max_size=5),
)


@given(st.dictionaries(_ascii_keys, _flat_values, max_size=6))
def test_a_flat_object_snapshots_like_its_json_round_trip(data: dict[str, object]) -> None:
    frozen = snapshot_json(data)

    assert type(frozen) is FrozenJsonObject
    assert json.loads(json.dumps(data)) == frozen
    assert list(data) == list(frozen)
    data["new key"] = 1  # the copy is detached from the caller's dict
    assert "new key" not in frozen


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"n": MAX_SAFE_INTEGER + 1}, "$.n: integer"),
        ({"x": -0.0}, "$.x: -0.0 cannot be represented"),
        ({"x": float("nan")}, "$.x: nan is not a finite number"),
        ({"s": "\udc80"}, "$.s: string contains a lone surrogate"),
        ({"k\udc80": 1}, "object key"),
    ],
)
def test_a_flat_object_the_fast_path_declines_is_judged_by_the_full_walk(
    data: dict[str, object], message: str
) -> None:
    with pytest.raises(JsonValueError) as caught:
        snapshot_json(data)

    assert message in str(caught.value)


def test_a_flat_frozen_object_counts_one_level_when_nested() -> None:
    flat = snapshot_json({"a": 1})
    nested: object = flat
    for _ in range(199):  # 200 levels in all: the most MAX_DEPTH allows
        nested = [nested]

    assert snapshot_json(nested) is not None
    with pytest.raises(JsonValueError, match="nesting deeper than 200 levels"):
        snapshot_json([nested])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        (' {"a": 1}', {"a": 1}),
        ('{"a": 1}\n', {"a": 1}),
        ('\t{"a": 1} ', {"a": 1}),
        ("[1, 2]", (1, 2)),
        ("3", 3),
    ],
)
def test_argument_text_parses_with_or_without_surrounding_whitespace(
    text: str, expected: object
) -> None:
    assert expected == parse_call_arguments(text)


@pytest.mark.parametrize("text", ['{"a": 1} x', '{"a": 1}{}', "NaN", '{"a": NaN}', "{", " "])
def test_argument_text_with_anything_but_whitespace_around_the_value_stays_text(text: str) -> None:
    assert text == parse_call_arguments(text)


def test_a_value_one_spec_accepted_is_still_checked_by_another() -> None:
    arguments = snapshot_json({"a": 1, "b": "x"})

    assert [] == validate_args(SPEC, arguments)
    assert ['missing required property "c"'] == validate_args(
        {**SPEC, "c": {"type": "string", "required": True}}, arguments
    )


def test_a_rejected_value_is_rejected_every_time() -> None:
    tool = define_tool(name="t", description="t", parameters=SPEC, execute=_echo)
    registry = ToolRegistry()
    registry.register(tool)
    bad = ToolCallRequest(call_id="c1", name="t", arguments='{"a": "x", "b": "y"}')

    async def main() -> list[bool]:
        first = await run_tool_calls(registry, [bad], signal=NEVER)
        second = await run_tool_calls(registry, [bad, bad], signal=NEVER)
        return [r.is_error for r in (*first.results, *second.results)]

    assert [True, True, True] == trio.run(main)


async def _echo(args: FrozenJsonObject, context: ToolRunContext) -> str:
    return f"{args['a']}:{args['b']}"


async def test_a_calls_arguments_are_validated_once_for_its_classifier_and_body() -> None:
    registry = ToolRegistry()
    registry.register(
        define_tool(
            name="t",
            description="t",
            parameters=SPEC,
            execute=_echo,
            is_concurrency_safe=lambda _args: True,
        )
    )
    calls = [
        ToolCallRequest(call_id=f"c{i}", name="t", arguments=json.dumps({"a": i, "b": "x"}))
        for i in range(3)
    ]

    # a frozen object is marked once per validator that accepts it: once per call here
    with mock.patch.object(
        dsh_tools._values._schema, "mark_checked", wraps=dsh_tools._values._schema.mark_checked
    ) as checks:
        batch = await run_tool_calls(registry, calls, signal=NEVER)

    assert ["0:x", "1:x", "2:x"] == [r.content[0].text for r in batch.results]  # type: ignore[union-attr]
    assert 3 == checks.call_count


async def test_every_view_of_a_call_shares_one_execution_and_token() -> None:
    registry = ToolRegistry()
    seen: dict[str, object] = {}

    async def body(args: FrozenJsonObject, context: ToolRunContext) -> str:
        seen["context"] = context
        return "ok"

    def guard(execution: ToolExecution) -> None:
        seen["guard"] = execution

    registry.register(define_tool(name="t", description="t", parameters={}, execute=body))
    registry.guard(guard)
    registry.hooks.result.add(lambda execution, _result: seen.setdefault("result", execution))

    await run_tool_calls(
        registry, [ToolCallRequest(call_id="c1", name="t", arguments="{}")], signal=NEVER
    )

    guard_view, result_view, context = seen["guard"], seen["result"], seen["context"]
    assert isinstance(guard_view, ToolExecution)
    assert isinstance(context, ToolRunContext)
    assert guard_view is result_view
    assert guard_view.token is context.token
    assert ("c1", "t", {}) == (context.call_id, context.name, context.arguments)


async def test_a_call_no_hook_looks_at_still_gives_its_body_a_token_of_its_own() -> None:
    registry = ToolRegistry()
    tokens: list[object] = []

    async def body(args: FrozenJsonObject, context: ToolRunContext) -> str:
        tokens.append(context.token)
        return "ok"

    registry.register(
        define_tool(
            name="t",
            description="t",
            parameters={},
            execute=body,
            is_concurrency_safe=lambda _args: True,
        )
    )
    calls = [ToolCallRequest(call_id=f"c{i}", name="t", arguments="{}") for i in range(3)]

    await run_tool_calls(registry, calls, signal=NEVER)

    assert 3 == len({id(token) for token in tokens})


@pytest.mark.parametrize(
    ("prop", "value", "expected"),
    [
        ({"type": "integer"}, 1, []),
        ({"type": "integer"}, 2.0, []),
        ({"type": "integer"}, 2.5, ['"p" must be an integer']),
        ({"type": "integer"}, True, ['"p" must be an integer']),
        ({"type": "number"}, 1, []),
        ({"type": "number"}, 1.5, []),
        ({"type": "number"}, False, ['"p" must be a number']),
        ({"type": "string"}, "x", []),
        ({"type": "string"}, 1, ['"p" must be a string']),
        ({"type": "boolean"}, True, []),
        ({"type": "boolean"}, 1, ['"p" must be a boolean']),
        ({"type": "string", "enum": ["a"]}, "a", []),
        ({"type": "string", "enum": ["a"]}, "z", ['"p" must be one of ["a"]']),
        ({"type": "integer", "enum": [1]}, 2, ['"p" must be one of [1]']),
    ],
)
def test_a_scalar_of_a_passing_type_is_judged_as_its_check_judges_it(
    prop: dict[str, object], value: object, expected: list[str]
) -> None:
    # a value whose exact type passes the property skips the per-field check; any other value,
    # and every value of a property with an enum, goes through it
    spec: SchemaSpec = {"p": prop}  # type: ignore[dict-item]

    assert expected == validate_args(spec, {"p": value})
    assert expected == validate_args(spec, snapshot_json({"p": value}))


async def test_a_pooled_body_returning_a_str_gets_what_the_general_path_gives() -> None:
    controller = CancelController()
    context = HookContext(content=[TextBlock(text="note")], source=UserSource())

    async def body(args: FrozenJsonObject, run: ToolRunContext) -> str:
        kind = args["kind"]
        if kind == "defer":
            run.defer_context(context)
        elif kind == "cancel":
            controller.cancel()
        elif kind == "surrogate":
            return "\udcff"
        return "é" if kind == "non-ascii" else "ok"

    registry = ToolRegistry()
    registry.register(
        define_tool(
            name="t",
            description="t",
            parameters={"kind": {"type": "string", "required": True}},
            execute=body,
            is_concurrency_safe=lambda _args: True,
        )
    )
    kinds = ["plain", "non-ascii", "defer", "surrogate"]
    calls = [
        ToolCallRequest(call_id=kind, name="t", arguments=json.dumps({"kind": kind}))
        for kind in kinds
    ]
    cancel = ToolCallRequest(call_id="cancel", name="t", arguments='{"kind": "cancel"}')

    batch = await run_tool_calls(registry, calls, signal=controller.signal)
    # a body that fires the batch's signal and then returns a str is aborted
    aborted = await run_tool_calls(registry, [cancel], signal=controller.signal)

    plain, non_ascii, deferred, surrogate = batch.results
    assert ToolExecutionResult(content=(TextBlock(text="ok"),), is_error=False) == plain
    assert ToolExecutionResult(content=(TextBlock(text="é"),), is_error=False) == non_ascii
    assert (
        ToolExecutionResult(
            content=(TextBlock(text="ok"),), is_error=False, additional_contexts=(context,)
        )
        == deferred
    )
    # a str that cannot cross the JSON boundary still fails stage 9
    assert surrogate.is_error
    assert "losslessly" in surrogate.content[0].text  # type: ignore[union-attr]
    (cancelled,) = aborted.results
    assert cancelled.is_error
    assert cancelled.error is not None
    assert TOOL_ABORTED == cancelled.error.code


async def test_a_classifier_that_cancels_the_caller_stops_the_batch_at_its_next_checkpoint() -> (
    None
):
    # a start is no cancel point of its own (only the lane's own code can cancel between two
    # of its awaits): a classifier that cancels the caller's scope stops the batch at the
    # lane's next checkpoint, at most _STEPS_PER_CHECKPOINT starts later; every started call
    # is balanced, and a body that checkpoints never gets past its first checkpoint
    ran: list[int] = []
    scope = trio.CancelScope()

    def classify(args: FrozenJsonObject) -> bool:
        if args["n"] == 2:
            scope.cancel()
        return True

    async def body(args: FrozenJsonObject, context: ToolRunContext) -> str:
        await trio.lowlevel.checkpoint()
        ran.append(typing.cast(int, args["n"]))
        return "ok"

    registry = ToolRegistry()
    registry.register(
        define_tool(
            name="t",
            description="t",
            parameters={"n": {"type": "integer", "required": True}},
            execute=body,
            is_concurrency_safe=classify,
        )
    )
    log = MemorySessionLog()
    calls = [
        ToolCallRequest(call_id=f"c{n}", name="t", arguments=json.dumps({"n": n}))
        for n in range(1, 301)
    ]

    with scope:
        await run_tool_calls(
            registry, calls, signal=NEVER, session=log, max_parallel_tool_calls=300
        )

    assert scope.cancelled_caught
    assert [] == ran
    events = log.events()
    started = [event.call_id for event in events if isinstance(event, ToolCallEvent)]
    results = [event for event in events if isinstance(event, ToolResultEvent)]
    assert 2 <= len(started) <= _STEPS_PER_CHECKPOINT
    assert started == [f"c{n}" for n in range(1, len(started) + 1)]
    assert started == [event.call_id for event in results]
    assert all(event.error is not None for event in results)
    assert {TOOL_ABORTED} == {event.error.code for event in results if event.error is not None}
    # the caller's scope was cancelled: the batch ends "aborted"
    assert (BatchStartEvent, BatchEndEvent) == (type(events[0]), type(events[-1]))
    assert "aborted" == getattr(events[-1], "reason", None)


def test_text_success_builds_what_the_constructors_build() -> None:
    assert ToolExecutionResult(content=(TextBlock(text="hi"),), is_error=False) == text_success(
        "hi"
    )


@attrs.frozen
class _Pair:
    a: int
    b: str


@pytest.mark.parametrize("form", ["spec", "attrs"])
async def test_a_checked_body_gets_from_the_shortcut_what_its_execute_gives(form: str) -> None:
    """The pipeline runs define_tool's author body itself for arguments the tool's validator
    marked; a tool without a classifier leaves them unmarked, so its ``execute`` validates and
    converts them: both bodies see the same values and give the same results.
    """
    seen: dict[str, list[object]] = {"shortcut": [], "general": []}

    def tool_for(path: str, classify: bool) -> ToolDefinition:
        async def body(args: typing.Any, run: ToolRunContext) -> str:
            seen[path].append(args)
            return f"{run.call_id}:{args['a'] if form == 'spec' else args.a}"

        return define_tool(
            name=path,
            description="t",
            parameters=SPEC if form == "spec" else _Pair,
            execute=body,
            is_concurrency_safe=(lambda _args: True) if classify else None,
        )

    registry = ToolRegistry()
    registry.register(tool_for("shortcut", classify=True))
    registry.register(tool_for("general", classify=False))
    arguments = ['{"a": 1, "b": "x"}', '{"a": "no", "b": "x"}', '{"b": "x"}']
    results: dict[str, list[ToolExecutionResult]] = {}
    for path in ("shortcut", "general"):
        calls = [
            ToolCallRequest(call_id=f"c{i}", name=path, arguments=text)
            for i, text in enumerate(arguments)
        ]
        results[path] = list((await run_tool_calls(registry, calls, signal=NEVER)).results)

    assert results["general"] == results["shortcut"]
    assert "c0:1" == results["shortcut"][0].content[0].text  # type: ignore[union-attr]
    assert results["shortcut"][1].is_error
    assert results["shortcut"][2].is_error
    assert seen["general"] == seen["shortcut"]
    expected: object = {"a": 1, "b": "x"} if form == "spec" else _Pair(a=1, b="x")
    assert [expected] == seen["shortcut"]
    if form == "spec":
        assert type(seen["shortcut"][0]) is FrozenJsonObject


def _positive(_instance: object, _attribute: object, value: int) -> None:
    if value <= 0:
        raise ValueError("a must be positive")


@attrs.frozen(kw_only=True)
class _Positive:
    a: int = attrs.field(validator=_positive)


async def test_a_conversion_that_raises_is_the_calls_failure_on_both_paths() -> None:
    # the spec allows any integer; the class's own validator refuses some while converting
    async def body(args: _Positive, run: ToolRunContext) -> str:
        return str(args.a)

    registry = ToolRegistry()
    for path, classify in (("shortcut", True), ("general", False)):
        registry.register(
            define_tool(
                name=path,
                description="t",
                parameters=_Positive,
                execute=body,
                is_concurrency_safe=(lambda _args: True) if classify else None,
            )
        )
    results: dict[str, list[ToolExecutionResult]] = {}
    for path in ("shortcut", "general"):
        calls = [
            ToolCallRequest(call_id=f"c{a}", name=path, arguments=json.dumps({"a": a}))
            for a in (-1, 2)
        ]
        results[path] = list((await run_tool_calls(registry, calls, signal=NEVER)).results)

    assert results["general"] == results["shortcut"]
    refused, accepted = results["shortcut"]
    assert refused.is_error
    assert "a must be positive" in refused.content[0].text  # type: ignore[union-attr]
    assert (TextBlock(text="2"),) == accepted.content


async def test_a_definition_whose_execute_is_replaced_runs_the_new_execute() -> None:
    async def first(args: typing.Any, run: ToolRunContext) -> str:
        return "first"

    async def second(args: typing.Any, run: ToolRunContext) -> str:
        return "second"

    original = define_tool(
        name="t",
        description="t",
        parameters=SPEC,
        execute=first,
        is_concurrency_safe=lambda _: True,
    )
    registry = ToolRegistry()
    # attrs.evolve keeps define_tool's validated execute (and its shortcut) unless execute changes
    dispose = registry.register(attrs.evolve(original, execute=second))
    call = ToolCallRequest(call_id="c", name="t", arguments='{"a": 1, "b": "x"}')
    batch = await run_tool_calls(registry, [call], signal=NEVER)
    assert "second" == batch.results[0].content[0].text  # type: ignore[union-attr]

    dispose()
    registry.register(attrs.evolve(original, timeout=5))
    batch = await run_tool_calls(registry, [call], signal=NEVER)
    assert "first" == batch.results[0].content[0].text  # type: ignore[union-attr]
