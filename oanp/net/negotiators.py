"""Agents that negotiate through a remote arbiter: a one-session buyer, a long-running merchant.

They drive the sans-IO agents of :mod:`oanp.agents.parties` with an arbiter API they are handed (an
:class:`ArbiterApi`, in practice :class:`oanp.net.client.ArbiterClient`), so this module imports
no network code itself. Vaults stay in the process: envelopes carry commitments only.

The merchant survives a crash without answering anything twice. Before it sends an envelope
it writes it, with its session's salt, to its state file (atomically: a whole new file
renamed over the old one); after a restart it rebuilds each live session's agent by
replaying the session's log into a fresh agent with the saved salt, and sends any envelope
still in its outbox again, byte for byte, which the arbiter answers as an idempotent replay
when the first send had arrived. (A client that signs envelopes signs it again on the way out:
the same bytes for an Ed25519 key, new ones for ES256, whose signatures are randomised; the
arbiter's replay check leaves the signature out, so either is a replay.)
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from oanp.agents.parties import BuyerAgent, MerchantAgent, SessionEnd
from oanp.agents.pricelist import PriceList
from oanp.agents.strategies import Strategy
from oanp.agents.vaults import MerchantVault
from oanp.audit import Report, SignatureRules, read_party_keys, verify_log
from oanp.wire.canonical import JsonObject
from oanp.wire.errors import ProtocolError
from oanp.wire.settlement import NEVER_SETTLE, SettlePolicy

STATE_VERSION = 1


class StreamEvent(Protocol):
    """One event of an arbiter stream: its resume ``id``, its type, its entry as JSON."""

    @property
    def id(self) -> str: ...

    @property
    def event(self) -> str: ...

    def json(self) -> Any: ...


class ArbiterApi(Protocol):
    """What the negotiators need of an arbiter client (:class:`oanp.net.client.ArbiterClient`)."""

    def submit(self, envelope: Mapping[str, Any]) -> Any: ...

    def log(self, session_id: str) -> list[dict[str, Any]]: ...

    def jwks(self) -> dict[str, Any]: ...

    def agent_keys(self, agent_id: str) -> list[dict[str, Any]]: ...

    def session_events(
        self, session_id: str, *, after: int = 0, on_open: Callable[[], None] | None = None
    ) -> Iterable[StreamEvent]: ...

    def inbox(
        self, *, cursor: str | None = None, on_open: Callable[[], None] | None = None
    ) -> Iterable[StreamEvent]: ...


# The buyer -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FinishedSession:
    """A finished session as the buyer saw it: outcome, the full log, its offline check."""

    session_id: str
    outcome: SessionEnd | None
    log: list[dict[str, Any]]
    report: Report

    @property
    def agreement(self) -> dict[str, Any] | None:
        """The ``session.agree`` payload, when the session ended in agreement."""
        for entry in reversed(self.log):
            if entry["envelope"]["type"] == "session.agree":
                payload: dict[str, Any] = entry["envelope"]["payload"]
                return payload
        return None

    @property
    def close(self) -> dict[str, Any] | None:
        """The arbiter's ``session.close`` payload, when the session ended without one."""
        for entry in reversed(self.log):
            envelope = entry["envelope"]
            if envelope["type"] == "session.close" and envelope["sender"]["role"] == "arbiter":
                payload: dict[str, Any] = envelope["payload"]
                return payload
        return None


def negotiate(
    api: ArbiterApi,
    buyer: BuyerAgent,
    opening: JsonObject,
    *,
    clock: Callable[[], datetime],
    on_entry: Callable[[dict[str, Any]], None] = lambda entry: None,
    on_refusal: Callable[[ProtocolError], None] = lambda error: None,
) -> FinishedSession:
    """Submit ``opening`` (the buyer's ``session.open``), follow the session's event stream
    and answer it until the arbiter ends the session; then verify the log against the
    arbiter's published keys.

    A refusal of one of the buyer's moves (a timer that fell due first, say) is reported to
    ``on_refusal``; the arbiter's close that follows ends the stream. Refusing the opening
    itself raises.
    """
    session_id = str(opening["session_id"])
    api.submit(opening)
    for event in api.session_events(session_id):
        entry = event.json()
        on_entry(entry)
        for envelope in buyer.receive(entry["envelope"], clock()):
            try:
                api.submit(envelope)
            except ProtocolError as refusal:
                on_refusal(refusal)
    log = api.log(session_id)
    report = verify_log(log, api.jwks(), signatures=party_signature_rules(api, log))
    return FinishedSession(session_id, buyer.outcome, log, report)


