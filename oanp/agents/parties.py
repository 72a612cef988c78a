"""Reference buyer and merchant agents that negotiate from sealed vaults.

An agent is sans-IO, like the arbiter's machine: it is fed every envelope of its session's
stream in log order (its own accepted envelopes, the other party's, the arbiter's) and answers
with the envelopes it wants to submit next. It learns its state only from that stream, so a
submission the arbiter refuses changes nothing. One agent object takes part in one session.

The vault is the only place a party's limits live. Envelopes are built from public fields
alone (ids, the item, the currency, prices the strategy chose, the commitment), so a limit can
reach the wire only as a salted hash. Before a price leaves, the agent checks it against the
vault itself (:class:`LimitGuard`): a strategy bug must fail loudly here, not be caught by the
arbiter as a violation, or worse, not be caught at all.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, ClassVar, Final, Generic, Literal, TypeVar

from oanp.agents.pricelist import PriceList, Unpriced
from oanp.agents.strategies import Accept, Decision, Limits, Situation, Strategy, at_least_as_good
from oanp.agents.tradeoffs import TermsPlan, terms_of
from oanp.agents.vaults import BuyerVault, MerchantVault, Vault
from oanp.wire.canonical import JsonObject, json_value
from oanp.wire.commitments import Side, commit
from oanp.wire.envelope import (
    DEFAULT_MAX_ROUNDS,
    DEFAULT_PROFILE,
    OANP_VERSION,
    PARTY_CLOSE_REASON,
    SETTLEMENTS,
    MessageType,
    format_timestamp,
)
from oanp.wire.money import MINOR_UNITS, PRICE_CEILING, fits_currency, price_to_json
from oanp.wire.profiles import TERMS
from oanp.wire.settlement import NEVER_SETTLE, SettlePolicy
from oanp.wire.terms import Issue, Values, is_pure_retraction, issues_json, read_issues, terms_json


class LimitGuard(Exception):
    """An agent refused to emit a move its own vault or history forbids.

    Strategies clamp their prices, so a correct strategy never trips a guard; one that does is
    a bug, and the move is not sent. Messages never name the limit itself.
    """


class BeyondLimit(LimitGuard):
    """An offer or accept above the buyer's true_ceiling or below the merchant's floor_price."""


class Renege(LimitGuard):
    """An offer that takes back a concession: a buyer lower, a merchant higher than before."""


class InvalidMove(LimitGuard):
    """A move the arbiter must refuse anyway: an unfit price, or an accept with none standing."""


class TermsUnfit(LimitGuard, ValueError):
    """The vault's terms cannot be read against the issues the session declares (an option it
    does not offer, a value outside its range, an ideal worse than the limit): the agent
    commits to nothing rather than negotiate issues it has no sound limits for."""


class AgentStateError(Exception):
    """The agent's session state does not allow the call (open twice, withdraw when done)."""


V = TypeVar("V", bound=Vault)


@dataclass(frozen=True, slots=True)
class Agreed:
    """The session ended in ``session.agree`` at ``price``."""

    price: Decimal


@dataclass(frozen=True, slots=True)
class Closed:
    """The arbiter closed the session; ``reason`` is its code (docs/protocol.md §7)."""

    reason: str


#: How a session ended for an agent: with an agreement, or closed without one.
SessionEnd = Agreed | Closed


@dataclass(frozen=True, slots=True)
class _Session:
    session_id: str
    item: JsonObject
    currency: str
    max_rounds: int
    commitment: str
    #: The declared issues besides the price (profile terms/v0.1), or none.
    issues: tuple[Issue, ...] = ()


def _timestamp(moment: datetime) -> str:
    if moment.utcoffset() is None:
        # A naive datetime would be read as the host's local time: refuse to guess.
        raise ValueError("timestamps need a timezone-aware datetime")
    return format_timestamp(moment)


