"""What the session page shows, read from the log alone: rounds, prices, verdicts, checks,
the terms of every offer in a session that negotiates issues besides the price, and the
entries in order with the time between them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from oanp.audit.invariants import audit_log
from oanp.wire.commitments import is_weak
from oanp.wire.envelope import DEFAULT_MAX_ROUNDS, INVARIANTS, parse_timestamp
from oanp.wire.errors import BadSignature
from oanp.wire.party_signatures import SIGNATURE, PartyKey, check_party_signature
from oanp.wire.terms import Issue, Values, gains_for_other, read_issues, read_terms


@dataclass
class RoundRow:
    round: int
    buyer_price: Any = None
    merchant_price: Any = None
    accepted_by: str | None = None
    verdict: str | None = None
    rationale: str | None = None
    verdict_seq: int | None = None
    #: In the last round, after the merchant's counter: the buyer's final answer "due",
    #: "accepted", "withdrawn", or "lapsed" when its window closed the session.
    final_answer: str | None = None
    #: In a session with issues: how many the verdict found the two sides apart on.
    issues_open: int | None = None

    @property
    def spread(self) -> Any:
        if self.buyer_price is None or self.merchant_price is None:
            return None
        return round(self.merchant_price - self.buyer_price, 6)


@dataclass(frozen=True)
class TermsCell:
    """One value of an offer as sent, and whether it moved towards the other side since the
    same party's previous offer (a concession on that issue)."""

    value: Any
    conceded: bool


@dataclass(frozen=True)
class TermsRow:
    """An offer of a session with issues: its price and every issue's value, in the declared
    order, the price first."""

    seq: int
    round: int
    role: str
    type: str
    cells: tuple[TermsCell, ...]


def terms_rows(issues: tuple[Issue, ...], entries: list[dict[str, Any]]) -> list[TermsRow]:
    """Every offer's terms, each value marked where the offer conceded it, by the rule the
    arbiter judges retractions by (:func:`oanp.wire.terms.gains_for_other`). A party's first offer
    has nothing to concede from."""
    rows: list[TermsRow] = []
    previous: dict[str, tuple[Decimal, Values]] = {}
    for entry in entries:
        envelope = entry["envelope"]
        kind, payload, role = envelope["type"], envelope["payload"], envelope["sender"]["role"]
        if not kind.startswith("offer."):
            continue
        terms = payload["terms"]
        offer = (Decimal(str(payload["price"])), read_terms(issues, terms))
        before = previous.get(role)
        gains = (
            gains_for_other(role == "merchant", issues, before, offer)
            if before is not None
            else (0,) * (len(issues) + 1)
        )
        values = [payload["price"], *(terms[issue.name] for issue in issues)]
        cells = tuple(TermsCell(v, g > 0) for v, g in zip(values, gains, strict=True))
        rows.append(TermsRow(entry["seq"], payload["round"], role, kind, cells))
        previous[role] = offer
    return rows


@dataclass
class InvariantCheck:
    invariant: str
    status: str
    why: list[str] = field(default_factory=list)


@dataclass
class Settlement:
    """Settlement by reveal as the log shows it: who revealed which limit, and what came of
    it (``settled``, ``no_zone``, a breach's code, or ``None`` while one reveal waits)."""

    ceiling: Any = None
    floor: Any = None
    revealed_by: list[str] = field(default_factory=list)
    outcome: str | None = None
    price: Any = None
    #: Each revealing party's whole constraints, as its reveal opened them: in the log, so
    #: the analytics need no reveal after the end from it.
    constraints: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def midpoint(self) -> Any:
        if self.ceiling is None or self.floor is None:
            return None
        return (Decimal(str(self.ceiling)) + Decimal(str(self.floor))) / 2


