"""The offline auditor: I1–I7 over one complete session log and a key set.

It re-derives everything from the entries alone and shares no code path with the machine that
wrote them, beyond the parser, the hash functions, the profiles' rules and which close reasons
are the machine's timers: a bug in the arbiter should show here.
A breach by a *party* that the arbiter caught (evidence, ``violated`` verdict, close) is the
protocol working, so it passes with a note; a breach the arbiter let through fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from enum import StrEnum

from oanp.canonical import JsonValue, canonical_bytes
from oanp.commitments import Role as CommitRole
from oanp.commitments import limit_breaches, limit_of, opens
from oanp.envelope import (
    INVARIANTS,
    OANP_VERSION,
    SENDERS,
    Ack,
    Agree,
    Close,
    Envelope,
    MessageType,
    Offer,
    Open,
    Role,
    SettleReveal,
    Verdict,
    Withdraw,
    envelope_from_json,
)
from oanp.errors import BadTerms, ProtocolError, VerificationError
from oanp.log import ChainBreak, chain_breaks
from oanp.money import price_to_json
from oanp.profiles import PROFILES, Judgement, Profile, Reason, VerdictStatus, breach_invariant
from oanp.settlement import SETTLEMENT_RULE, settlement_price
from oanp.signing import AGREEMENT_TYP, verify_detached
from oanp.state import TIMER_REASONS
from oanp.terms import Values, is_pure_retraction, issues_open, read_terms, terms_json

T = MessageType
#: Stands in for a profile the log names but the auditor does not know (an I5 failure).
_UNKNOWN_PROFILE = Profile("unknown")
#: A verdict checks what a round can break; I6 and I7 are the agreement's and the log's.
_ROUND_CHECKS = INVARIANTS[:5]
#: Closes whose cause is outside the log, so that it can neither support nor refute them.
_CLOSES_FROM_OUTSIDE = TIMER_REASONS | {Reason.OPERATOR_TERMINATED}
#: Where a close that nothing in the log owes is reported: under the invariant whose rule would
#: owe it. Any other reason (a stall, a verdict's rationale as a close) misstates the verdicts.
_CLOSE_RULES: Mapping[Reason, str] = {
    Reason.WITHDRAWN_BY_BUYER: "I2",
    Reason.WITHDRAWN_BY_MERCHANT: "I2",
    **{
        breach: breach_invariant(breach)
        for breach in (Reason.COMMITMENT_MISMATCH, Reason.BUYER_RENEGED, Reason.MERCHANT_RENEGED)
    },
}


#: The I2 check that the buyer and the merchant are two agents, named in its problem so that
#: a report says which rule an agent in both seats broke (docs/protocol.md §8).
ROLES_DISTINCT = "roles_distinct"


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
class _Walk:
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


def audit_log(
    entries: Sequence[Mapping[str, JsonValue]],
    jwks: Mapping[str, object] | None,
    *,
    profiles: Mapping[str, Profile] = PROFILES,
    breaks: Sequence[ChainBreak] | None = None,
) -> LogAudit:
    """Check I1–I7 over a whole session log. ``jwks`` may be ``None`` (I6 then fails if the
    log holds an agreement: nothing to verify it with). ``breaks`` are the log's chain breaks
    when the caller has already walked it."""
    walk = AuditWalk(entries, jwks, profiles=profiles, breaks=breaks)
    while walk.step():
        pass
    return walk.audit()


class AuditWalk:
    """The auditor's walk over one log, an entry at a time.

    :func:`audit_log` is this walk taken to the end. A replay of the log (:mod:`oanp.replay`)
    takes it one entry at a time and asks for :meth:`audit` after each, so that what it shows
    at entry k is what the auditor reports for the first k entries, found by the same code.
    """

    def __init__(
        self,
        entries: Sequence[Mapping[str, JsonValue]],
        jwks: Mapping[str, object] | None,
        *,
        profiles: Mapping[str, Profile] = PROFILES,
        breaks: Sequence[ChainBreak] | None = None,
    ) -> None:
        self._entries, self._jwks, self._profiles = entries, jwks, profiles
        # A break is found from its entry and the one before it alone, so the breaks of the
        # first k entries are those of the whole log up to entry k.
        self._breaks = chain_breaks(entries) if breaks is None else breaks
        self._walk = _Walk(LogAudit(None, 0, {i: InvariantResult(i) for i in INVARIANTS}))
        self._read = 0
        #: The first entry that is not an envelope: the audit stops there, at I2.
        self._unreadable: str | None = None
        self.envelope: Envelope | None = None

    def step(self) -> bool:
        """Read the next entry, if there is one; :attr:`envelope` is then its envelope, or
        ``None`` when it holds none."""
        if self._read == len(self._entries):
            return False
        position = self._read
        self._read += 1
        entry = self._entries[position]
        raw = entry.get("envelope") if isinstance(entry, Mapping) else None
        try:
            self.envelope = envelope_from_json(raw)
        except ProtocolError as exc:
            self.envelope = None
            self._unreadable = self._unreadable or (
                f"entry #{position + 1} is not a valid envelope: {exc.detail}"
            )
            return True
        if self._unreadable is None:
            if position == 0:
                self._walk.audit.session_id = self.envelope.session_id
            _visit(
                self._walk, position + 1, self.envelope, self._entries, self._jwks, self._profiles
            )
        return True

    @property
    def round(self) -> int:
        """The round the log has reached: 0 before the merchant joins."""
        return self._walk.round

    @property
    def owes_arbiter(self) -> bool:
        """Whether the log owes an entry of the arbiter's: a verdict for a round that ended, the
        agreement an accept earns, or a close. The arbiter writes those in the same step as the
        move that owes them, so a log read this far stops inside that step."""
        walk = self._walk
        return walk.terminal_seq is None and (
            any(r not in walk.verdicts for r in walk.completed)
            or walk.accepted_price is not None
            or walk.owed_close is not None
            or walk.pending_breach is not None
        )

    @property
    def settling(self) -> bool:
        """Whether one party has revealed its limit to settle and the other has not."""
        return len(self._walk.revealed) == 1

    def audit(self) -> LogAudit:
        """What :func:`audit_log` reports for the entries read so far."""
        read, walked = self._read, self._walk.audit
        if self._unreadable is not None or read == 0:
            audit = LogAudit(None, read, {i: InvariantResult(i) for i in INVARIANTS})
        else:
            audit = replace(
                walked,
                entries=read,
                results={
                    i: replace(r, problems=list(r.problems), notes=list(r.notes))
                    for i, r in walked.results.items()
                },
            )
        audit.results["I7"].problems[:0] = [
            brk.describe() for brk in self._breaks if brk.position < read
        ]
        if self._unreadable is not None or read == 0:
            audit.results["I2"].problems.append(self._unreadable or "the log is empty")
            return audit
        # The end of the log owes what is still open; a copy, so the walk may go on after it.
        _finish(replace(self._walk, audit=audit), read)
        return audit


def _visit(
    walk: _Walk,
    seq: int,
    env: Envelope,
    entries: Sequence[Mapping[str, JsonValue]],
    jwks: Mapping[str, object] | None,
    profiles: Mapping[str, Profile],
) -> None:
    if env.session_id != walk.audit.session_id:
        walk.fail("I2", f"entry {seq} belongs to session {env.session_id!r}")
    if walk.terminal_seq is not None:
        walk.fail("I1", f"entry {seq} follows the terminal entry {walk.terminal_seq}")
    if seq == 1:
        _visit_open(walk, env, profiles)
        return
    if walk.opened is None:
        return
    if env.role is Role.ARBITER:
        _visit_arbiter(walk, seq, env, entries, jwks)
    else:
        _visit_party(walk, seq, env)


def _visit_open(walk: _Walk, env: Envelope, profiles: Mapping[str, Profile]) -> None:
    if env.type is not T.SESSION_OPEN or not isinstance(env.payload, Open):
        walk.fail("I2", "the log does not start with the buyer's session.open")
        return
    walk.opened = env.payload
    walk.buyer, walk.merchant = env.agent_id, env.payload.merchant_agent_id
    if walk.buyer == walk.merchant:
        # I2's one buyer move and at most one merchant move per round are two parties' moves:
        # one agent in both seats could make each and agree with itself.
        walk.fail("I2", f"{ROLES_DISTINCT}: the buyer {walk.buyer!r} names itself as the merchant")
    walk.commits[Role.BUYER] = env.payload.constraints_commit
    walk.profile = profiles.get(env.payload.profile)
    if walk.profile is None:
        walk.fail("I5", f"unknown profile {env.payload.profile!r}: verdicts cannot be checked")
    elif walk.profile.with_terms != bool(env.payload.issues):
        walk.fail("I2", f"the profile {walk.profile.name} and the declared issues disagree")


def _visit_party(walk: _Walk, seq: int, env: Envelope) -> None:
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


def _visit_reveal(walk: _Walk, seq: int, env: Envelope, reveal: SettleReveal) -> None:
    """A ``settle.reveal``: re-derive what the arbiter owed it (docs/protocol.md §5)."""
    opened = walk.opened
    assert opened is not None
    role = env.role
    party: CommitRole = "buyer" if role is Role.BUYER else "merchant"
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
        _complete(walk, Judgement(VerdictStatus.VIOLATED, walk.pending_breach))
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
        _complete(walk, Judgement(VerdictStatus.FAIR_BUT_STUCK, Reason.NO_ZONE))
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
    _complete(walk, Judgement(VerdictStatus.FAIR, Reason.SETTLED))


def _standing_buyer(walk: _Walk) -> Decimal | None:
    return walk.buyer_price if walk.buyer_price is not None else walk.previous_buyer_price


def _standing_buyer_terms(walk: _Walk) -> Values | None:
    return walk.buyer_terms if walk.buyer_price is not None else walk.previous_buyer_terms


def _offered_terms(walk: _Walk, seq: int, offer: Offer) -> Values | None:
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


def _retracted(walk: _Walk, verb: str) -> str:
    opened = walk.opened
    assert opened is not None
    return "retracted from its last offer" if opened.issues else f"{verb} its price"


def _retracts(
    walk: _Walk,
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


def _visit_withdraw(walk: _Walk, role: Role) -> None:
    walk.final_answer = None  # the last round stays incomplete: no verdict is owed
    if walk.pending_breach is None:
        withdrawn = (
            Reason.WITHDRAWN_BY_BUYER if role is Role.BUYER else Reason.WITHDRAWN_BY_MERCHANT
        )
        # A close the last round or a stall already owed is not the party's to change.
        walk.owed_close = walk.owed_close or (withdrawn, "I2")
    elif walk.round > 0:
        _complete(walk, Judgement(VerdictStatus.VIOLATED, walk.pending_breach))


def _visit_offer(walk: _Walk, seq: int, env: Envelope, offer: Offer) -> None:
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
            _complete(walk, Judgement(VerdictStatus.VIOLATED, walk.pending_breach))
        else:
            _complete(walk, Judgement(VerdictStatus.FAIR, Reason.AGREEMENT))
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
        _complete(walk, Judgement(VerdictStatus.VIOLATED, walk.pending_breach))
    elif env.role is Role.MERCHANT and walk.buyer_price is not None:
        # Without a buyer price the merchant moved out of turn (failed under I2): no spread to
        # judge. An unknown profile failed under I5; the base rules keep the walk going.
        spread = offer.price - walk.buyer_price
        still_open = _open(walk)
        profile = walk.profile or _UNKNOWN_PROFILE
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
            _complete(walk, judged)


def _complete(walk: _Walk, judged: Judgement) -> None:
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


def _open(walk: _Walk) -> int | None:
    """The issues the two sides' terms differ on, in a session that declares any."""
    opened = walk.opened
    if opened is None or not opened.issues:
        return None
    return issues_open(opened.issues, walk.buyer_terms, walk.merchant_terms)


