"""The integrity check: do session rows and their logs still agree?

The application's role may update a session's row (each move advances its head) and append
entries, so a fault or a compromised server could leave a head that is not the log's last entry
or an entry that does not chain; an owner or superuser could change anything. Beat runs
:func:`check` every ``OANP_INTEGRITY_CHECK_SECONDS``:

- every session: ``head_seq`` is its last entry's ``seq``, ``head_hash`` that entry's
  ``entry_hash`` (one query);
- every entry: ``prev_hash`` is the ``entry_hash`` of the entry one ``seq`` before, or the zero
  hash for the first (one query); with the head check, a missing entry breaks a link;
- ``entry_hash`` recomputed from the stored fields with :mod:`oanp.wire.log`, for the entries new
  since the check before last (a transaction that committed late is still seen), and for every
  entry once every ``OANP_INTEGRITY_FULL_SECONDS``.

Each mismatch opens an :class:`IntegrityAlarm` (one per session and kind), logged at ERROR,
counted in ``oanp_integrity_mismatches`` and shown to operators and admins on every dashboard
page; a later check that finds the session consistent again resolves it.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import groupby
from operator import itemgetter

from django.conf import settings
from django.db.models import Case, Exists, F, Max, OuterRef, Q, Subquery, Value, When
from django.db.models.query import QuerySet
from django.utils import timezone

from arbiter_app import metrics, selectors
from arbiter_app.models import (
    Entry,
    IntegrityAlarm,
    IntegrityCheck,
    IntegrityKind,
    Session,
)
from oanp.wire.canonical import ZERO_HASH
from oanp.wire.log import entry_hash_of

log = logging.getLogger(__name__)

#: Checks kept for the dashboard and for where the next recompute starts.
KEEP_CHECKS = timedelta(days=7)
#: Sessions named in the ERROR line; the alarms hold them all.
LOGGED_SESSIONS = 10


@dataclass(frozen=True)
class Finding:
    session_id: str
    kind: str
    detail: str


@dataclass
class IntegrityReport:
    full: bool
    sessions: int
    entries_rehashed: int
    findings: list[Finding] = field(default_factory=list)


def check(*, now: datetime | None = None, full: bool | None = None) -> IntegrityReport:
    """Run one check, record it and its alarms. ``full`` forces (or skips) recomputing every
    entry's hash; by default it is due every ``OANP_INTEGRITY_FULL_SECONDS``."""
    now = now or timezone.now()
    started = time.monotonic()
    previous = list(IntegrityCheck.objects.order_by("-started_at")[:2])
    if full is None:
        full = not IntegrityCheck.objects.filter(
            full=True,
            started_at__gt=now - timedelta(seconds=settings.OANP_INTEGRITY_FULL_SECONDS),
        ).exists()
    # Entry ids are drawn before their transactions commit, so an id below the last check's
    # high mark may have committed after it: start from the mark of the check before last.
    since = 0 if full or len(previous) < 2 else previous[1].entry_id_to
    upto = Entry.objects.aggregate(top=Max("id"))["top"] or 0
    findings = [*_heads(), *_links()]
    rehashed = Counter[str]()
    findings += _hashes(Entry.objects.filter(id__gt=since, id__lte=upto), rehashed)
    report = IntegrityReport(
        full=full,
        sessions=Session.objects.count(),
        entries_rehashed=rehashed["entries"],
        findings=findings,
    )
    covered = [IntegrityKind.HEAD, IntegrityKind.LINK] + ([IntegrityKind.HASH] if full else [])
    _record_alarms(findings, covered=covered, now=now)
    IntegrityCheck.objects.create(
        started_at=now,
        seconds=time.monotonic() - started,
        full=full,
        sessions=report.sessions,
        entries_rehashed=report.entries_rehashed,
        entry_id_to=upto,
        mismatches=len(findings),
    )
    IntegrityCheck.objects.filter(started_at__lt=now - KEEP_CHECKS).delete()
    metrics.INTEGRITY_MISMATCHES.set(selectors.open_integrity_alarms().count())
    if findings:
        named = ", ".join(f"{f.session_id} ({f.kind})" for f in findings[:LOGGED_SESSIONS])
        log.error(
            "integrity check: %d mismatches between sessions and their logs: %s%s",
            len(findings),
            named,
            "" if len(findings) <= LOGGED_SESSIONS else ", …",
        )
    return report


