"""The MCP tools' guardrails over an in-process arbiter (the pure machine behind a client's
interface): on the agent's turn the view says what it may send, a move outside that is
refused with nothing sent, and an accept past the approval threshold is asked of a person
through the SDK's own client, over the handshake-era protocol (a server-to-client request) and
the 2026-07-28 one (input_required) alike. ``oanp mcp`` reads its limits and threshold."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from mcp import Client, types
from mcp.server.mcpserver.exceptions import ToolError

from oanp.net import cli, commands
from oanp.net.mcp import build_server
from oanp.net.mcp_agent import McpAgent
from oanp.wire.envelope import parse_envelope
from tests.support.factories.sessions import (
    BUYER,
    BUYER_COMMIT,
    MERCHANT,
    MERCHANT_COMMIT,
    SESSION,
    Session,
    counter,
    envelope,
    negotiating,
    propose,
)
from tests.support.factories.terms import ISSUES

#: The handshake-era protocol and the first whose elicitation rides input_required.
MODES = ["legacy", "2026-07-28"]


class InProcess:
    """An arbiter client answered by the pure machine: one session, both parties' desks."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.submitted: list[dict[str, Any]] = []

    def summary(self, session_id: str) -> dict[str, Any]:
        state = self.session.negotiation.state
        return {
            "session_id": session_id,
            "state": state.phase.value,
            "round": state.round,
            "turn": None if state.terminal or state.turn is None else state.turn.value,
            "final_answer": state.final_answer,
            "currency": state.currency,
            "max_rounds": state.max_rounds,
            "profile": state.profile,
            "outcome": None,
        }

    def log(self, session_id: str) -> list[dict[str, Any]]:
        return self.session.log()

    def submit(self, body: bytes) -> Any:
        self.submitted.append(json.loads(body))
        new = [entry.as_json() for entry in self.session.feed(parse_envelope(body))]
        return SimpleNamespace(
            entry=new[0], arbiter=new[1:], session=self.summary(SESSION), repeated=False
        )

    def types(self) -> list[str]:
        return [entry["type"] for entry in self.submitted]


def round_two(buyer_price: int = 320, merchant_price: int = 390) -> InProcess:
    """Round 2, the buyer's turn, after its proposal and the merchant's counter."""
    session = negotiating()
    session.feed(propose(1, buyer_price))
    session.feed(counter(1, merchant_price))
    return InProcess(session)


def buyer_agent(client: InProcess, **bounds: Any) -> McpAgent:
    mcp_agent = McpAgent(client, agent_id=BUYER, role="buyer", state_path=None, **bounds)  # type: ignore[arg-type]
    mcp_agent.remember(SESSION, BUYER_COMMIT)
    return mcp_agent


def merchant_agent(client: InProcess, **bounds: Any) -> McpAgent:
    mcp_agent = McpAgent(client, agent_id=MERCHANT, role="merchant", state_path=None, **bounds)  # type: ignore[arg-type]
    mcp_agent.remember(SESSION, MERCHANT_COMMIT)
    return mcp_agent


def refusal(error: pytest.ExceptionInfo[ToolError]) -> tuple[str, dict[str, Any]]:
    """A guard refusal's code and the allowed range it carries."""
    text = str(error.value)
    code, _, rest = text.partition(" (refused locally, nothing sent): ")
    assert rest, text
    return code, json.loads(rest.rpartition("; allowed: ")[2])


# The view and the refusals --------------------------------------------------------------------


def test_on_its_turn_the_view_says_what_the_agent_may_send() -> None:
    client = round_two()
    buyer = buyer_agent(client, limit=Decimal(420), approval=Decimal(380))
    assert buyer.turn(SESSION)["allowed"] == {
        "min_price": 320,
        "max_price": 420,
        "accept_price": 390,
        "trade_offs": False,
        "approval_above": 380,
    }
    # Not its turn: nothing to say what it may send.
    assert "allowed" not in merchant_agent(client).turn(SESSION)


