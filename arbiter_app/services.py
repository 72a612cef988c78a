"""Every write to the arbiter's records. Views, commands and tasks call these; nothing else
changes a session, an entry, a credential or a key.

Each service runs in one transaction, locks the session row it changes, and announces what it
committed through :mod:`arbiter_app.events` only after the commit.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import partial

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from arbiter_app import events, metrics, outbound, timers
from arbiter_app.handoff import open_handoff
from arbiter_app.handoff import send as send_handoff
from arbiter_app.handoff import send_test as send_test_request
from arbiter_app.keys import ActiveSigner
from arbiter_app.models import (
    AgentCallback,
    AgentCredential,
    DeliveryAttempt,
    Entry,
    Handoff,
    HandoffState,
    HandoffTarget,
    Role,
    Session,
)
from arbiter_app.summary import session_summary
from oanp.canonical import JsonObject, canonical_bytes, tagged_sha256
from oanp.commitments import Role as CommitRole
from oanp.commitments import is_weak, parse_reveal, verify_reveal
from oanp.envelope import IDENTIFIER_RULE, Envelope, MessageType, check_sender, is_identifier
from oanp.envelope import Role as OanpRole
from oanp.errors import (
    AlreadyRevealed,
    MessageIdReused,
    NotAParty,
    ProtocolError,
    RevealTooEarly,
    SessionExists,
    SessionTerminal,
    TimerExpired,
    UnknownSession,
)
from oanp.log import Entry as LogEntry
from oanp.machine import Arbiter, Negotiation
from oanp.profiles import Reason, VerdictStatus
from oanp.snapshot import dump_state, load_state


class SenderMismatch(ProtocolError):
    code = "sender_mismatch"
    status = 403
    title = "The API key does not speak for this sender"


class UnknownMerchant(ProtocolError):
    code = "unknown_merchant"
    status = 422
    title = "No merchant agent with this id is registered"


TIMER_REASONS = frozenset({Reason.RESPONSE_TIMEOUT.value, Reason.DEADLINE_EXPIRED.value})


@dataclass(frozen=True, slots=True)
class Outcome:
    """The answer to a submitted envelope: 201 when it was applied, 200 for a replay."""

    status: int
    body: str


def arbiter() -> Arbiter:
    return Arbiter(
        settings.OANP_ARBITER_ID,
        ActiveSigner(),
        f"{settings.OANP_PUBLIC_URL}/.well-known/jwks.json",
    )


# Sessions ------------------------------------------------------------------------------------


def receive_envelope(
    *,
    agent: AgentCredential,
    envelope: Envelope,
    now: datetime | None = None,
    admit: Callable[[], None] = lambda: None,
) -> Outcome:
    """Apply one party envelope, in PROTOCOL section 7's order of checks.

    Raises a :class:`~oanp.errors.ProtocolError` and changes nothing when it is refused, except
    that an envelope arriving after its session's timer fell due first lets the timer close
    the session, then is refused with ``timer_expired``. ``admit`` is called when every check
    passed and the envelope is about to be applied (a replay is not): the last refusal,
    section 7's 429, is its to raise.
    """
    refused = partial(metrics.count_envelope, envelope.type.value, "refused")
    if envelope.agent_id != agent.agent_id or envelope.role.value != agent.role:
        refused()
        raise SenderMismatch(
            f"this key speaks for {agent.role} {agent.agent_id!r}, not "
            f"{envelope.role.value} {envelope.agent_id!r}"
        )
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


def _receive(
    envelope: Envelope, now: datetime | None, admit: Callable[[], None]
) -> Outcome | TimerExpired:
    session = Session.objects.select_for_update().filter(session_id=envelope.session_id).first()
    # The clock is read once the row is ours: an envelope that waited for the lock while a
    # timer closed the session is judged by when it was applied, and entries keep log order.
    now = now or timezone.now()
    if session is None:
        return _open(envelope, now, admit)
    negotiation = _negotiation(session)
    state = negotiation.state
    if envelope.type is MessageType.SESSION_OPEN:
        if envelope.agent_id != state.buyer_agent_id:
            raise SessionExists(f"session {state.session_id!r} exists")
    elif not state.party_role(envelope.agent_id, envelope.role):
        raise NotAParty(f"{envelope.agent_id!r} is not this session's {envelope.role.value}")
    check_sender(envelope)
    # The state knows every message_id the session has seen: only those need the log.
    if envelope.message_id in state.message_ids:
        replay = _replay(session, envelope)
        if replay is not None:
            return replay
    if envelope.type is MessageType.SESSION_OPEN:
        raise SessionExists(f"session {state.session_id!r} exists")
    try:
        entries = negotiation.feed(envelope, received_at=now)
    except TimerExpired as late:
        _append(session, negotiation, negotiation.expire(now), now=now)
        return late
    except SessionTerminal:
        # Whether the timer's task or this envelope took the lock first is chance: a move
        # that came after its timer closed the session gets the same answer either way.
        if session.close_reason in TIMER_REASONS:
            raise TimerExpired(
                f"the session's timer closed it ({session.close_reason}) before this envelope"
            ) from None
        raise
    admit()
    return _append(session, negotiation, entries, now=now, envelope=envelope)


def _negotiation(session: Session) -> Negotiation:
    return Negotiation(load_state(json.loads(session.state)), arbiter())


def expire_session(*, session_id: str, now: datetime | None = None) -> bool:
    """Close the session if its timer fell due by ``now``; whoever calls, it closes once.

    The row lock orders this against envelopes: one arriving first moves the timer; one
    arriving after finds the session closed.
    """
    with transaction.atomic():
        session = Session.objects.select_for_update().filter(session_id=session_id).first()
        now = now or timezone.now()  # after the lock, as in _receive
        if session is None or session.next_deadline is None or session.next_deadline > now:
            return False
        due = session.next_deadline
        negotiation = _negotiation(session)
        entries = negotiation.expire(now)
        if not entries:
            return False
        _append(session, negotiation, entries, now=now)
    metrics.TIMER_LATENESS.observe((now - due).total_seconds())
    return True


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


def _open(envelope: Envelope, now: datetime, admit: Callable[[], None]) -> Outcome:
    if envelope.type is not MessageType.SESSION_OPEN:
        # Section 7 answers 404 before 422: only an open may name a session that does not exist,
        # so any other type (a buyer's round.verdict included) is about an unknown session.
        raise UnknownSession(f"no session {envelope.session_id!r}")
    check_sender(envelope)
    negotiation, entries = Negotiation.open(envelope, received_at=now, arbiter=arbiter())
    state = negotiation.state
    if not AgentCredential.objects.filter(
        agent_id=state.merchant_agent_id, role=Role.MERCHANT
    ).exists():
        raise UnknownMerchant(f"no merchant agent {state.merchant_agent_id!r} is registered")
    session = Session(
        session_id=state.session_id,
        buyer_agent_id=state.buyer_agent_id,
        merchant_agent_id=state.merchant_agent_id,
        currency=state.currency,
        profile=state.profile,
        opened_at=now,
    )
    admit()
    return _append(session, negotiation, entries, now=now, envelope=envelope)


def _replay(session: Session, envelope: Envelope) -> Outcome | None:
    """The first answer again for a retried envelope; 409 for a reused ``message_id``."""
    first = (
        Entry.objects.filter(session=session, message_id=envelope.message_id)
        .only("body_digest", "answer", "sender_agent_id")
        .first()
    )
    if first is None:
        return None
    if first.body_digest != _digest(envelope) or first.sender_agent_id != envelope.agent_id:
        raise MessageIdReused(f"message_id {envelope.message_id!r} was used with another body")
    return Outcome(200, first.answer)


def _digest(envelope: Envelope) -> str:
    return tagged_sha256(envelope.canonical())


def _append(
    session: Session,
    negotiation: Negotiation,
    entries: list[LogEntry],
    *,
    now: datetime,
    envelope: Envelope | None = None,
) -> Outcome:
    """Store ``entries`` and the state they lead to; the party's entry keeps its answer."""
    state = negotiation.state
    reveals = json.loads(session.reveals) if session.pk else {}
    as_json = [e.as_json() for e in entries]
    answer = ""
    if envelope is not None:
        answer = json.dumps(
            {
                "entry": as_json[0],
                "arbiter": as_json[1:],
                "session": session_summary(state, reveals),
            },
            separators=(",", ":"),
        )
    session.phase = state.phase.value
    session.round = state.round
    session.next_deadline = negotiation.next_deadline()
    session.head_seq, session.head_hash = state.head.seq, state.head.entry_hash
    _count_verdicts(session, entries)
    session.state = json.dumps(dump_state(state), separators=(",", ":"))
    if state.terminal and session.ended_at is None:
        session.ended_at = now
        session.final_price = state.final_price
        session.close_reason = "" if state.close_reason is None else state.close_reason.value
    session.save()
    rows = [_row(session, entry) for entry in entries]
    if envelope is not None:
        rows[0].body_digest, rows[0].answer = _digest(envelope), answer
    Entry.objects.bulk_create(rows)
    open_handoff(session, entries)
    # robust: the commit stands whatever a listener or the broker does afterwards.
    transaction.on_commit(
        partial(
            events.announce,
            session_id=session.session_id,
            buyer_agent_id=session.buyer_agent_id,
            merchant_agent_id=session.merchant_agent_id,
            entries=as_json,
        ),
        robust=True,
    )
    if session.next_deadline is not None:
        transaction.on_commit(
            partial(timers.arm, session_id=session.session_id, due=session.next_deadline, now=now),
            robust=True,
        )
    return Outcome(201, answer)


