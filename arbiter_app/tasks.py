"""Celery tasks: thin, each calls one service."""

from __future__ import annotations

from celery import Task, shared_task
from django.utils import timezone

from arbiter_app import heartbeats, integrity, selectors, services, timers
from arbiter_app.deliveries import callbacks, handoff, outbound


@shared_task
def expire_session(session_id: str) -> int:
    """Close every session whose timer fell due, this one among them, and return how many.

    Deadlines come in crowds (sessions opened together by one buyer's burst), and each due
    session's own task, run one by one, would close the crowd at the pool's pace: the first task
    to fire closes the whole crowd in batches and the rest find nothing left. If this session's
    timer moved since the task was armed (a move started a new response window), the task is
    armed again for the new due time."""
    closed = sweep_timers()
    if services.expire_session(session_id=session_id):
        return closed + 1  # an envelope held its row while the batches skipped it
    due = selectors.next_deadline_of(session_id)
    if due is not None:
        timers.arm(session_id=session_id, due=due)
    return closed


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
def rearm_timers() -> int:
    """Arm a task for every timer due within the horizon: sent each time a worker of the timers
    queue connects to the broker, since the tasks it held died with it or with the broker."""
    return timers.rearm(now=timezone.now())


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
    """Close the attempts whose worker died, then hand every delivery that fell due to a task
    of its own, however its first task fared; how many were handed. None is made here, so a
    slow target holds the threads the bound per target gives it, never the sweep. One the
    broker does not take stays due for the next sweep."""
    now = timezone.now()
    outbound.abandon_dead(
        now,
        handoffs=selectors.lapsed_handoffs(now),
        cursors=selectors.lapsed_callback_cursors(now),
    )
    handoffs = sum(handoff.send(pk) for pk in selectors.due_handoffs(now))
    return handoffs + sum(callbacks.send(pk) for pk in selectors.due_callback_cursors(now))


@shared_task(bind=True)
def heartbeat(self: Task) -> None:
    """Sent by beat every OANP_HEARTBEAT_SECONDS; running it shows the queue hands work over."""
    heartbeats.answered(
        hostname=self.request.hostname or "",
        sent_at=self.request.get(heartbeats.SENT_AT_HEADER),
        queue=(self.request.delivery_info or {}).get("routing_key"),
    )


@shared_task
def check_integrity() -> int:
    """Sent by beat every OANP_INTEGRITY_CHECK_SECONDS: session heads and hash chains against
    their entries; returns the mismatches found."""
    return len(integrity.check().findings)
