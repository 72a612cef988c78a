"""Agent callbacks: every new entry of an agent's sessions, POSTed to the URL it registered.

Each (callback, session) pair has a cursor; entries go out one at a time in seq order, each
signed like a handoff and retried by the same rules. A permanent refusal skips the entry (the
attempt stays on record); 410, or a day of failures, disables the callback until the agent
registers it again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from arbiter_app.deliveries import bound, outbound
from arbiter_app.deliveries.outbound import Answer, AttemptOutcome
from arbiter_app.events import Announcement
from arbiter_app.models import (
    AgentCallback,
    AgentRole,
    CallbackCursor,
    DeliveryAttempt,
    Entry,
    Session,
)
from arbiter_app.queue import DELIVER_CALLBACK, enqueue
from arbiter_app.selectors import entry_text

log = logging.getLogger(__name__)


def on_batch_committed(sender: Any, *, announcements: Sequence[Announcement], **_: Any) -> None:
    """Receiver of :data:`arbiter_app.events.batch_committed`: wake the deliveries of the
    parties' callbacks. The parties' callbacks come with the announcement where the step read
    them under its lock (an envelope's); the others' are one query for the whole batch. Nothing
    more is read when no party has one."""
    try:
        parties = [a for a in announcements if a.entries]
        by_session: dict[str, list[int]] = {}
        for a in parties:
            if a.callbacks:
                by_session.setdefault(a.session_id, []).extend(a.callbacks)
        for session_id, found in _looked_up([a for a in parties if a.callbacks is None]).items():
            by_session.setdefault(session_id, []).extend(found)
        if not by_session:
            return
        sessions = dict(
            Session.objects.filter(session_id__in=by_session).values_list("session_id", "pk")
        )
        # The cursors are written before any task is sent: if the broker is away, the sweep
        # still finds the sessions behind and delivers them.
        CallbackCursor.objects.bulk_create(
            [
                CallbackCursor(callback_id=pk, session_id=sessions[session_id])
                for session_id, pks in by_session.items()
                for pk in pks
            ],
            ignore_conflicts=True,
        )
        cursors = CallbackCursor.objects.filter(
            callback_id__in={pk for pks in by_session.values() for pk in pks},
            session_id__in=sessions.values(),
        )
        for cursor_id in cursors.values_list("pk", flat=True):
            send(cursor_id)
    except Exception:  # other listeners of the signal, and the streams, must still hear it
        log.exception("could not wake the callbacks of %d session(s)", len(announcements))


def _looked_up(parties: Sequence[Announcement]) -> dict[str, list[int]]:
    """The live callbacks of each session's parties, by session: one query for them all."""
    if not parties:
        return {}
    wanted = Q()
    for a in parties:
        wanted |= Q(agent_id=a.buyer_agent_id, role=AgentRole.BUYER)
        wanted |= Q(agent_id=a.merchant_agent_id, role=AgentRole.MERCHANT)
    live = AgentCallback.objects.filter(wanted, disabled_at__isnull=True)
    callbacks = {(c.agent_id, c.role): c.pk for c in live.only("pk", "agent_id", "role")}
    by_session: dict[str, list[int]] = {}
    for a in parties:
        owners = [(a.buyer_agent_id, AgentRole.BUYER), (a.merchant_agent_id, AgentRole.MERCHANT)]
        found = [callbacks[o] for o in owners if o in callbacks]
        if found:
            by_session.setdefault(a.session_id, []).extend(found)
    return by_session


def send(cursor_id: int, countdown: float | None = None) -> bool:
    """Ask the worker to deliver what the cursor is behind by; whether it was asked. When the
    broker is away, the cursor stays due, and the sweep asks again."""
    return enqueue(
        DELIVER_CALLBACK,
        args=[cursor_id],
        countdown=countdown,
        about=f"callback cursor {cursor_id}; the sweep will deliver it",
    )


def deliver(cursor_id: int) -> int:
    """Send the session's entries the callback has not had, in order, until it is caught up or
    must wait (for a retry, or for room at its target); how many POSTs were made."""
    posts = 0
    while True:
        claimed = _claim(cursor_id)
        if claimed is None:
            return posts
        attempt, callback, entry = claimed
        body = entry_text(entry).encode()
        answer = outbound.deliver(
            url=callback.url,
            body=body,
            secret=outbound.unseal(callback.secret_encrypted),
            message_id=f"oanp-{entry.session.session_id}-{entry.seq}",
            headers={},
        )
        outbound.record(attempt, answer, url=callback.url, body=body)
        posts += 1
        if not _settle(cursor_id, attempt, answer):
            return posts


def _claim(cursor_id: int) -> tuple[DeliveryAttempt, AgentCallback, Entry] | None:
    """Start the attempt at the next entry, unless another worker holds it, a retry is not due
    yet, the callback is disabled, or there is nothing new; or defer it, its retry budget
    untouched, when the callback's target already has as many attempts in flight as it may."""
    now = timezone.now()
    with transaction.atomic():
        cursor = (
            CallbackCursor.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("callback")
            .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now), pk=cursor_id)
            .first()
        )
        if cursor is None:
            return None
        if cursor.next_attempt_at is not None:
            # A lease ran out (or a retry fell due): an attempt still unanswered lost its
            # worker, and says so. A cursor free of both holds no attempt at all.
            outbound.abandon_dead(now, cursors=[cursor.pk])
        if cursor.callback.disabled_at is not None:
            return None
        entry = (
            Entry.objects.select_related("session")
            .filter(session_id=cursor.session_id, seq=cursor.delivered_seq + 1)
            .first()
        )
        if entry is None:
            return None
        origin = bound.origin_of(cursor.callback.url)
        if not bound.has_room(origin, now):
            bound.defer(cursor, now=now, send=send)
            return None
        cursor.attempts += 1
        cursor.next_attempt_at = outbound.lease_until(now)
        cursor.save(update_fields=["attempts", "next_attempt_at"])
        attempt = DeliveryAttempt.objects.create(
            cursor=cursor,
            seq=entry.seq,
            number=outbound.next_number(cursor.attempt_log.filter(seq=entry.seq)),
            started_at=now,
            origin=origin,
        )
    return attempt, cursor.callback, entry