#: The session column counting each verdict status.
VERDICT_COUNTS = {
    VerdictStatus.FAIR.value: "fair_rounds",
    VerdictStatus.FAIR_BUT_STUCK.value: "stuck_rounds",
    VerdictStatus.VIOLATED.value: "violated_rounds",
}


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


# Credentials ---------------------------------------------------------------------------------

KEY_PREFIX = "oanp"


@dataclass(frozen=True, slots=True)
class IssuedKey:
    credential: AgentCredential
    #: The whole key. It is shown this once; only its SHA-256 is stored.
    api_key: str


def key_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def issue_credential(*, agent_id: str, role: str, label: str = "") -> IssuedKey:
    """A new API key for ``agent_id`` speaking as ``role``; ``ValueError`` for a bad id or role."""
    if not is_identifier(agent_id):
        raise ValueError(f"agent id {agent_id!r} is not {IDENTIFIER_RULE}")
    if role not in Role.values:
        raise ValueError(f"role {role!r} is not one of {', '.join(Role.values)}")
    prefix = secrets.token_hex(6)
    api_key = f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(24)}"
    credential = AgentCredential.objects.create(
        agent_id=agent_id, role=role, prefix=prefix, digest=key_digest(api_key), label=label
    )
    return IssuedKey(credential, api_key)