def _exact(value: object) -> Decimal:
    """A price from the stream: floats (a stored log) are read by their shortest repr."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, int | Decimal) and not isinstance(value, bool):
        return Decimal(value)
    raise TypeError("a price is a JSON number")


class PartyAgent(ABC, Generic[V]):
    """What buyer and merchant agents share: stream bookkeeping, guards, envelopes."""

    role: ClassVar[Side]
    offer_type: ClassVar[MessageType]

    def __init__(
        self,
        *,
        agent_id: str,
        vault: V,
        strategy: Strategy,
        salt: str,
        new_message_id: Callable[[], str],
        settle: SettlePolicy = NEVER_SETTLE,
    ) -> None:
        self.agent_id = agent_id
        self._vault = vault
        self._strategy = strategy
        self._settle = settle
        self._settlement = False  # the session allows settlement by reveal
        self._revealed = False  # this agent revealed its limit to settle
        self._stuck = False  # the last verdict found the spread had not narrowed
        self._salt = salt
        self._new_message_id = new_message_id
        self._session: _Session | None = None
        self._mine: list[Decimal] = []
        self._theirs: list[Decimal] = []
        #: With issues: each side's terms beside its prices, in the same order.
        self._my_terms: list[Values] = []
        self._their_terms: list[Values] = []
        self._seen: set[str] = set()
        self._settling = False
        self._finished = False
        self._outcome: SessionEnd | None = None

    def __repr__(self) -> str:
        session_id = self._session.session_id if self._session else None
        return f"{type(self).__name__}(agent_id={self.agent_id!r}, session_id={session_id!r})"

    @property
    def outcome(self) -> SessionEnd | None:
        """How the session ended, once the arbiter said so (agreed price or close reason)."""
        return self._outcome

    @property
    def finished(self) -> bool:
        """True once the session was agreed or closed: the agent will send nothing more."""
        return self._finished

    @property
    def commitment(self) -> str | None:
        """The commitment this agent repeats in every message, once its session is known."""
        return self._session.commitment if self._session else None

    def receive(self, envelope: Mapping[str, Any], now: datetime) -> list[JsonObject]:
        """Take the next envelope of the session's stream; return the envelopes to submit next.

        Feed every entry in log order, this agent's own included: that is how it learns which
        of its submissions the arbiter accepted. Other sessions' envelopes and repeats are
        ignored. Raises a :class:`LimitGuard` when the strategy's answer breaks the vault.
        """
        if self._session is None:
            return self._join(envelope, now)
        message_id = envelope["message_id"]
        if envelope["session_id"] != self._session.session_id or message_id in self._seen:
            # An SSE stream resumed after a reconnect may deliver an entry twice.
            return []
        self._seen.add(message_id)
        kind = MessageType(envelope["type"])
        sender_role = envelope["sender"]["role"]
        payload = envelope["payload"]
        if kind in (MessageType.SESSION_AGREE, MessageType.SESSION_CLOSE):
            self._finish(kind, sender_role, payload)
            return []
        if self._finished:
            return []
        if kind is MessageType.OFFER_ACCEPT:
            # The round is complete and the arbiter's agree follows: nothing left to say.
            self._settling = True
            return []
        if kind is MessageType.SETTLE_REVEAL:
            # The round now ends in a settlement or no zone: no offer follows either way.
            self._settling = True
            if sender_role == self.role or self._revealed:
                return []  # its own, or the second: the arbiter's outcome follows
            # The other side revealed: its own reveal settles; without one, nothing can.
            return [self._reveal_envelope(int(payload["round"]), now)]
        if kind is MessageType.ROUND_VERDICT:
            self._stuck = payload["status"] == "fair_but_stuck"
        if kind in (MessageType.OFFER_PROPOSE, MessageType.OFFER_COUNTER):
            # Recorded first: whether to reveal reads the terms of the offer that hands the turn.
            mine = sender_role == self.role
            (self._mine if mine else self._theirs).append(_exact(payload["price"]))
            if self._session.issues:
                values = terms_of(self._session.issues, payload["terms"])
                (self._my_terms if mine else self._their_terms).append(values)
        round_ = self._settle_first(kind, payload)
        if round_ is not None:
            return [self._reveal_envelope(round_, now)]
        return self._react(kind, payload, now)

    def withdraw(self, now: datetime) -> JsonObject:
        """The party ``session.close`` that withdraws this agent from its session."""
        session = self._session
        if session is None or self._finished:
            raise AgentStateError("there is no running session to withdraw from")
        payload: JsonObject = {
            "reason": PARTY_CLOSE_REASON,
            "constraints_commit": session.commitment,
        }
        return self._envelope(session, MessageType.SESSION_CLOSE, payload, now)

    def _settle_first(self, kind: MessageType, payload: Mapping[str, Any]) -> int | None:
        """The round to reveal in, when this envelope hands this agent its turn and its
        policy says to reveal first now; else ``None``."""
        if not (self._settlement and self._settle.allows) or self._revealed:
            return None
        round_ = self._round_in_turn(kind, payload)
        if round_ is None or self._session is None or round_ > self._session.max_rounds:
            return None
        if self._session.issues and not (
            self._my_terms and self._their_terms and self._my_terms[-1] == self._their_terms[-1]
        ):
            # A reveal settles the price alone (docs/protocol.md §16): the arbiter refuses it
            # while another issue is open, so the agent bargains on until both sides' terms
            # match.
            return None
        return round_ if self._settle.reveals_now(round_, self._stuck) else None

    @abstractmethod
    def _round_in_turn(self, kind: MessageType, payload: Mapping[str, Any]) -> int | None:
        """The round in which this envelope hands this agent the turn, or ``None``."""

    def _reveal_envelope(self, round_: int, now: datetime) -> JsonObject:
        session = self._session
        assert session is not None
        self._revealed = True
        payload: JsonObject = {
            "round": round_,
            "constraints": self._vault.constraints(),
            "salt": self._salt,
            "constraints_commit": session.commitment,
        }
        return self._envelope(session, MessageType.SETTLE_REVEAL, payload, now)

    def reveal(self) -> JsonObject:
        """The body of a reveal (docs/protocol.md §10): constraints and salt opening the commitment.

        Only after the session ended: before, it would hand the other side this agent's limits.
        """
        if self._session is None or not self._finished:
            raise AgentStateError("constraints are revealed only after the session ended")
        return {"constraints": self._vault.constraints(), "salt": self._salt}

    def _join(self, envelope: Mapping[str, Any], now: datetime) -> list[JsonObject]:
        """React to an envelope while no session is known yet."""
        return []

    @abstractmethod
    def _react(
        self, kind: MessageType, payload: Mapping[str, Any], now: datetime
    ) -> list[JsonObject]:
        """React to a non-terminal envelope of the running session."""

    def _start(
        self,
        session_id: str,
        item: Mapping[str, object],
        currency: str,
        max_rounds: int,
        issues: tuple[Issue, ...] = (),
    ) -> _Session:
        if currency not in MINOR_UNITS:
            raise ValueError(f"unknown currency {currency!r}")
        item_json = json_value(item)
        if not isinstance(item_json, dict):
            raise ValueError("an item is a JSON object")
        if issues:
            # Its terms must fit the declared issues before it commits to anything.
            try:
                TermsPlan(self.role, issues, self._vault.limits(), self._vault.terms)
            except ValueError as unfit:
                raise TermsUnfit(str(unfit)) from None
        commitment = commit(self._vault.constraints(), item_json, max_rounds, self._salt)
        return _Session(session_id, item_json, currency, max_rounds, commitment, issues)

    def _finish(self, kind: MessageType, sender_role: str, payload: Mapping[str, Any]) -> None:
        self._finished = True
        if sender_role != "arbiter":
            return  # a party's withdrawal; the arbiter's close with the outcome follows
        if kind is MessageType.SESSION_AGREE:
            self._outcome = Agreed(_exact(payload["final_price"]))
        else:
            self._outcome = Closed(str(payload["reason"]))

    def _move(self, round_: int, now: datetime) -> JsonObject:
        """Ask the strategy for round ``round_``'s move, guard it, and wrap it."""
        session = self._session
        assert session is not None  # only reached from _react, inside a session
        situation = Situation(
            role=self.role,
            limits=self._vault.limits(),
            currency=session.currency,
            round=round_,
            max_rounds=session.max_rounds,
            own_prices=tuple(self._mine),
            opponent_prices=tuple(self._theirs),
        )
        decision = self._strategy.decide(situation)
        if session.issues:
            return self._move_with_terms(session, situation, decision, now)
        if isinstance(decision, Accept):
            kind, price = MessageType.OFFER_ACCEPT, self._acceptable(situation)
        else:
            kind, price = self.offer_type, self._offerable(decision.price, session.currency)
        payload: JsonObject = {
            "round": round_,
            "price": price_to_json(price),
            "constraints_commit": session.commitment,
        }
        return self._envelope(session, kind, payload, now)

    def _move_with_terms(
        self, session: _Session, situation: Situation, decision: Decision, now: datetime
    ) -> JsonObject:
        """A move in a session with issues (see :mod:`oanp.agents.tradeoffs`): the price strategy
        names the price, or accepts one; the terms beside it follow the plan, and the other
        side's standing offer is taken when it is worth at least what this party would ask."""
        plan = TermsPlan(self.role, session.issues, self._vault.limits(), self._vault.terms)
        standing = situation.standing
        theirs = self._their_terms[-1] if self._their_terms else None
        price = standing if isinstance(decision, Accept) else decision.price
        assert price is not None  # a strategy accepts only a standing price
        price = self._offerable(price, session.currency)
        previous = self._my_terms[-1] if self._my_terms else None
        values = plan.offer(price, previous, theirs, situation.progress)
        if (
            standing is not None
            and theirs is not None
            and self._takes(plan, situation, decision, (standing, theirs), (price, values))
        ):
            kind, price, values = MessageType.OFFER_ACCEPT, self._acceptable(situation), theirs
        else:
            kind = self.offer_type
            if (
                self._mine
                and previous is not None
                and is_pure_retraction(
                    self.role == "merchant",
                    session.issues,
                    (self._mine[-1], previous),
                    (price, values),
                )
            ):
                raise Renege(f"the {self.role} will not take back its previous terms")
        payload: JsonObject = {
            "round": situation.round,
            "price": price_to_json(price),
            "constraints_commit": session.commitment,
            "terms": terms_json(session.issues, values),
        }
        return self._envelope(session, kind, payload, now)

    def _takes(
        self,
        plan: TermsPlan,
        situation: Situation,
        decision: Decision,
        standing: tuple[Decimal, Values],
        planned: tuple[Decimal, Values],
    ) -> bool:
        """Whether to accept the other side's standing offer: within every limit, and worth
        at least the offer this party would make instead; on the last word (the buyer's final
        answer, a merchant's last counter its strategy would not make), anything within."""
        if not plan.within(standing[1]) or not at_least_as_good(
            self.role, standing[0], self._vault.limits().reservation
        ):
            return False
        last_word = situation.is_final_answer or (
            situation.is_last_counter and isinstance(decision, Accept)
        )
        return last_word or plan.utility(*standing) >= plan.utility(*planned)

    def _offerable(self, price: Decimal, currency: str) -> Decimal:
        if not (0 < price < PRICE_CEILING and fits_currency(price, currency)):
            raise InvalidMove(f"{price} is not a price {currency} can carry on the wire")
        self._within_limit(price, "offer")
        if self._mine and not at_least_as_good(self.role, self._mine[-1], price):
            raise Renege(f"the {self.role} will not take back its previous price with {price}")
        return price

    def _acceptable(self, situation: Situation) -> Decimal:
        standing = situation.standing
        if standing is None:
            raise InvalidMove("there is no standing price to accept")
        self._within_limit(standing, "accept")
        return standing

    def _within_limit(self, price: Decimal, move: str) -> None:
        if not at_least_as_good(self.role, price, self._vault.limits().reservation):
            side = "above its ceiling" if self.role == "buyer" else "below its floor"
            raise BeyondLimit(f"the {self.role} will not {move} {price}: that is {side}")

    def _envelope(
        self, session: _Session, kind: MessageType, payload: JsonObject, now: datetime
    ) -> JsonObject:
        return {
            "oanp_version": OANP_VERSION,
            "message_id": self._new_message_id(),
            "session_id": session.session_id,
            "timestamp": _timestamp(now),
            "sender": {"role": self.role, "agent_id": self.agent_id},
            "type": kind.value,
            "payload": payload,
        }


