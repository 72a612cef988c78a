"""How the offline auditor checks the parties' entries of a log (:mod:`oanp.audit.invariants`):
turns, commitments (I3), no retraction (I4), reveals against their commitments and prices,
withdrawals, and the rounds they complete.
"""

from __future__ import annotations

from decimal import Decimal

from oanp.audit.walk import (
    ROUND_CHECKS,
    UNKNOWN_PROFILE,
    T,
    Walk,
)
from oanp.wire.commitments import Side, limit_breaches, limit_of, opens
from oanp.wire.envelope import (
    SENDERS,
    Ack,
    Envelope,
    Offer,
    Role,
    SettleReveal,
    Verdict,
    Withdraw,
)
from oanp.wire.errors import BadTerms
from oanp.wire.money import price_to_json
from oanp.wire.profiles import Judgement, Reason, VerdictStatus, breach_invariant
from oanp.wire.settlement import SETTLEMENT_RULE, settlement_price
from oanp.wire.terms import Values, is_pure_retraction, issues_open, read_terms


def visit_party(walk: Walk, seq: int, env: Envelope) -> None:
    expected_agent = walk.buyer if env.role is Role.BUYER else walk.merchant
    if env.agent_id != expected_agent:
        walk.fail("I2", f"entry {seq}: {env.agent_id!r} is not the session's {env.role.value}")
    if env.role not in SENDERS[env.type]:
        walk.fail("I2", f"entry {seq}: a {env.role.value} may not send {env.type.value}")
        return
    if walk.pending_breach is not None:
        walk.fail("I2", f"entry {seq}: a party moved while a breach awaited its verdict")
    payload = env.payload
    if isinstance(payload, Ack):
        if walk.round != 0 or Role.MERCHANT in walk.commits:
            walk.fail("I2", f"entry {seq}: session.ack out of place")
        walk.commits[Role.MERCHANT] = payload.constraints_commit
        walk.round = 1
        return
    commit = payload.constraints_commit if isinstance(payload, Offer | Withdraw) else None
    if commit is not None and env.role in walk.commits and commit != walk.commits[env.role]:
        walk.pending_breach = Reason.COMMITMENT_MISMATCH
        walk.note("I3", f"entry {seq}: the {env.role.value}'s commitment changed (evidence)")
    if isinstance(payload, Withdraw):
        _visit_withdraw(walk, env.role)
        return
    if isinstance(payload, SettleReveal):
        _visit_reveal(walk, seq, env, payload)
        return
    assert isinstance(payload, Offer)
    if walk.revealed:
        walk.fail("I2", f"entry {seq}: {env.type.value} while the session was settling")
    _visit_offer(walk, seq, env, payload)


def _visit_reveal(walk: Walk, seq: int, env: Envelope, reveal: SettleReveal) -> None:
    """A ``settle.reveal``: re-derive what the arbiter owed it (docs/protocol.md §5)."""
    opened = walk.opened
    assert opened is not None
    role = env.role
    party: Side = "buyer" if role is Role.BUYER else "merchant"
    if opened.settlement is None:
        walk.fail("I2", f"entry {seq}: settle.reveal in a session opened without settlement")
    if reveal.round != walk.round or walk.final_answer is not None:
        walk.fail("I2", f"entry {seq}: settle.reveal out of place in round {walk.round}")
    in_turn = (role is Role.BUYER) != walk.buyer_moved
    if role in walk.revealed or (not walk.revealed and not in_turn):
        walk.fail("I2", f"entry {seq}: the {party} revealed out of turn")
    if opened.issues and issues_open(
        opened.issues, _standing_buyer_terms(walk), walk.merchant_terms
    ):
        walk.fail("I2", f"entry {seq}: settle.reveal while issues besides the price were open")
    limit = limit_of(party, reveal.constraints)
    commit = walk.commits.get(role)
    if (
        commit is None
        or reveal.constraints_commit != commit
        or not opens(
            commit,
            constraints=reveal.constraints,
            item=opened.item,
            max_rounds=opened.max_rounds,
            salt=reveal.salt,
        )
    ):
        walk.note("I3", f"entry {seq}: the {party}'s reveal does not open its commitment")
        walk.pending_breach = Reason.COMMITMENT_MISMATCH
    elif limit is None:
        walk.fail("I2", f"entry {seq}: the {party}'s reveal names no limit to settle on")
        return
    else:
        own = _standing_buyer(walk) if role is Role.BUYER else walk.merchant_price
        if own is not None and limit_breaches(party, reveal.constraints, [(walk.round, own)]):
            walk.note("I3", f"entry {seq}: the {party}'s own price broke its revealed limit")
            walk.pending_breach = Reason.LIMIT_BREACHED
    if walk.pending_breach is not None:
        walk.buyer_price, walk.buyer_terms = _standing_buyer(walk), _standing_buyer_terms(walk)
        complete_round(walk, Judgement(VerdictStatus.VIOLATED, walk.pending_breach))
        return
    assert limit is not None
    walk.revealed[role] = limit
    if len(walk.revealed) < 2:
        return
    ceiling, floor = walk.revealed[Role.BUYER], walk.revealed[Role.MERCHANT]
    # Settlement settles the price alone: the other terms already match, and stay.
    walk.buyer_terms = walk.accepted_terms = walk.merchant_terms
    if ceiling < floor:
        walk.buyer_price, walk.merchant_price = ceiling, floor
        complete_round(walk, Judgement(VerdictStatus.FAIR_BUT_STUCK, Reason.NO_ZONE))
        return
    price = settlement_price(
        ceiling,
        floor,
        currency=opened.currency,
        buyer_standing=_standing_buyer(walk),
        merchant_standing=walk.merchant_price,
    )
    walk.buyer_price = walk.merchant_price = walk.accepted_price = price
    walk.settlement = {
        "rule": SETTLEMENT_RULE,
        "ceiling": price_to_json(ceiling),
        "floor": price_to_json(floor),
    }
    complete_round(walk, Judgement(VerdictStatus.FAIR, Reason.SETTLED))


