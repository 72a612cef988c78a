"""Sessions: every envelope a party sends, timer expiries and operators' terminations.

Each write locks the session row it changes, appends the entries in the same transaction, and
announces them through :mod:`arbiter_app.events` only after the commit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, OuterRef, QuerySet, Subquery
from django.utils import timezone

from arbiter_app import events, metrics
from arbiter_app.deliveries.handoff import open_handoff
from arbiter_app.models import (
    VERDICT_COUNTS,
    AgentCallback,
    AgentCredential,
    AgentRole,
    Availability,
    Entry,
    Listing,
    MerchantAvailability,
    Session,
    SignatureRequirement,
    settlement_of,
)
from arbiter_app.prepared import PreparedRead
from arbiter_app.refusals import (
    CurrencyNotOffered,
    MerchantArchived,
    MerchantPaused,
    SelfDealing,
    SenderMismatch,
    UnknownMerchant,
)
from arbiter_app.services.agent_keys import check_signature
from arbiter_app.signing_keys import ActiveSigner
from oanp.wire.canonical import JsonObject, canonical_bytes, tagged_sha256
from oanp.wire.discovery import catalog_text
from oanp.wire.envelope import Envelope, MessageType
from oanp.wire.errors import (
    MessageIdReused,
    MessageIdSeen,
    ProtocolError,
    TimerExpired,
    UnknownSession,
)
from oanp.wire.log import Entry as LogEntry
from oanp.wire.machine import Negotiation
from oanp.wire.party_signatures import signing_input
from oanp.wire.profiles import Reason
from oanp.wire.snapshot import dump_state, load_state
from oanp.wire.state import Arbiter
from oanp.wire.summary import session_summary


@dataclass(frozen=True, slots=True)
class EnvelopeAnswer:
    """The answer to a submitted envelope: 201 when it was applied, 200 when it repeats one."""

    status: int
    body: str


def arbiter() -> Arbiter:
    return Arbiter(
        settings.OANP_ARBITER_ID,
        ActiveSigner(),
        f"{settings.OANP_PUBLIC_URL}/.well-known/jwks.json",
    )


# Sessions ------------------------------------------------------------------------------------


def check_sender(*, agent: AgentCredential, envelope: Envelope) -> None:
    """Refuse (403 ``sender_mismatch``) an envelope whose sender is not the key's agent and
    role: the edge's check before :func:`receive_envelope`, which trusts it."""
    if envelope.agent_id != agent.agent_id or envelope.role.value != agent.role:
        metrics.count_envelope(envelope.type.value, "refused")
        raise SenderMismatch(
            f"this key speaks for {agent.role} {agent.agent_id!r}, not "
            f"{envelope.role.value} {envelope.agent_id!r}"
        )


def receive_envelope(
    *,
    agent: AgentCredential,
    envelope: Envelope,
    now: datetime | None = None,
    admit: Callable[[], None] = lambda: None,
) -> EnvelopeAnswer:
    """Apply one party envelope of ``agent`` (its sender, as :func:`check_sender` found), in
    docs/protocol.md §14's order of checks.

    Raises a :class:`~oanp.wire.errors.ProtocolError` and changes nothing when it is refused, except
    that an envelope arriving after its session's timer fell due first lets the timer close
    the session, then is refused with ``timer_expired``. ``admit`` is called when every check
    passed and the envelope is about to be applied (a replay is not): the last refusal,
    section 7's 429, is its to raise.
    """
    refused = partial(metrics.count_envelope, envelope.type.value, "refused")
    try:
        try:
            with transaction.atomic():
                result = _receive(envelope, now, admit)
        except IntegrityError:
            if envelope.type is not MessageType.SESSION_OPEN:
                raise
            # Two opens of one new session_id raced; the loser now finds the winner's row.
            with transaction.atomic():
                result = _receive(envelope, now, admit)
    except ProtocolError:
        refused()
        raise
    if isinstance(result, TimerExpired):
        refused()
        raise result  # after the commit: the timer's close stands
    outcome = "accepted" if result.status == 201 else "replayed"
    metrics.count_envelope(envelope.type.value, outcome)
    return result


