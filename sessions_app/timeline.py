"""What the session page shows, read from the log alone: rounds, prices, verdicts, checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from oanp.commitments import is_weak
from oanp.envelope import DEFAULT_MAX_ROUNDS, INVARIANTS
from oanp.invariants import audit_log


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

    @property
    def spread(self) -> Any:
        if self.buyer_price is None or self.merchant_price is None:
            return None
        return round(self.merchant_price - self.buyer_price, 6)


@dataclass
class Check:
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


@dataclass
class Timeline:
    rounds: list[RoundRow]
    checks: list[Check]
    commitments: list[tuple[str, str, bool]]
    agreement: dict[str, Any] | None
    agreement_valid: bool | None
    close: dict[str, Any] | None
    head_seq: int
    violations: int
    settlement: Settlement | None = None


def timeline(entries: list[dict[str, Any]], jwks: dict[str, Any]) -> Timeline:
    """Fold the log into rounds, and audit it with :func:`oanp.invariants.audit_log`."""
    rounds: dict[int, RoundRow] = {}
    commitments: list[tuple[str, str, bool]] = []
    agreement = close = None
    violations = 0
    max_rounds = None
    settlement: Settlement | None = None
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
        Check(
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
    )
