"""An MCP tool server over stdio, so an LLM agent negotiates through tool calls.

Run as ``oanp mcp --server URL --api-key KEY --agent-id ID --role buyer|merchant``. The
tools build the protocol's envelopes from their arguments, run each through
:func:`oanp.envelope.parse_envelope` and the role check before sending, so a bad argument is
refused here with the code the arbiter would answer, and nothing is sent. Constraints and
salts stay on this machine: ``make_commitment`` keeps them in this process (and in the
``--state`` file, if given) and returns only the commitment.

Guardrails (:mod:`oanp.guardrails`): on the agent's turn the session view says what it may
send next, and an offer outside that (a retraction, a price past the agent's own limit when
the server was given one, an accept of a price that is not standing) is refused here with a
code and the range, before anything is sent. An accept past the approval threshold, when one
is given, first asks a person through MCP elicitation; declined, or with a client that cannot
ask, it is not sent.

Like :mod:`oanp.net.client`, this module is an edge of the package: nothing else in ``oanp``
imports it.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
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

from oanp.canonical import json_value
from oanp.commitments import Role, commit, encode_salt
from oanp.discovery import parse_query
from oanp.envelope import (
    DEFAULT_MAX_ROUNDS,
    DEFAULT_PROFILE,
    OANP_VERSION,
    PARTY_CLOSE_REASON,
    check_sender,
    format_timestamp,
    parse_envelope,
)
from oanp.errors import ProtocolError
from oanp.guardrails import (
    Position,
    Refusal,
    Standing,
    needs_approval,
    past_committed_limit,
    read_position,
)
from oanp.ids import new_ulid
from oanp.money import price_to_json
from oanp.net.client import ArbiterClient, ProblemError, ServerEvent
from oanp.profiles import TERMS
from oanp.terms import Values, read_terms

#: After the first new entry, wait this long for the ones it causes (a verdict, a close).
SETTLE_SECONDS = 0.3
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


def _now() -> str:
    return format_timestamp(datetime.now(UTC))


def _refused(error: ProtocolError, where: str) -> ToolError:
    fields = "; ".join(f"{e.field}: {e.message}" for e in error.errors)
    return ToolError(
        f"{error.code} ({error.status}, refused {where}): {error.detail}"
        + (f" [{fields}]" if fields else "")
    )


def _guarded(refusal: Refusal) -> ToolError:
    """The guard's refusal as the tools give it: the code first, as the arbiter's refusals,
    and the allowed range as JSON, for a model to read and a program to parse."""
    allowed = json.dumps(refusal.allowed.as_json())
    return ToolError(
        f"{refusal.code} (refused locally, nothing sent): {refusal.detail}; allowed: {allowed}"
    )


def _not_approved(why: str) -> ToolError:
    return ToolError(f"not_approved (refused locally, nothing sent): {why}")


class Approval(BaseModel):
    """What a person answers when an accept past the approval threshold asks them."""

    approve: bool = Field(description="true to send this accept, false to hold it back")


@dataclass
class _Sealed:
    """A commitment's opening, which never leaves this process (or its state file)."""

    constraints: dict[str, Any]
    item: dict[str, Any]
    max_rounds: int
    salt: str


@dataclass
class _Feed:
    """A stream followed in the background; ``entries`` grows, ``delivered`` is how many
    of them the tools have returned."""

    entries: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    delivered: int = 0
    finished: bool = False
    error: str | None = None
    changed: threading.Condition = field(default_factory=threading.Condition)