@pytest.mark.parametrize(
    ("price", "code"), [(Decimal("420.01"), "beyond_limit"), (Decimal(319), "retraction")]
)
def test_a_buyer_s_offer_outside_its_range_is_refused_and_nothing_is_sent(
    price: Decimal, code: str
) -> None:
    client = round_two()
    buyer = buyer_agent(client, limit=Decimal(420))
    with pytest.raises(ToolError) as refused:
        buyer.offer(SESSION, "offer.propose", 2, price)
    assert refusal(refused) == (
        code,
        {"min_price": 320, "max_price": 420, "accept_price": 390, "trade_offs": False},
    )
    assert client.submitted == []
    buyer.offer(SESSION, "offer.propose", 2, Decimal(420))
    assert client.types() == ["offer.propose"]


@pytest.mark.parametrize(("price", "code"), [(279, "beyond_limit"), (391, "retraction")])
def test_a_merchant_s_counter_outside_its_range_is_refused(price: int, code: str) -> None:
    client = round_two()
    client.session.feed(propose(2, 340))
    merchant = merchant_agent(client, limit=Decimal(280))
    with pytest.raises(ToolError) as refused:
        merchant.offer(SESSION, "offer.counter", 2, Decimal(price))
    assert refusal(refused) == (
        code,
        {"min_price": 280, "max_price": 390, "accept_price": 340, "trade_offs": False},
    )
    assert client.submitted == []


def test_without_limits_a_retraction_is_still_refused() -> None:
    client = round_two()
    buyer = buyer_agent(client)
    with pytest.raises(ToolError) as refused:
        buyer.offer(SESSION, "offer.propose", 2, Decimal(300))
    code, allowed = refusal(refused)
    assert code == "retraction"
    assert "you may not lower your standing price of 320 to 300" in str(refused.value)
    assert allowed["max_price"] is None
    assert client.submitted == []


@pytest.mark.parametrize(("price", "code"), [(380, "not_standing"), (390, "beyond_limit")])
def test_an_accept_of_a_price_not_standing_or_past_the_limit_is_refused(
    price: int, code: str
) -> None:
    client = round_two()
    buyer = buyer_agent(client, limit=Decimal(385))
    with pytest.raises(ToolError) as refused:
        buyer.offer(SESSION, "offer.accept", 2, Decimal(price))
    assert refusal(refused)[0] == code
    assert client.submitted == []


def test_the_envelope_s_own_checks_come_first() -> None:
    client = round_two()
    with pytest.raises(ToolError, match=r"^schema_invalid \(400, refused locally\)"):
        buyer_agent(client, limit=Decimal(420)).offer(SESSION, "offer.propose", 2, Decimal(-5))
    assert client.submitted == []


def terms_round_two() -> InProcess:
    """A terms session at round 2: the buyer offered 320 fast, the merchant 390 slow."""
    session = Session(profile="terms/v0.1", issues=ISSUES)
    session.feed(envelope("session.ack", {"constraints_commit": MERCHANT_COMMIT}))
    for kind, price, terms, commit in (
        ("offer.propose", 320, {"delivery_days": 3, "support": "premium"}, BUYER_COMMIT),
        ("offer.counter", 390, {"delivery_days": 9, "support": "none"}, MERCHANT_COMMIT),
    ):
        payload = {"round": 1, "price": price, "constraints_commit": commit, "terms": terms}
        session.feed(envelope(kind, payload))
    return InProcess(session)


def test_with_issues_a_pure_retraction_is_refused_and_a_trade_off_sent() -> None:
    client = terms_round_two()
    buyer = buyer_agent(client, limit=Decimal(420))
    assert buyer.turn(SESSION)["allowed"]["trade_offs"] is True
    faster = {"delivery_days": 2, "support": "premium"}
    with pytest.raises(ToolError) as refused:
        buyer.offer(SESSION, "offer.propose", 2, Decimal(320), faster)
    assert refusal(refused)[0] == "retraction"
    with pytest.raises(ToolError, match=r"^bad_terms \(422, refused locally\)"):
        buyer.offer(SESSION, "offer.propose", 2, Decimal(330))
    assert client.submitted == []
    # Less money, but slower and with standard support: better for the merchant on terms.
    slower = {"delivery_days": 6, "support": "standard"}
    buyer.offer(SESSION, "offer.propose", 2, Decimal(310), slower)
    assert client.types() == ["offer.propose"]
    assert "session.close" not in client.session.types()


