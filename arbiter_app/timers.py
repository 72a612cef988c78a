"""A session's timer, the whole of its life: armed as a task at its due time (:func:`arm`, once
the step that set it committed), fired by that task (:func:`fire`), backed up by beat's
periodic :func:`sweep` (``sweep-timers`` in settings.CELERY_BEAT_SCHEDULE, every
``OANP_TIMER_SWEEP_SECONDS``), and armed again from the database whenever a worker of the timers
queue connects to the broker (:func:`connected`, :func:`rearm`).

Closing a session whose timer fell due is a write, so it stays the services' (their
``expire_session`` and ``expire_due_sessions``); the Celery tasks only call in here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from arbiter_app import selectors, services
from arbiter_app.queue import EXPIRE_SESSION, REARM_TIMERS, enqueue

#: The queue timer tasks travel on (settings.CELERY_TASK_ROUTES).
QUEUE = "timers"


def arm(*, session_id: str, due: datetime) -> None:
    """Ask the worker to close ``session_id`` at ``due``.

    A timer that moves arms a new task; the old one then finds nothing due and does nothing.
    Timers beyond the horizon are left to the sweep (:func:`arbiter_app.queue.enqueue`), so no
    task waits for hours in the broker.
    """
    enqueue(
        EXPIRE_SESSION,
        args=[session_id],
        eta=due,
        about=f"the timer of session {session_id}; the sweep will close it",
    )


def on_deadlines_set(
    sender: Any, *, deadlines: Sequence[tuple[str, datetime]], **kwargs: Any
) -> None:
    """Arm the timers a commit set (:data:`arbiter_app.events.deadlines_set`, connected when
    the app is ready): the services announce them rather than arm them, since firing a timer
    calls the services."""
    for session_id, due in deadlines:
        arm(session_id=session_id, due=due)


def fire(session_id: str) -> int:
    """Close every session whose timer fell due, this one among them, and return how many.

    Deadlines come in crowds (sessions opened together by one buyer's burst), and each due
    session's own task, run one by one, would close the crowd at the pool's pace: the first task
    to fire closes the whole crowd in batches and the rest find nothing left. If this session's
    timer moved since the task was armed (a move started a new response window), the task is
    armed again for the new due time."""
    closed = sweep()
    if services.expire_session(session_id=session_id):
        return closed + 1  # an envelope held its row while the batches skipped it
    due = selectors.next_deadline_of(session_id)
    if due is not None:
        arm(session_id=session_id, due=due)
    return closed


def sweep() -> int:
    """Close every session whose timer fell due, however its own task fared: batch after
    batch, until one comes back short (the rest are due later, or another sweeper's)."""
    closed = 0
    while True:
        batch = services.expire_due_sessions()
        closed += batch
        if batch < services.EXPIRY_BATCH:
            return closed


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
    enqueue(REARM_TIMERS, args=[], about="the re-arming of timers; the sweep will close them")
