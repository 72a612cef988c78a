"""Every read of the arbiter's records, scoped to the agent asking.

A session is visible only to its two parties: to anyone else it does not exist (404), so an
agent cannot probe for other agents' sessions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import IO, Any

from django.conf import settings
from django.db.models import Count, Exists, F, Min, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from arbiter_app import signing_keys
from arbiter_app.delivery_history import (  # noqa: F401 - the dashboard's reads of deliveries
    HANDOFF,
    BadPosition,
    Delivery,
    Position,
    delivery_of,
    delivery_page,
    resendable,
)
from arbiter_app.delivery_history import KINDS as DELIVERY_KINDS  # noqa: F401 - for the dashboard
from arbiter_app.delivery_history import (  # noqa: F401 - for the dashboard
    OUTCOMES as DELIVERY_OUTCOMES,
)
from arbiter_app.entry_scan import (  # noqa: F401 - the stream watch's reads of new entries
    entry_scan_start,
    scan_entries,
)
from arbiter_app.key_registry import (  # noqa: F401 - the dashboard's reads of party keys
    agent_keys,
    party_keys,
    party_keys_json,
    party_keys_of_sessions,
    signatures_required,
)
from arbiter_app.models import (
    AgentCallback,
    AgentCredential,
    AgentRole,
    Availability,
    CallbackCursor,
    DeliveryAttempt,
    Entry,
    Handoff,
    HandoffState,
    HandoffTarget,
    Heartbeat,
    IntegrityAlarm,
    IntegrityCheck,
    KeyState,
    Listing,
    MerchantAvailability,
    ProcessKind,
    Session,
    SigningKey,
    TaskFailure,
)
from arbiter_app.tlog.keys import log_identity  # noqa: F401 - the dashboard's reads of the log
from arbiter_app.tlog.reads import log_health, note_text, served_checkpoint  # noqa: F401
from arbiter_app.tlog.witnesses import configured as configured_witnesses  # noqa: F401
from oanp.audit import BundleWriter
from oanp.wire.canonical import JsonObject
from oanp.wire.errors import UnknownSession
from oanp.wire.signing import jwks_document
from oanp.wire.snapshot import load_state
from oanp.wire.state import Phase
from oanp.wire.summary import session_summary


def _party_filter(agent: AgentCredential, prefix: str = "") -> Q:
    field = "buyer_agent_id" if agent.role == AgentRole.BUYER else "merchant_agent_id"
    return Q(**{f"{prefix}{field}": agent.agent_id})


def visible_session(*, agent: AgentCredential, session_id: str) -> Session:
    session = Session.objects.filter(_party_filter(agent), session_id=session_id).first()
    if session is None:
        raise UnknownSession(f"no session {session_id!r} that {agent.agent_id!r} is a party to")
    return session


def summary_of(session: Session) -> JsonObject:
    return session_summary(load_state(json.loads(session.state)), json.loads(session.reveals))


def entry_text(entry: Entry) -> str:
    """The entry's JSON, its envelope spliced in as stored (the very bytes that were hashed)."""
    return (
        f'{{"seq":{entry.seq},"received_at":{json.dumps(entry.received_at)},'
        f'"envelope":{entry.envelope},"prev_hash":"{entry.prev_hash}",'
        f'"entry_hash":"{entry.entry_hash}"}}'
    )


_ENTRY_FIELDS = ("id", "seq", "type", "received_at", "envelope", "prev_hash", "entry_hash")


def entries_after(session: Session, seq: int = 0, limit: int | None = None) -> list[Entry]:
    rows = Entry.objects.filter(session=session, seq__gt=seq).order_by("seq").only(*_ENTRY_FIELDS)
    return list(rows if limit is None else rows[:limit])


def log_text(session: Session, *, with_keys: bool = False) -> str:
    """``GET .../log``: every entry in order, as one JSON document. ``with_keys`` adds
    ``jwks``, every key the arbiter ever signed with, and ``party_keys``, every key its parties
    registered, so that ``oanp verify`` checks the session's agreement and its parties'
    signatures from the file alone, as it does a bundle's."""
    keys = (
        ',"jwks":%s,"party_keys":%s'  # noqa: UP031
        % (
            json.dumps(every_public_jwk()),
            json.dumps(party_keys_json([session.buyer_agent_id, session.merchant_agent_id])),
        )
        if with_keys
        else ""
    )
    return '{"session_id":%s,"entries":[%s]%s}' % (  # noqa: UP031 - JSON braces
        json.dumps(session.session_id),
        ",".join(entry_text(e) for e in entries_after(session)),
        keys,
    )


