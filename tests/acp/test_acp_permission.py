"""AcpPermissionAnswerer: approval requests as ACP ``session/request_permission``."""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import pytest
import trio
import trio.testing
from acp.schema import RequestPermissionRequest, RequestPermissionResponse
from acp_wire import assert_valid

from dsh_tools import (
    Approval,
    ApprovalNext,
    ApprovalOutcome,
    ApprovalRequest,
    CancelController,
    session_turn,
)
from dsh_tools.acp import AcpPermissionAnswerer, JsonRpcError
from support import approval_service


class Client:
    """Records every request and answers with ``result`` (or raises ``error``)."""

    def __init__(self, result: object = None, error: Exception | None = None) -> None:
        self.result = result
        self.error = error
        self.sent: list[tuple[str, Mapping[str, object]]] = []

    async def send_request(self, method: str, params: Mapping[str, object]) -> object:
        await trio.lowlevel.checkpoint()
        self.sent.append((method, params))
        if self.error is not None:
            raise self.error
        return self.result


def _selected(option: str) -> dict[str, object]:
    result: dict[str, object] = {"outcome": {"outcome": "selected", "optionId": option}}
    assert_valid(RequestPermissionResponse, result)
    return result


CANCELLED = {"outcome": {"outcome": "cancelled"}}
AGENT = object()
NEVER_SIGNAL = CancelController().signal


async def _ask(
    answerer: AcpPermissionAnswerer, *, agent: object = AGENT, call_id: str | None = "c7"
) -> tuple[ApprovalOutcome | Approval, list[str]]:
    """Ask through a real UserApproval whose next answerer says ``rejected`` (and notes it)."""
    heard: list[str] = []

    async def fallback(request: ApprovalRequest, next: ApprovalNext) -> ApprovalOutcome:
        await trio.lowlevel.checkpoint()
        heard.append(request.tool_name)
        return ApprovalOutcome.REJECTED

    approval = approval_service(answerer, fallback)
    request = ApprovalRequest(
        agent=agent, tool_name="write_file", call_id="c7", signal=CancelController().signal
    )
    if call_id is None:
        request = attrs.evolve(request, call_id=None)  # other callers may omit it
    async with session_turn(approval.session, 0):
        outcome = await approval.request(request)
    return outcome, heard