# Approval through MCP elicitation -------------------------------------------------------------


def accept_over_mcp(
    client: InProcess,
    *,
    mode: str,
    answer: types.ElicitResult | None,
    price: int = 390,
    **bounds: Any,
) -> tuple[types.CallToolResult, list[str]]:
    """The buyer's accept of ``price`` through the SDK's own client, whose elicitation
    callback gives ``answer`` (no callback: a client that cannot ask); the result and the
    questions asked."""
    mcp_agent = buyer_agent(client, **bounds)
    asked: list[str] = []

    async def ask(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        assert answer is not None
        return answer

    async def drive() -> types.CallToolResult:
        callback = {} if answer is None else {"elicitation_callback": ask}
        async with Client(build_server(mcp_agent), mode=mode, **callback) as mcp:  # type: ignore[arg-type]
            arguments = {"session_id": SESSION, "round": 2, "price": price}
            return await mcp.call_tool("accept", arguments)

    return anyio.run(drive), asked


APPROVE = types.ElicitResult(action="accept", content={"approve": True})


@pytest.mark.parametrize("mode", MODES)
def test_an_accept_past_the_threshold_is_sent_once_a_person_approves(mode: str) -> None:
    client = round_two()
    result, asked = accept_over_mcp(client, mode=mode, answer=APPROVE, approval=Decimal(380))
    assert not result.is_error, result.content
    assert client.types() == ["offer.accept"]
    (question,) = asked
    assert "accept of 390 USD" in question
    assert "above 380 USD" in question


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (types.ElicitResult(action="decline"), "answered decline"),
        (types.ElicitResult(action="cancel"), "answered cancel"),
        (types.ElicitResult(action="accept", content={"approve": False}), "did not approve"),
    ],
)
def test_an_accept_a_person_does_not_approve_is_not_sent(
    mode: str, answer: types.ElicitResult, said: str
) -> None:
    client = round_two()
    result, asked = accept_over_mcp(client, mode=mode, answer=answer, approval=Decimal(380))
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert "not_approved (refused locally, nothing sent)" in text
    assert said in text
    assert len(asked) == 1
    assert client.submitted == []


@pytest.mark.parametrize("mode", MODES)
def test_a_client_that_cannot_ask_a_person_sends_no_accept_past_the_threshold(mode: str) -> None:
    client = round_two()
    result, _ = accept_over_mcp(client, mode=mode, answer=None, approval=Decimal(380))
    assert result.is_error
    assert "cannot ask one" in result.content[0].text  # type: ignore[union-attr]
    assert client.submitted == []


@pytest.mark.parametrize("mode", MODES)
def test_nobody_is_asked_within_the_threshold_nor_about_an_accept_the_guard_stops(
    mode: str,
) -> None:
    within = round_two(merchant_price=375)
    result, asked = accept_over_mcp(
        within, mode=mode, answer=APPROVE, price=375, approval=Decimal(380)
    )
    assert not result.is_error, result.content
    assert asked == []
    assert within.types() == ["offer.accept"]
    beyond = round_two(merchant_price=430)
    result, asked = accept_over_mcp(
        beyond, mode=mode, answer=APPROVE, price=430, limit=Decimal(420), approval=Decimal(380)
    )
    assert result.is_error
    assert "beyond_limit" in result.content[0].text  # type: ignore[union-attr]
    assert asked == []
    assert beyond.submitted == []


# The command line -----------------------------------------------------------------------------


def mcp_args(*extra: str) -> Any:
    return cli._parser().parse_args(["mcp", "--api-key", "k", "--agent-id", "a", *extra])