# The inbox -----------------------------------------------------------------------------------


def entry_ids_after(after: int, limit: int = 500) -> frozenset[int]:
    """The ids of committed entries after ``after``, at most ``limit`` of them."""
    rows = Entry.objects.filter(id__gt=after).order_by("id").values_list("id", flat=True)
    return frozenset(rows[:limit])


@dataclass(frozen=True, slots=True)
class InboxPage:
    entries: list[tuple[int, Entry]]
    """(cursor, entry) for the caller's entries, in id order."""
    scanned_to: int
    """Every entry id up to here has been looked at; resume after it."""


def inbox_page(
    *, agent: AgentCredential, after: int, upto: int, limit: int = 200, span: int = 5000
) -> InboxPage:
    """The caller's entries with ids after ``after`` and at most ``upto`` (a bound below which
    every entry is committed), read from at most ``span`` ids, so that each page of a long
    history is one bounded query however few of its entries are the caller's."""
    bound = min(upto, after + span)
    if bound <= after:
        return InboxPage([], after)
    mine = list(
        Entry.objects.filter(_party_filter(agent, "session__"), id__gt=after, id__lte=bound)
        .order_by("id")
        .only(*_ENTRY_FIELDS)[:limit]
    )
    scanned_to = mine[-1].id if len(mine) == limit else bound
    return InboxPage([(e.id, e) for e in mine], scanned_to)


def next_deadline_of(session_id: str) -> datetime | None:
    """When the session's timer next falls due; ``None`` when it has none or has ended."""
    return (
        Session.objects.filter(session_id=session_id)
        .values_list("next_deadline", flat=True)
        .first()
    )


def deadlines_before(until: datetime) -> list[tuple[str, datetime]]:
    """Each session whose timer falls due by ``until``, with its due time."""
    return list(
        Session.objects.filter(next_deadline__lte=until)
        .order_by("next_deadline")
        .values_list("session_id", "next_deadline")
    )


# Outbound deliveries ----------------------------------------------------------------------


def callback_of(agent: AgentCredential) -> AgentCallback | None:
    return AgentCallback.objects.filter(agent_id=agent.agent_id, role=agent.role).first()


def lapsed_handoffs(now: datetime) -> QuerySet[Handoff]:
    """Pending handoffs whose next attempt is due, or whose running attempt's lease ran out:
    a claim leases the handoff until the attempt's end, so only these can hold a dead one."""
    return Handoff.objects.filter(state=HandoffState.PENDING, next_attempt_at__lte=now)


def lapsed_callback_cursors(now: datetime) -> QuerySet[CallbackCursor]:
    """Cursors whose retry is due or whose running attempt's lease ran out, the disabled
    callbacks' too (an attempt may die as another disables its callback)."""
    return CallbackCursor.objects.filter(next_attempt_at__lte=now)


def due_handoffs(now: datetime | None = None, limit: int = 100) -> list[int]:
    """Pending handoffs whose next attempt is due, or whose running attempt died."""
    due = lapsed_handoffs(now or timezone.now()).order_by("next_attempt_at")
    return list(due.values_list("pk", flat=True)[:limit])


def due_callback_cursors(now: datetime | None = None, limit: int = 100) -> list[int]:
    """Cursors of live callbacks that are behind their session's log and free to move."""
    due = CallbackCursor.objects.filter(
        Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now or timezone.now()),
        callback__disabled_at__isnull=True,
        delivered_seq__lt=F("session__head_seq"),
    ).order_by("pk")
    return list(due.values_list("pk", flat=True)[:limit])


# The dashboard's reads: sessions of some merchant agents (None: every session) ------------


def sessions_of(merchant_agent_ids: list[str] | None) -> QuerySet[Session]:
    """Sessions whose merchant agent is one of ``merchant_agent_ids``; all when ``None``."""
    sessions = Session.objects.all()
    if merchant_agent_ids is not None:
        sessions = sessions.filter(merchant_agent_id__in=merchant_agent_ids)
    return sessions


def sessions_bought_by(buyer_agent_ids: list[str]) -> QuerySet[Session]:
    """Sessions whose buyer agent is one of ``buyer_agent_ids``."""
    return Session.objects.filter(buyer_agent_id__in=buyer_agent_ids)


def session_entries(session: Session) -> list[JsonObject]:
    """Every entry of the session as JSON, in order."""
    return [e.as_json() for e in entries_after(session)]


# Credentials ---------------------------------------------------------------------------------


