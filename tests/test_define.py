"""``define_tool`` in both forms: the schema it shows, validation before the body, soft
presenters and classifier, the timeout check, and the attrs-class derivation."""

from __future__ import annotations

import enum
import inspect
import json
import math
from collections.abc import Sequence
from typing import Literal, cast

import attrs
import pytest
import trio

from dsh_tools import (
    CancelSignal,
    FrozenJsonObject,
    GenericCallView,
    GenericResultView,
    JsonValue,
    SchemaSpec,
    TextBlock,
    ToolArgsError,
    ToolDefinition,
    ToolErrorInfo,
    ToolExecutionInput,
    ToolOutput,
    ToolRegistry,
    ToolResult,
    ToolReturn,
    ToolRunContext,
    define_tool,
    snapshot_json,
    thaw_json,
)
from dsh_tools._values._execution import new_execution_token


def _context(arguments: JsonValue = None) -> ToolRunContext:
    return ToolRunContext(
        token=new_execution_token(),
        call_id="call-1",
        name="tool",
        arguments=arguments,
        signal=CancelSignal.never(),
    )


async def _run(definition: ToolDefinition, arguments: object) -> ToolReturn:
    return await _call(definition, arguments, _context())


async def _call(
    definition: ToolDefinition, arguments: object, context: ToolRunContext
) -> ToolReturn:
    returned = definition.execute(arguments, context)
    assert inspect.isawaitable(returned), "an async body gives an async execute"
    return await returned


RESULT = ToolResult(content=[TextBlock(text="ok")], is_error=False)

# --- the spec form ----------------------------------------------------------------------------

READ_SPEC: SchemaSpec = {
    "path": {"type": "string", "required": True, "description": "File to read."},
    "limit": {"type": "integer"},
}


class Recorder:
    """A body, classifier and presenters that record what they were called with."""

    def __init__(self) -> None:
        self.calls: list[object] = []

    async def body(self, args: object, context: ToolRunContext) -> ToolReturn:
        self.calls.append(args)
        await trio.lowlevel.checkpoint()
        return "done"

    def classify(self, args: object) -> bool:
        self.calls.append(args)
        return True

    def present_call(self, args: object) -> GenericCallView:
        self.calls.append(args)
        return GenericCallView(title="call")

    def present_result(self, args: object, result: ToolResult) -> GenericResultView:
        self.calls.append(args)
        return GenericResultView(title="result")


def _read_tool(recorder: Recorder, **options: object) -> ToolDefinition:
    return define_tool(
        name="read",
        description="Read a file.",
        parameters=READ_SPEC,
        execute=recorder.body,
        is_concurrency_safe=recorder.classify,
        present_call=recorder.present_call,
        present_result=recorder.present_result,
    )


def test_the_definition_shows_the_json_schema_of_the_spec() -> None:
    definition = _read_tool(Recorder())

    assert thaw_json(definition.parameters) == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File to read."},
            "limit": {"type": "integer"},
        },
        "required": ["path"],
    }


def test_the_definition_keeps_name_and_description() -> None:
    definition = _read_tool(Recorder())

    assert (definition.name, definition.description) == ("read", "Read a file.")


async def test_a_valid_call_reaches_the_body_with_the_frozen_arguments() -> None:
    recorder = Recorder()
    arguments = snapshot_json({"path": "a.txt", "extra": 1})

    await _run(_read_tool(recorder), arguments)

    assert recorder.calls == [arguments]


async def test_plain_dict_arguments_reach_the_body_as_a_frozen_mapping() -> None:
    recorder = Recorder()

    await _run(_read_tool(recorder), {"path": "a.txt"})

    assert [FrozenJsonObject] == [type(call) for call in recorder.calls]


async def test_invalid_arguments_raise_tool_args_error_with_every_violation() -> None:
    with pytest.raises(ToolArgsError) as caught:
        await _run(_read_tool(Recorder()), snapshot_json({"limit": 1.5}))

    assert (caught.value.violations, str(caught.value), caught.value.code) == (
        ('missing required property "path"', '"limit" must be an integer'),
        'invalid arguments: missing required property "path"; "limit" must be an integer',
        "INVALID_ARGS",
    )


async def test_invalid_arguments_never_reach_the_body() -> None:
    recorder = Recorder()

    with pytest.raises(ToolArgsError):
        await _run(_read_tool(recorder), snapshot_json({}))

    assert recorder.calls == []


