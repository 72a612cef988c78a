"""What the offline auditor (:mod:`oanp.audit.invariants`) reports of a log, per invariant, and the
:class:`Walk` it keeps while it reads the log in order: each side's standing offers, the
rounds that owe a verdict, the close owed, the agreement owed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum

from oanp.wire.canonical import JsonValue
from oanp.wire.envelope import (
    INVARIANTS,
    MessageType,
    Open,
    Role,
    Verdict,
)
from oanp.wire.profiles import Judgement, Profile, Reason, breach_invariant
from oanp.wire.state import TIMER_REASONS
from oanp.wire.terms import Values

T = MessageType
#: Stands in for a profile the log names but the auditor does not know (an I5 failure).
UNKNOWN_PROFILE = Profile("unknown")
#: A verdict checks what a round can break; I6 and I7 are the agreement's and the log's.
ROUND_CHECKS = INVARIANTS[:5]
#: Closes whose cause is outside the log, so that it can neither support nor refute them.
CLOSES_FROM_OUTSIDE = TIMER_REASONS | {Reason.OPERATOR_TERMINATED}
#: Where a close that nothing in the log owes is reported: under the invariant whose rule would
#: owe it. Any other reason (a stall, a verdict's rationale as a close) misstates the verdicts.
CLOSE_RULES: Mapping[Reason, str] = {
    Reason.WITHDRAWN_BY_BUYER: "I2",
    Reason.WITHDRAWN_BY_MERCHANT: "I2",
    **{
        breach: breach_invariant(breach)
        for breach in (Reason.COMMITMENT_MISMATCH, Reason.BUYER_RENEGED, Reason.MERCHANT_RENEGED)
    },
}


class Status(StrEnum):
    PASS = "pass"  # noqa: S105  (a verdict, not a secret)
    FAIL = "fail"
    NOT_APPLICABLE = "n/a"


@dataclass(slots=True)
class InvariantResult:
    invariant: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    applicable: bool = True

    @property
    def status(self) -> Status:
        if self.problems:
            return Status.FAIL
        return Status.PASS if self.applicable else Status.NOT_APPLICABLE


@dataclass(slots=True)
class LogAudit:
    """What an auditor learns from one log: per invariant, pass or exactly why not."""

    session_id: str | None
    entries: int
    results: dict[str, InvariantResult]
    agreement_valid: bool | None = None
    final_price: Decimal | None = None
    outcome: str | None = None

    @property
    def ok(self) -> bool:
        return all(r.status is not Status.FAIL for r in self.results.values())


@dataclass(slots=True)
class Walk:
    """What the auditor tracks while walking the log in order."""

    audit: LogAudit
    profile: Profile | None = None
    opened: Open | None = None
    buyer: str | None = None
    merchant: str | None = None
    #: The arbiter that wrote the log, as its first entry of its own names it.
    arbiter: str | None = None
    commits: dict[Role, str] = field(default_factory=dict)
    round: int = 0
    buyer_moved: bool = False
    merchant_moved: bool = False
    buyer_price: Decimal | None = None
    previous_buyer_price: Decimal | None = None
    merchant_price: Decimal | None = None
    last_spread: Decimal | None = None
    stuck: int = 0
    #: Rounds that ended (answered, accepted or breached) and so owe exactly one verdict.
    completed: list[int] = field(default_factory=list)
    verdicts: dict[int, int] = field(default_factory=dict)
    #: Per completed round, the verdict the log owes it: judgement, prices, spread and checks.
    expected: dict[int, Verdict] = field(default_factory=dict)
    #: A caught breach: the verdict and close the arbiter owes next.
    pending_breach: Reason | None = None
    #: The close the arbiter owes after a verdict (max rounds, stall) or a party's withdrawal,
    #: and for which invariant.
    owed_close: tuple[Reason, str] | None = None
    terminal_seq: int | None = None
    accepted_price: Decimal | None = None
    #: The last round's counter awaits the buyer's final answer (docs/protocol.md §5): the
    #: judgement its verdict owes if the answer's window expires.
    final_answer: Judgement | None = None
    #: Settlement by reveal: the limits revealed so far, by role, and once settled the
    #: ``settlement`` member the agreement owes.
    revealed: dict[Role, Decimal] = field(default_factory=dict)
    settlement: dict[str, JsonValue] | None = None
    #: Profile terms/v0.1: each side's values beside its prices, as the prices are kept.
    buyer_terms: Values | None = None
    previous_buyer_terms: Values | None = None
    merchant_terms: Values | None = None
    last_open: int | None = None
    accepted_terms: Values | None = None

    def fail(self, invariant: str, problem: str) -> None:
        self.audit.results[invariant].problems.append(problem)

    def note(self, invariant: str, note: str) -> None:
        self.audit.results[invariant].notes.append(note)