def _standing_buyer(walk: Walk) -> Decimal | None:
    return walk.buyer_price if walk.buyer_price is not None else walk.previous_buyer_price


def _standing_buyer_terms(walk: Walk) -> Values | None:
    return walk.buyer_terms if walk.buyer_price is not None else walk.previous_buyer_terms


def _offered_terms(walk: Walk, seq: int, offer: Offer) -> Values | None:
    """The offer's terms against the declared issues; a logged offer outside them is one the
    arbiter should have refused (422 ``bad_terms``)."""
    opened = walk.opened
    assert opened is not None
    if not opened.issues:
        if offer.terms is not None:
            walk.fail("I2", f"entry {seq}: terms in a session that declares no issues")
        return None
    try:
        return read_terms(opened.issues, offer.terms)
    except BadTerms as exc:
        walk.fail("I2", f"entry {seq}: {exc.detail}")
        return None


def _retracted(walk: Walk, verb: str) -> str:
    opened = walk.opened
    assert opened is not None
    return "retracted from its last offer" if opened.issues else f"{verb} its price"


def _retracts(
    walk: Walk,
    merchant: bool,
    old: tuple[Decimal | None, Values | None],
    new: tuple[Decimal, Values | None],
) -> bool:
    """I4 over the price and the declared issues (a pure retraction); terms that could not be
    read failed under I2 and are left out."""
    opened = walk.opened
    assert opened is not None
    if old[0] is None:
        return False
    if not opened.issues:
        return is_pure_retraction(merchant, (), (old[0], ()), (new[0], ()))
    if old[1] is None or new[1] is None:
        return False
    return is_pure_retraction(merchant, opened.issues, (old[0], old[1]), (new[0], new[1]))


def _visit_withdraw(walk: Walk, role: Role) -> None:
    walk.final_answer = None  # the last round stays incomplete: no verdict is owed
    if walk.pending_breach is None:
        withdrawn = (
            Reason.WITHDRAWN_BY_BUYER if role is Role.BUYER else Reason.WITHDRAWN_BY_MERCHANT
        )
        # A close the last round or a stall already owed is not the party's to change.
        walk.owed_close = walk.owed_close or (withdrawn, "I2")
    elif walk.round > 0:
        complete_round(walk, Judgement(VerdictStatus.VIOLATED, walk.pending_breach))