async def test_an_own_agents_call_is_asked_about_with_exactly_allow_once_and_reject_once() -> None:
    client = Client(_selected("allow-once"))
    answerer = AcpPermissionAnswerer(client.send_request, {AGENT: "sess-1"})
    assert (ApprovalOutcome.ALLOWED_ONCE, []) == await _ask(answerer)
    expected_params = {
        "sessionId": "sess-1",
        "toolCall": {"toolCallId": "c7"},
        "options": [
            {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
        ],
    }
    assert [("session/request_permission", expected_params)] == client.sent
    assert_valid(RequestPermissionRequest, client.sent[0][1])


@pytest.mark.parametrize(
    ("result", "outcome"),
    [
        (CANCELLED, ApprovalOutcome.CANCELLED),
        (_selected("reject-once"), ApprovalOutcome.REJECTED),
        (_selected("allow-always"), ApprovalOutcome.REJECTED),
        (_selected("anything-else"), ApprovalOutcome.REJECTED),
    ],
    ids=["cancelled", "reject-once", "allow-always-is-not-offered", "unknown-option"],
)
async def test_the_clients_answer_maps_to_an_outcome(
    result: object, outcome: ApprovalOutcome
) -> None:
    answerer = AcpPermissionAnswerer(Client(result).send_request, {AGENT: "sess-1"})
    assert (outcome, []) == await _ask(answerer)


@pytest.mark.parametrize(
    "client",
    [
        Client(error=JsonRpcError(-32603, "Internal error")),
        Client(error=OSError("pipe closed")),
        Client({"outcome": "selected"}),
        Client({"outcome": {"outcome": "selected"}}),
        Client(None),
    ],
    ids=["error-answer", "failed-send", "outcome-not-an-object", "no-option", "null-result"],
)
async def test_a_failed_request_or_an_answer_that_is_not_a_permission_response_is_unavailable(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    answerer = AcpPermissionAnswerer(client.send_request, {AGENT: "sess-1"})
    assert (ApprovalOutcome.UNAVAILABLE, []) == await _ask(answerer)
    assert 1 == len(client.sent)
    warnings = [r.getMessage() for r in caplog.records if r.name == "dsh_tools.acp"]
    assert 1 == len(warnings)
    assert warnings[0].startswith("session/request_permission for call 'c7'")


async def test_another_agents_request_goes_to_next_even_an_equal_one() -> None:
    class Agent:
        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 0

    client = Client(_selected("allow-once"))
    answerer = AcpPermissionAnswerer(client.send_request, {Agent(): "sess-1"})
    assert (ApprovalOutcome.REJECTED, ["write_file"]) == await _ask(answerer, agent=Agent())
    assert [] == client.sent


async def test_a_request_without_a_call_id_goes_to_next() -> None:
    client = Client(_selected("allow-once"))
    answerer = AcpPermissionAnswerer(client.send_request, {AGENT: "sess-1"})
    assert (ApprovalOutcome.REJECTED, ["write_file"]) == await _ask(answerer, call_id=None)
    assert [] == client.sent


async def test_agents_added_to_the_mapping_later_are_heard() -> None:
    agents: dict[object, str] = {}
    client = Client(_selected("allow-once"))
    answerer = AcpPermissionAnswerer(client.send_request, agents)
    agents[AGENT] = "sess-9"
    assert (ApprovalOutcome.ALLOWED_ONCE, []) == await _ask(answerer)
    assert "sess-9" == client.sent[0][1]["sessionId"]


async def test_a_request_cancelled_while_the_client_thinks_is_cancelled_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    thinking = trio.Event()

    async def slow_client(method: str, params: Mapping[str, object]) -> object:
        thinking.set()
        await trio.sleep_forever()

    approval = approval_service(AcpPermissionAnswerer(slow_client, {AGENT: "sess-1"}))
    controller = CancelController()
    request = ApprovalRequest(
        agent=AGENT, tool_name="write_file", call_id="c7", signal=controller.signal
    )
    async with session_turn(approval.session, 0), trio.open_nursery() as nursery:

        async def cancel_when_asked() -> None:
            await thinking.wait()
            controller.cancel("the user pressed Esc")

        nursery.start_soon(cancel_when_asked)
        with trio.fail_after(1):
            assert ApprovalOutcome.CANCELLED == await approval.request(request)


# --- allow always (a session grant) ------------------------------------------------------------


async def test_allow_always_offers_a_third_option_that_validates_against_the_schema() -> None:
    client = Client(_selected("allow-always"))
    answerer = AcpPermissionAnswerer(client.send_request, {AGENT: "sess-1"}, allow_always=True)

    assert (ApprovalOutcome.ALLOWED_SESSION, []) == await _ask(answerer)
    params = client.sent[0][1]
    assert_valid(RequestPermissionRequest, params)
    expected = [
        {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
        {"optionId": "allow-always", "name": "Allow always (this session)", "kind": "allow_always"},
        {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
    ]
    assert expected == params["options"]


async def test_allow_always_grants_the_tool_so_the_client_is_not_asked_again() -> None:
    client = Client(_selected("allow-always"))
    approval = approval_service(
        AcpPermissionAnswerer(client.send_request, {AGENT: "sess-1"}, allow_always=True)
    )

    async with session_turn(approval.session, 0):
        outcomes = [
            await approval.request(
                ApprovalRequest(
                    agent=AGENT, tool_name="write_file", call_id=call_id, signal=NEVER_SIGNAL
                )
            )
            for call_id in ("c1", "c2")
        ]

    assert ([ApprovalOutcome.ALLOWED_SESSION] * 2, 1) == (outcomes, len(client.sent))


def test_allow_always_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="allow_always must be a bool, not int"):
        AcpPermissionAnswerer(Client().send_request, {}, allow_always=1)  # pyright: ignore[reportArgumentType]