def credentials_of(*, agent_id: str, role: str) -> QuerySet[AgentCredential]:
    """Every API key ever issued to ``agent_id`` as ``role``, revoked ones included."""
    return AgentCredential.objects.filter(agent_id=agent_id, role=role).order_by("-created_at")


def live_credentials(credential_ids: set[int]) -> set[int]:
    """Which of these credentials are live: not revoked (nor deleted) nor expired. One query
    for every stream a process holds open."""
    rows = AgentCredential.objects.filter(pk__in=credential_ids, revoked_at__isnull=True)
    return set(rows.exclude(expires_at__lte=timezone.now()).values_list("pk", flat=True))


def credential_is_live(credential_id: int) -> bool:
    """Whether the credential has not been revoked (nor deleted) since it was loaded, nor
    expired: a stream opened with a key ends when the key does."""
    return (
        AgentCredential.objects.filter(pk=credential_id, revoked_at__isnull=True)
        .exclude(expires_at__lte=timezone.now())
        .exists()
    )


@dataclass(frozen=True)
class KeyedAgent:
    """An agent id as its API keys know it: the role they speak in, and who they were
    issued to (the latest key's owner; ``""``: nobody)."""

    agent_id: str
    role: str
    owner: str
    keys: int
    first_issued_at: datetime


def keyed_agents(*, excluding: Sequence[QuerySet[Any, str]]) -> list[KeyedAgent]:
    """Every agent id and role some key was issued to, but for the ids each query of
    ``excluding`` yields (subqueries), in agent id order."""
    latest_owner = AgentCredential.objects.filter(
        agent_id=OuterRef("agent_id"), role=OuterRef("role")
    ).order_by("-created_at", "-pk")
    found = AgentCredential.objects.all()
    for ids in excluding:
        found = found.exclude(agent_id__in=ids)
    rows = (
        found.values("agent_id", "role")
        .annotate(
            keys=Count("pk"),
            first_issued_at=Min("created_at"),
            owner=Subquery(latest_owner.values("owner")[:1]),
        )
        .order_by("agent_id", "role")
    )
    return [KeyedAgent(**row) for row in rows]


def agent_id_in_use(agent_id: str) -> bool:
    """Whether any key, of either role, speaks for ``agent_id``."""
    return AgentCredential.objects.filter(agent_id=agent_id).exists()


def session_named(session_id: str) -> Session | None:
    return Session.objects.filter(session_id=session_id).first()


# Discovery (docs/protocol.md §14.10) ----------------------------------------------------------


def listing_of(merchant_agent_id: str) -> Listing | None:
    """The agent's listing, listed or not."""
    return Listing.objects.filter(merchant_agent_id=merchant_agent_id).first()


def listed_merchants(*, query: str, after: str | None, limit: int) -> list[Listing]:
    """Up to ``limit`` listed merchant agents, in agent id order after ``after``, whose id,
    merchant, description or catalog holds ``query`` (case-insensitively; ``""``: any).

    Only agents a ``session.open`` may name are listed: a merchant key was issued for the id
    (:func:`arbiter_app.services.receive_envelope` refuses any other as ``unknown_merchant``),
    and its owner has not paused or archived it (``merchant_paused``, ``merchant_archived``).
    """
    registered = AgentCredential.objects.filter(
        agent_id=OuterRef("merchant_agent_id"), role=AgentRole.MERCHANT
    )
    stopped = MerchantAvailability.objects.filter(merchant_agent_id=OuterRef("merchant_agent_id"))
    stopped = stopped.exclude(state=Availability.ACTIVE)
    found = Listing.objects.filter(Exists(registered), ~Exists(stopped), listed=True)
    if query:
        found = found.filter(
            Q(merchant_agent_id__icontains=query)
            | Q(merchant__icontains=query)
            | Q(description__icontains=query)
            | Q(catalog_text__icontains=query)
        )
    if after is not None:
        found = found.filter(merchant_agent_id__gt=after)
    return list(found.order_by("merchant_agent_id")[:limit])


def availabilities(agent_ids: Sequence[str]) -> dict[str, str]:
    """Whether each of these merchant agents takes new sessions, by id: an
    :class:`~arbiter_app.models.Availability`, ``"active"`` for one never paused."""
    found = dict(
        MerchantAvailability.objects.filter(merchant_agent_id__in=agent_ids).values_list(
            "merchant_agent_id", "state"
        )
    )
    return {agent_id: found.get(agent_id, Availability.ACTIVE.value) for agent_id in agent_ids}