def _visit_offer(walk: Walk, seq: int, env: Envelope, offer: Offer) -> None:
    if offer.round != walk.round or walk.round == 0:
        walk.fail(
            "I2", f"entry {seq}: {env.type.value} names round {offer.round} in round {walk.round}"
        )
    opened = walk.opened
    assert opened is not None
    if offer.round > opened.max_rounds:
        walk.fail("I1", f"entry {seq}: round {offer.round} exceeds max_rounds {opened.max_rounds}")
    if walk.final_answer is not None:
        walk.final_answer = None
        if env.role is not Role.BUYER or env.type is not T.OFFER_ACCEPT:
            walk.fail(
                "I2",
                f"entry {seq}: {env.type.value} from the {env.role.value} in the buyer's final "
                "answer, where only its accept or a withdrawal may come",
            )
    elif (env.role is Role.BUYER) == walk.buyer_moved:
        walk.fail("I2", f"entry {seq}: the {env.role.value} moved out of turn")
    values = _offered_terms(walk, seq, offer)
    if env.type is T.OFFER_ACCEPT:
        standing = walk.merchant_price if env.role is Role.BUYER else walk.buyer_price
        if standing is None or offer.price != standing:
            walk.fail("I4", f"entry {seq}: accept of {offer.price}, standing price {standing}")
        standing_terms = walk.merchant_terms if env.role is Role.BUYER else walk.buyer_terms
        if values != standing_terms:
            walk.fail("I4", f"entry {seq}: accept of terms that are not the standing terms")
        walk.accepted_price, walk.accepted_terms = offer.price, values
        walk.buyer_price = walk.merchant_price = offer.price
        walk.buyer_terms = walk.merchant_terms = values
        if walk.pending_breach is not None:
            complete_round(walk, Judgement(VerdictStatus.VIOLATED, walk.pending_breach))
        else:
            complete_round(walk, Judgement(VerdictStatus.FAIR, Reason.AGREEMENT))
        return
    if env.role is Role.BUYER:
        old = (walk.previous_buyer_price, walk.previous_buyer_terms)
        if _retracts(walk, False, old, (offer.price, values)):
            walk.pending_breach = walk.pending_breach or Reason.BUYER_RENEGED
            walk.note("I4", f"entry {seq}: the buyer {_retracted(walk, 'lowered')} (evidence)")
        walk.buyer_price, walk.buyer_terms, walk.buyer_moved = offer.price, values, True
    else:
        old = (walk.merchant_price, walk.merchant_terms)
        if _retracts(walk, True, old, (offer.price, values)):
            walk.pending_breach = walk.pending_breach or Reason.MERCHANT_RENEGED
            walk.note("I4", f"entry {seq}: the merchant {_retracted(walk, 'raised')} (evidence)")
        walk.merchant_price, walk.merchant_terms, walk.merchant_moved = offer.price, values, True
    if walk.pending_breach is not None:
        complete_round(walk, Judgement(VerdictStatus.VIOLATED, walk.pending_breach))
    elif env.role is Role.MERCHANT and walk.buyer_price is not None:
        # Without a buyer price the merchant moved out of turn (failed under I2): no spread to
        # judge. An unknown profile failed under I5; the base rules keep the walk going.
        spread = offer.price - walk.buyer_price
        still_open = _open(walk)
        profile = walk.profile or UNKNOWN_PROFILE
        judged = profile.judge_counter(
            walk.round,
            spread,
            walk.last_spread,
            issues_open=still_open,
            previous_open=walk.last_open,
        )
        walk.last_spread, walk.last_open = spread, still_open
        walk.stuck = walk.stuck + 1 if judged.status is VerdictStatus.FAIR_BUT_STUCK else 0
        if walk.round == opened.max_rounds:
            walk.final_answer = judged  # the round completes with the buyer's final answer
        else:
            complete_round(walk, judged)


def complete_round(walk: Walk, judged: Judgement) -> None:
    """The round ended: it owes one verdict, which states the prices the round ended on."""
    buyer, merchant = walk.buyer_price, walk.merchant_price
    spread = None if buyer is None or merchant is None else merchant - buyer
    walk.completed.append(walk.round)
    walk.expected[walk.round] = Verdict(
        walk.round,
        judged.status,
        judged.rationale,
        buyer,
        merchant,
        spread,
        _checks(judged),
        _open(walk),
    )


def _open(walk: Walk) -> int | None:
    """The issues the two sides' terms differ on, in a session that declares any."""
    opened = walk.opened
    if opened is None or not opened.issues:
        return None
    return issues_open(opened.issues, walk.buyer_terms, walk.merchant_terms)


def _checks(judged: Judgement) -> dict[str, str]:
    checks = dict.fromkeys(ROUND_CHECKS, "pass")
    if judged.status is VerdictStatus.VIOLATED:
        checks[breach_invariant(judged.rationale)] = "fail"
    return checks
