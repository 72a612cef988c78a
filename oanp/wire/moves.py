"""What each party move does to a session (docs/protocol.md §5): the ack, offers, accepts,
withdrawals and reveals, each a function of a :class:`Step` (the state being built, the
entries it appends). :class:`oanp.wire.machine.Negotiation` picks the move from
:data:`oanp.wire.state.TRANSITIONS` and calls it from :data:`MOVES`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from oanp.wire.canonical import JsonObject, canonical_bytes
from oanp.wire.commitments import LIMIT_KEYS, Side, is_weak, limit_breaches, limit_of, opens
from oanp.wire.envelope import (
    ARBITER_ID_PREFIX,
    INVARIANTS,
    OANP_VERSION,
    Ack,
    Envelope,
    MessageType,
    Offer,
    Role,
    SettleReveal,
    Withdraw,
    format_timestamp,
)
from oanp.wire.errors import (
    BadTerms,
    FieldError,
    NotSettleable,
    PriceNotStanding,
    PricePrecision,
    SettlementNotEnabled,
    TermsNotStanding,
    WeakCommitment,
    WrongRound,
)
from oanp.wire.log import Entry, make_entry
from oanp.wire.money import fits_currency, minor_units, price_to_json
from oanp.wire.profiles import (
    Judgement,
    Reason,
    VerdictStatus,
    breach_invariant,
)
from oanp.wire.settlement import SETTLEMENT_RULE, settlement_price
from oanp.wire.signing import AGREEMENT_TYP
from oanp.wire.state import Arbiter, B, M, Move, Phase, SessionState, T, evolve
from oanp.wire.terms import Values, is_pure_retraction, issues_open, read_terms, terms_json


class Step:
    """One transition in progress: a working copy of the state and the entries it appends.

    Each method takes the other fields a move changes with it (``**changes``), so a move copies
    the state once per entry rather than once per field it touches.
    """

    def __init__(self, state: SessionState, arbiter: Arbiter, now: datetime) -> None:
        self.state = state
        self.arbiter = arbiter
        self.now = now
        self.entries: list[Entry] = []

    def window_end(self) -> datetime:
        return self.now + timedelta(seconds=self.state.response_window_s)

    def log(self, envelope: Envelope, **changes: Any) -> None:
        self._append(
            envelope.body, message_ids=self.state.message_ids | {envelope.message_id}, **changes
        )

    def _append(self, body: JsonObject, **changes: Any) -> Entry:
        head = self.state.head
        entry = make_entry(
            seq=head.seq + 1, received_at=self.now, envelope=body, prev_hash=head.entry_hash
        )
        self.entries.append(entry)
        self.state = evolve(self.state, {"head": head.after(entry), **changes})
        return entry

    def _emit(self, kind: MessageType, payload: JsonObject, **changes: Any) -> Entry:
        state = self.state
        return self._append(
            {
                "oanp_version": OANP_VERSION,
                "message_id": f"{ARBITER_ID_PREFIX}{state.head.seq + 1}",
                "session_id": state.session_id,
                "timestamp": format_timestamp(self.now),
                "sender": {"role": Role.ARBITER.value, "agent_id": self.arbiter.arbiter_id},
                "type": kind.value,
                "payload": payload,
            },
            **changes,
        )

    def moving(self, turn: Role) -> dict[str, Any]:
        """The changes that hand the turn to ``turn``, whose response window starts now."""
        return {"phase": Phase.NEGOTIATING, "turn": turn, "turn_deadline": self.window_end()}

    def to_move(self, turn: Role, **changes: Any) -> None:
        self.state = evolve(self.state, {**self.moving(turn), **changes})

    def verdict(
        self,
        judgement: Judgement,
        *,
        buyer_price: Decimal | None,
        merchant_price: Decimal | None,
        buyer_terms: Values | None = None,
        merchant_terms: Values | None = None,
        failed: str | None = None,
    ) -> None:
        """Judge the round on the prices (and, with issues, the terms) it ended on."""
        spread = None
        if buyer_price is not None and merchant_price is not None:
            spread = merchant_price - buyer_price
        checks = dict.fromkeys(INVARIANTS[:5], "pass")
        if failed:
            checks[failed] = "fail"
        payload: JsonObject = {
            "round": self.state.round,
            "status": judgement.status.value,
            "rationale": judgement.rationale.value,
            "buyer_price": _amount(buyer_price),
            "merchant_price": _amount(merchant_price),
            "spread": _amount(spread),
            "checks": dict(checks),
        }
        if self.state.issues:
            payload["issues_open"] = issues_open(self.state.issues, buyer_terms, merchant_terms)
        self._emit(T.ROUND_VERDICT, payload, phase=Phase.EVALUATING, turn=None)

    def close(self, reason: Reason, detail: str, **changes: Any) -> None:
        self._emit(
            T.SESSION_CLOSE,
            {"reason": reason.value, "detail": detail, "round": self.state.round},
            phase=Phase.CLOSED,
            turn=None,
            turn_deadline=None,
            close_reason=reason,
            **changes,
        )

    def agree(
        self, price: Decimal, terms: Values | None, settlement: JsonObject | None = None
    ) -> None:
        state, arbiter = self.state, self.arbiter
        agreement: JsonObject = {
            "oanp_version": OANP_VERSION,
            "session_id": state.session_id,
            "arbiter_id": arbiter.arbiter_id,
            "buyer_agent_id": state.buyer_agent_id,
            "merchant_agent_id": state.merchant_agent_id,
            "item": state.item,
            "currency": state.currency,
            "final_price": price_to_json(price),
            "session_digest": state.head.entry_hash,
            "log_length": state.head.seq,
            "invariants_satisfied": list(INVARIANTS),
            "agreed_at": format_timestamp(self.now),
        }
        if state.issues:
            assert terms is not None
            agreement["final_terms"] = terms_json(state.issues, terms)
        if settlement is not None:
            agreement["settlement"] = settlement
        signature = arbiter.signer.sign_detached(canonical_bytes(agreement), typ=AGREEMENT_TYP)
        self._emit(
            T.SESSION_AGREE,
            {
                "final_price": price_to_json(price),
                "currency": state.currency,
                "session_digest": state.head.entry_hash,
                "invariants_satisfied": list(INVARIANTS),
                "agreement": agreement,
                "signature": signature,
                "signature_alg": arbiter.signer.alg,
                "kid": arbiter.signer.kid,
                "jwks_uri": arbiter.jwks_uri,
            },
            phase=Phase.AGREED,
            turn=None,
            turn_deadline=None,
            final_price=price,
        )

    # Checks shared by priced moves -----------------------------------------------------------

    def priced(self, envelope: Envelope) -> tuple[Offer, Values | None]:
        """Refuse (422) a wrong round, a price finer than the currency, or terms outside the
        session's issues; nothing is logged. Returns the offer and its terms' values."""
        offer = envelope.payload
        assert isinstance(offer, Offer)
        state = self.state
        if offer.round != state.round:
            raise WrongRound(f"this is round {state.round}, not {offer.round}")
        if not fits_currency(offer.price, state.currency):
            raise PricePrecision(
                f"{state.currency} prices have at most {minor_units(state.currency)} decimals"
            )
        if not state.issues:
            if offer.terms is not None:
                raise BadTerms(
                    "this session negotiates the price alone",
                    errors=[FieldError("$.payload.terms", "the session declares no issues")],
                )
            return offer, None
        return offer, read_terms(state.issues, offer.terms)

    def violated(
        self,
        envelope: Envelope,
        reason: Reason,
        detail: str,
        *,
        buyer: tuple[Decimal | None, Values | None],
        merchant: tuple[Decimal | None, Values | None],
    ) -> None:
        """Log the breaching envelope as evidence, judge the round violated on each side's
        ``(price, terms)``, close."""
        self.log(envelope)
        self.verdict(
            Judgement(VerdictStatus.VIOLATED, reason),
            buyer_price=buyer[0],
            merchant_price=merchant[0],
            buyer_terms=buyer[1],
            merchant_terms=merchant[1],
            failed=breach_invariant(reason),
        )
        self.close(reason, detail)

    def conclude_round(self, judgement: Judgement, spread: Decimal, still_open: int | None) -> None:
        """After a round's fair or stuck verdict: close at the limit or stall, else go on."""
        state = self.state
        stuck = state.stuck_rounds + 1 if judgement.status is VerdictStatus.FAIR_BUT_STUCK else 0
        progress = {"last_spread": spread, "stuck_rounds": stuck, "last_issues_open": still_open}
        profile = self.arbiter.profiles[state.profile]
        if state.round >= state.max_rounds:
            self.close(
                Reason.MAX_ROUNDS_REACHED,
                f"no agreement after {state.max_rounds} rounds",
                **progress,
            )
        elif profile.stalled(stuck):
            self.close(Reason.STALLED, f"{stuck} consecutive rounds without progress", **progress)
        else:
            self.to_move(
                B,
                round=state.round + 1,
                previous_buyer_price=state.buyer_price,
                buyer_price=None,
                previous_buyer_terms=state.buyer_terms,
                buyer_terms=None,
                **progress,
            )