def _locked_query(session_id: str) -> QuerySet[Session]:
    """The session's row locked for a step, read with its parties' live callbacks (their ids,
    or ``None``) and whether each must sign its envelopes (§12), in the same round trip: the
    callbacks' listener needs the ids after the commit, and the step the requirement first;
    each would otherwise ask in a query of its own for every envelope. A callback registered
    between this read and the commit is first served from the session's next step, as one
    registered just after the commit is."""

    def live(party: str, role: AgentRole) -> Subquery:
        callbacks = AgentCallback.objects.filter(
            agent_id=OuterRef(party), role=role, disabled_at__isnull=True
        ).order_by()
        return Subquery(callbacks.values("pk")[:1])

    def signs(party: str) -> Exists:
        return Exists(SignatureRequirement.objects.filter(agent_id=OuterRef(party)))

    return (
        Session.objects.select_for_update()
        .annotate(
            buyer_callback=live("buyer_agent_id", AgentRole.BUYER),
            merchant_callback=live("merchant_agent_id", AgentRole.MERCHANT),
            buyer_signs=signs("buyer_agent_id"),
            merchant_signs=signs("merchant_agent_id"),
        )
        .filter(session_id=session_id)
    )


#: Every envelope and every timer reads its session this way: compiled once.
_locked = PreparedRead(Session, _locked_query)


def _callbacks_read(session: Session) -> tuple[int, ...] | None:
    """The ids :func:`_locked_query` read for ``session``; ``None`` for a row it did not read."""
    if not hasattr(session, "buyer_callback"):
        return None
    read = (session.buyer_callback, session.merchant_callback)
    return tuple(pk for pk in read if pk is not None)


def _receive(
    envelope: Envelope, now: datetime | None, admit: Callable[[], None]
) -> EnvelopeAnswer | TimerExpired:
    session = _locked.first(envelope.session_id)
    # The clock is read once the row is ours: an envelope that waited for the lock while a
    # timer closed the session is judged by when it was applied, and entries keep log order.
    now = now or timezone.now()
    # §12: the first check after the sender's, judged at the moment the entry will record.
    check_signature(envelope, now=now, required=_must_sign(session, envelope))
    if session is None:
        return _open(envelope, now, admit)
    negotiation = _negotiation(session)
    try:
        entries = negotiation.feed(envelope, received_at=now)
    except MessageIdSeen:
        return _answer_again(session, envelope)
    except TimerExpired as late:
        (expiry,) = _expiries([negotiation], now)
        if expiry:  # else a timer's close is already logged
            _append(session, negotiation, expiry, now=now)
        return late
    admit()
    return _append(session, negotiation, entries, now=now, envelope=envelope)


def _must_sign(session: Session | None, envelope: Envelope) -> bool | None:
    """Whether the sender must sign, as the locked read found for a party of the session;
    ``None`` (ask) for an open, or for a sender that is no party of it."""
    role = envelope.role.value
    if session is None or getattr(session, f"{role}_agent_id", None) != envelope.agent_id:
        return None
    return bool(getattr(session, f"{role}_signs"))


def _negotiation(session: Session) -> Negotiation:
    return Negotiation(load_state(json.loads(session.state)), arbiter())


def _none_run_here(agent_ids: Collection[str]) -> set[str]:
    return set()


#: Which of the agents named the arbiter runs itself; see :func:`runs_agents`.
_run_here: Callable[[Collection[str]], set[str]] = _none_run_here


def runs_agents(lookup: Callable[[Collection[str]], set[str]]) -> None:
    """Name the agents the arbiter runs itself (the dashboard's hosted agents): ``lookup``
    returns those of the ids it is given. Registered once, by the app that runs them."""
    global _run_here  # one registration per process, at start
    _run_here = lookup