def test_oanp_mcp_reads_its_limit_from_the_file_negotiate_and_merchant_read(
    tmp_path: Path,
) -> None:
    limits = tmp_path / "limits.json"
    limits.write_text('{"true_ceiling": 420.5, "budget_cap": 400, "floor_price": 280}')
    assert commands.mcp_limit(mcp_args("--limits", str(limits))) == Decimal("420.5")
    merchant = mcp_args("--role", "merchant", "--limits", str(limits))
    with pytest.raises(commands.UsageError, match="ideal"):
        commands.mcp_limit(merchant)  # a merchant's file holds its ideal price too
    limits.write_text('{"floor_price": 280, "ideal_price": 400}')
    assert commands.mcp_limit(merchant) == Decimal(280)
    row = {"item": None, "currency": "USD", "floor_price": 280, "ideal_price": 400}
    limits.write_text(json.dumps({"limits": [row]}))
    with pytest.raises(commands.UsageError, match="not a price list"):
        commands.mcp_limit(merchant)
    assert commands.mcp_limit(mcp_args()) is None


def test_oanp_mcp_takes_the_approval_threshold_of_its_role() -> None:
    assert commands.mcp_approval(mcp_args("--approve-above", "380")) == Decimal(380)
    merchant = mcp_args("--role", "merchant", "--approve-below", "300")
    assert commands.mcp_approval(merchant) == Decimal(300)
    assert commands.mcp_approval(mcp_args()) is None
    with pytest.raises(commands.UsageError, match="--approve-above"):
        commands.mcp_approval(mcp_args("--approve-below", "300"))
    with pytest.raises(commands.UsageError, match="positive"):
        commands.mcp_approval(mcp_args("--approve-above", "-1"))


# The limit's currency, and what a commitment may settle on ------------------------------------


@pytest.mark.parametrize("limit_currency", ["JPY", "EUR"])
def test_a_limit_in_another_currency_allows_nothing_and_sends_nothing(
    limit_currency: str,
) -> None:
    client = round_two()  # a USD session
    buyer = buyer_agent(client, limit=Decimal(420), limit_currency=limit_currency)
    allowed = buyer.turn(SESSION)["allowed"]
    assert allowed["min_price"] is None
    assert allowed["accept_price"] is None
    assert f"your limit is in {limit_currency} and this session is in USD" in allowed["blocked"]
    for send in (
        lambda: buyer.offer(SESSION, "offer.propose", 2, Decimal(330)),
        lambda: buyer.offer(SESSION, "offer.accept", 2, Decimal(390)),
    ):
        with pytest.raises(ToolError) as refused:
            send()
        assert refusal(refused)[0] == "other_currency"
    assert client.submitted == []
    # In its own currency the same limit allows the usual range.
    same = buyer_agent(client, limit=Decimal(420), limit_currency="USD")
    assert same.turn(SESSION)["allowed"]["max_price"] == 420


@pytest.mark.parametrize(
    ("role", "constraints"),
    [
        ("merchant", {"floor_price": 1, "ideal_price": 400}),
        ("merchant", {"floor_price": "279.99", "ideal_price": 400}),
        ("buyer", {"true_ceiling": 421, "budget_cap": 400}),
        ("buyer", {"true_ceiling": "a lot", "budget_cap": 400}),
    ],
)
def test_no_commitment_a_settlement_could_agree_past_the_limit_on(
    role: str, constraints: dict[str, Any]
) -> None:
    client = round_two()
    mcp_agent = (buyer_agent if role == "buyer" else merchant_agent)(
        client, limit=Decimal(280 if role == "merchant" else 420)
    )
    with pytest.raises(ToolError, match="refused locally, nothing committed"):
        mcp_agent.make_commitment(constraints, {"route": "SFO-JFK"}, 5)
    assert mcp_agent.sealed == {}


def test_a_commitment_within_the_limit_is_made() -> None:
    merchant = merchant_agent(round_two(), limit=Decimal(280))
    commitment = merchant.make_commitment({"floor_price": 280, "ideal_price": 400}, {}, 5)
    assert commitment in merchant.sealed


def test_oanp_mcp_takes_the_currency_of_its_limits(tmp_path: Path) -> None:
    limits = tmp_path / "buyer.json"
    limits.write_text(json.dumps({"true_ceiling": 420, "budget_cap": 400}))
    args = cli._parser().parse_args(
        ["mcp", "--role", "buyer", "--limits", str(limits), "--currency", "eur"]
    )
    assert args.currency == "EUR"
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["mcp", "--currency", "XYZ"])