def duration(span: timedelta) -> str:
    """A span in the two largest units that matter: "850 ms", "4.2 s", "3 min 5 s", "2 h 10 min".
    Agents answer within milliseconds and operators wait for minutes: both must read."""
    ms = max(0, round(span.total_seconds() * 1000))
    if ms < 1000:
        return f"{ms} ms"
    if ms < 59_950:  # beyond it, one decimal would round up to "60.0 s"
        return f"{ms / 1000:.1f} s"
    seconds = round(ms / 1000)
    for unit, size, smaller, small in (("d", 86400, "h", 3600), ("h", 3600, "min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} {seconds % size // small} {smaller}"
    return f"{seconds // 60} min {seconds % 60} s"


@dataclass
class LogRow:
    """One entry on the timeline: when the arbiter received it, how long after the entry
    before it, what it says in a line, and its whole JSON for whoever opens it."""

    seq: int
    received_at: datetime
    since_previous: timedelta | None
    role: str
    type: str
    text: str
    round: int | None = None
    price: Any = None
    #: A verdict's (status, rationale), or a close's (reason, detail).
    outcome: tuple[str, str] | None = None
    #: A party's entry (§17): "signed" (by a key of its sender in force then), "unsigned",
    #: or "bad signature", with why; ``None`` for the arbiter's.
    signature: str | None = None
    signature_detail: str = ""

    @property
    def gap(self) -> str | None:
        return None if self.since_previous is None else duration(self.since_previous)


def _signature(
    entry: dict[str, Any], keys: Mapping[str, Sequence[PartyKey]]
) -> tuple[str | None, str]:
    envelope = entry["envelope"]
    if envelope["sender"]["role"] == "arbiter":
        return None, ""
    if SIGNATURE not in envelope:
        return "unsigned", "its sender did not sign it"
    try:
        kid = check_party_signature(
            envelope,
            keys.get(envelope["sender"]["agent_id"], ()),
            parse_timestamp(entry["received_at"]),
        )
    except BadSignature as refused:
        return "bad signature", refused.detail
    return "signed", f"by key {kid}"


def log_rows(
    entries: list[dict[str, Any]], keys: Mapping[str, Sequence[PartyKey]] | None = None
) -> list[LogRow]:
    rows: list[LogRow] = []
    for entry in entries:
        signature, signature_detail = _signature(entry, keys or {})
        envelope = entry["envelope"]
        kind, payload = envelope["type"], envelope["payload"]
        received = parse_timestamp(entry["received_at"])
        outcome = None
        if kind == "round.verdict":
            outcome = (payload["status"], payload["rationale"])
        elif kind == "session.close":
            outcome = (payload.get("reason", ""), payload.get("detail", ""))
        rows.append(
            LogRow(
                seq=entry["seq"],
                received_at=received,
                since_previous=received - rows[-1].received_at if rows else None,
                role=envelope["sender"]["role"],
                type=kind,
                text=json.dumps(entry, indent=2),
                round=payload.get("round"),
                price=payload.get("price", payload.get("final_price")),
                outcome=outcome,
                signature=signature,
                signature_detail=signature_detail,
            )
        )
    return rows


@dataclass
class Timeline:
    rounds: list[RoundRow]
    checks: list[InvariantCheck]
    commitments: list[tuple[str, str, bool]]
    agreement: dict[str, Any] | None
    agreement_valid: bool | None
    close: dict[str, Any] | None
    head_seq: int
    violations: int
    settlement: Settlement | None = None
    log: list[LogRow] = field(default_factory=list)
    #: The issues the session negotiates besides the price, as its open declares them.
    declared: tuple[Issue, ...] = ()
    terms: list[TermsRow] = field(default_factory=list)
    #: The agreement's ``final_terms`` as (issue, value) pairs, in declared order.
    final_terms: list[tuple[str, Any]] = field(default_factory=list)

    @property
    def issues(self) -> list[str]:
        return [issue.name for issue in self.declared]

    def idle(self, now: datetime) -> str | None:
        """How long since the last entry: how long the party in turn has kept everyone waiting."""
        return duration(now - self.log[-1].received_at) if self.log else None


def timeline(
    entries: list[dict[str, Any]],
    jwks: dict[str, Any],
    party_keys: Mapping[str, Sequence[PartyKey]] | None = None,
) -> Timeline:
    """Fold the log into rounds, audit it with :func:`oanp.audit.invariants.audit_log`, and
    check each party entry's signature with its sender's registered ``party_keys``."""
    rounds: dict[int, RoundRow] = {}
    commitments: list[tuple[str, str, bool]] = []
    agreement = close = None
    violations = 0
    max_rounds = None
    settlement: Settlement | None = None
    issues: tuple[Issue, ...] = ()
    for entry in entries:
        envelope = entry["envelope"]
        kind, payload = envelope["type"], envelope["payload"]
        role = envelope["sender"]["role"]
        due = next((r for r in rounds.values() if r.final_answer == "due"), None)
        if kind in ("session.open", "session.ack"):
            commit = payload["constraints_commit"]
            commitments.append((role, commit, is_weak(commit)))
            if kind == "session.open":
                max_rounds = payload.get("max_rounds", DEFAULT_MAX_ROUNDS)
                if "issues" in payload:
                    issues = read_issues(payload["issues"])
        elif kind.startswith("offer."):
            row = rounds.setdefault(payload["round"], RoundRow(payload["round"]))
            if role == "buyer":
                row.buyer_price = payload["price"]
            else:
                row.merchant_price = payload["price"]
            if kind == "offer.accept":
                row.accepted_by = role
                if row is due:
                    row.final_answer = "accepted"
            elif kind == "offer.counter" and payload["round"] == max_rounds:
                row.final_answer = "due"
        elif kind == "session.close" and role != "arbiter" and due is not None:
            due.final_answer = "withdrawn"
        elif kind == "settle.reveal":
            settlement = settlement or Settlement()
            settlement.revealed_by.append(role)
            limits = payload["constraints"]
            settlement.constraints[role] = limits
            if role == "buyer":
                settlement.ceiling = limits.get("true_ceiling")
            else:
                settlement.floor = limits.get("floor_price")
        elif kind == "round.verdict":
            row = rounds.setdefault(payload["round"], RoundRow(payload["round"]))
            if row is due:
                row.final_answer = "lapsed"
            row.verdict, row.rationale = payload["status"], payload["rationale"]
            row.buyer_price, row.merchant_price = payload["buyer_price"], payload["merchant_price"]
            row.verdict_seq = entry["seq"]
            row.issues_open = payload.get("issues_open")
            violations += payload["status"] == "violated"
            if settlement is not None:
                settlement.outcome = payload["rationale"]
                if payload["rationale"] == "settled":
                    settlement.price = payload["buyer_price"]
        elif kind == "session.agree":
            agreement = payload
        elif kind == "session.close" and role == "arbiter":
            close = payload
    audit = audit_log(entries, jwks) if entries else None
    checks = [
        InvariantCheck(
            i,
            audit.results[i].status.value if audit else "n/a",
            (audit.results[i].problems or audit.results[i].notes) if audit else [],
        )
        for i in INVARIANTS
    ]
    return Timeline(
        rounds=[rounds[r] for r in sorted(rounds)],
        checks=checks,
        commitments=commitments,
        agreement=agreement,
        agreement_valid=audit.agreement_valid if audit else None,
        close=close,
        head_seq=entries[-1]["seq"] if entries else 0,
        violations=violations,
        settlement=settlement,
        log=log_rows(entries, party_keys),
        declared=issues,
        terms=terms_rows(issues, entries) if issues else [],
        final_terms=[
            (issue.name, agreement["agreement"]["final_terms"][issue.name]) for issue in issues
        ]
        if issues and agreement is not None
        else [],
    )
