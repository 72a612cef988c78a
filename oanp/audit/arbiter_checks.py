"""How the offline auditor checks the arbiter's own entries of a log (:mod:`oanp.audit.invariants`):
each verdict against the one the log owes (I5), closes against what caused them, and the
signed agreement against the log (I6, I7).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal

from oanp.audit.party_checks import complete_round
from oanp.audit.walk import (
    CLOSE_RULES,
    CLOSES_FROM_OUTSIDE,
    Walk,
)
from oanp.wire.canonical import JsonValue, canonical_bytes
from oanp.wire.envelope import (
    INVARIANTS,
    OANP_VERSION,
    Agree,
    Close,
    Envelope,
    Verdict,
)
from oanp.wire.errors import VerificationError
from oanp.wire.profiles import Reason, VerdictStatus, breach_invariant
from oanp.wire.signing import AGREEMENT_TYP, verify_detached
from oanp.wire.terms import terms_json


def visit_arbiter(
    walk: Walk,
    seq: int,
    env: Envelope,
    entries: Sequence[Mapping[str, JsonValue]],
    jwks: Mapping[str, object] | None,
) -> None:
    walk.arbiter = walk.arbiter or env.agent_id
    if env.agent_id != walk.arbiter:
        walk.fail("I2", f"entry {seq}: {env.agent_id!r} is not the session's arbiter")
    payload = env.payload
    if isinstance(payload, Verdict):
        _visit_verdict(walk, seq, payload)
    elif isinstance(payload, Close):
        _visit_close(walk, seq, payload)
    elif isinstance(payload, Agree):
        _visit_agree(walk, seq, payload, entries, jwks)
    else:
        walk.fail("I2", f"entry {seq}: the arbiter sent {env.type.value}")


def _visit_verdict(walk: Walk, seq: int, verdict: Verdict) -> None:
    walk.verdicts[verdict.round] = walk.verdicts.get(verdict.round, 0) + 1
    if walk.final_answer is not None and verdict.round == walk.round:
        # No final answer came in its window; logs written before the final answer existed
        # judge the last counter at once, which reads the same.
        complete_round(walk, walk.final_answer)
        walk.final_answer = None
    expected = walk.expected.get(verdict.round)
    if expected is None:
        walk.fail("I5", f"entry {seq}: verdict for round {verdict.round}, which did not complete")
        return
    if (verdict.status, verdict.rationale) != (expected.status, expected.rationale):
        walk.fail(
            "I5",
            f"entry {seq}: round {verdict.round} judged {verdict.status.value}/"
            f"{verdict.rationale.value}, the profile says {expected.status.value}/"
            f"{expected.rationale.value}",
        )
    if expected.status is VerdictStatus.VIOLATED and verdict.status is not VerdictStatus.VIOLATED:
        # The breach was the party's; letting it through is the arbiter's, under its invariant.
        walk.fail(
            breach_invariant(expected.rationale),
            f"entry {seq}: round {verdict.round}'s breach ({expected.rationale.value}) was judged "
            f"{verdict.status.value}",
        )
    _check_figures(walk, seq, verdict, expected)
    if verdict.status is VerdictStatus.VIOLATED:
        walk.note(
            breach_invariant(verdict.rationale),
            f"entry {seq}: the arbiter judged round {verdict.round} violated",
        )
        return
    if expected.rationale in (Reason.AGREEMENT, Reason.SETTLED):
        return
    if expected.rationale is Reason.NO_ZONE:
        walk.owed_close = (Reason.NO_ZONE, "I5")
        return
    opened = walk.opened
    assert opened is not None
    if walk.round >= opened.max_rounds:
        walk.owed_close = (Reason.MAX_ROUNDS_REACHED, "I1")
    elif walk.profile is not None and walk.profile.stalled(walk.stuck):
        walk.owed_close = (Reason.STALLED, "I5")
    else:
        walk.round += 1
        walk.previous_buyer_price, walk.buyer_price = walk.buyer_price, None
        walk.previous_buyer_terms, walk.buyer_terms = walk.buyer_terms, None
        walk.buyer_moved = walk.merchant_moved = False


def _check_figures(walk: Walk, seq: int, verdict: Verdict, expected: Verdict) -> None:
    """A verdict states what it judged: the round's prices, their spread, and its checks."""
    stated = _figures(verdict)
    for name, owed in _figures(expected).items():
        if stated[name] != owed:
            walk.fail(
                "I5",
                f"entry {seq}: round {verdict.round}'s verdict states {name} "
                f"{_shown(stated[name])}, the log gives {_shown(owed)}",
            )


