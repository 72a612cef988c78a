"""The offline auditor: I1–I7 over one complete session log and a key set.

It re-derives everything from the entries alone and shares no code path with the machine that
wrote them, beyond the parser, the hash functions, the profiles' rules and which close reasons
are the machine's timers: a bug in the arbiter should show here.
A breach by a *party* that the arbiter caught (evidence, ``violated`` verdict, close) is the
protocol working, so it passes with a note; a breach the arbiter let through fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from oanp.audit.arbiter_checks import finish, visit_arbiter
from oanp.audit.party_checks import visit_party
from oanp.audit.walk import (
    InvariantResult,
    LogAudit,
    T,
    Walk,
)
from oanp.wire.canonical import JsonValue
from oanp.wire.envelope import (
    INVARIANTS,
    Envelope,
    Open,
    Role,
    envelope_from_json,
)
from oanp.wire.errors import ProtocolError
from oanp.wire.log import ChainBreak, chain_breaks
from oanp.wire.profiles import PROFILES, Profile

#: The I2 check that the buyer and the merchant are two agents, named in its problem so that
#: a report says which rule an agent in both seats broke (docs/protocol.md §8).
ROLES_DISTINCT = "roles_distinct"


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

    :func:`audit_log` is this walk taken to the end. A replay of the log (:mod:`oanp.audit.replay`)
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
        self._walk = Walk(LogAudit(None, 0, {i: InvariantResult(i) for i in INVARIANTS}))
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
        finish(replace(self._walk, audit=audit), read)
        return audit


def _visit(
    walk: Walk,
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
        visit_arbiter(walk, seq, env, entries, jwks)
    else:
        visit_party(walk, seq, env)


def _visit_open(walk: Walk, env: Envelope, profiles: Mapping[str, Profile]) -> None:
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
