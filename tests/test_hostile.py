"""The pipeline under hostile input: decisions it cannot read, specs that would recurse
forever, mappings that raise, and lone surrogates in everything the model supplies.

Every decision the pipeline cannot read must deny (an error result; the body never runs), and
nothing here may crash a batch or lose a result.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, cast

import pytest
import trio

from dsh_tools import (
    Accept,
    Allow,
    ApprovalOutcome,
    ApprovalRequest,
    Ask,
    BatchStartEvent,
    Block,
    CancelSignal,
    Deny,
    ExecuteNext,
    HookContext,
    MemorySessionLog,
    PostExecuteNext,
    PostToolDecision,
    PreExecuteNext,
    PreToolDecision,
    SchemaSpec,
    TextBlock,
    ToolCallEvent,
    ToolCallRequest,
    ToolDefinition,
    ToolDispatchExecution,
    ToolExecution,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRegistry,
    ToolResultEvent,
    ToolReturn,
    ToolRunContext,
    UserSource,
    define_tool,
    schema_spec_to_json_schema,
    validate_args,
)
from support import Agent, execution_input, first_text, registry_with, run_calls, tool

SECRET = "SECRET DATA"


class Lab:
    """A registry with one tool ``t`` whose body records that it ran and returns SECRET."""

    def __init__(self, approval: object = None) -> None:
        self.ran = False
        self.agent = Agent()

        async def body(args: Any, context: ToolRunContext) -> ToolReturn:
            self.ran = True
            return SECRET

        self.registry = registry_with(tool("t", body), approval=cast(Any, approval))

    async def run(self) -> tuple[bool, ToolExecutionResult]:
        result = await self.registry.execute(execution_input("t", agent=self.agent))
        return self.ran, result


def _forged(cls: type[Any], **fields: object) -> Any:
    """An instance built around the constructor's checks, as a buggy plug-in might."""
    value = object.__new__(cls)
    for name, field in fields.items():
        object.__setattr__(value, name, field)
    return value


# --- decisions -------------------------------------------------------------------------------


def test_a_deny_without_a_str_reason_cannot_be_built() -> None:
    with pytest.raises(TypeError) as caught:
        Deny(cast(str, None))

    expected = "Deny.reason must be a str, not NoneType"
    assert expected == str(caught.value)


def test_an_ask_with_a_reason_that_is_not_a_str_cannot_be_built() -> None:
    with pytest.raises(TypeError) as caught:
        Ask(cast(str, 42))

    expected = "Ask.reason must be a str or None, not int"
    assert expected == str(caught.value)


class _ReasonRaises(Deny):
    @property
    def reason(self) -> str:  # pyright: ignore[reportIncompatibleVariableOverride]
        raise RuntimeError("no reason")


class _AllowAndDeny(Allow, Deny):
    pass


@pytest.mark.parametrize(
    ("decision", "expected_text"),
    [
        (
            _forged(Deny, reason=None),
            "Error: tools/pre-execute returned a Deny whose reason is not a str (None); "
            "the call is denied",
        ),
        (
            _forged(Deny, reason=b"bytes"),
            "Error: tools/pre-execute returned a Deny whose reason is not a str (b'bytes'); "
            "the call is denied",
        ),
        (
            _forged(_ReasonRaises),
            "Error: tools/pre-execute returned a Deny whose reason is not a str "
            "(RuntimeError('no reason')); the call is denied",
        ),
        (_forged(_AllowAndDeny, reason="both"), "Error: both"),
        (
            _forged(Ask, reason=42),
            "Error: tools/pre-execute returned an Ask whose reason is "
            "42, an int, not a str or None",
        ),
        (None, "Error: tools/pre-execute returned None, not Allow, Deny or Ask"),
        ("allow", 'Error: tools/pre-execute returned "allow", not Allow, Deny or Ask'),
        (3.0, "Error: tools/pre-execute returned 3, not Allow, Deny or Ask"),
    ],
)
async def test_a_pre_execute_decision_the_pipeline_cannot_read_denies(
    decision: object, expected_text: str
) -> None:
    lab = Lab()

    async def pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        return cast(PreToolDecision, decision)

    lab.registry.hooks.pre_execute.add(pre)

    ran, result = await lab.run()

    assert (False, True, expected_text) == (ran, result.is_error, first_text(result))


@pytest.mark.parametrize(
    ("guard_return", "expected_text"),
    [(False, "Error: False"), ("", "Error: "), (0, "Error: 0"), (SECRET, f"Error: {SECRET}")],
)
async def test_any_guard_return_but_none_denies(guard_return: object, expected_text: str) -> None:
    lab = Lab()
    lab.registry.guard(lambda execution: cast(str, guard_return))

    ran, result = await lab.run()

    assert (False, True, expected_text) == (ran, result.is_error, first_text(result))


class _SneakyOutcome(str):
    """Equal to, and hashing like, ``allowed-once`` while its value says ``rejected``."""

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return hash("allowed-once")