def _figures(verdict: Verdict) -> dict[str, Decimal | int | str | None]:
    return {
        "buyer_price": verdict.buyer_price,
        "merchant_price": verdict.merchant_price,
        "spread": verdict.spread,
        "issues_open": verdict.issues_open,
        **{f"checks.{i}": verdict.checks.get(i) for i in INVARIANTS},
    }


def _shown(figure: Decimal | int | str | None) -> str:
    return "none" if figure is None else str(figure)


def _visit_close(walk: Walk, seq: int, close: Close) -> None:
    walk.terminal_seq = seq
    walk.audit.outcome = close.reason.value
    opened = walk.opened
    assert opened is not None
    breach = walk.pending_breach
    if breach is not None and close.reason is not breach:
        walk.fail(breach_invariant(breach), f"entry {seq}: a breach closed as {close.reason.value}")
    if walk.owed_close is not None and close.reason is not walk.owed_close[0]:
        reason, invariant = walk.owed_close
        walk.fail(invariant, f"entry {seq}: closed as {close.reason.value}, owed {reason.value}")
    if close.reason is Reason.MAX_ROUNDS_REACHED and walk.completed[-1:] != [opened.max_rounds]:
        walk.fail("I1", f"entry {seq}: closed max_rounds_reached before round {opened.max_rounds}")
    if breach is None:
        _check_unbreached_close(walk, seq, close.reason)


def _check_unbreached_close(walk: Walk, seq: int, reason: Reason) -> None:
    """A close that no breach owes: never one after an accept, since the arbiter logs an accept
    with its verdict and agreement in one step; else the close the log owes (checked above), or,
    when it owes none, one whose cause is outside the log.

    The auditor accepts those, a timer's (response_timeout, deadline_expired) and an operator's
    (operator_terminated), without re-deriving them: when a window or deadline fell due is read
    off the arbiter's own clock, a move that came too late was refused and never logged, and an
    operator acts from outside the protocol, so the log holds no cause to check them against.
    max_rounds_reached has its own check above, which names the round it needed.
    """
    if walk.accepted_price is not None:
        walk.fail(
            "I6",
            f"entry {seq}: closed as {reason.value} after the accept of {walk.accepted_price}, "
            "owed session.agree",
        )
    elif (
        walk.owed_close is None
        and reason not in CLOSES_FROM_OUTSIDE
        and reason is not Reason.MAX_ROUNDS_REACHED
    ):
        walk.fail(
            CLOSE_RULES.get(reason, "I5"),
            f"entry {seq}: closed as {reason.value}, which nothing in the log owes",
        )