class BuyerAgent(PartyAgent[BuyerVault]):
    """Opens a session, proposes first in every round, and accepts a standing counter.

    ``decline`` is how it turns down a last counter it will not take as its final answer:
    ``"withdraw"`` at once (the default: nobody waits), or ``"lapse"``, saying nothing until
    the answer's window closes the session as ``max_rounds_reached``.
    """

    role = "buyer"
    offer_type = MessageType.OFFER_PROPOSE

    def __init__(self, *, decline: Literal["withdraw", "lapse"] = "withdraw", **party: Any) -> None:
        if decline not in ("withdraw", "lapse"):
            raise ValueError(f"decline by {decline!r}: withdraw or lapse")
        super().__init__(**party)
        self._decline = decline

    def open(
        self,
        *,
        session_id: str,
        merchant_agent_id: str,
        item: Mapping[str, object],
        currency: str,
        now: datetime,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        profile: str = DEFAULT_PROFILE,
        response_window_s: int | None = None,
        deadline: datetime | None = None,
        issues: list[JsonObject] | None = None,
    ) -> JsonObject:
        """The ``session.open`` envelope, committing this buyer's constraints to the session.

        ``issues`` (docs/protocol.md §16) opens a session of profile terms/v0.1 that
        negotiates them besides the price; ``ValueError`` when they are not well formed."""
        if self._session is not None:
            raise AgentStateError("this agent already opened its session")
        declared = read_issues(issues) if issues else ()
        session = self._start(session_id, item, currency, max_rounds, declared)
        payload: JsonObject = {
            "merchant_agent_id": merchant_agent_id,
            "item": session.item,
            "currency": currency,
            "max_rounds": max_rounds,
            "profile": TERMS.name if declared and profile == DEFAULT_PROFILE else profile,
            "constraints_commit": session.commitment,
        }
        if declared:
            payload["issues"] = issues_json(declared)
        if response_window_s is not None:
            payload["response_window_s"] = response_window_s
        if deadline is not None:
            payload["deadline"] = _timestamp(deadline)
        if self._settle.allows:
            payload["settlement"] = SETTLEMENTS[0]
            self._settlement = True
        envelope = self._envelope(session, MessageType.SESSION_OPEN, payload, now)
        self._session = session
        return envelope

    def _react(
        self, kind: MessageType, payload: Mapping[str, Any], now: datetime
    ) -> list[JsonObject]:
        assert self._session is not None
        if kind is MessageType.SESSION_ACK:
            return [self._move(1, now)]
        if kind is MessageType.OFFER_COUNTER and int(payload["round"]) >= self._session.max_rounds:
            # The final answer (docs/protocol.md §5): accept the last counter, or decline it.
            answer = self._move(int(payload["round"]), now)
            if answer["type"] == MessageType.OFFER_ACCEPT.value:
                return [answer]
            return [self.withdraw(now)] if self._decline == "withdraw" else []
        if kind is not MessageType.ROUND_VERDICT or self._settling:
            return []
        round_ = int(payload["round"])
        # A violated round is followed by the arbiter's close; a final one by max_rounds_reached.
        if payload["status"] == "violated" or round_ >= self._session.max_rounds:
            return []
        return [self._move(round_ + 1, now)]

    def _round_in_turn(self, kind: MessageType, payload: Mapping[str, Any]) -> int | None:
        if kind is MessageType.SESSION_ACK:
            return 1
        if kind is MessageType.ROUND_VERDICT and payload["status"] != "violated":
            return int(payload["round"]) + 1
        return None