def _heads() -> Iterator[Finding]:
    at_head = Entry.objects.filter(session=OuterRef("pk"), seq=OuterRef("head_seq"))
    beyond = Entry.objects.filter(session=OuterRef("pk"), seq__gt=OuterRef("head_seq"))
    wrong = (
        Session.objects.annotate(
            hash_at_head=Subquery(at_head.values("entry_hash")), beyond=Exists(beyond)
        )
        .filter(Q(beyond=True) | Q(hash_at_head__isnull=True) | ~Q(hash_at_head=F("head_hash")))
        .values_list("pk", "session_id", "head_seq", "head_hash")
    )
    for pk, session_id, head_seq, head_hash in list(wrong):
        last = Entry.objects.filter(session_id=pk).order_by("-seq").values("seq", "entry_hash")
        end = last.first()
        ends = f"seq {end['seq']}, {end['entry_hash']}" if end else "no entry"
        yield Finding(
            session_id, IntegrityKind.HEAD, f"head is seq {head_seq}, {head_hash}; log ends {ends}"
        )


def _links() -> Iterator[Finding]:
    before = Entry.objects.filter(session=OuterRef("session"), seq=OuterRef("seq") - 1)
    expected = Case(
        When(seq=1, then=Value(ZERO_HASH)),
        When(seq__gt=1, then=Subquery(before.values("entry_hash"))),
        default=Value(""),
    )
    broken = (
        Entry.objects.alias(expected=expected)
        .filter(Q(expected__isnull=True) | ~Q(prev_hash=F("expected")))
        .order_by("session_id", "seq")
        .values_list("session__session_id", "seq")
    )
    yield from _per_session(
        broken.iterator(), IntegrityKind.LINK, "prev_hash does not link to the entry before"
    )


def _hashes(entries: QuerySet[Entry], read: Counter[str]) -> Iterator[Finding]:
    """Entries whose hash does not recompute; ``read["entries"]`` counts those read."""
    # In the order of ids, with no join: a plain range scan of the table, however stale the
    # planner's statistics; the few sessions at fault are named afterwards.
    rows = (
        entries.order_by("id")
        .values_list("session_id", "seq", "received_at", "envelope", "prev_hash", "entry_hash")
        .iterator(chunk_size=2000)
    )
    wrong = []
    for session_pk, seq, received_at, envelope, prev_hash, entry_hash in rows:
        read["entries"] += 1
        stored = {
            "seq": seq,
            "received_at": received_at,
            "envelope": json.loads(envelope),
            "prev_hash": prev_hash,
        }
        if entry_hash != entry_hash_of(stored):
            wrong.append((session_pk, seq))
    wrong.sort()
    names = dict(
        Session.objects.filter(pk__in={pk for pk, _ in wrong}).values_list("pk", "session_id")
    )
    yield from _per_session(
        ((names[pk], seq) for pk, seq in wrong),
        IntegrityKind.HASH,
        "entry_hash does not match its contents",
    )


def _per_session(
    places: Iterable[tuple[str, int]], kind: IntegrityKind, what: str
) -> Iterator[Finding]:
    """One finding per session, naming its entries at fault, for rows in session order."""
    for session_id, group in groupby(places, key=itemgetter(0)):
        seqs = [seq for _, seq in group]
        listed = ", ".join(map(str, seqs[:20])) + (", …" if len(seqs) > 20 else "")
        yield Finding(session_id, kind, f"entry {listed}: {what}")


def _record_alarms(findings: list[Finding], *, covered: list[str], now: datetime) -> None:
    found = {(f.session_id, f.kind): f for f in findings}
    for finding in findings:
        alarm, created = IntegrityAlarm.objects.get_or_create(
            session_id=finding.session_id,
            kind=finding.kind,
            resolved_at=None,
            defaults={"detail": finding.detail, "first_seen_at": now, "last_seen_at": now},
        )
        if not created:
            alarm.detail, alarm.last_seen_at = finding.detail, now
            alarm.save(update_fields=["detail", "last_seen_at"])
    # Only what this check looked at can be found sound again.
    for alarm in selectors.open_integrity_alarms().filter(kind__in=covered):
        if (alarm.session_id, alarm.kind) not in found:
            alarm.resolved_at = now
            alarm.save(update_fields=["resolved_at"])