class _Approval:
    def __init__(self, answer: object) -> None:
        self.answer = answer

    async def request(self, request: ApprovalRequest, /) -> ApprovalOutcome:
        await trio.lowlevel.checkpoint()
        return cast(ApprovalOutcome, self.answer)


@pytest.mark.parametrize(
    ("answer", "expected_text"),
    [
        (_SneakyOutcome("rejected"), 'Error: the user rejected tool "t"'),
        (None, "Error: unreachable variant in ApprovalOutcome: None"),
        (1.0, "Error: unreachable variant in ApprovalOutcome: 1"),
        (True, "Error: unreachable variant in ApprovalOutcome: True"),
        ("ALLOWED-ONCE", 'Error: unreachable variant in ApprovalOutcome: "ALLOWED-ONCE"'),
    ],
)
async def test_an_approval_answer_is_read_by_its_value_and_anything_else_denies(
    answer: object, expected_text: str
) -> None:
    lab = Lab(approval=_Approval(answer))

    async def pre(execution: ToolExecution, next: PreExecuteNext) -> PreToolDecision:
        return Ask()

    lab.registry.hooks.pre_execute.add(pre)

    ran, result = await lab.run()

    assert (False, True, expected_text) == (ran, result.is_error, first_text(result))


@pytest.mark.parametrize(
    ("decision", "expected_text"),
    [
        (None, "Error: tools/post-execute returned None, not Accept or Block"),
        (
            _forged(Accept, content=None, additional_contexts=42),
            "Error: tools/post-execute returned an unreadable Accept: 'int' object is not iterable",
        ),
        (
            _forged(Block, feedback=None, additional_contexts=()),
            "Error: tools/post-execute returned an unreadable Block: "
            "'NoneType' object is not iterable",
        ),
        (
            _forged(Accept, content=None, additional_contexts=("not a context",)),
            "Error: tool result must be losslessly JSON-serializable",
        ),
    ],
)
async def test_a_post_execute_decision_the_pipeline_cannot_read_never_passes_the_result(
    decision: object, expected_text: str
) -> None:
    lab = Lab()

    async def post(
        execution: ToolExecution, result: ToolExecutionResult, next: PostExecuteNext
    ) -> PostToolDecision:
        return cast(PostToolDecision, decision)

    lab.registry.hooks.post_execute.add(post)

    ran, result = await lab.run()

    assert (True, True, expected_text) == (ran, result.is_error, first_text(result))


@pytest.mark.parametrize(
    "returned",
    [
        None,
        SECRET,
        _forged(
            ToolExecutionResult,
            content=(TextBlock(text=SECRET),),
            is_error=False,
            error=None,
            additional_contexts=42,
            meta=None,
        ),
        _forged(
            ToolExecutionResult,
            content=(TextBlock(text=SECRET),),
            is_error=0,
            error=None,
            additional_contexts=(),
            meta=None,
        ),
    ],
)
async def test_a_wrapper_result_the_pipeline_cannot_read_becomes_the_invalid_result(
    returned: object,
) -> None:
    lab = Lab()

    async def defer(args: Any, context: ToolRunContext) -> ToolReturn:
        context.defer_context(HookContext(content=(), source=UserSource()))
        return SECRET

    lab.registry.register(ToolDefinition(name="d", description="d", parameters={}, execute=defer))

    async def wrapper(execution: ToolDispatchExecution, next: ExecuteNext) -> ToolExecutionResult:
        await next()
        return cast(ToolExecutionResult, returned)

    lab.registry.hooks.execute.add(wrapper)

    results = [
        await lab.registry.execute(
            ToolExecutionInput(call_id="c", name=name, arguments={}, signal=CancelSignal.never())
        )
        for name in ("t", "d")
    ]

    expected = ["Error: tool result must be losslessly JSON-serializable"] * 2
    assert expected == [first_text(result) for result in results]


# --- specs that would recurse forever, mappings that raise -----------------------------------


def _deep_spec(depth: int) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    current = spec
    for _ in range(depth):
        nested: dict[str, Any] = {}
        current["a"] = {"type": "object", "properties": nested}
        current = nested
    return spec


def _deep_items(depth: int) -> dict[str, Any]:
    prop: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        prop = {"type": "array", "items": prop}
    return {"a": prop}


def _cyclic_spec() -> dict[str, Any]:
    spec: dict[str, Any] = {}
    spec["a"] = {"type": "object", "properties": spec}
    return spec


def _cyclic_items() -> dict[str, Any]:
    prop: dict[str, Any] = {"type": "array"}
    prop["items"] = prop
    return {"a": prop}


SPECS = {
    "100,000-deep properties": (_deep_spec(100_000), "nested deeper than 200 levels"),
    "100,000-deep items": (_deep_items(100_000), "nested deeper than 200 levels"),
    "cyclic properties": (_cyclic_spec(), "the schema spec is cyclic: spec.a.properties"),
    "cyclic items": (_cyclic_items(), "the schema spec is cyclic: spec.a.items"),
}