async def test_unparsable_arguments_arrive_as_a_string_and_are_not_an_object() -> None:
    with pytest.raises(ToolArgsError) as caught:
        await _run(_read_tool(Recorder()), '{"path": ')

    assert str(caught.value) == 'invalid arguments: "arguments" must be an object'


async def test_invalid_arguments_checkpoint_before_raising() -> None:
    with trio.CancelScope() as scope:
        scope.cancel()
        await _run(_read_tool(Recorder()), snapshot_json({}))

    assert scope.cancelled_caught


@pytest.mark.parametrize(
    "returned",
    ["text", [TextBlock(text="a")], ToolOutput(content=[TextBlock(text="a")], meta={"k": 1})],
)
async def test_the_body_return_value_is_passed_through_unchanged(returned: ToolReturn) -> None:
    async def body(args: FrozenJsonObject, context: ToolRunContext) -> ToolReturn:
        await trio.lowlevel.checkpoint()
        return returned

    definition = define_tool(name="t", description="d", parameters={}, execute=body)

    assert returned is await _run(definition, snapshot_json({}))


async def test_the_body_receives_the_context() -> None:
    seen: list[ToolRunContext] = []

    async def body(args: FrozenJsonObject, context: ToolRunContext) -> ToolReturn:
        seen.append(context)
        await trio.lowlevel.checkpoint()
        return "ok"

    definition = define_tool(name="t", description="d", parameters={}, execute=body)
    context = _context()
    await _call(definition, snapshot_json({}), context)

    assert seen == [context]


def test_the_classifier_says_false_for_invalid_arguments_without_asking_the_author() -> None:
    recorder = Recorder()
    classify = _read_tool(recorder).is_concurrency_safe
    assert classify is not None

    assert (classify(snapshot_json({"path": 1})), recorder.calls) == (False, [])


def test_the_classifier_asks_the_author_for_valid_arguments() -> None:
    recorder = Recorder()
    classify = _read_tool(recorder).is_concurrency_safe
    assert classify is not None

    assert (classify(snapshot_json({"path": "a"})), recorder.calls) == (True, [{"path": "a"}])


def test_the_call_presenter_gives_none_for_invalid_arguments_without_asking_the_author() -> None:
    recorder = Recorder()
    present = _read_tool(recorder).present_call
    assert present is not None

    assert (present("not json"), recorder.calls) == (None, [])


def test_the_call_presenter_asks_the_author_for_valid_arguments() -> None:
    present = _read_tool(Recorder()).present_call
    assert present is not None

    assert present(snapshot_json({"path": "a"})) == GenericCallView(title="call")


def test_the_result_presenter_gives_none_for_invalid_arguments_without_asking_the_author() -> None:
    recorder = Recorder()
    present = _read_tool(recorder).present_result
    assert present is not None

    assert (present(snapshot_json({"limit": "x"}), RESULT), recorder.calls) == (None, [])


def test_the_result_presenter_asks_the_author_for_valid_arguments() -> None:
    present = _read_tool(Recorder()).present_result
    assert present is not None

    assert present(snapshot_json({"path": "a"}), RESULT) == GenericResultView(title="result")


def test_an_exception_from_the_authors_presenter_propagates() -> None:
    def present_call(args: FrozenJsonObject) -> GenericCallView:
        raise RuntimeError("presenter bug")

    definition = define_tool(
        name="t", description="d", parameters={}, execute=Recorder().body, present_call=present_call
    )
    assert definition.present_call is not None

    with pytest.raises(RuntimeError, match="presenter bug"):
        definition.present_call(snapshot_json({}))


def test_callables_the_author_did_not_supply_stay_none() -> None:
    definition = define_tool(name="t", description="d", parameters={}, execute=Recorder().body)

    assert (
        definition.timeout,
        definition.is_concurrency_safe,
        definition.present_call,
        definition.present_result,
    ) == (None, None, None, None)


@pytest.mark.parametrize("timeout", [0.5, 30, 1e-9])
def test_a_positive_finite_timeout_is_kept(timeout: float) -> None:
    definition = define_tool(
        name="t", description="d", parameters={}, execute=Recorder().body, timeout=timeout
    )

    assert definition.timeout == timeout