def _expiries(negotiations: list[Negotiation], now: datetime) -> list[list[LogEntry]]:
    """The entries that close each session whose timer fell due by ``now`` (none for one whose
    timer did not).

    A response window that ran out on an agent the arbiter runs itself (the dashboard's hosted
    agents, :func:`runs_agents`) is the arbiter's failure: its workers or
    broker were away when the agent should have answered. That session is ended
    ``operator_terminated``, saying so, rather than closed ``response_timeout``, which would
    blame the agent's owner. One lookup for the whole batch."""
    movers = {
        index: n.state.agent_of(n.state.turn)
        for index, n in enumerate(negotiations)
        if n.state.turn is not None and n.due_reason(now) is Reason.RESPONSE_TIMEOUT
    }
    ours = _run_here(set(movers.values())) if movers else set()
    return [
        negotiation.terminate(now, _arbiter_fault(negotiation))
        if movers.get(index) in ours
        else negotiation.expire(now)
        for index, negotiation in enumerate(negotiations)
    ]


def _arbiter_fault(negotiation: Negotiation) -> str:
    state = negotiation.state
    assert state.turn is not None
    return (
        f"the {state.turn.value}'s agent, run by this arbiter, could not move within its "
        f"{state.response_window_s} s window: the fault is the arbiter's, not the "
        f"{state.turn.value}'s"
    )


def expire_session(*, session_id: str, now: datetime | None = None) -> bool:
    """Close the session if its timer fell due by ``now``; whoever calls, it closes once.

    The row lock orders this against envelopes: one arriving first moves the timer; one
    arriving after finds the session closed.
    """
    with transaction.atomic():
        session = _locked.first(session_id)
        now = now or timezone.now()  # after the lock, as in _receive
        if session is None or session.next_deadline is None or session.next_deadline > now:
            return False
        due = session.next_deadline
        negotiation = _negotiation(session)
        (entries,) = _expiries([negotiation], now)
        if not entries:
            return False
        _append(session, negotiation, entries, now=now)
    metrics.TIMER_LATENESS.observe((now - due).total_seconds())
    return True


#: Sessions a sweep closes in one transaction.
EXPIRY_BATCH = 500
#: What a session row's step changes, for the one UPDATE that writes a whole batch.
_STEP_FIELDS = [
    "phase",
    "round",
    "next_deadline",
    "head_seq",
    "head_hash",
    "state",
    "ended_at",
    "final_price",
    "close_reason",
    "last_activity_at",
    "lasted",
    "settlement",
    *VERDICT_COUNTS.values(),
]


def expire_due_sessions(*, now: datetime | None = None, limit: int = EXPIRY_BATCH) -> int:
    """Close up to ``limit`` sessions whose timer fell due by ``now``, set by set: their rows
    locked SKIP LOCKED (so sweepers running at once share the due sessions and none is closed
    twice, nor one an envelope holds), one UPDATE for the rows, one multi-row INSERT for the
    closes, each chain continued from its own head, and one wake-up for the batch. Returns
    how many closed; fewer than ``limit`` means none was left for this sweeper."""
    now = now or timezone.now()
    with transaction.atomic():
        due = list(
            Session.objects.select_for_update(skip_locked=True)
            .filter(next_deadline__lte=now)
            .order_by("next_deadline")[:limit]
        )
        steps: list[_Staged] = []
        late: list[float] = []
        negotiations = [_negotiation(session) for session in due]
        for session, negotiation, entries in zip(
            due, negotiations, _expiries(negotiations, now), strict=True
        ):
            assert session.next_deadline is not None
            if entries:
                late.append((now - session.next_deadline).total_seconds())
                steps.append(_stage(session, negotiation, entries, now=now))
        if not steps:
            return 0
        _update_rows([s.session for s in steps])
        _insert_rows([row for step in steps for row in step.rows])
        _after_commit(steps)
    for seconds in late:
        metrics.TIMER_LATENESS.observe(seconds)
    return len(steps)