def judge_counter(state: SessionState, arbiter: Arbiter) -> tuple[Judgement, Decimal, int | None]:
    """The profile's judgement of a round the merchant countered, with the spread and (with
    issues) the count of issues open it was judged on."""
    assert state.buyer_price is not None and state.merchant_price is not None
    spread = state.merchant_price - state.buyer_price
    still_open = (
        issues_open(state.issues, state.buyer_terms, state.merchant_terms) if state.issues else None
    )
    judgement = arbiter.profiles[state.profile].judge_counter(
        state.round,
        spread,
        state.last_spread,
        issues_open=still_open,
        previous_open=state.last_issues_open,
    )
    return judgement, spread, still_open


def _amount(value: Decimal | None) -> int | float | None:
    return None if value is None else price_to_json(value)


COMMITMENT_DETAIL = "the {role}'s constraints_commit differs from the one it committed"


def _ack(step: Step, envelope: Envelope) -> None:
    payload = envelope.payload
    assert isinstance(payload, Ack)
    if step.state.settlement is not None and is_weak(payload.constraints_commit):
        raise WeakCommitment(WEAK_FOR_SETTLEMENT.format(role="merchant"))
    step.log(envelope, merchant_commit=payload.constraints_commit, round=1, **step.moving(B))


WEAK_FOR_SETTLEMENT = (
    "the session asks for settlement by reveal, which needs the {role}'s commitment salted "
    '("sha256:…"), not the unsalted reference form ("0x…")'
)