class Desk:
    """One agent's side of the arbiter: its client, its sealed commitments, its feeds."""

    def __init__(
        self,
        client: ArbiterClient,
        *,
        agent_id: str,
        role: Role,
        state_path: Path | None,
        limit: Decimal | None = None,
        approval: Decimal | None = None,
        limit_currency: str | None = None,
    ) -> None:
        self.client = client
        self.agent_id = agent_id
        self.role = role
        self.state_path = state_path
        #: This agent's hard limit (a buyer's true_ceiling, a merchant's floor_price), if given.
        self.limit = limit
        #: The currency of ``limit`` and ``approval`` (``None``: they hold in any currency).
        self.limit_currency = limit_currency
        #: The price past which an accept waits for a person's approval, if given.
        self.approval = approval
        self.sealed: dict[str, _Sealed] = {}
        self.session_commitments: dict[str, str] = {}
        self._feeds: dict[str, _Feed] = {}
        self._lock = threading.Lock()
        self._load()

    # Sealed commitments ------------------------------------------------------------------

    def _load(self) -> None:
        if self.state_path is None or not self.state_path.exists():
            return
        document = json.loads(self.state_path.read_text(encoding="utf-8"))
        for commitment, sealed in document.get("commitments", {}).items():
            self.sealed[commitment] = _Sealed(**sealed)
        self.session_commitments.update(document.get("sessions", {}))

    def _save(self) -> None:
        if self.state_path is None:
            return
        document = {
            "agent_id": self.agent_id,
            "commitments": {c: vars(s) for c, s in self.sealed.items()},
            "sessions": self.session_commitments,
        }
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".mcp-", dir=self.state_path.parent)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(document, out)
        os.replace(temporary, self.state_path)

    def make_commitment(
        self, constraints: dict[str, Any], item: dict[str, Any], max_rounds: int
    ) -> str:
        """Commit to ``constraints`` with a fresh salt; keep both here, return the commitment."""
        try:
            constraints_json = json_value(constraints)
            item_json = json_value(item)
        except ProtocolError as exc:
            raise _refused(exc, "locally") from None
        if not isinstance(constraints_json, dict) or not isinstance(item_json, dict):
            raise ToolError("constraints and item are JSON objects")
        if not 1 <= max_rounds <= 20:
            raise ToolError("max_rounds is between 1 and 20")
        if self.limit is not None and (
            why := past_committed_limit(self.role, constraints_json, self.limit)
        ):
            raise ToolError(f"beyond_limit (refused locally, nothing committed): {why}")
        salt = encode_salt(secrets.token_bytes(32))
        commitment = commit(constraints_json, item_json, max_rounds, salt)
        with self._lock:
            self.sealed[commitment] = _Sealed(constraints_json, item_json, max_rounds, salt)
            self._save()
        return commitment

    def commitment_for(self, session_id: str) -> str:
        """The commitment this agent made in ``session_id`` (asked of the arbiter if unknown)."""
        known = self.session_commitments.get(session_id)
        if known is not None:
            return known
        summary = self.read(session_id)
        party = summary.get(self.role) or {}
        commitment = party.get("constraints_commit")
        if not isinstance(commitment, str):
            raise ToolError(f"no commitment of this {self.role} in session {session_id} yet")
        return commitment

    def remember(self, session_id: str, commitment: str) -> None:
        """Note the commitment this agent made in ``session_id``."""
        with self._lock:
            self.session_commitments[session_id] = commitment
            self._save()

    # Sending -----------------------------------------------------------------------------

    def send(self, session_id: str, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Build, check locally, and submit one envelope; the arbiter's answer."""
        return self.submit(self.envelope(session_id, kind, payload))

    def envelope(self, session_id: str, kind: str, payload: dict[str, Any]) -> bytes:
        """One envelope from this agent, checked as the arbiter checks it first."""
        envelope = {
            "oanp_version": OANP_VERSION,
            "message_id": new_ulid(),
            "session_id": session_id,
            "timestamp": _now(),
            "sender": {"role": self.role, "agent_id": self.agent_id},
            "type": kind,
            "payload": payload,
        }
        body = json.dumps(envelope).encode()
        try:
            check_sender(parse_envelope(body))
        except ProtocolError as exc:
            raise _refused(exc, "locally") from None
        return body

    def submit(self, body: bytes) -> dict[str, Any]:
        """Submit an envelope; the arbiter's answer."""
        try:
            answer = self.client.submit(body)
        except ProblemError as exc:
            raise _refused(exc, "by the arbiter") from None
        return {
            "entry": answer.entry,
            "arbiter": answer.arbiter,
            "session": answer.session,
            "replayed": answer.replayed,
        }

    def offer(
        self,
        session_id: str,
        kind: str,
        round_: int,
        price: Decimal,
        terms: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``offer.propose``, ``offer.counter`` or ``offer.accept`` at ``price``, with
        ``terms`` in a session with issues; an accept without them repeats the standing ones.
        Refused, nothing sent, when outside what :meth:`allowed` says."""
        payload: dict[str, Any] = {
            "round": round_,
            "price": price_to_json(price) if price.is_finite() else str(price),
            "constraints_commit": self.commitment_for(session_id),
        }
        if terms is None and kind == "offer.accept":
            summary = self.read(session_id)
            view = self.terms_view(summary)
            if view is None and summary.get("profile") == TERMS.name:
                # An arbiter whose summaries predate the standing terms: a bare accept would
                # only be refused (bad_terms), so say what to send instead.
                raise ToolError(
                    "this arbiter's session summary does not carry the standing terms: "
                    "name the terms you accept"
                )
            terms = None if view is None else view["theirs"]
        if terms is not None:
            payload["terms"] = terms
        body = self.envelope(session_id, kind, payload)
        self._guard(session_id, kind, price, terms)
        return self.submit(body)

    # Guardrails ----------------------------------------------------------------------------

    def position(self, session_id: str) -> Position:
        """Where this agent stands in ``session_id``: its log's standing offers, its limit."""
        return read_position(self.log(session_id), self.role, self.limit, self.limit_currency)

    def allowed(self, session_id: str) -> dict[str, Any]:
        """What this agent may send next in ``session_id``, as the session view shows it: the
        range of :meth:`oanp.guardrails.Position.allowed`, and the approval threshold."""
        allowed = self.position(session_id).allowed().as_json()
        if self.approval is not None:
            side = "approval_above" if self.role == "buyer" else "approval_below"
            allowed[side] = price_to_json(self.approval)
        return allowed

    def approval_question(self, session_id: str, price: Decimal) -> str | None:
        """Refuse an accept of ``price`` the guard stops; else what to ask a person before
        sending it, when it is past the approval threshold (``None``: nothing to ask)."""
        position = self.position(session_id)
        refusal = position.check_accept(price)
        if refusal is not None:
            raise _guarded(refusal)
        if not needs_approval(self.role, self.approval, price):
            return None
        side = "above" if self.role == "buyer" else "below"
        return (
            f"Send the {self.role}'s accept of {price} {position.currency} in session "
            f"{session_id}? It is {side} {self.approval} {position.currency}, past which "
            "every accept waits for your approval."
        )

    def _guard(
        self, session_id: str, kind: str, price: Decimal, terms: dict[str, Any] | None
    ) -> None:
        position = self.position(session_id)
        if kind == "offer.accept":
            refusal = position.check_accept(price)
        else:
            refusal = position.check_offer(Standing(price, _values(position, terms)))
        if refusal is not None:
            raise _guarded(refusal)

    def opening(self, session_id: str) -> _Sealed:
        """The sealed constraints and salt of this agent's commitment in ``session_id``."""
        sealed = self.sealed.get(self.commitment_for(session_id))
        if sealed is None:
            raise ToolError(
                f"the constraints of this {self.role}'s commitment in session {session_id} "
                "are not kept here (made with make_commitment in another state file?)"
            )
        return sealed

    def settle(self, session_id: str) -> dict[str, Any]:
        """``settle.reveal`` in the current round, opening this agent's own commitment."""
        sealed = self.opening(session_id)
        payload = {
            "round": self.read(session_id)["round"],
            "constraints": sealed.constraints,
            "salt": sealed.salt,
            "constraints_commit": self.commitment_for(session_id),
        }
        return self.send(session_id, "settle.reveal", payload)

    def reveal_after_end(self, session_id: str) -> dict[str, Any]:
        """Reveal this agent's constraints after the session ended."""
        sealed = self.opening(session_id)
        try:
            return self.client.reveal(session_id, sealed.constraints, sealed.salt)
        except ProblemError as exc:
            raise _refused(exc, "by the arbiter") from None

    # Reading -----------------------------------------------------------------------------

    def terms_view(self, summary: dict[str, Any]) -> dict[str, Any] | None:
        """In a session with issues: the issues, each side's standing terms (its latest
        offer's, or the ones it accepted), seen from this agent, and how many issues those
        differ on, all as the summary's ``terms`` carries them; else ``None``."""
        terms = summary.get("terms")
        if terms is None:
            return None
        other = "merchant" if self.role == "buyer" else "buyer"
        return {
            "issues": terms["issues"],
            "yours": terms[self.role],
            "theirs": terms[other],
            "issues_open": terms["issues_open"],
        }

    def turn(self, session_id: str) -> dict[str, Any]:
        """Where the session stands for this agent: state, round, whose turn, outcome, the
        terms in a session with issues, and on its turn what it may send."""
        summary = self.read(session_id)
        view = _turn_summary(summary, self.role)
        terms = self.terms_view(summary)
        if terms is not None:
            view["terms"] = terms
        if view["your_turn"]:
            view["allowed"] = self.allowed(session_id)
        return view

    def read(self, session_id: str) -> dict[str, Any]:
        """The session summary."""
        try:
            return self.client.summary(session_id)
        except ProblemError as exc:
            raise _refused(exc, "by the arbiter") from None

    def log(self, session_id: str) -> list[dict[str, Any]]:
        """Every entry of the session."""
        try:
            return self.client.log(session_id)
        except ProblemError as exc:
            raise _refused(exc, "by the arbiter") from None

    def find_merchants(self, q: str) -> list[dict[str, Any]]:
        """The listed merchant agents matching ``q``, checked here as the arbiter checks it."""
        try:
            query = parse_query(q)
        except ProtocolError as exc:
            raise _refused(exc, "locally") from None
        try:
            return self.client.merchants(query or None)
        except ProblemError as exc:
            raise _refused(exc, "by the arbiter") from None

    def _follow(self, key: str, events: Iterator[ServerEvent], feed: _Feed) -> None:
        try:
            for event in events:
                with feed.changed:
                    feed.entries.append((event.id, event.json()))
                    feed.changed.notify_all()
        except Exception as exc:
            feed.error = repr(exc)
        with feed.changed:
            feed.finished = True
            feed.changed.notify_all()
        with self._lock:
            if feed.error is not None:
                self._feeds.pop(key, None)  # the next wait starts a new one

    def _feed(self, session_id: str | None) -> _Feed:
        key = session_id or ""
        with self._lock:
            feed = self._feeds.get(key)
            if feed is not None:
                return feed
            feed = _Feed()
            self._feeds[key] = feed
        events = self.client.session_events(session_id) if session_id else self.client.inbox()
        threading.Thread(target=self._follow, args=(key, events, feed), daemon=True).start()
        return feed

    def wait(self, session_id: str | None, timeout_s: float) -> dict[str, Any]:
        """The entries not returned before, waiting up to ``timeout_s`` for the first."""
        feed = self._feed(session_id)
        with feed.changed:
            feed.changed.wait_for(
                lambda: len(feed.entries) > feed.delivered or feed.finished, timeout_s
            )
            if len(feed.entries) > feed.delivered:
                # The first new entry usually brings others (a verdict, the next round).
                feed.changed.wait_for(lambda: feed.finished, SETTLE_SECONDS)
            fresh = feed.entries[feed.delivered :]
            feed.delivered = len(feed.entries)
            error = feed.error
        result: dict[str, Any] = {"events": [_described(entry) for _, entry in fresh]}
        if error is not None and not fresh:
            raise ToolError(f"the event stream failed: {error}; call again to reconnect")
        if session_id:
            result["session"] = self.turn(session_id)
        elif fresh:
            result["cursor"] = fresh[-1][0]
        return result


def _values(position: Position, terms: dict[str, Any] | None) -> Values:
    """An offer's terms as the guard compares them; refused as the arbiter would refuse them
    (``bad_terms``), nothing sent, when they do not fit the session's issues."""
    if not position.issues:
        return ()
    try:
        return read_terms(position.issues, terms)
    except ProtocolError as exc:
        raise _refused(exc, "locally") from None


def _approval(
    session_id: str, price: Decimal, ctx: Context[Any, Any]
) -> Elicit[Approval] | Approval:
    """The accept tool's approval, resolved before its body runs (which sends only once this
    yields an approval): the guard first, so that nobody is asked to approve what would be
    refused anyway, then a person's answer when the price is past the threshold."""
    desk: Desk = ctx.request_context.lifespan_context
    question = desk.approval_question(session_id, price)
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


def _described(entry: dict[str, Any]) -> dict[str, Any]:
    from oanp.net.commands import describe

    envelope = entry["envelope"]
    return {
        "seq": entry["seq"],
        "session_id": envelope["session_id"],
        "type": envelope["type"],
        "sender": envelope["sender"],
        "payload": envelope["payload"],
        "summary": describe(entry),
    }


def _turn_summary(summary: dict[str, Any], role: str) -> dict[str, Any]:
    turn = summary.get("turn")
    return {
        "state": summary.get("state"),
        "round": summary.get("round"),
        "max_rounds": summary.get("max_rounds"),
        "currency": summary.get("currency"),
        "turn": turn,
        "your_turn": turn == role,
        "outcome": summary.get("outcome"),
    }


def build_server(desk: Desk) -> MCPServer[Desk]:
    """The MCP server with the negotiation tools and the session-log resources."""

    @asynccontextmanager
    async def serving(server: MCPServer[Desk]) -> AsyncIterator[Desk]:
        # The desk is the server's state: the tools close over it, and the approval resolver
        # (named in an annotation, so a module-level function) reads it from the context.
        yield desk

    server: MCPServer[Desk] = MCPServer("oanp", instructions=INSTRUCTIONS, lifespan=serving)

    @server.tool()
    def find_merchants(q: str = "") -> dict[str, Any]:
        """Find merchant agents to negotiate with: those listed in the arbiter's directory
        whose id, merchant name, description or catalog holds q (any case; empty: all). Each
        has agent_id (open_session's merchant_agent_id), merchant, description, currencies,
        profiles, settlement and catalog (items to open a session over)."""
        return {"merchants": desk.find_merchants(q)}

    @server.tool()
    def make_commitment(
        constraints: dict[str, Any], item: dict[str, Any], max_rounds: int = DEFAULT_MAX_ROUNDS
    ) -> dict[str, Any]:
        """Commit to your private constraints for one item and max_rounds. The constraints
        and a fresh random salt stay on this machine; only the commitment is returned. Use
        the same item and max_rounds when opening or joining the session."""
        return {"constraints_commit": desk.make_commitment(constraints, item, max_rounds)}

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
        sealed = desk.sealed.get(constraints_commit)
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
        answer = desk.send(session_id, "session.open", payload)
        desk.remember(session_id, constraints_commit)
        return {"session_id": session_id, **answer}

    @server.tool()
    def join_session(session_id: str, constraints_commit: str) -> dict[str, Any]:
        """(merchant) Join a session opened with you (session.ack), committing your
        constraints (from make_commitment, over the session's item and max_rounds)."""
        answer = desk.send(session_id, "session.ack", {"constraints_commit": constraints_commit})
        desk.remember(session_id, constraints_commit)
        return answer

    @server.tool()
    def propose(
        session_id: str, round: int, price: Decimal, terms: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """(buyer) Propose a price for this round, with terms (a value for every issue) in a
        session with issues. Never lower than your previous price, unless the terms give the
        merchant more in exchange."""
        return desk.offer(session_id, "offer.propose", round, price, terms)

    @server.tool()
    def counter(
        session_id: str, round: int, price: Decimal, terms: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """(merchant) Counter the buyer's price in this round, with terms (a value for every
        issue) in a session with issues. Never higher than before, unless the terms give the
        buyer more in exchange."""
        return desk.offer(session_id, "offer.counter", round, price, terms)

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
        return desk.offer(session_id, "offer.accept", round, price, terms)

    @server.tool()
    def withdraw(session_id: str) -> dict[str, Any]:
        """Leave the session without agreement (session.close, reason withdrawn)."""
        payload = {
            "reason": PARTY_CLOSE_REASON,
            "constraints_commit": desk.commitment_for(session_id),
        }
        return desk.send(session_id, "session.close", payload)

    @server.tool()
    def settle(session_id: str) -> dict[str, Any]:
        """In a session opened with settlement, on your turn: reveal your committed limit
        (a buyer's true_ceiling, a merchant's floor_price) to settle at once. When the other
        side reveals too, the arbiter settles at the midpoint of the two limits (within the
        standing prices) if the ceiling reaches the floor, else closes with no_zone. Both
        limits then stand in the log for anyone to see."""
        return desk.settle(session_id)

    @server.tool()
    def reveal(session_id: str) -> dict[str, Any]:
        """After the session ended: reveal your constraints and salt, checked against your
        commitment and your own prices, for the zone of agreement and surplus analytics."""
        return desk.reveal_after_end(session_id)

    @server.tool()
    def read_session(session_id: str, include_log: bool = False) -> dict[str, Any]:
        """The session's summary (state, round, whose turn, outcome; with issues, the terms
        standing and issues_open), on your turn what you may send (allowed), and its log if
        asked."""
        summary = desk.read(session_id)
        result: dict[str, Any] = {"summary": summary}
        terms = desk.terms_view(summary)
        if terms is not None:
            result["terms"] = terms
        if summary.get("turn") == desk.role:
            result["allowed"] = desk.allowed(session_id)
        if include_log:
            result["entries"] = [_described(entry) for entry in desk.log(session_id)]
        return result

    @server.tool()
    def wait_for_events(session_id: str | None = None, timeout_s: float = 30.0) -> dict[str, Any]:
        """The session's entries you have not seen yet (or, without session_id, your inbox:
        every session you are a party to), waiting up to timeout_s for the first one. With a
        session_id the answer also says whose turn it is, on your turn what you may send
        (allowed), and in a session with issues the terms standing on each side."""
        return desk.wait(session_id, max(0.0, min(timeout_s, 300.0)))

    @server.resource(
        "oanp://sessions/{session_id}/log", mime_type="application/json", name="session_log"
    )
    def session_log(session_id: str) -> str:
        """Every entry of a session, in order: the hash-chained log anyone can verify."""
        try:
            entries = desk.client.log(session_id)
        except ProblemError as exc:
            raise ResourceError(str(exc)) from None
        return json.dumps({"session_id": session_id, "entries": entries})

    return server


def serve(
    *,
    server: str,
    api_key: str,
    agent_id: str,
    role: Role,
    state_path: Path | None,
    limit: Decimal | None = None,
    approval: Decimal | None = None,
    limit_currency: str | None = None,
) -> None:
    """Serve the tools over stdio until the client closes the pipe; with ``limit`` (this
    agent's true_ceiling or floor_price) and ``approval`` (the price past which an accept asks
    a person), both in ``limit_currency``, the guardrails of :mod:`oanp.guardrails` hold the
    tools to them."""
    with ArbiterClient(server, api_key) as client:
        desk = Desk(
            client,
            agent_id=agent_id,
            role=role,
            state_path=state_path,
            limit=limit,
            approval=approval,
            limit_currency=limit_currency,
        )
        build_server(desk).run("stdio")
