"""Handing work to the worker: the one way every part of the project enqueues a task.

Each task sent here has a backstop that finds its work without it (the timer and delivery
sweeps, a session's response timer), so a broker that is away delays work but loses none: the
send is logged and skipped. While the broker keeps failing, :data:`broker_breaker` skips it
outright, so a commit does not pay the publisher's retries (most of a second) each time.

The arbiter's own modules send its tasks by name, through the table below: arbiter_app.tasks
imports the modules whose work its tasks do, so those modules cannot import it back.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Task

# The project's Celery app, which loading Django's settings makes current: a task is sent by
# name through it without importing the project's wiring or the task's module.
from celery import current_app as app
from django.conf import settings
from django.utils import timezone

from arbiter_app.breaker import Breaker

log = logging.getLogger(__name__)

# The arbiter's tasks its own modules send, by name (arbiter_app.tasks registers each under it;
# settings.CELERY_TASK_ROUTES routes it by it).
EXPIRE_SESSION = "arbiter_app.tasks.expire_session"
REARM_TIMERS = "arbiter_app.tasks.rearm_timers"
DELIVER_HANDOFF = "arbiter_app.tasks.deliver_handoff"
DELIVER_CALLBACK = "arbiter_app.tasks.deliver_callback"
COSIGN_CHECKPOINT = "arbiter_app.tasks.cosign_checkpoint"

broker_breaker = Breaker(open_seconds=5.0)


def _later_than_the_horizon(options: dict[str, Any]) -> bool:
    countdown, eta = options.get("countdown"), options.get("eta")
    wait = countdown if eta is None else (eta - timezone.now()).total_seconds()
    return wait is not None and wait > settings.OANP_TIMER_HORIZON_SECONDS


def enqueue(task: Task | str, *, args: list[Any], about: str, **options: Any) -> bool:
    """Send ``task`` (a task, or one of the names above) with ``args`` (and Celery's
    ``countdown``/``eta``); whether it was sent. ``about`` names the work in the warning when
    it was not, and what will do it instead.

    A task due later than ``OANP_TIMER_HORIZON_SECONDS`` is not sent at all: a worker would
    hold it that long, and the broker hands out again a task held past its visibility timeout
    (settings), so the work would be done twice. Its backstop does it when it falls due."""
    if _later_than_the_horizon(options):
        return False
    if broker_breaker.allows():
        try:
            if isinstance(task, str):
                app.send_task(task, args=args, **options)
            else:
                task.apply_async(args=args, **options)
        except Exception as error:
            broker_breaker.failed()
            log.warning("could not queue %s: %r", about, error)
        else:
            broker_breaker.succeeded()
            return True
    else:
        log.warning("could not queue %s: the broker was away moments ago", about)
    return False