def revoke_credential(*, credential: AgentCredential) -> None:
    revoke_credentials(agent_id=credential.agent_id, prefix=credential.prefix)


def revoke_credentials(*, agent_id: str, prefix: str | None = None) -> list[AgentCredential]:
    """Revoke the agent's live key with ``prefix``, or every live key of the agent when
    ``prefix`` is ``None``; the keys revoked now. Every stream opened with one of them ends
    within seconds (:mod:`arbiter_app.streams`)."""
    with transaction.atomic():
        live = AgentCredential.objects.select_for_update().filter(
            agent_id=agent_id, revoked_at__isnull=True
        )
        if prefix is not None:
            live = live.filter(prefix=prefix)
        revoked = list(live.order_by("created_at", "pk"))
        now = timezone.now()
        AgentCredential.objects.filter(pk__in=[c.pk for c in revoked]).update(revoked_at=now)
        for credential in revoked:
            credential.revoked_at = now
        prefixes = [c.prefix for c in revoked]
        if prefixes:
            transaction.on_commit(partial(events.announce_revocation, prefixes=prefixes))
    return revoked


# Outbound deliveries -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Configured:
    """A handoff target or a callback, with the secret its deliveries are signed with."""

    target: HandoffTarget | AgentCallback
    #: ``whsec_…``: shown this once, kept only encrypted.
    secret: str


def configure_handoff(
    *, merchant_agent_id: str, endpoint: str, api_key: str, webhook_secret: str | None = None
) -> Configured:
    """Where ``merchant_agent_id``'s agreements are handed off; replaces an earlier target and
    enables it again. ``ValueError`` for a bad id, key, secret or endpoint (SSRF included)."""
    if not is_identifier(merchant_agent_id):
        raise ValueError(f"agent id {merchant_agent_id!r} is not {IDENTIFIER_RULE}")
    if not api_key.strip():
        raise ValueError("the merchant's ACP API key is required")
    _check_url(endpoint)
    if webhook_secret is None:
        webhook_secret = outbound.new_webhook_secret()
    outbound.check_webhook_secret(webhook_secret)
    target, _ = HandoffTarget.objects.update_or_create(
        merchant_agent_id=merchant_agent_id,
        defaults={
            "endpoint": endpoint,
            "api_key_encrypted": outbound.seal(api_key.strip()),
            "webhook_secret_encrypted": outbound.seal(webhook_secret),
            "disabled_at": None,
            "disabled_reason": "",
        },
    )
    return Configured(target, webhook_secret)


def _check_url(url: str) -> None:
    if len(url) > 2000:
        raise outbound.TargetNotAllowed("the URL is longer than 2000 characters")
    outbound.check_target(url)


