"""Arming session timers: a task at the due time, backed up by the periodic sweep."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings

from arbiter_app import selectors
from arbiter_app.queue import enqueue

#: The queue timer tasks travel on (settings.CELERY_TASK_ROUTES).
QUEUE = "timers"


def arm(*, session_id: str, due: datetime) -> None:
    """Ask the worker to close ``session_id`` at ``due``.

    A timer that moves arms a new task; the old one then finds nothing due and does nothing.
    Timers beyond the horizon are left to the sweep (:func:`arbiter_app.queue.enqueue`), so no
    task waits for hours in the broker.
    """
    from arbiter_app import tasks

    enqueue(
        tasks.expire_session,
        args=[session_id],
        eta=due,
        about=f"the timer of session {session_id}; the sweep will close it",
    )


def rearm(*, now: datetime) -> int:
    """Arm every timer due within the horizon (the overdue too); how many were armed.

    A worker holds its timer tasks in memory until they fall due. When it dies, or loses the
    broker (a Redis restarted without persistence has forgotten them too), those tasks are
    gone, while the database still knows every deadline: arming them again keeps them on time
    instead of waiting for the sweep. A task armed twice is harmless (the second finds nothing
    due)."""
    horizon = now + timedelta(seconds=settings.OANP_TIMER_HORIZON_SECONDS)
    armed = 0
    for session_id, due in selectors.deadlines_before(horizon):
        arm(session_id=session_id, due=due)
        armed += 1
    return armed


def connected(*, serving: set[str]) -> None:
    """A worker connected to the broker, serving the queues named: if the timers queue is one,
    send the task that re-arms every near timer (:func:`rearm`)."""
    if QUEUE not in serving:
        return
    from arbiter_app import tasks

    enqueue(tasks.rearm_timers, args=[], about="the re-arming of timers; the sweep will close them")