def _reveal(step: Step, envelope: Envelope) -> None:
    """``settle.reveal`` (docs/protocol.md §5, settlement): the first puts the session in
    SETTLING, the second settles at the midpoint or finds no zone. A reveal that does not open
    its commitment, or whose limit the party's own prices broke, is evidence of a breach."""
    reveal = envelope.payload
    assert isinstance(reveal, SettleReveal)
    state, role = step.state, envelope.role
    if state.settlement is None:
        raise SettlementNotEnabled("the session was not opened with settlement: reveal")
    if reveal.round != state.round:
        raise WrongRound(f"this is round {state.round}, not {reveal.round}")
    party: Side = "buyer" if role is B else "merchant"
    limit = limit_of(party, reveal.constraints)
    if limit is None or limit <= 0:
        raise NotSettleable(
            f"the {party}'s constraints name no positive {LIMIT_KEYS[party]} to settle on"
        )
    if state.issues and issues_open(state.issues, state.buyer_standing_terms, state.merchant_terms):
        raise NotSettleable(
            "settlement by reveal settles the price alone: the other issues must match first"
        )
    committed = state.commitment_of(role)
    assert committed is not None  # a live session past OPENING has both commitments
    standing = {
        "buyer": (state.buyer_standing, state.buyer_standing_terms),
        "merchant": (state.merchant_price, state.merchant_terms),
    }
    if reveal.constraints_commit != committed or not opens(
        committed,
        constraints=reveal.constraints,
        item=state.item,
        max_rounds=state.max_rounds,
        salt=reveal.salt,
    ):
        detail = f"the {party}'s reveal does not open the commitment it made"
        step.violated(envelope, Reason.COMMITMENT_MISMATCH, detail, **standing)
        return
    own = state.buyer_standing if role is B else state.merchant_price
    if own is not None and limit_breaches(party, reveal.constraints, [(state.round, own)]):
        side = "above its ceiling" if role is B else "below its floor"
        detail = f"the {party} offered {own}, {side} {limit}"
        step.violated(envelope, Reason.LIMIT_BREACHED, detail, **standing)
        return
    limits = {"revealed_ceiling": limit} if role is B else {"revealed_floor": limit}
    if state.phase is Phase.NEGOTIATING:
        other = M if role is B else B
        step.log(envelope, **{**step.moving(other), "phase": Phase.SETTLING, **limits})
        return
    step.log(envelope, **limits)
    _settle(step)


