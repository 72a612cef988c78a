"""The dashboard's tasks by name, and the one way its modules queue them.

The task module imports the modules whose work its tasks run (the hosted agents, the exports),
and those queue more of that work: so they name a task here instead of importing it, and
:mod:`sessions_app.tasks` registers each task under the name given here. A process that has
not loaded the tasks (a web server) sends by name, and the settings' routes match names.
"""

from __future__ import annotations

from typing import Any

from celery import signature

from arbiter_app import queue

ANSWER_SESSION = "sessions_app.tasks.answer_session"
REVEAL_AFTER_END = "sessions_app.tasks.reveal_after_end"
RUN_EXPORT = "sessions_app.tasks.run_export"


def enqueue(name: str, *, args: list[Any], about: str, **options: Any) -> bool:
    """:func:`arbiter_app.queue.enqueue` for the task registered as ``name``."""
    return queue.enqueue(signature(name), args=args, about=about, **options)
