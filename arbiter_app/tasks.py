"""Celery tasks, thin: each hands its work to the module that owns it (a service, the timers,
the deliveries); the arbiter's own modules send them by name (:mod:`arbiter_app.queue`)."""

from __future__ import annotations

from celery import Task, shared_task
from django.utils import timezone

from arbiter_app import heartbeats, integrity, queue, selectors, services, timers
from arbiter_app.deliveries import callbacks, handoff, outbound
from arbiter_app.tlog import integrator, witnesses


@shared_task(name=queue.EXPIRE_SESSION)
def expire_session(session_id: str) -> int:
    return timers.fire(session_id)


@shared_task
def sweep_timers() -> int:
    return timers.sweep()


@shared_task(name=queue.REARM_TIMERS)
def rearm_timers() -> int:
    """Sent each time a worker of the timers queue connects to the broker, since the timer
    tasks it held died with it or with the broker."""
    return timers.rearm(now=timezone.now())


@shared_task
def maintain_signing_keys() -> str | None:
    rotated, _ = services.maintain_signing_keys()
    return None if rotated is None else rotated.kid


@shared_task
def integrate_log() -> int:
    """Committed entries into the transparency log and a checkpoint signed for them, then
    sent to the witnesses; how many entries were integrated."""
    done = integrator.integrate()
    if done.checkpoint is not None and witnesses.configured():
        queue.enqueue(
            queue.COSIGN_CHECKPOINT,
            args=[done.checkpoint.size],
            about=f"checkpoint {done.checkpoint.size}: the next one goes to the witnesses",
        )
    return done.added


@shared_task(name=queue.COSIGN_CHECKPOINT)
def cosign_checkpoint(size: int) -> int:
    """Ask the witnesses to cosign the checkpoint of ``size``, unless a later one exists
    (which they cosign instead, with a proof from where they stood)."""
    return witnesses.submit_latest(size)


@shared_task(name=queue.DELIVER_HANDOFF)
def deliver_handoff(handoff_id: int) -> bool:
    return handoff.deliver(handoff_id)


@shared_task(name=queue.DELIVER_CALLBACK)
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
