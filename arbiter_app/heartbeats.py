"""What the worker and beat say about themselves, for ``/readyz``, ``/metrics`` and the dashboard.

- A worker writes its heartbeat row every ``OANP_HEARTBEAT_SECONDS`` from a thread of its own,
  started when it is ready; a clean shutdown marks the row stopped. A worker that crashes simply
  stops writing, and is counted lost after ``OANP_WORKER_LOST_SECONDS``.
- Beat sends the ``heartbeat`` task on the same period. Its publication is beat's tick; the
  worker that runs it records when, and how long the task waited in the queue, which shows the
  broker hands work over and not only that the worker process lives.
- Every task run is one log line (task, id, outcome, duration, the session or agent it was
  about) and a count in ``oanp_tasks_total``; a failure is also kept, with its message and
  arguments, for the health panel and its list of failed tasks, which may queue one again.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import socket
import threading
import time
from datetime import timedelta
from typing import Any

from celery import signals
from django.conf import settings
from django.db import connection
from django.utils import timezone

from arbiter_app import metrics
from arbiter_app.models import Heartbeat, ProcessKind, TaskFailure

log = logging.getLogger("oanp.worker")

HEARTBEAT_TASK = "arbiter_app.tasks.heartbeat"
SENT_AT_HEADER = "oanp_sent_at"
#: Arguments worth naming on a task's log line: ids, never anything a secret could be in.
LOGGED_ARGUMENTS = ("session_id", "agent_id", "handoff_id", "cursor_id")
KEEP_RECORDS = timedelta(days=7)
PRUNE_SECONDS = 3600


def _beat_name() -> str:
    return f"beat@{socket.gethostname()}"


def _save(kind: str, name: str, **fields: Any) -> None:
    now = timezone.now()
    Heartbeat.objects.update_or_create(
        kind=kind,
        name=name,
        defaults={"seen_at": now, "pid": os.getpid(), **fields},
        create_defaults={"seen_at": now, "started_at": now, "pid": os.getpid(), **fields},
    )


def _quietly(what: str, write: Any, *args: Any, **kwargs: Any) -> None:
    """A heartbeat that cannot be written (the database is away) is a missed beat, which is
    exactly what readers should see; it must never take the process down."""
    try:
        write(*args, **kwargs)
    except Exception:
        log.warning("could not record %s", what, exc_info=True)
    finally:
        # Outside any request nothing else would notice a connection the database dropped:
        # give it back after each write and take a fresh one next time. Not inside a caller's
        # transaction (a task run eagerly), which is the caller's to end.
        if not connection.in_atomic_block:
            connection.close()


# The worker ------------------------------------------------------------------------------------


class _WorkerHeartbeat(threading.Thread):
    def __init__(self, hostname: str) -> None:
        super().__init__(name="oanp-heartbeat", daemon=True)
        self.hostname = hostname
        self.stopping = threading.Event()

    def run(self) -> None:
        _quietly("the worker's start", self._start)
        pruned = time.monotonic()
        while not self.stopping.wait(settings.OANP_HEARTBEAT_SECONDS):
            # stopped_at again: another worker of the same name may have stopped meanwhile.
            _quietly(
                "the worker's heartbeat", _save, ProcessKind.WORKER, self.hostname, stopped_at=None
            )
            if time.monotonic() - pruned > PRUNE_SECONDS:
                _quietly("the pruning of old records", _prune)
                pruned = time.monotonic()
        # Written here, after the last heartbeat, so no heartbeat can land after it.
        _quietly(
            "the worker's stop",
            Heartbeat.objects.filter(kind=ProcessKind.WORKER, name=self.hostname).update,
            stopped_at=timezone.now(),
        )

    def _start(self) -> None:
        _save(
            ProcessKind.WORKER,
            self.hostname,
            started_at=timezone.now(),
            stopped_at=None,
            answered_at=None,
            queue_wait_ms=None,
        )
        _prune()

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=10)


def _prune() -> None:
    cutoff = timezone.now() - KEEP_RECORDS
    TaskFailure.objects.filter(failed_at__lt=cutoff).delete()
    Heartbeat.objects.filter(seen_at__lt=cutoff).delete()


_heartbeat: _WorkerHeartbeat | None = None


def _on_worker_ready(sender: Any = None, **kwargs: Any) -> None:
    global _heartbeat  # one heartbeat thread per worker process
    _heartbeat = _WorkerHeartbeat(getattr(sender, "hostname", None) or socket.gethostname())
    _heartbeat.start()


def _on_worker_shutdown(**kwargs: Any) -> None:
    if _heartbeat is not None:
        _heartbeat.stop()


def answered(*, hostname: str, sent_at: float | None, queue: str | None) -> None:
    """The worker ran beat's heartbeat task, taken from ``queue``: record when, and how long it
    waited, for the worker and for the queue."""
    if not hostname:
        return  # run in-process, not by a worker: there is no worker to vouch for
    wait = None if sent_at is None else max(0, round((time.time() - sent_at) * 1000))
    now = timezone.now()
    _save(ProcessKind.WORKER, hostname, answered_at=now, queue_wait_ms=wait)
    if queue:
        _save(ProcessKind.QUEUE, queue, answered_at=now, queue_wait_ms=wait)


# Beat ------------------------------------------------------------------------------------------


def _on_publish(
    sender: str | None = None, headers: dict[str, Any] | None = None, **kwargs: Any
) -> None:
    if sender != HEARTBEAT_TASK or headers is None:
        return
    headers[SENT_AT_HEADER] = time.time()
    _quietly("beat's tick", _save, ProcessKind.BEAT, _beat_name())


def _on_beat_init(**kwargs: Any) -> None:
    _quietly("beat's start", _save, ProcessKind.BEAT, _beat_name(), started_at=timezone.now())


# Every task ------------------------------------------------------------------------------------

_started: dict[str, float] = {}


def _on_task_prerun(task_id: str = "", **kwargs: Any) -> None:
    _started[task_id] = time.monotonic()


def _named_arguments(task: Any, args: Any, kwargs: Any) -> dict[str, Any]:
    try:
        bound = inspect.signature(task.run).bind_partial(*(args or ()), **(kwargs or {}))
    except (TypeError, ValueError):
        return {}
    return {k: v for k, v in bound.arguments.items() if k in LOGGED_ARGUMENTS}


def _on_task_postrun(
    sender: Any = None,
    task_id: str = "",
    args: Any = None,
    kwargs: Any = None,
    state: str | None = None,
    **extra: Any,
) -> None:
    started = _started.pop(task_id, None)
    duration_ms = None if started is None else round((time.monotonic() - started) * 1000, 1)
    name = getattr(sender, "name", "?")
    outcome = (state or "unknown").lower()
    metrics.TASKS.labels(task=name, outcome=outcome).inc()
    level = logging.WARNING if outcome == "failure" else logging.INFO
    if name == HEARTBEAT_TASK and outcome == "success":
        level = logging.DEBUG  # every few seconds; /readyz shows it
    fields = {
        "task": name,
        "task_id": task_id,
        "outcome": outcome,
        "duration_ms": duration_ms,
        **_named_arguments(sender, args, kwargs),
    }
    log.log(level, "task %s %s", name, outcome, extra={"oanp": fields})


def _kept_arguments(args: Any, kwargs: Any) -> list[Any] | None:
    """The arguments a retry would send again, or ``None`` when they cannot be sent as kept:
    the project's tasks take ids, positionally, and a retry must not guess at anything else."""
    if kwargs or not isinstance(args, list | tuple):
        return None
    try:
        json.dumps(list(args), allow_nan=False)
    except (TypeError, ValueError):
        return None
    return list(args)