def _update_rows(sessions: list[Session]) -> None:
    """Write a batch's changed rows in one UPDATE. On PostgreSQL, joined to a VALUES list:
    the ORM's bulk_update builds a CASE per column over every row, which cost two thirds of a
    sweep of 1,000 sessions; elsewhere (SQLite, the development default) it is good enough."""
    if connection.vendor != "postgresql":
        Session.objects.bulk_update(sessions, _STEP_FIELDS)
        return
    fields = [Session._meta.get_field(name) for name in ["id", *_STEP_FIELDS]]
    casts = [f"%s::{field.db_type(connection)}" for field in fields]
    row = "(" + ", ".join(casts) + ")"
    columns = [connection.ops.quote_name(field.column) for field in fields]
    assignments = ", ".join(f"{column} = v.{column}" for column in columns[1:])
    table = connection.ops.quote_name(Session._meta.db_table)
    params = [
        field.get_db_prep_save(getattr(session, field.attname), connection)
        for session in sessions
        for field in fields
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS s SET {assignments} "  # noqa: S608 - names from the model
            f"FROM (VALUES {', '.join([row] * len(sessions))}) AS v({', '.join(columns)}) "
            f"WHERE s.{columns[0]} = v.{columns[0]}",
            params,
        )


def _insert_rows(rows: list[Entry]) -> None:
    """Insert new entries in multi-row INSERTs built as :func:`_update_rows` builds its
    UPDATE: the ORM's bulk_create cost the web more to build than the database to run, and
    nothing reads the rows' ids back."""
    fields = [field for field in Entry._meta.concrete_fields if not field.primary_key]
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    table = connection.ops.quote_name(Entry._meta.db_table)
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    batch = connection.ops.bulk_batch_size(fields, rows)
    for entry in rows:
        entry.session_id = entry.session.pk  # a session inserted after its entries were made
    with connection.cursor() as cursor:
        for start in range(0, len(rows), batch):
            some = rows[start : start + batch]
            cursor.execute(
                f"INSERT INTO {table} ({columns}) "  # noqa: S608 - names from the model
                f"VALUES {', '.join([row] * len(some))}",
                [
                    field.get_db_prep_save(getattr(entry, field.attname), connection)
                    for entry in some
                    for field in fields
                ],
            )


def terminate_session(*, session_id: str, detail: str, now: datetime | None = None) -> bool:
    """Close a live session as ``operator_terminated``; ``False`` when it had already ended.

    The row lock orders this against envelopes and timers, as in :func:`expire_session`: an
    agreement or a timer that commits first wins, and the session is not closed twice.
    """
    with transaction.atomic():
        session = Session.objects.select_for_update().filter(session_id=session_id).first()
        now = now or timezone.now()
        if session is None:
            raise UnknownSession(f"no session {session_id!r}")
        negotiation = _negotiation(session)
        if negotiation.state.terminal:
            return False
        _append(session, negotiation, negotiation.terminate(now, detail), now=now)
    return True


def _open(envelope: Envelope, now: datetime, admit: Callable[[], None]) -> EnvelopeAnswer:
    negotiation, entries = Negotiation.open(envelope, received_at=now, arbiter=arbiter())
    state = negotiation.state
    if not AgentCredential.objects.filter(
        agent_id=state.merchant_agent_id, role=AgentRole.MERCHANT
    ).exists():
        raise UnknownMerchant(f"no merchant agent {state.merchant_agent_id!r} is registered")
    _refuse_self_dealing(state.buyer_agent_id, state.merchant_agent_id)
    _refuse_unoffered_currency(state.merchant_agent_id, state.currency)
    _refuse_unavailable(state.merchant_agent_id)
    session = Session(
        session_id=state.session_id,
        buyer_agent_id=state.buyer_agent_id,
        merchant_agent_id=state.merchant_agent_id,
        currency=state.currency,
        profile=state.profile,
        opened_at=now,
        item_text=catalog_text([state.item]),
    )
    admit()
    return _append(session, negotiation, entries, now=now, envelope=envelope)