def availability_column(agent_id: str) -> Coalesce:
    """Whether the agent whose id is the outer query's column ``agent_id`` takes new
    sessions, as a column: for a list of agents to read in its own query."""
    state = MerchantAvailability.objects.filter(merchant_agent_id=OuterRef(agent_id))
    return Coalesce(Subquery(state.values("state")[:1]), Value(Availability.ACTIVE.value))


# Handoffs and reveals, for the dashboard: the caller has already scoped the session --------


def handoff_target_of(merchant_agent_id: str) -> HandoffTarget | None:
    """The agent's handoff target; its key and secret stay sealed in it."""
    return HandoffTarget.objects.filter(merchant_agent_id=merchant_agent_id).first()


def handoff_of(session: Session) -> Handoff | None:
    return Handoff.objects.select_related("target").filter(session=session).first()


def handoff_attempts(handoff: Handoff) -> list[DeliveryAttempt]:
    return list(handoff.attempt_log.order_by("started_at", "number"))


def revealed_constraints(session: Session) -> dict[str, JsonObject]:
    """What each party revealed (``"buyer"``, ``"merchant"``), checked against its
    commitment when it was received; a party that has not revealed is absent."""
    reveals = json.loads(session.reveals or "{}")
    return {
        role: reveal["constraints"]
        for role, reveal in reveals.items()
        if isinstance(reveal, dict) and isinstance(reveal.get("constraints"), dict)
    }


# The machinery: workers, beat, failures, backlogs ----------------------------------------------


@dataclass(frozen=True)
class ProcessSeen:
    name: str
    started_at: datetime
    seen_at: datetime
    answered_at: datetime | None
    queue_wait_ms: int | None
    stopped_at: datetime | None
    alive: bool

    def as_json(self, now: datetime) -> JsonObject:
        return {
            "name": self.name,
            "alive": self.alive,
            "last_seen": self.seen_at.isoformat(),
            "seconds_ago": round((now - self.seen_at).total_seconds(), 1),
            "last_answer": None if self.answered_at is None else self.answered_at.isoformat(),
            "queue_wait_ms": self.queue_wait_ms,
            "stopped": self.stopped_at is not None,
        }


def background_processes(kind: str, now: datetime | None = None) -> list[ProcessSeen]:
    """Every worker (or beat) that reported in the last day, most recently seen first. One is
    alive while it has not stopped and was seen within ``OANP_WORKER_LOST_SECONDS``."""
    now = now or timezone.now()
    lost = now - timedelta(seconds=settings.OANP_WORKER_LOST_SECONDS)
    rows = Heartbeat.objects.filter(kind=kind, seen_at__gte=now - timedelta(days=1)).order_by(
        "-seen_at"
    )
    return [
        ProcessSeen(
            name=row.name,
            started_at=row.started_at,
            seen_at=row.seen_at,
            answered_at=row.answered_at,
            queue_wait_ms=row.queue_wait_ms,
            stopped_at=row.stopped_at,
            alive=row.stopped_at is None and row.seen_at >= lost,
        )
        for row in rows
    ]


def workers(now: datetime | None = None) -> list[ProcessSeen]:
    return background_processes(ProcessKind.WORKER, now)


def beats(now: datetime | None = None) -> list[ProcessSeen]:
    return background_processes(ProcessKind.BEAT, now)


def queues(now: datetime | None = None) -> list[ProcessSeen]:
    """Each queue as a worker last took beat's heartbeat from it; ``alive`` while lately."""
    return background_processes(ProcessKind.QUEUE, now)


def failed_tasks_since(since: datetime) -> int:
    return TaskFailure.objects.filter(failed_at__gte=since).count()


def task_failures(*, since: datetime | None = None, limit: int) -> list[TaskFailure]:
    """The tasks that failed (since ``since``), newest first."""
    found = TaskFailure.objects.order_by("-failed_at", "-pk")
    if since is not None:
        found = found.filter(failed_at__gte=since)
    return list(found[:limit])


def task_failure(pk: int) -> TaskFailure | None:
    return TaskFailure.objects.filter(pk=pk).first()


@dataclass(frozen=True)
class DeliveryBacklog:
    """Handoffs waiting for a retry or given up on; callbacks waiting for a retry."""

    handoffs_retrying: int
    handoffs_failed: int
    callbacks_retrying: int


