"""A Celery worker's database pool, sized to the worker: one connection for each task it runs at
once and one for its heartbeat thread.

The settings size every process's pool for a web process (``OANP_DB_BUDGET``). A worker on a
threads pool runs ``--concurrency`` tasks at once, each holding a connection for the whole task,
so a smaller pool would make tasks wait for one and fail after ``OANP_DB_POOL_TIMEOUT``; a
larger one would hold connections the budget gave to the web.
"""

from __future__ import annotations

from typing import Any

from celery import signals
from django.db import connection


def on_worker_init(sender: Any = None, **kwargs: Any) -> None:
    """Connected to ``worker_init``, before the worker runs a task: ``sender`` is the worker."""
    options = connection.settings_dict["OPTIONS"].get("pool")
    if not options:
        return  # SQLite: a connection per thread, no pool to size
    # Its heartbeat thread writes beside the tasks (oanp_site.connections counts the same).
    options["max_size"] = sender.concurrency + 1
    # A pool made before this, by a query at start-up, would keep the web's size: the next
    # connection makes a new one with this.
    connection.close_pool()


def connect() -> None:
    signals.worker_init.connect(on_worker_init, dispatch_uid="oanp-worker-pool")