def _visit_agree(
    walk: Walk,
    seq: int,
    agree: Agree,
    entries: Sequence[Mapping[str, JsonValue]],
    jwks: Mapping[str, object] | None,
) -> None:
    walk.terminal_seq = seq
    walk.audit.outcome = "agreed"
    walk.audit.final_price = agree.final_price
    if walk.pending_breach is not None:
        walk.fail(
            breach_invariant(walk.pending_breach),
            f"entry {seq}: an agreement after a breach ({walk.pending_breach.value})",
        )
    before = entries[seq - 2]
    head = before.get("entry_hash")
    if agree.session_digest != head:
        walk.fail("I7", f"entry {seq}: session_digest is not the entry_hash of entry {seq - 1}")
    if walk.accepted_price is None or agree.final_price != walk.accepted_price:
        walk.fail("I4", f"entry {seq}: final price {agree.final_price} was never accepted")
    opened = walk.opened
    assert opened is not None
    expected = {
        "oanp_version": OANP_VERSION,
        "session_id": walk.audit.session_id,
        "arbiter_id": walk.arbiter,
        "buyer_agent_id": walk.buyer,
        "merchant_agent_id": walk.merchant,
        "item": opened.item,
        "currency": opened.currency,
        "session_digest": head,
        "log_length": seq - 1,
        "invariants_satisfied": list(INVARIANTS),
    }
    for name, value in expected.items():
        if agree.agreement.get(name) != value:
            walk.fail("I6", f"entry {seq}: the signed agreement's {name} is not the log's")
    final_terms = (
        terms_json(opened.issues, walk.accepted_terms)
        if opened.issues and walk.accepted_terms is not None
        else None
    )
    if agree.agreement.get("final_terms") != final_terms:
        walk.fail("I6", f"entry {seq}: the signed agreement's final_terms are not the log's")
    if agree.agreement.get("settlement") != walk.settlement:
        walk.fail("I6", f"entry {seq}: the signed agreement's settlement is not the log's")
    signed_price = agree.agreement.get("final_price")
    if (
        # bool is an int, but Decimal(repr(True)) raises instead of differing.
        isinstance(signed_price, bool)
        or not isinstance(signed_price, int | float)
        or Decimal(repr(signed_price)) != agree.final_price
    ):
        walk.fail("I6", f"entry {seq}: the signed agreement's final_price differs")
    walk.audit.agreement_valid = False
    if jwks is None:
        walk.fail("I6", f"entry {seq}: no key set to verify the agreement with")
        return
    try:
        signed = verify_detached(
            agree.signature, canonical_bytes(agree.agreement), jwks, typ=AGREEMENT_TYP
        )
    except VerificationError as exc:
        walk.fail("I6", f"entry {seq}: {exc.code}: {exc.detail}")
        return
    if signed.kid != agree.kid or signed.alg != agree.signature_alg:
        walk.fail("I6", f"entry {seq}: kid or signature_alg disagree with the JWS header")
        return
    walk.audit.agreement_valid = not walk.audit.results["I6"].problems


def finish(walk: Walk, count: int) -> None:
    for round_ in dict.fromkeys(walk.completed):
        n = walk.verdicts.get(round_, 0)
        if n != 1:
            walk.fail("I5", f"round {round_} completed with {n} verdicts, not exactly one")
    opened = walk.opened
    if opened is not None and walk.round > opened.max_rounds:
        walk.fail("I1", f"the log reached round {walk.round} of {opened.max_rounds}")
    if walk.audit.agreement_valid and walk.audit.results["I7"].problems:
        # A good signature over a digest this log does not recompute to covers another log.
        walk.audit.agreement_valid = False
    if walk.audit.outcome != "agreed":
        walk.audit.results["I6"].applicable = False
        walk.audit.results["I6"].notes.append("no agreement in this log")
    # The arbiter writes a round's last move, its verdict and what they owe (a close, an
    # agreement) in one step, so a log that ends between them was cut short, not live.
    if walk.terminal_seq is None and walk.owed_close is not None:
        walk.fail(walk.owed_close[1], f"the log ends without the owed {walk.owed_close[0].value}")
    elif walk.terminal_seq is None and walk.pending_breach is not None:
        walk.fail(
            breach_invariant(walk.pending_breach),
            f"the log ends without the close its {walk.pending_breach.value} owes",
        )
    elif walk.terminal_seq is None and walk.accepted_price is not None:
        walk.fail(
            "I6", f"the log ends after the accept of {walk.accepted_price} without session.agree"
        )
    elif walk.terminal_seq is None:
        walk.audit.results["I1"].notes.append(f"the session is still live after {count} entries")
