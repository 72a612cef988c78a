"""What the dashboard says about the background work: the health panel ("Background work")
operators read on the overview, and the outage every signed-in page announces while no worker
answers (timers, hosted agents and exports all wait for one)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from arbiter_app import health as arbiter_health
from arbiter_app import selectors as arbiter

#: How long the overview waits for the broker: a refused connection takes kombu seconds of
#: retries, and a page must not wait on them.
QUEUE_DEPTH_SECONDS = 1.0


@dataclass(frozen=True)
class Health:
    now: datetime
    #: Most recently seen first, as far back as a day.
    workers: list[arbiter.ProcessSeen]
    beat: arbiter.ProcessSeen | None
    #: ``None`` when the broker did not answer in time.
    queue_depth: int | None
    failed_last_hour: int
    deliveries: arbiter.DeliveryBacklog
    #: Seconds without a word after which a worker counts as lost.
    lost_seconds: float

    @property
    def workers_alive(self) -> int:
        return sum(worker.alive for worker in self.workers)


def health(now: datetime | None = None) -> Health:
    now = now or timezone.now()
    beats = arbiter.beats(now)
    return Health(
        now=now,
        workers=arbiter.workers(now),
        beat=beats[0] if beats else None,
        queue_depth=arbiter_health.queue_depth(within=QUEUE_DEPTH_SECONDS),
        failed_last_hour=arbiter.failed_tasks_since(now - timedelta(hours=1)),
        deliveries=arbiter.delivery_backlog(),
        lost_seconds=settings.OANP_WORKER_LOST_SECONDS,
    )


@dataclass(frozen=True)
class Outage:
    """No worker alive. ``last_seen`` is when one last was, ``None`` if none in the last day."""

    last_seen: datetime | None


def worker_outage(now: datetime | None = None) -> Outage | None:
    """``None`` while some worker is alive; one query."""
    seen = arbiter.workers(now)
    if any(worker.alive for worker in seen):
        return None
    return Outage(last_seen=seen[0].seen_at if seen else None)