def redeliver_handoff(*, handoff: Handoff) -> None:
    """Hand the agreement off again from a fresh retry budget: after a failure, a disabled
    target configured anew, or to read the merchant's checkout again (the Idempotency-Key is
    the same, so the merchant answers with the checkout it already made)."""
    with transaction.atomic():
        locked = Handoff.objects.select_for_update().select_related("target").get(pk=handoff.pk)
        if locked.target.disabled_at is not None:
            raise ValueError(
                f"the handoff target of {locked.target.merchant_agent_id!r} is disabled "
                f"({locked.target.disabled_reason}); configure it again first"
            )
        now = timezone.now()
        # An attempt past its lease lost its worker: closed as abandoned, it blocks nothing.
        outbound.abandon_dead(now, handoffs=[locked.pk])
        if DeliveryAttempt.objects.filter(outbound.running(now), handoff=locked).exists():
            raise ValueError("an attempt is running; wait for its answer")
        locked.state, locked.attempts = HandoffState.PENDING, 0
        locked.next_attempt_at = now
        locked.flagged, locked.flag_reason = False, ""
        locked.delivered_at, locked.checkout_id = None, ""
        locked.save()
        transaction.on_commit(partial(send_handoff, locked.pk), robust=True)


def send_test_handoff(*, merchant_agent_id: str) -> outbound.Answer:
    """One signed test request to the merchant's handoff target, as its handoffs would go;
    ``ValueError`` when it has none. A disabled target is tried too: the test is how a
    merchant learns it answers again before configuring it anew."""
    target = HandoffTarget.objects.filter(merchant_agent_id=merchant_agent_id).first()
    if target is None:
        raise ValueError(f"{merchant_agent_id!r} has no handoff target")
    return send_test_request(target)


def register_callback(*, agent: AgentCredential, url: str) -> Configured:
    """Where ``agent`` receives its sessions' entries, under a fresh secret. Registering again
    replaces the URL and the secret and enables a disabled callback; entries already delivered
    are not sent again."""
    _check_url(url)
    secret = outbound.new_webhook_secret()
    with transaction.atomic():
        callback, created = AgentCallback.objects.update_or_create(
            agent_id=agent.agent_id,
            role=agent.role,
            defaults={
                "url": url,
                "secret_encrypted": outbound.seal(secret),
                "disabled_at": None,
                "disabled_reason": "",
            },
        )
        if not created:
            # A fresh retry budget for whatever was waiting; the sweep resumes it.
            callback.cursors.update(attempts=0)
    return Configured(callback, secret)


def remove_callback(*, agent: AgentCredential) -> None:
    AgentCallback.objects.filter(agent_id=agent.agent_id, role=agent.role).delete()


# Reveals -------------------------------------------------------------------------------------

_PRICED = (
    MessageType.OFFER_PROPOSE.value,
    MessageType.OFFER_COUNTER.value,
    MessageType.OFFER_ACCEPT.value,
)


def reveal_constraints(
    *,
    session: Session,
    agent: AgentCredential,
    data: bytes,
    admit: Callable[[], None] = lambda: None,
) -> JsonObject:
    """Check a party's reveal against its commitment and its own prices, then keep it.

    A reveal that opens the commitment is kept even when it shows the party broke its own
    limit: that is evidence, reported in ``breaches``. ``admit`` is called once every check
    passed, before the reveal is kept.
    """
    reveal = parse_reveal(data)
    role = agent.role
    party: CommitRole = "buyer" if role == Role.BUYER else "merchant"
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        state = load_state(json.loads(locked.state))
        if not state.terminal:
            raise RevealTooEarly(f"session is {state.phase.value}")
        reveals = json.loads(locked.reveals)
        if role in reveals:
            raise AlreadyRevealed(f"the {role} has already revealed")
        commitment = state.commitment_of(OanpRole(role))
        assert commitment is not None  # a terminal session has both, or only a buyer
        priced = Entry.objects.filter(session=locked, sender_role=role, type__in=_PRICED)
        prices = [
            (int(body["payload"]["round"]), Decimal(str(body["payload"]["price"])))
            for body in (json.loads(e.envelope) for e in priced.order_by("seq"))
        ]
        breaches = verify_reveal(
            commitment,
            role=party,
            constraints=reveal.constraints,
            salt=reveal.salt,
            item=state.item,
            max_rounds=state.max_rounds,
            prices=prices,
        )
        answer: JsonObject = {
            "session_id": state.session_id,
            "role": role,
            "opens": True,
            "weak_commitment": is_weak(commitment),
            "breaches": [
                b.describe("buyer" if role == Role.BUYER else "merchant") for b in breaches
            ],
        }
        admit()
        reveals[role] = {
            "constraints": reveal.constraints,
            "salt": reveal.salt,
            "revealed_at": timezone.now().isoformat(),
            "breaches": answer["breaches"],
        }
        locked.reveals = json.dumps(reveals)
        locked.save(update_fields=["reveals"])
    return answer
