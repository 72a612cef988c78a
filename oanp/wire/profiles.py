"""Verdict profiles: how a completed round is judged, looked up by name.

Every profile judges inside the same invariants (I1–I7 are the machine's, not a profile's);
a profile only decides between ``fair`` and ``fair_but_stuck`` and whether stalling ends a
session.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum


class VerdictStatus(StrEnum):
    FAIR = "fair"
    FAIR_BUT_STUCK = "fair_but_stuck"
    VIOLATED = "violated"


class Reason(StrEnum):
    """Rationale and close codes of docs/protocol.md §7, one vocabulary for both."""

    OPENING_MOVES = "opening_moves"
    SPREAD_NARROWED = "spread_narrowed"
    SPREAD_UNCHANGED = "spread_unchanged"
    AGREEMENT = "agreement"
    BUYER_RENEGED = "buyer_reneged"
    MERCHANT_RENEGED = "merchant_reneged"
    COMMITMENT_MISMATCH = "commitment_mismatch"
    MAX_ROUNDS_REACHED = "max_rounds_reached"
    STALLED = "stalled"
    WITHDRAWN_BY_BUYER = "withdrawn_by_buyer"
    WITHDRAWN_BY_MERCHANT = "withdrawn_by_merchant"
    RESPONSE_TIMEOUT = "response_timeout"
    DEADLINE_EXPIRED = "deadline_expired"
    OPERATOR_TERMINATED = "operator_terminated"
    SETTLED = "settled"
    NO_ZONE = "no_zone"
    LIMIT_BREACHED = "limit_breached"
    #: Profile terms/v0.1: fewer issues open than after the round before.
    TERMS_NARROWED = "terms_narrowed"


def breach_invariant(reason: Reason) -> str:
    """The invariant a breach of this kind falls under: I3 for commitments (a reveal that does
    not open one, or one whose limit the party's own prices broke), I4 for reneging."""
    return "I3" if reason in (Reason.COMMITMENT_MISMATCH, Reason.LIMIT_BREACHED) else "I4"


@dataclass(frozen=True, slots=True)
class Judgement:
    status: VerdictStatus
    rationale: Reason


@dataclass(frozen=True, slots=True)
class Profile:
    """A named verdict policy. ``stall_limit`` consecutive stuck rounds close the session;
    ``with_terms`` sessions negotiate declared issues besides the price (docs/protocol.md §11),
    and only theirs may."""

    name: str
    stall_limit: int | None = None
    with_terms: bool = False

    def judge_counter(
        self,
        round_: int,
        spread: Decimal,
        previous: Decimal | None,
        *,
        issues_open: int | None = None,
        previous_open: int | None = None,
    ) -> Judgement:
        """Judge a round the merchant answered with a counter: progress is a narrower spread
        (which names the progress when both moved) or, with terms, fewer issues open."""
        if round_ == 1 or previous is None:
            return Judgement(VerdictStatus.FAIR, Reason.OPENING_MOVES)
        if spread < previous:
            return Judgement(VerdictStatus.FAIR, Reason.SPREAD_NARROWED)
        if issues_open is not None and previous_open is not None and issues_open < previous_open:
            return Judgement(VerdictStatus.FAIR, Reason.TERMS_NARROWED)
        return Judgement(VerdictStatus.FAIR_BUT_STUCK, Reason.SPREAD_UNCHANGED)

    def stalled(self, consecutive_stuck: int) -> bool:
        return self.stall_limit is not None and consecutive_stuck >= self.stall_limit


DEFAULT = Profile("default/v0.1")
STRICT = Profile("strict/v0.1", stall_limit=2)
TERMS = Profile("terms/v0.1", with_terms=True)


def registry(profiles: Iterable[Profile] = (DEFAULT, STRICT, TERMS)) -> Mapping[str, Profile]:
    """A name → profile mapping; pass a larger one to the machine to plug profiles in."""
    return {p.name: p for p in profiles}


PROFILES: Mapping[str, Profile] = registry()