def _settle(step: Step) -> None:
    """Both limits are in the log: the midpoint within the standing prices, or no zone."""
    state = step.state
    ceiling, floor = state.revealed_ceiling, state.revealed_floor
    assert ceiling is not None and floor is not None
    # With issues, settlement was allowed only once both sides' terms matched.
    terms = state.merchant_terms
    if ceiling < floor:
        step.verdict(
            Judgement(VerdictStatus.FAIR_BUT_STUCK, Reason.NO_ZONE),
            buyer_price=ceiling,
            merchant_price=floor,
            buyer_terms=terms,
            merchant_terms=terms,
        )
        step.close(Reason.NO_ZONE, f"the buyer's ceiling {ceiling} is under the floor {floor}")
        return
    price = settlement_price(
        ceiling,
        floor,
        currency=state.currency,
        buyer_standing=state.buyer_standing,
        merchant_standing=state.merchant_price,
    )
    step.verdict(
        Judgement(VerdictStatus.FAIR, Reason.SETTLED),
        buyer_price=price,
        merchant_price=price,
        buyer_terms=terms,
        merchant_terms=terms,
    )
    step.agree(
        price,
        terms,
        settlement={
            "rule": SETTLEMENT_RULE,
            "ceiling": price_to_json(ceiling),
            "floor": price_to_json(floor),
        },
    )


def _breached(
    step: Step,
    envelope: Envelope,
    offer: Offer,
    values: Values | None,
    *,
    buyer: tuple[Decimal | None, Values | None],
    merchant: tuple[Decimal | None, Values | None],
) -> bool:
    """I3, then I4: on a breach, log it as evidence, judge the round violated on ``buyer``'s
    and ``merchant``'s ``(price, terms)``, close."""
    state, role = step.state, envelope.role
    if offer.constraints_commit != state.commitment_of(role):
        reason, detail = Reason.COMMITMENT_MISMATCH, COMMITMENT_DETAIL.format(role=role.value)
    elif envelope.type is T.OFFER_ACCEPT:
        return False  # naming the standing offer was checked; accepting it is never reneging
    else:
        if role is B:
            previous, previous_terms = state.previous_buyer_price, state.previous_buyer_terms
        else:
            previous, previous_terms = state.merchant_price, state.merchant_terms
        if previous is None or not is_pure_retraction(
            role is M, state.issues, (previous, previous_terms or ()), (offer.price, values or ())
        ):
            return False
        reason = Reason.BUYER_RENEGED if role is B else Reason.MERCHANT_RENEGED
        detail = _retraction_detail(role, previous, offer.price, bool(state.issues))
    step.violated(envelope, reason, detail, buyer=buyer, merchant=merchant)
    return True


def _retraction_detail(role: Role, previous: Decimal, price: Decimal, with_terms: bool) -> str:
    if not with_terms:
        verb = "lowered" if role is B else "raised"
        return f"the {role.value} {verb} its price from {previous} to {price}"
    return (
        f"the {role.value}'s offer is worse for the other side than its previous one on some "
        "terms and better on none"
    )