def delivery_backlog() -> DeliveryBacklog:
    handoffs = Handoff.objects.aggregate(
        retrying=Count("pk", filter=Q(state=HandoffState.PENDING, attempts__gt=0)),
        failed=Count("pk", filter=Q(state=HandoffState.FAILED)),
    )
    callbacks = CallbackCursor.objects.filter(attempts__gt=0, callback__disabled_at__isnull=True)
    return DeliveryBacklog(
        handoffs_retrying=handoffs["retrying"],
        handoffs_failed=handoffs["failed"],
        callbacks_retrying=callbacks.count(),
    )


def sessions_by_phase() -> dict[str, int]:
    """How many sessions are in each phase, every phase named (0 when none is in it)."""
    rows = Session.objects.values_list("phase").annotate(n=Count("pk")).order_by()
    return {phase.value: 0 for phase in Phase} | dict(rows)


def earliest_deadline() -> datetime | None:
    """When the first timer of any open session falls (or fell) due."""
    return Session.objects.aggregate(first=Min("next_deadline"))["first"]


# Signing keys --------------------------------------------------------------------------------

#: The algorithms an admin may rotate to.
SIGNING_ALGORITHMS = signing_keys.ALGORITHMS


def published_jwks() -> dict[str, list[dict[str, object]]]:
    """``/.well-known/jwks.json``: the active key and the retiring ones."""
    signing_keys.ensure_active_key()
    rows = SigningKey.objects.filter(state__in=[KeyState.ACTIVE, KeyState.RETIRING])
    return jwks_document(row.public_jwk for row in rows)


def key_history() -> list[dict[str, object]]:
    """Every public key the arbiter ever signed with, and when it was valid."""
    signing_keys.ensure_active_key()
    return [
        {
            **row.public_jwk,
            "state": row.state,
            "activated_at": row.activated_at.isoformat(),
            "retiring_at": row.retiring_at.isoformat() if row.retiring_at else None,
            "retired_at": row.retired_at.isoformat() if row.retired_at else None,
        }
        for row in SigningKey.objects.order_by("activated_at")
    ]


def every_public_jwk() -> dict[str, list[dict[str, object]]]:
    """A JWKS of every key ever used, retired ones included: what old agreements need."""
    signing_keys.ensure_active_key()
    return jwks_document(row.public_jwk for row in SigningKey.objects.order_by("activated_at"))


def audit_bundle_writer(
    out: IO[bytes], *, sessions: QuerySet[Session], prefixes: Sequence[JsonObject] = ()
) -> BundleWriter:
    """A writer of an audit bundle of ``sessions`` into ``out``, signed by the active key,
    carrying every public key that ever signed and every key their parties registered, so the
    auditor needs nothing of the arbiter's but the file. ``prefixes`` are checkpoint statements
    of earlier exports it may extend."""
    return BundleWriter(
        out,
        jwks=every_public_jwk(),
        key=signing_keys.active_key(),
        arbiter_id=settings.OANP_ARBITER_ID,
        prefixes=prefixes,
        party_keys=party_keys_of_sessions(sessions),
    )


#: Entries read per round trip of an export's server-side cursor.
LOG_CURSOR_ROWS = 2000


def logs_of(sessions: QuerySet[Session]) -> Iterator[tuple[Session, list[JsonObject]]]:
    """Each of ``sessions`` (ordered) with its whole log, read through two server-side
    cursors walking in step: one session's log in memory at a time, however many there are."""
    order = [
        f"{'-' if str(f).startswith('-') else ''}session__{str(f).lstrip('-')}"
        for f in sessions.query.order_by
    ] + ["seq"]
    rows = (
        Entry.objects.filter(session__in=sessions.values("pk"))
        .order_by(*order)
        .only("session_id", *_ENTRY_FIELDS)
        .iterator(chunk_size=LOG_CURSOR_ROWS)
    )
    pending = next(rows, None)
    for session in sessions.iterator(chunk_size=max(1, LOG_CURSOR_ROWS // 10)):
        log: list[JsonObject] = []
        while pending is not None and pending.session_id == session.pk:
            log.append(pending.as_json())  # type: ignore[arg-type]
            pending = next(rows, None)
        yield session, log


# The integrity check (arbiter_app.integrity) -----------------------------------------------


def open_integrity_alarms() -> QuerySet[IntegrityAlarm]:
    return IntegrityAlarm.objects.filter(resolved_at__isnull=True)


def resolved_integrity_alarms() -> QuerySet[IntegrityAlarm]:
    return IntegrityAlarm.objects.filter(resolved_at__isnull=False).order_by("-resolved_at")


def last_integrity_check() -> IntegrityCheck | None:
    return IntegrityCheck.objects.order_by("-started_at").first()
