"""One agent's side of the arbiter for the MCP tools (:mod:`oanp.net.mcp`): its client, its
sealed commitments (constraints and salts stay in this process and its ``--state`` file), its
followed streams, and the guardrails (:mod:`oanp.agents.guardrails`) every offer passes before it is
sent. Each refusal is a :class:`ToolError` the model reads, with the code the arbiter would
answer or the guard's.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from oanp.agents.guardrails import (
    Position,
    Refusal,
    Standing,
    needs_approval,
    past_committed_limit,
    read_position,
)
from oanp.agents.ids import new_ulid
from oanp.net.client import ArbiterClient, ProblemError, ServerEvent
from oanp.wire.canonical import json_value
from oanp.wire.commitments import Side, commit, encode_salt
from oanp.wire.discovery import parse_query
from oanp.wire.envelope import (
    OANP_VERSION,
    check_sender,
    format_timestamp,
    parse_envelope,
)
from oanp.wire.errors import ProtocolError
from oanp.wire.money import price_to_json
from oanp.wire.profiles import TERMS
from oanp.wire.terms import Values, read_terms
from oanp.wire.transcript import describe_entry_json

#: After the first new entry, wait this long for the ones it causes (a verdict, a close).
SETTLE_SECONDS = 0.3


def _now() -> str:
    return format_timestamp(datetime.now(UTC))


def refused(error: ProtocolError, where: str) -> ToolError:
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


class McpAgent:
    """One agent's side of the arbiter: its client, its sealed commitments, its feeds."""

    def __init__(
        self,
        client: ArbiterClient,
        *,
        agent_id: str,
        role: Side,
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
            raise refused(exc, "locally") from None
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
            raise refused(exc, "locally") from None
        return body

    def submit(self, body: bytes) -> dict[str, Any]:
        """Submit an envelope; the arbiter's answer."""
        try:
            answer = self.client.submit(body)
        except ProblemError as exc:
            raise refused(exc, "by the arbiter") from None
        return {
            "entry": answer.entry,
            "arbiter": answer.arbiter,
            "session": answer.session,
            "replayed": answer.repeated,
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
        range of :meth:`oanp.agents.guardrails.Position.allowed`, and the approval threshold."""
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
            raise refused(exc, "by the arbiter") from None

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
            raise refused(exc, "by the arbiter") from None

    def log(self, session_id: str) -> list[dict[str, Any]]:
        """Every entry of the session."""
        try:
            return self.client.log(session_id)
        except ProblemError as exc:
            raise refused(exc, "by the arbiter") from None

    def find_merchants(self, q: str) -> list[dict[str, Any]]:
        """The listed merchant agents matching ``q``, checked here as the arbiter checks it."""
        try:
            query = parse_query(q)
        except ProtocolError as exc:
            raise refused(exc, "locally") from None
        try:
            return self.client.merchants(query or None)
        except ProblemError as exc:
            raise refused(exc, "by the arbiter") from None

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

    def follow_inbox(self) -> None:
        """Start reading the inbox now: it begins at the arbiter's live head, so a wait without
        a session id then sees every session opened since this call, not only since itself."""
        self._feed(None)

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
        result: dict[str, Any] = {"events": [described(entry) for _, entry in fresh]}
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
        raise refused(exc, "locally") from None


def described(entry: dict[str, Any]) -> dict[str, Any]:
    envelope = entry["envelope"]
    return {
        "seq": entry["seq"],
        "session_id": envelope["session_id"],
        "type": envelope["type"],
        "sender": envelope["sender"],
        "payload": envelope["payload"],
        "summary": describe_entry_json(entry),
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