@pytest.mark.parametrize(
    ("timeout", "error", "shown"),
    [
        (0, ValueError, "0"),
        (-1, ValueError, "-1"),
        (-0.5, ValueError, "-0.5"),
        (math.inf, ValueError, "Infinity"),
        (math.nan, ValueError, "NaN"),
        (-3.0, ValueError, "-3"),
        (True, TypeError, "True"),
        ("5", TypeError, "'5'"),
    ],
)
def test_a_timeout_that_is_not_a_positive_finite_number_is_rejected(
    timeout: object, error: type[Exception], shown: str
) -> None:
    with pytest.raises(error) as caught:
        define_tool(
            name="slow",
            description="d",
            parameters={},
            execute=Recorder().body,
            timeout=cast(float, timeout),
        )

    expected = f'tool "slow": timeout must be a positive finite number of seconds (got {shown})'
    assert expected == str(caught.value)


def test_the_timeout_is_checked_before_the_parameters() -> None:
    with pytest.raises(ValueError, match="timeout must be a positive finite number"):
        define_tool(
            name="t",
            description="d",
            parameters=cast(SchemaSpec, {"x": {"type": "weird"}}),
            execute=Recorder().body,
            timeout=0,
        )


def test_a_malformed_spec_fails_at_definition_time() -> None:
    with pytest.raises(ValueError, match=r'^unreachable variant in validateArgs: "weird"$'):
        define_tool(
            name="t",
            description="d",
            parameters=cast(SchemaSpec, {"x": {"type": "weird"}}),
            execute=Recorder().body,
        )


@pytest.mark.parametrize("parameters", [["x"], "x", None, int])
def test_parameters_that_are_neither_a_spec_nor_an_attrs_class_are_rejected(
    parameters: object,
) -> None:
    with pytest.raises(TypeError, match=r"^define_tool\(t\): parameters must be a schema spec"):
        define_tool(
            name="t",
            description="d",
            parameters=parameters,  # pyright: ignore[reportArgumentType, reportCallIssue]
            execute=Recorder().body,
        )


# --- the attrs-class form -----------------------------------------------------------------------


class Region(enum.Enum):
    EU = "eu"
    US = "us"


@attrs.frozen(kw_only=True)
class Server:
    host: str = attrs.field(metadata={"description": "Host name or IP address."})
    port: int = 22
    tls: bool | None = None


@attrs.frozen(kw_only=True)
class DeployArgs:
    service: str = attrs.field(metadata={"description": "The service to deploy."})
    version: str
    strategy: Literal["rolling", "blue-green"] = "rolling"
    servers: tuple[Server, ...] = attrs.field(metadata={"description": "Where to deploy."})
    region: Region = Region.EU
    replicas: int | None = None
    canary_fraction: float = 0.1
    labels: list[str] = attrs.field(factory=list[str])
    notes: str | None
    dry_run: bool = False
    attempts: int = attrs.field(default=0, init=False)


DEPLOY_SCHEMA = {
    "type": "object",
    "properties": {
        "service": {"type": "string", "description": "The service to deploy."},
        "version": {"type": "string"},
        "strategy": {"type": "string", "enum": ["rolling", "blue-green"], "default": "rolling"},
        "servers": {
            "type": "array",
            "description": "Where to deploy.",
            "items": {
                "type": "object",
                "properties": {
                    "host": {"type": "string", "description": "Host name or IP address."},
                    "port": {"type": "integer", "default": 22},
                    "tls": {"type": "boolean"},
                },
                "required": ["host"],
            },
        },
        "region": {"type": "string", "enum": ["eu", "us"]},
        "replicas": {"type": "integer"},
        "canary_fraction": {"type": "number", "default": 0.1},
        "labels": {"type": "array", "items": {"type": "string"}},
        "notes": {"type": "string"},
        "dry_run": {"type": "boolean", "default": False},
    },
    "required": ["service", "version", "servers"],
}

# The same parameters written as a spec by hand: both forms must report alike.
DEPLOY_SPEC: SchemaSpec = {
    "service": {"type": "string", "required": True},
    "version": {"type": "string", "required": True},
    "strategy": {"type": "string", "enum": ["rolling", "blue-green"]},
    "servers": {
        "type": "array",
        "required": True,
        "items": {
            "type": "object",
            "properties": {
                "host": {"type": "string", "required": True},
                "port": {"type": "integer"},
                "tls": {"type": "boolean"},
            },
        },
    },
    "region": {"type": "string", "enum": ["eu", "us"]},
    "replicas": {"type": "integer"},
    "canary_fraction": {"type": "number"},
    "labels": {"type": "array", "items": {"type": "string"}},
    "notes": {"type": "string"},
    "dry_run": {"type": "boolean"},
}