def _refuse_unavailable(merchant: str) -> None:
    """A merchant agent its owner paused or archived takes no new session. Read without a
    lock: a pause committing while an open is checked lets that one open through, as if it
    had come a moment earlier; its session, like every running one, goes on."""
    state = (
        MerchantAvailability.objects.filter(merchant_agent_id=merchant)
        .values_list("state", flat=True)
        .first()
    )
    if state == Availability.PAUSED:
        raise MerchantPaused(f"merchant agent {merchant!r} is paused by its owner; try later")
    if state == Availability.ARCHIVED:
        raise MerchantArchived(f"merchant agent {merchant!r} is archived by its owner")


def _refuse_self_dealing(buyer: str, merchant: str) -> None:
    """A session needs two parties. One agent in both seats, or two agents of one owner, would
    agree with itself, and the arbiter would sign that as a negotiation."""
    if buyer == merchant:
        raise SelfDealing(
            f"buyer {buyer!r} and merchant {merchant!r} are one agent: a session needs two parties"
        )
    buyer_owners = (
        AgentCredential.objects.filter(agent_id=buyer, role=AgentRole.BUYER)
        .exclude(owner="")
        .values("owner")
    )
    if AgentCredential.objects.filter(
        agent_id=merchant, role=AgentRole.MERCHANT, owner__in=buyer_owners
    ).exists():
        # The detail never names the owner: the wire knows agents, not who runs them.
        raise SelfDealing(
            f"buyer {buyer!r} and merchant {merchant!r} were issued to one owner: "
            "a session needs two parties"
        )


def _refuse_unoffered_currency(merchant: str, currency: str) -> None:
    """A listed merchant agent says which currencies it negotiates in; an open in another
    could only end without a deal. An unlisted agent, or one listing none, takes any."""
    offered = (
        Listing.objects.filter(merchant_agent_id=merchant, listed=True)
        .values_list("currencies", flat=True)
        .first()
    )
    if offered and currency not in offered:
        raise CurrencyNotOffered(
            f"merchant agent {merchant!r} negotiates in {', '.join(offered)}; not {currency}"
        )


def _answer_again(session: Session, envelope: Envelope) -> EnvelopeAnswer:
    """The first answer again for a retried envelope; 409 for a reused ``message_id``."""
    first = (
        Entry.objects.filter(session=session, message_id=envelope.message_id)
        .only("body_digest", "answer", "sender_agent_id")
        .first()
    )
    if (
        first is None
        or first.body_digest != _digest(envelope)
        or first.sender_agent_id != envelope.agent_id
    ):
        raise MessageIdReused(f"message_id {envelope.message_id!r} was used with another body")
    return EnvelopeAnswer(200, first.answer)


def _digest(envelope: Envelope) -> str:
    """Taken without the signature: an envelope signed again (ES256 differs each time) and
    sent again is a replay, not a reuse of its message id."""
    return tagged_sha256(signing_input(envelope.body))


def _append(
    session: Session,
    negotiation: Negotiation,
    entries: list[LogEntry],
    *,
    now: datetime,
    envelope: Envelope | None = None,
) -> EnvelopeAnswer:
    """Store ``entries`` and the state they lead to; the party's entry keeps its answer."""
    staged = _stage(session, negotiation, entries, now=now, envelope=envelope)
    # A new row is inserted whole; an existing one writes only what a step changes, in the
    # sweep's UPDATE, which costs less to build than the ORM's save of the same fields.
    if session._state.adding:
        session.save()
    else:
        _update_rows([session])
    _insert_rows(staged.rows)
    _after_commit([staged])
    return EnvelopeAnswer(201, staged.answer)


@dataclass(frozen=True, slots=True)
class _Staged:
    """One session's step, ready to store: its row changed in memory, its entries' rows, and
    what is announced once they commit."""

    session: Session
    rows: list[Entry]
    entries: list[LogEntry]
    entries_json: list[JsonObject]
    answer: str
    now: datetime
    #: Whether a timer task is to be armed once the step commits.
    arm: bool