def _settle(cursor_id: int, attempt: DeliveryAttempt, answer: Answer) -> bool:
    """Move the cursor by the answer; ``True`` when the next entry may go out at once."""
    now = timezone.now()
    with transaction.atomic():
        cursor = CallbackCursor.objects.select_for_update().get(pk=cursor_id)
        if cursor.delivered_seq + 1 != attempt.seq or not outbound.is_latest(
            cursor.attempts, cursor.attempt_log.filter(seq=attempt.seq), attempt.number
        ):
            return False  # the callback was registered again meanwhile
        cursor.next_attempt_at = None
        if answer.outcome in (AttemptOutcome.DELIVERED, AttemptOutcome.REJECTED):
            cursor.delivered_seq, cursor.attempts = cursor.delivered_seq + 1, 0
            cursor.save()
            return True
        wait = None
        if answer.outcome is AttemptOutcome.RETRY:
            wait = outbound.retry_wait(cursor.attempts, answer.retry_after)
        if wait is None:
            reason = answer.error or f"the callback answered {answer.status_code}"
            if answer.outcome is AttemptOutcome.RETRY:
                reason = f"no delivery after {cursor.attempts} attempts: {reason}"
            AgentCallback.objects.filter(pk=cursor.callback_id, disabled_at__isnull=True).update(
                disabled_at=now, disabled_reason=reason[:300]
            )
        else:
            cursor.next_attempt_at = now + timedelta(seconds=wait)
            transaction.on_commit(partial(send, cursor.pk, countdown=wait), robust=True)
        cursor.save()
        return False