def _on_task_failure(
    sender: Any = None,
    task_id: str = "",
    exception: BaseException | None = None,
    args: Any = None,
    kwargs: Any = None,
    **kw: Any,
) -> None:
    _quietly(
        "a task's failure",
        TaskFailure.objects.create,
        task=getattr(sender, "name", "?")[:200],
        task_id=task_id[:64],
        error=type(exception).__name__[:200],
        message=str(exception)[: TaskFailure.MESSAGE_LENGTH],
        args=_kept_arguments(args, kwargs),
        failed_at=timezone.now(),
    )


def connect() -> None:
    """Called once from the app's ``ready``: in the server these signals never fire."""
    signals.worker_ready.connect(_on_worker_ready, dispatch_uid="oanp-worker-ready")
    signals.worker_shutdown.connect(_on_worker_shutdown, dispatch_uid="oanp-worker-shutdown")
    signals.beat_init.connect(_on_beat_init, dispatch_uid="oanp-beat-init")
    signals.beat_embedded_init.connect(_on_beat_init, dispatch_uid="oanp-beat-embedded-init")
    signals.before_task_publish.connect(_on_publish, dispatch_uid="oanp-beat-tick")
    signals.task_prerun.connect(_on_task_prerun, dispatch_uid="oanp-task-prerun")
    signals.task_postrun.connect(_on_task_postrun, dispatch_uid="oanp-task-postrun")
    signals.task_failure.connect(_on_task_failure, dispatch_uid="oanp-task-failure")