class DeployRecorder:
    def __init__(self) -> None:
        self.calls: list[DeployArgs] = []

    async def body(self, args: DeployArgs, context: ToolRunContext) -> ToolReturn:
        self.calls.append(args)
        await trio.lowlevel.checkpoint()
        return f"deployed {args.service}"


def _deploy_tool(recorder: DeployRecorder) -> ToolDefinition:
    return define_tool(
        name="deploy",
        description="Deploy a service.",
        parameters=DeployArgs,
        execute=recorder.body,
        is_concurrency_safe=lambda args: args.dry_run,
        present_call=lambda args: GenericCallView(title=f"deploy {args.service}"),
        present_result=lambda args, result: GenericResultView(title=args.version),
    )


def test_the_json_schema_of_a_nested_attrs_class_is_pinned_with_its_key_order() -> None:
    definition = _deploy_tool(DeployRecorder())

    assert json.dumps(thaw_json(definition.parameters)) == json.dumps(DEPLOY_SCHEMA)


async def test_valid_arguments_are_structured_into_an_instance() -> None:
    recorder = DeployRecorder()
    arguments = snapshot_json(
        {
            "service": "api",
            "version": "1.2",
            "strategy": "blue-green",
            "servers": [{"host": "a", "port": 2222, "tls": True}, {"host": "b"}],
            "region": "us",
            "replicas": 3,
            "canary_fraction": 0.25,
            "labels": ["x", "y"],
            "notes": "careful",
            "dry_run": True,
        }
    )

    await _run(_deploy_tool(recorder), arguments)

    assert recorder.calls == [
        DeployArgs(
            service="api",
            version="1.2",
            strategy="blue-green",
            servers=(Server(host="a", port=2222, tls=True), Server(host="b")),
            region=Region.US,
            replicas=3,
            canary_fraction=0.25,
            labels=["x", "y"],
            notes="careful",
            dry_run=True,
        )
    ]


async def test_absent_fields_take_their_defaults_and_absent_optionals_are_none() -> None:
    recorder = DeployRecorder()

    await _run(
        _deploy_tool(recorder), snapshot_json({"service": "s", "version": "v", "servers": []})
    )

    assert recorder.calls == [DeployArgs(service="s", version="v", servers=(), notes=None)]


async def test_an_integral_float_for_an_int_field_becomes_an_int() -> None:
    recorder = DeployRecorder()
    arguments = snapshot_json(
        {"service": "s", "version": "v", "servers": [{"host": "h", "port": 8080.0}]}
    )

    await _run(_deploy_tool(recorder), arguments)

    assert [(8080, int)] == [(s.port, type(s.port)) for s in recorder.calls[0].servers]


async def test_an_int_for_a_float_field_becomes_a_float() -> None:
    recorder = DeployRecorder()
    arguments = snapshot_json({"service": "s", "version": "v", "servers": [], "canary_fraction": 1})

    await _run(_deploy_tool(recorder), arguments)

    assert (1.0, float) == (
        recorder.calls[0].canary_fraction,
        type(recorder.calls[0].canary_fraction),
    )


async def test_unknown_argument_keys_are_ignored_by_the_class_form() -> None:
    recorder = DeployRecorder()
    arguments = snapshot_json(
        {"service": "s", "version": "v", "servers": [{"host": "h", "zone": 1}], "extra": True}
    )

    await _run(_deploy_tool(recorder), arguments)

    assert recorder.calls == [
        DeployArgs(service="s", version="v", servers=(Server(host="h"),), notes=None)
    ]


INVALID_DEPLOYS: list[dict[str, object]] = [
    {},
    {"service": 1, "version": None, "servers": "a"},
    {"service": "s", "version": "v", "servers": [{"port": True}, "x"], "strategy": "big-bang"},
    {"service": "s", "version": "v", "servers": [], "region": "EU", "replicas": 1.5},
    {"service": "s", "version": "v", "servers": [], "labels": [1], "notes": None, "dry_run": 0},
]


@pytest.mark.parametrize("arguments", INVALID_DEPLOYS)
async def test_invalid_arguments_give_the_same_violations_as_the_spec_form(
    arguments: dict[str, object],
) -> None:
    spec_tool = define_tool(
        name="deploy", description="d", parameters=DEPLOY_SPEC, execute=Recorder().body
    )
    frozen = snapshot_json(arguments)

    with pytest.raises(ToolArgsError) as by_spec:
        await _run(spec_tool, frozen)
    with pytest.raises(ToolArgsError) as by_class:
        await _run(_deploy_tool(DeployRecorder()), frozen)

    assert by_spec.value.violations == by_class.value.violations