def party_signature_rules(api: ArbiterApi, log: Sequence[Mapping[str, Any]]) -> SignatureRules:
    """The keys the log's parties registered, as the arbiter lists them: what their signed
    entries are checked with."""
    parties = {
        str(entry["envelope"]["sender"]["agent_id"])
        for entry in log
        if entry["envelope"]["sender"]["role"] != "arbiter"
    }
    return SignatureRules(read_party_keys({agent: api.agent_keys(agent) for agent in parties}))


# The merchant's state file -------------------------------------------------------------------


@dataclass
class SessionRecord:
    """What the merchant keeps of one session: the salt of its commitment, the envelopes it
    is about to send (its outbox), and whether the session is over (or given up)."""

    salt: str
    outbox: list[JsonObject] = field(default_factory=list)
    finished: bool = False
    abandoned: str | None = None

    def as_json(self) -> JsonObject:
        return {
            "salt": self.salt,
            "outbox": list(self.outbox),
            "finished": self.finished,
            "abandoned": self.abandoned,
        }


@dataclass
class MerchantState:
    """The merchant's durable memory: its inbox cursor and a record per session.

    Saved as one JSON file, replaced atomically, so a crash leaves the old or the new
    version and never half of one. The file holds salts: keep it private (mode 0600).
    """

    path: Path
    agent_id: str
    cursor: str | None = None
    sessions: dict[str, SessionRecord] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path, agent_id: str) -> MerchantState:
        """The state at ``path``, or a fresh one when there is no file yet."""
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls(path, agent_id)
        if document.get("version") != STATE_VERSION:
            raise ValueError(f"{path}: not a merchant state file of version {STATE_VERSION}")
        if document.get("agent_id") != agent_id:
            raise ValueError(f"{path} belongs to agent {document.get('agent_id')!r}")
        sessions = {
            session_id: SessionRecord(
                salt=record["salt"],
                outbox=list(record.get("outbox", [])),
                finished=bool(record.get("finished")),
                abandoned=record.get("abandoned"),
            )
            for session_id, record in document.get("sessions", {}).items()
        }
        return cls(path, agent_id, document.get("cursor"), sessions)

    def save(self) -> None:
        """Write the whole state to a new file and rename it over the old one."""
        document = {
            "version": STATE_VERSION,
            "agent_id": self.agent_id,
            "cursor": self.cursor,
            "sessions": {sid: record.as_json() for sid, record in self.sessions.items()},
        }
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".state-", dir=directory)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(document, out, separators=(",", ":"))
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


# The merchant --------------------------------------------------------------------------------

#: The inbox cursor before every entry (docs/protocol.md, section 14.8). A merchant whose state
#: file holds no cursor yet reads from it, not from the live head, so that a session opened
#: while it was starting is not missed.
INBOX_START = "c0"


