"""Arming session timers: a task at the due time, backed up by the periodic sweep."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings

from arbiter_app.queue import enqueue


def arm(*, session_id: str, due: datetime, now: datetime) -> None:
    """Ask the worker to close ``session_id`` at ``due``, if it is due soon enough.

    A timer that moves arms a new task; the old one then finds nothing due and does nothing.
    Far timers are left to the sweep, so no task waits for hours in the broker.
    """
    if (due - now).total_seconds() > settings.OANP_TIMER_HORIZON_SECONDS:
        return
    from arbiter_app import tasks

    enqueue(
        tasks.expire_session,
        args=[session_id],
        eta=due,
        about=f"the timer of session {session_id}; the sweep will close it",
    )
