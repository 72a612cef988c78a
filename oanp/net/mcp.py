"""An MCP tool server over stdio, so an LLM agent negotiates through tool calls.

Run as ``oanp mcp --server URL --api-key KEY --agent-id ID --role buyer|merchant``. The
tools build the protocol's envelopes from their arguments, run each through
:func:`oanp.wire.envelope.parse_envelope` and the role check before sending, so a bad argument is
refused here with the code the arbiter would answer, and nothing is sent. Constraints and
salts stay on this machine: ``make_commitment`` keeps them in this process (and in the
``--state`` file, if given) and returns only the commitment.

Guardrails (:mod:`oanp.agents.guardrails`): on the agent's turn the session view says what it may
send next, and an offer outside that (a retraction, a price past the agent's own limit when
the server was given one, an accept of a price that is not standing) is refused here with a
code and the range, before anything is sent. An accept past the approval threshold, when one
is given, first asks a person through MCP elicitation; declined, or with a client that cannot
ask, it is not sent.

Given a party signing key (``--signing-key``), the server registers its public half with the
arbiter before it serves, and every envelope a tool sends is signed with it (docs/protocol.md
§17).

Like :mod:`oanp.net.client`, this module is an edge of the package: nothing else in ``oanp``
imports it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
)
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from pydantic import BaseModel, Field

from oanp.agents.ids import new_ulid
from oanp.net.client import ArbiterClient, ProblemError
from oanp.net.mcp_agent import McpAgent, described
from oanp.wire.commitments import Side
from oanp.wire.envelope import (
    DEFAULT_MAX_ROUNDS,
    DEFAULT_PROFILE,
    PARTY_CLOSE_REASON,
)
from oanp.wire.profiles import TERMS
from oanp.wire.signing import SigningKey

INSTRUCTIONS = """\
Negotiate a price (and, if declared, terms besides it) through a neutral OANP v0.1 arbiter.
0. A buyer that knows no merchant agent yet finds one with find_merchants(q): what it sells
   (catalog), in which currencies; its agent_id is open_session's merchant_agent_id.
1. make_commitment(constraints, item, max_rounds): your private limits stay here; you get a
   constraints_commit back. A buyer commits e.g. {"true_ceiling": 420, "budget_cap": 400};
   a merchant {"floor_price": 280, "ideal_price": 400}.
2. A buyer calls open_session; a merchant waits for a session.open (wait_for_events without a
   session_id reads its inbox) and calls join_session.
3. Each round the buyer proposes (or, from round 2, accepts the merchant's last counter),
   then the merchant counters or accepts. Buyer prices may only go up, merchant prices only
   down. The arbiter posts a round.verdict per round and ends with session.agree (a signed
   agreement) or session.close. After the merchant's counter in the last round the buyer has
   a final answer: accept that counter (same round), withdraw, or let its window close the
   session unagreed.
4. wait_for_events(session_id) returns the entries you have not seen yet and whose turn it is.
5. A buyer may open with settlement=true; then, on its turn, either side may settle: its
   committed limit is revealed, and once both are, the arbiter settles at their midpoint
   (or closes with no_zone). After the end, reveal shares your limits for analytics.
6. Terms besides the price: a buyer opens with issues, e.g. [{"name": "delivery_days",
   "kind": "number", "buyer_prefers": "low", "min": 1, "max": 30, "decimals": 0},
   {"name": "support", "kind": "choice", "options": ["premium", "standard", "none"]}]
   (choices run from the buyer's best to the merchant's best). Every propose and counter
   then carries terms, a value for each issue, e.g. {"delivery_days": 6, "support":
   "standard"}; accept repeats the other side's standing terms (left out, they are filled
   in). A new offer may trade one issue against another, but may not be worse for the other
   side on one issue and better on none. The session view's terms show the issues, your
   and their standing terms, and issues_open. Your limits on issues belong in
   make_commitment's constraints, e.g. "terms": {"price_weight": 1, "issues":
   {"delivery_days": {"weight": 2, "ideal": 2, "limit": 14}}}.
7. On your turn the session view carries allowed: min_price and max_price for your next
   propose or counter (a buyer never below its standing price, a merchant never above it, and
   neither past its own limit when this server was given one), accept_price (the other side's
   standing price, when you may accept it; else null), and trade_offs (with issues: a price
   past your standing one is allowed for terms better for the other side). A move outside it
   is refused here, nothing sent, with its code (beyond_limit, retraction, not_standing) and
   the range. With approval_above (a buyer's) or approval_below (a merchant's), an accept past
   that price first asks a person; declined, or not askable, it is refused (not_approved).