def _checks(judged: Judgement) -> dict[str, str]:
    checks = dict.fromkeys(_ROUND_CHECKS, "pass")
    if judged.status is VerdictStatus.VIOLATED:
        checks[breach_invariant(judged.rationale)] = "fail"
    return checks


def _visit_arbiter(
    walk: _Walk,
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


def _visit_verdict(walk: _Walk, seq: int, verdict: Verdict) -> None:
    walk.verdicts[verdict.round] = walk.verdicts.get(verdict.round, 0) + 1
    if walk.final_answer is not None and verdict.round == walk.round:
        # No final answer came in its window; logs written before the final answer existed
        # judge the last counter at once, which reads the same.
        _complete(walk, walk.final_answer)
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


def _check_figures(walk: _Walk, seq: int, verdict: Verdict, expected: Verdict) -> None:
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


def _visit_close(walk: _Walk, seq: int, close: Close) -> None:
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


def _check_unbreached_close(walk: _Walk, seq: int, reason: Reason) -> None:
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
        and reason not in _CLOSES_FROM_OUTSIDE
        and reason is not Reason.MAX_ROUNDS_REACHED
    ):
        walk.fail(
            _CLOSE_RULES.get(reason, "I5"),
            f"entry {seq}: closed as {reason.value}, which nothing in the log owes",
        )


def _visit_agree(
    walk: _Walk,
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


def _finish(walk: _Walk, count: int) -> None:
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