class Merchant:
    """A merchant agent serving every session opened with it, from its inbox.

    One strategy and one vault answer all sessions, a price list read for each session's
    currency and item (one declined when it holds none); each session has its own agent (and
    salt). :meth:`recover` must run before :meth:`follow`: it finishes what a previous run
    of the same state file left half done.
    """

    def __init__(
        self,
        api: ArbiterApi,
        *,
        agent_id: str,
        vault: MerchantVault | PriceList,
        strategy: Strategy,
        state: MerchantState,
        clock: Callable[[], datetime],
        new_salt: Callable[[], str],
        new_message_id: Callable[[], str],
        report: Callable[[str], None] = lambda line: None,
        settle: SettlePolicy = NEVER_SETTLE,
    ) -> None:
        self.api = api
        self.agent_id = agent_id
        self.vault = vault
        self.strategy = strategy
        self.settle = settle
        self.state = state
        self.clock = clock
        self.new_salt = new_salt
        self.new_message_id = new_message_id
        self.report = report
        self.agents: dict[str, MerchantAgent] = {}

    def _agent(self, salt: str) -> MerchantAgent:
        return MerchantAgent(
            agent_id=self.agent_id,
            vault=self.vault,
            strategy=self.strategy,
            salt=salt,
            new_message_id=self.new_message_id,
            settle=self.settle,
        )

    def recover(self) -> None:
        """Rebuild every live session of the state file from its log; send what is owed."""
        for session_id, record in list(self.state.sessions.items()):
            if not record.finished:
                self.sync(session_id)

    def follow(self, *, on_open: Callable[[], None] | None = None) -> None:
        """Follow the inbox from the saved cursor, forever (until the stream raises); with
        none saved yet, from the start of the agent's history."""
        cursor = self.state.cursor or INBOX_START
        for event in self.api.inbox(cursor=cursor, on_open=on_open):
            self.handle(event.json())
            self.state.cursor = event.id
            self.state.save()

    def handle(self, entry: Mapping[str, Any]) -> None:
        """React to one inbox entry."""
        envelope = entry["envelope"]
        session_id = str(envelope["session_id"])
        agent = self.agents.get(session_id)
        if agent is not None:
            owed = agent.receive(envelope, self.clock())
            if owed:
                self._send(session_id, owed)
            if agent.finished:
                self._finish(session_id, agent)
            return
        record = self.state.sessions.get(session_id)
        if record is not None and record.finished:
            return
        if envelope["type"] == "session.open" and envelope["payload"].get("merchant_agent_id") != (
            self.agent_id
        ):
            return
        # A new session, or one whose agent this run has not rebuilt: read it whole.
        self.sync(session_id)

    def sync(self, session_id: str) -> None:
        """Rebuild the session's agent from its log and send whatever it still owes."""
        record = self.state.sessions.get(session_id)
        if record is None:
            record = SessionRecord(salt=self.new_salt())
            self.state.sessions[session_id] = record
            self.state.save()  # the salt is kept before anything commits to it
        log = self.api.log(session_id)
        agent = self._agent(record.salt)
        owed: list[JsonObject] = []
        sent: set[str] = set()
        my_commitment: str | None = None
        for entry in log:
            envelope = entry["envelope"]
            answer = agent.receive(envelope, self.clock())
            sender = envelope["sender"]
            if sender["role"] == "merchant" and sender["agent_id"] == self.agent_id:
                sent.add(str(envelope["message_id"]))
                my_commitment = my_commitment or envelope["payload"].get("constraints_commit")
                owed = []
            owed.extend(answer)
        if agent.commitment is None:
            record.finished, record.abandoned = True, "not a session opened with this merchant"
            self.state.save()
            return
        if agent.declined is not None and owed:
            self.report(f"{session_id}: declined, {agent.declined}")
        if my_commitment is not None and my_commitment != agent.commitment:
            # The salt this run holds is not the one the session committed to (a lost
            # state file): any answer would be a commitment mismatch on the record.
            record.finished, record.abandoned = True, "commitment not held by this state file"
            self.state.save()
            self.report(f"{session_id}: not answering, the state file lost its commitment")
            return
        if record.outbox:
            # Sent again byte for byte even when the log holds it: the arbiter answers a
            # repeat with its first answer, so what the crash interrupted ends the same way.
            unsent = [e for e in record.outbox if str(e["message_id"]) not in sent]
            for envelope in record.outbox:
                self._submit(session_id, envelope)
            record.outbox = []
            self.state.save()
            if unsent:
                self.sync(session_id)  # the log moved on; read it again
                return
        self.agents[session_id] = agent
        if owed and not agent.finished:
            self._send(session_id, owed)
        if agent.finished:
            self._finish(session_id, agent)

    def _send(self, session_id: str, envelopes: list[JsonObject]) -> None:
        record = self.state.sessions[session_id]
        record.outbox = list(envelopes)
        self.state.save()  # written ahead: a crash from here on sends these same bytes again
        for envelope in envelopes:
            self._submit(session_id, envelope)
        record.outbox = []
        self.state.save()

    def _submit(self, session_id: str, envelope: JsonObject) -> None:
        try:
            answer = self.api.submit(envelope)
        except ProtocolError as refusal:
            self.report(f"{session_id}: {envelope['type']} refused: {refusal}")
            return
        payload = envelope["payload"]
        assert isinstance(payload, dict)
        price = payload.get("price")
        repeat = " (replayed)" if getattr(answer, "repeated", False) else ""
        self.report(
            f"{session_id}: sent {envelope['type']}"
            + (f" round {payload.get('round')} at {price}" if price is not None else "")
            + repeat
        )

    def _finish(self, session_id: str, agent: MerchantAgent) -> None:
        self.state.sessions[session_id].finished = True
        self.state.save()
        self.agents.pop(session_id, None)
        self.report(f"{session_id}: finished, {agent.outcome}")
