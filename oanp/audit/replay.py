"""A session log read back one entry at a time: what stood after each entry, as frames.

Frame k is what the first k entries show: the entry itself, the round and phase they reach,
each side's standing price (and, in a session with issues, its standing terms and how many
issues the two sides are still apart on), the offers and verdicts so far, and the I1–I7
checklist. The
checklist is the offline auditor's own (:class:`oanp.audit.invariants.AuditWalk`, the walk
:func:`oanp.audit.invariants.audit_log` takes), asked after each entry, so what a replay shows at
step k is what an auditor computes from those k entries, never a second opinion that could
drift from it. Each step is audited as if the log ended there: between a round's last move
and what the arbiter writes with it (its verdict, an agreement, a close) the auditor reports
what is still owed, as it would for a log cut short at that entry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from oanp.audit.invariants import AuditWalk
from oanp.audit.walk import LogAudit
from oanp.wire.canonical import JsonObject, JsonValue, json_value
from oanp.wire.envelope import (
    INVARIANTS,
    Agree,
    Close,
    Envelope,
    Offer,
    Open,
    Role,
    SettleReveal,
    Verdict,
    Withdraw,
)
from oanp.wire.errors import BadTerms
from oanp.wire.money import price_to_json
from oanp.wire.profiles import PROFILES, Profile
from oanp.wire.state import Phase
from oanp.wire.terms import Issue, issues_open, read_terms


@dataclass(frozen=True, slots=True)
class InvariantFinding:
    """One invariant as the auditor reports it: ``pass``, ``fail`` or ``n/a``, and why."""

    invariant: str
    status: str
    problems: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PriceMove:
    """A price a party put on the table: a proposal, a counter or an accept."""

    seq: int
    round: int
    role: str
    type: str
    price: Decimal


@dataclass(frozen=True, slots=True)
class RoundVerdict:
    """A ``round.verdict`` as the log states it."""

    seq: int
    round: int
    status: str
    rationale: str
    buyer_price: Decimal | None
    merchant_price: Decimal | None
    spread: Decimal | None
    issues_open: int | None = None


@dataclass(frozen=True, slots=True)
class StandingTerms:
    """In a session with issues: each side's standing terms as sent (declared order), and how
    many issues they differ on (:func:`oanp.wire.terms.issues_open`; ``None`` when an offer's terms
    do not read against the declaration, which the checklist then reports)."""

    buyer: JsonObject | None
    merchant: JsonObject | None
    issues_open: int | None


@dataclass(frozen=True, slots=True)
class EntryView:
    """The entry a frame stops at; ``type`` and the rest are ``None`` when it holds no
    readable envelope (the auditor then stops at I2)."""

    seq: int
    received_at: str | None
    type: str | None
    role: str | None
    agent_id: str | None
    round: int | None
    price: Decimal | None
    #: A verdict's rationale or a close's reason.
    reason: str | None


@dataclass(frozen=True, slots=True)
class Frame:
    """What stood after entry ``step`` (1-based) of the log."""

    step: int
    entry: EntryView
    round: int
    phase: str
    buyer_price: Decimal | None
    merchant_price: Decimal | None
    offers: tuple[PriceMove, ...]
    verdicts: tuple[RoundVerdict, ...]
    checks: tuple[InvariantFinding, ...]
    #: ``"agreed"``, a close reason, or ``None`` while the log has not ended.
    outcome: str | None
    #: ``None`` unless the session declared issues besides the price.
    terms: StandingTerms | None = None

    def as_json(self) -> JsonObject:
        """The frame as JSON, prices as the log writes them (numbers, never exponents)."""
        entry = self.entry
        return {
            "step": self.step,
            "entry": {
                "seq": entry.seq,
                "received_at": entry.received_at,
                "type": entry.type,
                "role": entry.role,
                "agent_id": entry.agent_id,
                "round": entry.round,
                "price": _price(entry.price),
                "reason": entry.reason,
            },
            "round": self.round,
            "phase": self.phase,
            "standing": {
                "buyer": _price(self.buyer_price),
                "merchant": _price(self.merchant_price),
            },
            "offers": [
                {
                    "seq": o.seq,
                    "round": o.round,
                    "role": o.role,
                    "type": o.type,
                    "price": _price(o.price),
                }
                for o in self.offers
            ],
            "verdicts": [
                {
                    "seq": v.seq,
                    "round": v.round,
                    "status": v.status,
                    "rationale": v.rationale,
                    "buyer_price": _price(v.buyer_price),
                    "merchant_price": _price(v.merchant_price),
                    "spread": _price(v.spread),
                    "issues_open": v.issues_open,
                }
                for v in self.verdicts
            ],
            "checks": [
                {
                    "invariant": c.invariant,
                    "status": c.status,
                    "problems": list(c.problems),
                    "notes": list(c.notes),
                }
                for c in self.checks
            ],
            "outcome": self.outcome,
            "terms": None
            if self.terms is None
            else {
                "buyer": self.terms.buyer,
                "merchant": self.terms.merchant,
                "issues_open": self.terms.issues_open,
            },
        }


def replay(
    entries: Sequence[Mapping[str, JsonValue]],
    jwks: Mapping[str, object] | None = None,
    *,
    profiles: Mapping[str, Profile] = PROFILES,
) -> list[Frame]:
    """One frame per entry of ``entries`` (a session log as its API returns it), each audited
    over the entries up to it with ``jwks`` (without keys, an agreement fails I6 as it does
    for the auditor). ``ValueError`` for a number JSON cannot hash, as for the auditor."""
    log = [_read(e) for e in entries]
    walk = AuditWalk(log, jwks, profiles=profiles)
    frames: list[Frame] = []
    offers: list[PriceMove] = []
    verdicts: list[RoundVerdict] = []
    standing: dict[Role, Decimal] = {}
    issues: tuple[Issue, ...] = ()
    terms: dict[Role, JsonObject] = {}
    while walk.step():
        step = len(frames) + 1
        entry = log[step - 1]
        written = entry.get("seq") if isinstance(entry, Mapping) else None
        seq = written if isinstance(written, int) and not isinstance(written, bool) else step
        envelope = walk.envelope
        if envelope is not None:
            payload = envelope.payload
            if isinstance(payload, Open):
                issues = payload.issues
            if isinstance(payload, Offer) and envelope.role is not Role.ARBITER:
                offers.append(
                    PriceMove(
                        seq, payload.round, envelope.role.value, envelope.type.value, payload.price
                    )
                )
                standing[envelope.role] = payload.price
                if issues and payload.terms is not None:
                    terms[envelope.role] = _in_order(issues, payload.terms)
            elif isinstance(payload, Verdict):
                verdicts.append(
                    RoundVerdict(
                        seq,
                        payload.round,
                        payload.status.value,
                        payload.rationale.value,
                        payload.buyer_price,
                        payload.merchant_price,
                        payload.spread,
                        payload.issues_open,
                    )
                )
        audit = walk.audit()
        frames.append(
            Frame(
                step=step,
                entry=_entry_view(seq, entry, envelope),
                round=walk.round,
                phase=_phase(walk, audit).value,
                buyer_price=standing.get(Role.BUYER),
                merchant_price=standing.get(Role.MERCHANT),
                offers=tuple(offers),
                verdicts=tuple(verdicts),
                checks=_checks(audit),
                outcome=audit.outcome,
                terms=_standing_terms(issues, terms) if issues else None,
            )
        )
    return frames


def _in_order(issues: Sequence[Issue], terms: JsonObject) -> JsonObject:
    """Terms as sent, the declared issues first in their order (a stored log may sort keys)."""
    names = [i.name for i in issues]
    return {
        **{name: terms[name] for name in names if name in terms},
        **{name: value for name, value in terms.items() if name not in names},
    }


def _standing_terms(issues: Sequence[Issue], terms: Mapping[Role, JsonObject]) -> StandingTerms:
    buyer, merchant = terms.get(Role.BUYER), terms.get(Role.MERCHANT)
    try:
        apart = issues_open(
            issues,
            None if buyer is None else read_terms(issues, buyer),
            None if merchant is None else read_terms(issues, merchant),
        )
    except BadTerms:
        apart = None
    return StandingTerms(buyer, merchant, apart)


def _read(entry: Mapping[str, JsonValue]) -> Mapping[str, JsonValue]:
    """An entry as :func:`oanp.audit.verify_log` reads it, so that both audit the same values;
    anything else as it is, for the walk to report."""
    if not isinstance(entry, Mapping):
        return entry
    value = json_value(dict(entry))
    assert isinstance(value, dict)
    return value


def _entry_view(seq: int, entry: Mapping[str, JsonValue], envelope: Envelope | None) -> EntryView:
    received = entry.get("received_at") if isinstance(entry, Mapping) else None
    received_at = received if isinstance(received, str) else None
    if envelope is None:
        return EntryView(seq, received_at, None, None, None, None, None, None)
    payload = envelope.payload
    price = reason = None
    round_: int | None = None
    if isinstance(payload, Offer):
        round_, price = payload.round, payload.price
    elif isinstance(payload, Verdict):
        round_, reason = payload.round, payload.rationale.value
    elif isinstance(payload, Close):
        round_, reason = payload.round, payload.reason.value
    elif isinstance(payload, Agree):
        price = payload.final_price
    elif isinstance(payload, SettleReveal):
        round_ = payload.round
    elif isinstance(payload, Withdraw):
        reason = "withdrawn"
    return EntryView(
        seq,
        received_at,
        envelope.type.value,
        envelope.role.value,
        envelope.agent_id,
        round_,
        price,
        reason,
    )


def _phase(walk: AuditWalk, audit: LogAudit) -> Phase:
    """The session's phase as the log shows it. Between a move and the arbiter's entries it
    owes (a verdict, an agreement, a close), written in the same step, the session is being
    evaluated, as the machine's phase between the two says."""
    if audit.outcome == "agreed":
        return Phase.AGREED
    if audit.outcome is not None:
        return Phase.CLOSED
    if walk.round == 0:
        return Phase.OPENING
    if walk.owes_arbiter:
        return Phase.EVALUATING
    if walk.settling:
        return Phase.SETTLING
    return Phase.NEGOTIATING


def _checks(audit: LogAudit) -> tuple[InvariantFinding, ...]:
    results = [audit.results[i] for i in INVARIANTS]
    return tuple(
        InvariantFinding(r.invariant, r.status.value, tuple(r.problems), tuple(r.notes))
        for r in results
    )


def _price(value: Decimal | None) -> int | float | None:
    return None if value is None else price_to_json(value)