class EmptyVault:
    """The vault of a merchant agent that has not joined a session yet, or declined one: it
    commits to nothing (``{}``) and has no limits to negotiate on."""

    terms: Final = None

    def __repr__(self) -> str:
        return "EmptyVault()"

    def constraints(self) -> JsonObject:
        return {}

    def limits(self) -> Limits:
        raise AgentStateError("this agent holds no limits for its session")


class MerchantAgent(PartyAgent[MerchantVault | EmptyVault]):
    """Joins a session that names it, and answers every buyer propose in the same round.

    Its vault is one :class:`MerchantVault`, taken for any session, or a
    :class:`~oanp.agents.pricelist.PriceList`, read at the open for the session's currency and item:
    a session it holds no limits for is declined at once (:attr:`declined` says why).
    """

    role = "merchant"
    offer_type = MessageType.OFFER_COUNTER

    def __init__(self, *, vault: MerchantVault | PriceList, **party: Any) -> None:
        self._prices = vault if isinstance(vault, PriceList) else None
        super().__init__(vault=EmptyVault() if isinstance(vault, PriceList) else vault, **party)
        #: Why it declined its session before acking, or ``None``.
        self.declined: str | None = None

    def _join(self, envelope: Mapping[str, Any], now: datetime) -> list[JsonObject]:
        payload = envelope["payload"]
        if (
            envelope["type"] != MessageType.SESSION_OPEN.value
            or payload["merchant_agent_id"] != self.agent_id
        ):
            return []
        opened = (
            envelope["session_id"],
            payload["item"],
            payload["currency"],
            int(payload.get("max_rounds", DEFAULT_MAX_ROUNDS)),
        )
        self._seen.add(envelope["message_id"])
        if self._prices is not None:
            try:
                row = self._prices.limits_for(payload["currency"], payload["item"])
            except Unpriced as unpriced:
                # It negotiates on no limits it does not hold (280 means nothing in another
                # currency): it declines at once, committed to nothing, rather than let the
                # buyer wait out its window.
                return self._decline(opened, str(unpriced), now)
            self._vault = MerchantVault(row.floor_price, row.ideal_price, self._prices.terms)
        try:
            session = self._start(
                *opened, read_issues(payload["issues"]) if payload.get("issues") else ()
            )
        except TermsUnfit:
            # Its terms cannot fit the issues this buyer declared (an option the session does
            # not offer, an ideal past its limit by the declared direction): it declines at once
            # (docs/protocol.md §5, a merchant may withdraw before acking) rather than leave
            # the buyer to wait out its window. The withdrawal repeats a commitment to its
            # limits, as every withdrawal does; it negotiates on none of them.
            return self._decline(opened, "its limits on issues do not fit the issues declared", now)
        self._session = session
        self._settlement = payload.get("settlement") in SETTLEMENTS
        ack: JsonObject = {"constraints_commit": session.commitment}
        return [self._envelope(session, MessageType.SESSION_ACK, ack, now)]

    def _decline(
        self, opened: tuple[str, Any, str, int], why: str, now: datetime
    ) -> list[JsonObject]:
        """Withdraw before acking (docs/protocol.md §5, a merchant may), saying why in
        :attr:`declined`, which names no limit."""
        self.declined = why
        self._session = self._start(*opened)
        return [self.withdraw(now)]

    def _react(
        self, kind: MessageType, payload: Mapping[str, Any], now: datetime
    ) -> list[JsonObject]:
        if kind is MessageType.OFFER_PROPOSE:
            return [self._move(int(payload["round"]), now)]
        return []

    def _round_in_turn(self, kind: MessageType, payload: Mapping[str, Any]) -> int | None:
        return int(payload["round"]) if kind is MessageType.OFFER_PROPOSE else None
