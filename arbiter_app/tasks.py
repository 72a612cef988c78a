"""Celery tasks: thin, each calls one service."""

from __future__ import annotations

from celery import Task, shared_task
from django.utils import timezone

from arbiter_app import heartbeats, integrity, selectors, services, timers
from arbiter_app.deliveries import callbacks, handoff, outbound


@shared_task
def expire_session(session_id: str) -> bool:
    """Close the session if its timer fell due; if the timer moved since this task was armed
    (a move started a new response window), arm the task for the new due time instead."""
    if services.expire_session(session_id=session_id):
        return True
    due = selectors.next_deadline_of(session_id)
    if due is not None:
        timers.arm(session_id=session_id, due=due, now=timezone.now())
    return False


@shared_task
def sweep_timers() -> int:
    """Close every session whose timer fell due, however its own task fared: batch after
    batch, until one comes back short (the rest are due later, or another sweeper's)."""
    closed = 0
    while True:
        batch = services.expire_due_sessions()
        closed += batch
        if batch < services.EXPIRY_BATCH:
            return closed


@shared_task
def maintain_signing_keys() -> str | None:
    rotated, _ = services.maintain_signing_keys()
    return None if rotated is None else rotated.kid


@shared_task
def deliver_handoff(handoff_id: int) -> bool:
    return handoff.deliver(handoff_id)


@shared_task
def deliver_callback(cursor_id: int) -> int:
    return callbacks.deliver(cursor_id)


@shared_task
def sweep_deliveries() -> int:
    """Close the attempts whose worker died, then make every delivery attempt that fell due,
    however its own task fared."""
    now = timezone.now()
    outbound.abandon_dead(
        now,
        handoffs=selectors.lapsed_handoffs(now),
        cursors=selectors.lapsed_callback_cursors(now),
    )
    handoffs = sum(handoff.deliver(pk) for pk in selectors.due_handoffs())
    return handoffs + sum(callbacks.deliver(pk) for pk in selectors.due_callback_cursors())


@shared_task(bind=True)
def heartbeat(self: Task) -> None:
    """Sent by beat every OANP_HEARTBEAT_SECONDS; running it shows the queue hands work over."""
    heartbeats.answered(
        hostname=self.request.hostname or "", sent_at=self.request.get(heartbeats.SENT_AT_HEADER)
    )


@shared_task
def check_integrity() -> int:
    """Sent by beat every OANP_INTEGRITY_CHECK_SECONDS: session heads and hash chains against
    their entries; returns the mismatches found."""
    return len(integrity.check().findings)