def _propose(step: Step, envelope: Envelope) -> None:
    offer, values = step.priced(envelope)
    state = step.state
    buyer, merchant = (offer.price, values), (state.merchant_price, state.merchant_terms)
    if _breached(step, envelope, offer, values, buyer=buyer, merchant=merchant):
        return
    step.log(envelope, buyer_price=offer.price, buyer_terms=values, **step.moving(M))


def _counter(step: Step, envelope: Envelope) -> None:
    offer, values = step.priced(envelope)
    state = step.state
    assert state.buyer_price is not None
    buyer, merchant = (state.buyer_price, state.buyer_terms), (offer.price, values)
    if _breached(step, envelope, offer, values, buyer=buyer, merchant=merchant):
        return
    if state.round >= state.max_rounds:
        # The last round's counter: the buyer's final answer decides (docs/protocol.md §5).
        step.log(
            envelope,
            merchant_price=offer.price,
            merchant_terms=values,
            final_answer=True,
            **step.moving(B),
        )
        return
    step.log(envelope, merchant_price=offer.price, merchant_terms=values)
    judgement, spread, still_open = judge_counter(step.state, step.arbiter)
    step.verdict(
        judgement,
        buyer_price=state.buyer_price,
        merchant_price=offer.price,
        buyer_terms=state.buyer_terms,
        merchant_terms=values,
    )
    step.conclude_round(judgement, spread, still_open)


def _accept(step: Step, envelope: Envelope) -> None:
    offer, values = step.priced(envelope)
    state = step.state
    mine = envelope.role is B
    standing = state.merchant_price if mine else state.buyer_price
    if standing is None or offer.price != standing:
        named = "nothing" if standing is None else str(standing)
        raise PriceNotStanding(f"the other side's standing price is {named}, not {offer.price}")
    standing_terms = state.merchant_terms if mine else state.buyer_terms
    if values != standing_terms:
        raise TermsNotStanding(
            "an accept repeats the other side's standing terms exactly",
            errors=[FieldError("$.payload.terms", "differs from the other side's standing terms")],
        )
    both = (offer.price, values)
    if _breached(step, envelope, offer, values, buyer=both, merchant=both):
        return
    step.log(
        envelope,
        buyer_price=offer.price,
        merchant_price=offer.price,
        buyer_terms=values,
        merchant_terms=values,
    )
    step.verdict(
        Judgement(VerdictStatus.FAIR, Reason.AGREEMENT),
        buyer_price=offer.price,
        merchant_price=offer.price,
        buyer_terms=values,
        merchant_terms=values,
    )
    step.agree(offer.price, values)


def _withdraw(step: Step, envelope: Envelope) -> None:
    payload = envelope.payload
    assert isinstance(payload, Withdraw)
    state = step.state
    committed = state.commitment_of(envelope.role)
    if committed is not None and payload.constraints_commit != committed:
        detail = COMMITMENT_DETAIL.format(role=envelope.role.value)
        if state.phase is Phase.OPENING:
            # No round has started, so there is no round to judge: evidence, then close.
            step.log(envelope)
            step.close(Reason.COMMITMENT_MISMATCH, detail)
        else:
            step.violated(
                envelope,
                Reason.COMMITMENT_MISMATCH,
                detail,
                buyer=(state.buyer_price, state.buyer_terms),
                merchant=(state.merchant_price, state.merchant_terms),
            )
        return
    step.log(envelope)
    reason = Reason.WITHDRAWN_BY_BUYER if envelope.role is B else Reason.WITHDRAWN_BY_MERCHANT
    step.close(reason, f"the {envelope.role.value} withdrew")


MOVES = {
    Move.ACK: _ack,
    Move.PROPOSE: _propose,
    Move.COUNTER: _counter,
    Move.BUYER_ACCEPT: _accept,
    Move.MERCHANT_ACCEPT: _accept,
    Move.WITHDRAW: _withdraw,
    Move.REVEAL: _reveal,
}