async def test_null_for_an_optional_field_is_a_violation() -> None:
    with pytest.raises(ToolArgsError) as caught:
        await _run(
            _deploy_tool(DeployRecorder()),
            snapshot_json({"service": "s", "version": "v", "servers": [], "replicas": None}),
        )

    assert caught.value.violations == ('"replicas" must be an integer',)


def test_the_classifier_receives_the_instance() -> None:
    classify = _deploy_tool(DeployRecorder()).is_concurrency_safe
    assert classify is not None

    assert classify(snapshot_json({"service": "s", "version": "v", "servers": [], "dry_run": True}))


def test_the_classifier_says_false_for_invalid_arguments_of_the_class_form() -> None:
    classify = _deploy_tool(DeployRecorder()).is_concurrency_safe
    assert classify is not None

    assert classify(snapshot_json({"dry_run": True})) is False


def test_the_call_presenter_receives_the_instance() -> None:
    present = _deploy_tool(DeployRecorder()).present_call
    assert present is not None

    assert present(snapshot_json({"service": "api", "version": "v", "servers": []})) == (
        GenericCallView(title="deploy api")
    )


def test_the_result_presenter_gives_none_for_invalid_arguments_of_the_class_form() -> None:
    present = _deploy_tool(DeployRecorder()).present_result
    assert present is not None

    assert present(snapshot_json({"service": "api"}), RESULT) is None


@attrs.frozen
class Sizes:
    counts: Sequence[int]
    matrix: list[list[float]] = attrs.field(factory=list[list[float]])


async def test_sequences_and_nested_lists_become_arrays_with_items() -> None:
    seen: list[Sizes] = []

    async def body(args: Sizes, context: ToolRunContext) -> ToolReturn:
        seen.append(args)
        await trio.lowlevel.checkpoint()
        return "ok"

    definition = define_tool(name="t", description="d", parameters=Sizes, execute=body)
    await _run(definition, snapshot_json({"counts": [1, 2.0], "matrix": [[1, 2.5]]}))

    assert (thaw_json(definition.parameters), seen) == (
        {
            "type": "object",
            "properties": {
                "counts": {"type": "array", "items": {"type": "integer"}},
                "matrix": {
                    "type": "array",
                    "items": {"type": "array", "items": {"type": "number"}},
                },
            },
            "required": ["counts"],
        },
        [Sizes(counts=(1, 2), matrix=[[1.0, 2.5]])],
    )


@attrs.frozen
class Levels:
    level: Literal[1, 2, 3]


@attrs.frozen
class Mixed:
    value: int | str


@attrs.frozen
class Table:
    rows: dict[str, int]


@attrs.frozen
class Node:
    children: list[Node]


@attrs.frozen
class MixedEnum:
    class Size(enum.Enum):
        SMALL = 1

    size: Size


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (Levels, r"^Levels\.level: only Literal\[\.\.\.\] of strings is supported"),
        (Mixed, r"^Mixed\.value: unions other than X \| None are not supported: int \| str$"),
        (Table, r"^Table\.rows: unsupported argument type"),
        (Node, r"^Node\.children: Node contains itself"),
        (MixedEnum, r"^MixedEnum\.size: only Enum classes with str values are supported"),
    ],
)
def test_a_field_type_the_dsl_cannot_express_is_rejected_at_definition_time(
    cls: type[attrs.AttrsInstance], message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        define_tool(name="t", description="d", parameters=cls, execute=Recorder().body)


def test_a_class_whose_annotations_cannot_be_resolved_is_rejected_clearly() -> None:
    @attrs.frozen
    class Inner:
        x: int

    @attrs.frozen
    class Outer:
        inner: Inner

    with pytest.raises(TypeError, match=r"^.*Outer: cannot resolve its field annotations"):
        define_tool(name="t", description="d", parameters=Outer, execute=Recorder().body)


async def test_the_registry_turns_invalid_arguments_into_an_invalid_args_result() -> None:
    registry = ToolRegistry()
    registry.register(_read_tool(Recorder()))

    result = await registry.execute(
        ToolExecutionInput(
            call_id="call-1", name="read", arguments={"path": 7}, signal=CancelSignal.never()
        )
    )

    assert (result.is_error, result.error, result.content) == (
        True,
        ToolErrorInfo(name="ToolArgsError", code="INVALID_ARGS"),
        (TextBlock(text='Error: invalid arguments: "path" must be a string'),),
    )