def _stage(
    session: Session,
    negotiation: Negotiation,
    entries: list[LogEntry],
    *,
    now: datetime,
    envelope: Envelope | None = None,
) -> _Staged:
    state = negotiation.state
    as_json = [e.as_json() for e in entries]
    answer = ""
    if envelope is not None:
        reveals = json.loads(session.reveals) if session.pk else {}
        answer = json.dumps(
            {
                "entry": as_json[0],
                "arbiter": as_json[1:],
                "session": session_summary(state, reveals),
            },
            separators=(",", ":"),
        )
    # A session's next deadline only ever moves later, so the task armed when its first one
    # was set still fires first, and re-arms itself for the new one (arbiter_app.timers):
    # only a session that had no deadline needs a task now, not every envelope a publish.
    # With a response window past the timer horizon no task may be pending (queue.enqueue leaves
    # far timers to the sweep) while the session's deadline draws near: those arm every time.
    first_deadline = session.next_deadline is None
    long_window = state.response_window_s > settings.OANP_TIMER_HORIZON_SECONDS
    session.phase = state.phase.value
    session.round = state.round
    session.next_deadline = negotiation.next_deadline()
    session.head_seq, session.head_hash = state.head.seq, state.head.entry_hash
    _count_verdicts(session, entries)
    session.state = json.dumps(dump_state(state), separators=(",", ":"))
    session.last_activity_at = now
    session.settlement = settlement_of(state)
    if state.terminal and session.ended_at is None:
        session.ended_at = now
        session.lasted = now - session.opened_at
        session.final_price = state.final_price
        session.close_reason = "" if state.close_reason is None else state.close_reason.value
    rows = [_row(session, entry) for entry in entries]
    if envelope is not None:
        rows[0].body_digest, rows[0].answer = _digest(envelope), answer
    arm = (first_deadline or long_window) and session.next_deadline is not None
    return _Staged(session, rows, entries, as_json, answer, now, arm)


def _after_commit(steps: list[_Staged]) -> None:
    """Hand off agreements now, in the transaction; once it commits, announce the entries, the
    whole batch in one wake-up, and the deadlines whose timers need a task."""
    for step in steps:
        open_handoff(step.session, step.entries)
    # robust: the commit stands whatever a listener or the broker does afterwards.
    transaction.on_commit(
        partial(
            events.announce_all,
            [
                events.Announcement(
                    session_id=step.session.session_id,
                    buyer_agent_id=step.session.buyer_agent_id,
                    merchant_agent_id=step.session.merchant_agent_id,
                    entries=step.entries_json,
                    callbacks=_callbacks_read(step.session),
                )
                for step in steps
            ],
        ),
        robust=True,
    )
    deadlines = [
        (step.session.session_id, due)
        for step in steps
        if step.arm and (due := step.session.next_deadline) is not None
    ]
    if deadlines:
        transaction.on_commit(partial(events.announce_deadlines, deadlines), robust=True)


def _count_verdicts(session: Session, entries: list[LogEntry]) -> None:
    for entry in entries:
        if entry.type == MessageType.ROUND_VERDICT.value:
            payload = entry.envelope["payload"]
            assert isinstance(payload, dict)
            column = VERDICT_COUNTS[str(payload["status"])]
            setattr(session, column, getattr(session, column) + 1)


def _row(session: Session, entry: LogEntry) -> Entry:
    envelope = entry.envelope
    sender = envelope["sender"]
    assert isinstance(sender, dict)
    return Entry(
        session=session,
        seq=entry.seq,
        message_id=str(envelope["message_id"]),
        type=entry.type,
        sender_role=str(sender["role"]),
        sender_agent_id=str(sender["agent_id"]),
        received_at=entry.received_at,
        envelope=canonical_bytes(envelope).decode(),
        prev_hash=entry.prev_hash,
        entry_hash=entry.entry_hash,
    )
