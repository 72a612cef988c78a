"""The MCP tools' guardrails against a live arbiter: a buyer and a merchant, each an MCP tool
server held to its own limits and driven by the SDK's own client, try retractions and prices
past their limits and are refused by their tools; an accept past the buyer's approval
threshold is declined by the person asked, then approved. The arbiter's log holds none of the
refused moves, and the session agrees with no round judged violated."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from decimal import Decimal
from typing import Any

import anyio
import pytest
from mcp import Client, types

from oanp.audit import verify_log
from oanp.net.client import ArbiterClient
from oanp.net.mcp import build_server
from oanp.net.mcp_agent import McpAgent
from tests.conftest import LiveServer
from tests.support.factories.agents import SFO_JFK_ITEM, Agent, make_agent

pytestmark = pytest.mark.django_db(transaction=True)

#: The handshake-era protocol and the first whose elicitation rides input_required.
MODES = ["legacy", "2026-07-28"]


@asynccontextmanager
async def tools(
    server: LiveServer, agent: Agent, *, mode: str, answers: list[bool] | None = None, **bounds: Any
) -> AsyncIterator[Client]:
    """``agent``'s MCP tools over the live arbiter, held to ``bounds``, through the SDK's own
    in-memory client; with ``answers``, a person approving (or not) each accept asked about."""

    async def ask(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert answers, f"nobody expected this question: {params.message}"
        if answers.pop(0):
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="decline")

    with ArbiterClient(server.url, agent.api_key) as arbiter:
        role: Any = agent.role
        mcp_agent = McpAgent(arbiter, agent_id=agent.agent_id, role=role, state_path=None, **bounds)
        callback = {} if answers is None else {"elicitation_callback": ask}
        async with Client(build_server(mcp_agent), mode=mode, **callback) as client:  # type: ignore[arg-type]
            yield client


async def call(client: Client, name: str, **arguments: Any) -> Any:
    """What the tool ``name`` answers ``arguments`` with; an error fails the test."""
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def refused(client: Client, name: str, **arguments: Any) -> str:
    """The code the tool ``name`` refuses ``arguments`` with, nothing sent."""
    result = await client.call_tool(name, arguments)
    assert result.is_error, result.structured_content
    text: str = result.content[0].text  # type: ignore[union-attr]
    said = re.match(rf"Error executing tool {name}: (\w+) \(refused locally, nothing sent\)", text)
    assert said, text
    return said.group(1)


async def commitment(client: Client, constraints: dict[str, Any]) -> str:
    sealed = await call(
        client, "make_commitment", constraints=constraints, item=SFO_JFK_ITEM, max_rounds=5
    )
    made: str = sealed["constraints_commit"]
    return made


@pytest.mark.parametrize("mode", MODES)
def test_the_tools_refuse_what_the_limits_forbid_and_the_log_never_sees_it(
    live_arbiter: LiveServer, mode: str
) -> None:
    tag = mode.replace("-", "")
    buyer = make_agent(f"buyer-guarded-{tag}", "buyer")
    seller = make_agent(f"merchant-guarded-{tag}", "merchant")
    # The person asked about the accept above 380 first declines, then approves.
    answers = [False, True]

    async def drive() -> tuple[str, dict[str, Any]]:
        async with (
            tools(
                live_arbiter,
                buyer,
                mode=mode,
                answers=answers,
                limit=Decimal(420),
                approval=Decimal(380),
            ) as b,
            tools(live_arbiter, seller, mode=mode, limit=Decimal(280)) as m,
        ):
            opened = await call(
                b,
                "open_session",
                merchant_agent_id=seller.agent_id,
                item=SFO_JFK_ITEM,
                currency="USD",
                constraints_commit=await commitment(b, {"true_ceiling": 420, "budget_cap": 400}),
            )
            session = opened["session_id"]
            floor = await commitment(m, {"floor_price": 280, "ideal_price": 400})
            await call(m, "join_session", session_id=session, constraints_commit=floor)
            await call(b, "propose", session_id=session, round=1, price=320)
            assert await refused(m, "counter", session_id=session, round=1, price=270) == (
                "beyond_limit"
            )
            await call(m, "counter", session_id=session, round=1, price=390)
            view = (await call(b, "wait_for_events", session_id=session, timeout_s=5))["session"]
            assert view["allowed"] == {
                "min_price": 320,
                "max_price": 420,
                "accept_price": 390,
                "trade_offs": False,
                "approval_above": 380,
            }
            assert await refused(b, "propose", session_id=session, round=2, price=300) == (
                "retraction"
            )
            assert await refused(b, "propose", session_id=session, round=2, price=450) == (
                "beyond_limit"
            )
            await call(b, "propose", session_id=session, round=2, price=340)
            read = await call(m, "read_session", session_id=session)
            assert read["allowed"]["max_price"] == 390
            assert read["allowed"]["accept_price"] == 340
            assert await refused(m, "counter", session_id=session, round=2, price=395) == (
                "retraction"
            )
            await call(m, "counter", session_id=session, round=2, price=385)
            assert await refused(b, "accept", session_id=session, round=3, price=385) == (
                "not_approved"
            )
            accepted = await call(b, "accept", session_id=session, round=3, price=385)
            return session, accepted

    session_id, accepted = anyio.run(drive)
    assert answers == []
    assert accepted["entry"]["envelope"]["type"] == "offer.accept"
    log = ArbiterClient(live_arbiter.url, buyer.api_key).log(session_id)
    moves = [
        (e["envelope"]["sender"]["role"], e["envelope"]["type"], e["envelope"]["payload"]["price"])
        for e in log
        if e["envelope"]["type"].startswith("offer.")
    ]
    assert moves == [
        ("buyer", "offer.propose", 320),
        ("merchant", "offer.counter", 390),
        ("buyer", "offer.propose", 340),
        ("merchant", "offer.counter", 385),
        ("buyer", "offer.accept", 385),
    ]
    verdicts = [e["envelope"]["payload"] for e in log if e["envelope"]["type"] == "round.verdict"]
    assert [v["status"] for v in verdicts] == ["fair", "fair", "fair"]
    agree = log[-1]["envelope"]
    assert agree["type"] == "session.agree"
    assert agree["payload"]["final_price"] == 385
    assert verify_log(log, ArbiterClient(live_arbiter.url).jwks()).ok
    assert "true_ceiling" not in json.dumps(log)