Never put a private limit in a tool argument other than make_commitment's constraints.
"""


def _not_approved(why: str) -> ToolError:
    return ToolError(f"not_approved (refused locally, nothing sent): {why}")


class Approval(BaseModel):
    """What a person answers when an accept past the approval threshold asks them."""

    approve: bool = Field(description="true to send this accept, false to hold it back")


def _approval(
    session_id: str, price: Decimal, ctx: Context[Any, Any]
) -> Elicit[Approval] | Approval:
    """The accept tool's approval, resolved before its body runs (which sends only once this
    yields an approval): the guard first, so that nobody is asked to approve what would be
    refused anyway, then a person's answer when the price is past the threshold."""
    agent: McpAgent = ctx.request_context.lifespan_context
    question = agent.approval_question(session_id, price)
    if question is None:
        return Approval(approve=True)  # within the threshold: nobody needs asking
    # Asked here rather than left to the SDK, whose refusal would be a protocol error, not a
    # tool result the model reads.
    if not _can_ask(ctx):
        raise _not_approved(
            f"accepting {price} needs a person's approval, and this MCP client cannot ask "
            "one (it declared no form elicitation)"
        )
    return Elicit(question, Approval)


def _can_ask(ctx: Context[Any, Any]) -> bool:
    """Whether the client declared it can put a form to a person (MCP form elicitation; a
    bare ``elicitation`` capability predates the modes and means forms)."""
    capabilities = ctx.client_capabilities
    elicitation = None if capabilities is None else capabilities.elicitation
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def build_server(agent: McpAgent) -> MCPServer[McpAgent]:
    """The MCP server with the negotiation tools and the session-log resources."""

    @asynccontextmanager
    async def serving(server: MCPServer[McpAgent]) -> AsyncIterator[McpAgent]:
        # The agent is the server's state: the tools close over it, and the approval resolver
        # (named in an annotation, so a module-level function) reads it from the context.
        yield agent

    server: MCPServer[McpAgent] = MCPServer("oanp", instructions=INSTRUCTIONS, lifespan=serving)

    @server.tool()
    def find_merchants(q: str = "") -> dict[str, Any]:
        """Find merchant agents to negotiate with: those listed in the arbiter's directory
        whose id, merchant name, description or catalog holds q (any case; empty: all). Each
        has agent_id (open_session's merchant_agent_id), merchant, description, currencies,
        profiles, settlement and catalog (items to open a session over)."""
        return {"merchants": agent.find_merchants(q)}

    @server.tool()
    def make_commitment(
        constraints: dict[str, Any], item: dict[str, Any], max_rounds: int = DEFAULT_MAX_ROUNDS
    ) -> dict[str, Any]:
        """Commit to your private constraints for one item and max_rounds. The constraints
        and a fresh random salt stay on this machine; only the commitment is returned. Use
        the same item and max_rounds when opening or joining the session."""
        return {"constraints_commit": agent.make_commitment(constraints, item, max_rounds)}

    @server.tool()
    def open_session(
        merchant_agent_id: str,
        item: dict[str, Any],
        currency: str,
        constraints_commit: str,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        profile: str = DEFAULT_PROFILE,
        response_window_s: int | None = None,
        deadline: str | None = None,
        session_id: str | None = None,
        settlement: bool = False,
        issues: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """(buyer) Open a session with a merchant agent over an item, committing your
        constraints (from make_commitment). With settlement=true either side may later call
        settle to end the haggle at once. With issues (1 to 8 declarations, see the
        instructions) the session negotiates them besides the price, under profile
        terms/v0.1. Returns the session id and the arbiter's answer."""
        sealed = agent.sealed.get(constraints_commit)
        if sealed is not None and (sealed.item != item or sealed.max_rounds != max_rounds):
            raise ToolError(
                "commitment_mismatch (refused locally): this commitment was made for another "
                "item or max_rounds; make a new one"
            )
        session_id = session_id or new_ulid()
        payload: dict[str, Any] = {
            "merchant_agent_id": merchant_agent_id,
            "item": item,
            "currency": currency,
            "max_rounds": max_rounds,
            "profile": TERMS.name if issues and profile == DEFAULT_PROFILE else profile,
            "constraints_commit": constraints_commit,
        }
        if issues:
            payload["issues"] = issues
        if response_window_s is not None:
            payload["response_window_s"] = response_window_s
        if deadline is not None:
            payload["deadline"] = deadline
        if settlement:
            payload["settlement"] = "reveal"
        answer = agent.send(session_id, "session.open", payload)
        agent.remember(session_id, constraints_commit)
        return {"session_id": session_id, **answer}

    @server.tool()
    def join_session(session_id: str, constraints_commit: str) -> dict[str, Any]:
        """(merchant) Join a session opened with you (session.ack), committing your
        constraints (from make_commitment, over the session's item and max_rounds)."""
        answer = agent.send(session_id, "session.ack", {"constraints_commit": constraints_commit})
        agent.remember(session_id, constraints_commit)
        return answer

    @server.tool()
    def propose(
        session_id: str, round: int, price: Decimal, terms: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """(buyer) Propose a price for this round, with terms (a value for every issue) in a
        session with issues. Never lower than your previous price, unless the terms give the
        merchant more in exchange."""
        return agent.offer(session_id, "offer.propose", round, price, terms)

    @server.tool()
    def counter(
        session_id: str, round: int, price: Decimal, terms: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """(merchant) Counter the buyer's price in this round, with terms (a value for every
        issue) in a session with issues. Never higher than before, unless the terms give the
        buyer more in exchange."""
        return agent.offer(session_id, "offer.counter", round, price, terms)

    @server.tool()
    def accept(
        session_id: str,
        round: int,
        price: Decimal,
        terms: dict[str, Any] | None = None,
        *,
        approval: Annotated[ElicitationResult[Approval], Resolve(_approval)],
    ) -> dict[str, Any]:
        """Accept the other side's standing price: a merchant the buyer's price of this
        round, a buyer (from round 2) the merchant's counter of the round before, or, as its
        final answer in the last round, the merchant's counter of that round. In a session
        with issues the accept repeats their standing terms: left out, they are filled in.
        Past the approval threshold (allowed's approval_above or approval_below) a person is
        asked first; unless they approve, nothing is sent (not_approved)."""
        if not isinstance(approval, AcceptedElicitation):
            raise _not_approved(
                f"the person asked to approve accepting {price} answered {approval.action}"
            )
        if not approval.data.approve:
            raise _not_approved(f"the person asked did not approve accepting {price}")
        return agent.offer(session_id, "offer.accept", round, price, terms)

    @server.tool()
    def withdraw(session_id: str) -> dict[str, Any]:
        """Leave the session without agreement (session.close, reason withdrawn)."""
        payload = {
            "reason": PARTY_CLOSE_REASON,
            "constraints_commit": agent.commitment_for(session_id),
        }
        return agent.send(session_id, "session.close", payload)

    @server.tool()
    def settle(session_id: str) -> dict[str, Any]:
        """In a session opened with settlement, on your turn: reveal your committed limit
        (a buyer's true_ceiling, a merchant's floor_price) to settle at once. When the other
        side reveals too, the arbiter settles at the midpoint of the two limits (within the
        standing prices) if the ceiling reaches the floor, else closes with no_zone. Both
        limits then stand in the log for anyone to see."""
        return agent.settle(session_id)

    @server.tool()
    def reveal(session_id: str) -> dict[str, Any]:
        """After the session ended: reveal your constraints and salt, checked against your
        commitment and your own prices, for the zone of agreement and surplus analytics."""
        return agent.reveal_after_end(session_id)

    @server.tool()
    def read_session(session_id: str, include_log: bool = False) -> dict[str, Any]:
        """The session's summary (state, round, whose turn, outcome; with issues, the terms
        standing and issues_open), on your turn what you may send (allowed), and its log if
        asked."""
        summary = agent.read(session_id)
        result: dict[str, Any] = {"summary": summary}
        terms = agent.terms_view(summary)
        if terms is not None:
            result["terms"] = terms
        if summary.get("turn") == agent.role:
            result["allowed"] = agent.allowed(session_id)
        if include_log:
            result["entries"] = [described(entry) for entry in agent.log(session_id)]
        return result

    @server.tool()
    def wait_for_events(session_id: str | None = None, timeout_s: float = 30.0) -> dict[str, Any]:
        """The session's entries you have not seen yet (or, without session_id, your inbox:
        every session you are a party to, from when this server started), waiting up to
        timeout_s for the first one. With a
        session_id the answer also says whose turn it is, on your turn what you may send
        (allowed), and in a session with issues the terms standing on each side."""
        return agent.wait(session_id, max(0.0, min(timeout_s, 300.0)))

    @server.resource(
        "oanp://sessions/{session_id}/log", mime_type="application/json", name="session_log"
    )
    def session_log(session_id: str) -> str:
        """Every entry of a session, in order: the hash-chained log anyone can verify."""
        try:
            entries = agent.client.log(session_id)
        except ProblemError as exc:
            raise ResourceError(str(exc)) from None
        return json.dumps({"session_id": session_id, "entries": entries})

    return server


def serve(
    *,
    server: str,
    api_key: str,
    agent_id: str,
    role: Side,
    state_path: Path | None,
    limit: Decimal | None = None,
    approval: Decimal | None = None,
    limit_currency: str | None = None,
    signing_key: SigningKey | None = None,
) -> None:
    """Serve the tools over stdio until the client closes the pipe; with ``limit`` (this
    agent's true_ceiling or floor_price) and ``approval`` (the price past which an accept asks
    a person), both in ``limit_currency``, the guardrails of :mod:`oanp.agents.guardrails` hold the
    tools to them. With ``signing_key`` every envelope is signed, the key registered first:
    its refusal raises :class:`ProblemError` before anything is served."""
    with ArbiterClient(server, api_key, signing_key=signing_key) as client:
        if signing_key is not None:
            # Before any tool may send: the arbiter refuses an envelope signed with a key it
            # does not hold for this agent (bad_signature).
            client.register_signing_key()
        agent = McpAgent(
            client,
            agent_id=agent_id,
            role=role,
            state_path=state_path,
            limit=limit,
            approval=approval,
            limit_currency=limit_currency,
        )
        agent.follow_inbox()
        build_server(agent).run("stdio")