def _reads(spec: SchemaSpec) -> dict[str, Any]:
    return {
        "validate_args": lambda: validate_args(spec, {}),
        "schema_spec_to_json_schema": lambda: schema_spec_to_json_schema(spec),
        "define_tool": lambda: define_tool(
            name="t", description="d", parameters=spec, execute=_never_called
        ),
    }


async def _never_called(args: Any, context: ToolRunContext) -> ToolReturn:
    raise AssertionError("the body must not run")


@pytest.mark.parametrize("case", SPECS)
@pytest.mark.parametrize("entry", ["validate_args", "schema_spec_to_json_schema", "define_tool"])
def test_a_deep_or_cyclic_spec_is_a_value_error_never_a_recursion_error(
    case: str, entry: str
) -> None:
    spec, expected_part = SPECS[case]

    with pytest.raises(Exception) as caught:
        _reads(spec)[entry]()

    assert (ValueError, True) == (type(caught.value), expected_part in str(caught.value))


def test_a_spec_reused_by_siblings_is_not_cyclic() -> None:
    shared = {"type": "string"}
    spec: SchemaSpec = {"a": cast(Any, shared), "b": cast(Any, shared)}

    assert ['"a" must be a string', '"b" must be a string'] == validate_args(spec, {"a": 1, "b": 2})


class _Raising(Mapping[str, object]):
    """A mapping that lists keys but whose reads fail with ``error``."""

    def __init__(self, error: Exception, keys: tuple[str, ...] = ("x",)) -> None:
        self.error = error
        self.keys_ = keys

    def __getitem__(self, key: str) -> object:
        raise self.error

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys_)

    def __len__(self) -> int:
        return len(self.keys_)


def test_a_spec_whose_reads_raise_gives_a_type_error_naming_the_path() -> None:
    spec = cast(SchemaSpec, {"a": _Raising(RuntimeError("disk gone"))})

    with pytest.raises(TypeError) as caught:
        validate_args(spec, {})

    expected = "reading the schema spec at spec.a.type raised RuntimeError: disk gone"
    assert expected == str(caught.value)


def test_a_spec_whose_items_raise_gives_a_type_error() -> None:
    class Items(_Raising):
        def __iter__(self) -> Iterator[str]:
            raise self.error

    with pytest.raises(TypeError) as caught:
        define_tool(
            name="t",
            description="d",
            parameters=cast(SchemaSpec, Items(OSError("gone"))),
            execute=_never_called,
        )

    expected = "reading the schema spec at spec raised OSError: gone"
    assert expected == str(caught.value)


def test_arguments_whose_reads_raise_give_a_type_error_naming_the_argument() -> None:
    spec: SchemaSpec = {"x": {"type": "string"}}

    with pytest.raises(TypeError) as caught:
        validate_args(spec, _Raising(RuntimeError("boom")))

    expected = 'reading argument "x" raised RuntimeError: boom'
    assert expected == str(caught.value)


# --- lone surrogates in what the model sends -------------------------------------------------


async def _echo(args: Any, context: ToolRunContext) -> ToolReturn:
    return "echo"


@pytest.mark.parametrize(
    ("call", "expected_text"),
    [
        (
            ToolCallRequest(call_id="c\ud800", name="echo", arguments="{}"),
            "echo",
        ),
        (
            ToolCallRequest(call_id="c1", name="ec\udcffho", arguments="{}"),
            'Error: unknown tool "ec\\udcffho"',
        ),
        (
            ToolCallRequest(call_id="c1", name="echo", arguments='{"a": "\ud800"}'),
            "Error: tool execution arguments must be losslessly JSON-serializable",
        ),
        (
            ToolCallRequest(call_id="c1", name="echo", arguments='{"a": "\\ud800"}'),
            "Error: tool execution arguments must be losslessly JSON-serializable",
        ),
        (
            ToolCallRequest(call_id="c1", name="echo", arguments="\udcff{"),
            "Error: tool execution arguments must be losslessly JSON-serializable",
        ),
    ],
)
async def test_a_lone_surrogate_from_the_model_never_loses_the_batch(
    call: ToolCallRequest, expected_text: str
) -> None:
    registry = ToolRegistry()
    registry.register(ToolDefinition(name="echo", description="d", parameters={}, execute=_echo))
    session = MemorySessionLog()

    batch = await run_calls(registry, call, session=session)

    events = session.events()[1:-1]  # inside the batch/start .. batch/end bracket
    start = session.events()[0]
    assert isinstance(start, BatchStartEvent)
    assert (call,) == start.calls
    assert (
        [expected_text],
        [ToolCallEvent, ToolResultEvent],
        [call.call_id, call.call_id],
    ) == (
        [first_text(result) for result in batch.results],
        [type(event) for event in events],
        [cast(Any, event).call_id for event in events],
    )


async def test_a_surrogate_in_a_deny_reason_is_escaped_in_the_result() -> None:
    lab = Lab()
    lab.registry.guard(lambda execution: "no \ud800")

    ran, result = await lab.run()

    assert (False, "Error: no \\ud800") == (ran, first_text(result))
