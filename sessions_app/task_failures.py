"""The background tasks that failed, as operators and admins read them, and Retry for those
that are safe to run again.

A task is safe to run again when a second run does no more than the first would have: it looks
up what is due and does that (a timer, a delivery's next attempt, a hosted agent's pending
answer), so a run that comes after the work was done finds nothing to do. Every task the
project runs is named below with what a retry does or why none is offered; one not named is
not offered, since nobody has said it is safe. A retry sends the task again with the arguments
it failed with, through :func:`sessions_app.queue.enqueue`, once per failure, audited as
``task.retry``. Each retryable task also has a backstop (a sweep, or beat's schedule) that does
its work later should the broker not take the retry.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from arbiter_app import queue as arbiter_queue
from arbiter_app import selectors as arbiter
from arbiter_app import services
from arbiter_app.models import TaskFailure
from sessions_app import queue
from sessions_app.models import AuditEvent
from sessions_app.tenancy import Scope, require_staff

#: As far back as the list reads: the worker prunes older failures (arbiter_app.heartbeats).
LISTED_DAYS = 7
LISTED_MAX = 200


@dataclass(frozen=True)
class Rerun:
    """Whether a task may be run again from the dashboard, and what that does or why not."""

    safe: bool
    says: str


def _safe(says: str) -> Rerun:
    return Rerun(True, says)


def _not_offered(says: str) -> Rerun:
    return Rerun(False, says)


_SWEPT_DELIVERIES = "Hands every delivery that fell due to a task of its own."

RERUNS: dict[str, Rerun] = {
    arbiter_queue.EXPIRE_SESSION: _safe(
        "Closes the sessions whose timer fell due; a session closed already is left alone."
    ),
    "arbiter_app.tasks.sweep_timers": _safe("Closes the sessions whose timer fell due."),
    arbiter_queue.REARM_TIMERS: _safe(
        "Arms the timers due soon again; a timer armed twice finds nothing due the second time."
    ),
    arbiter_queue.DELIVER_HANDOFF: _safe(
        "Makes the handoff's next attempt if one is due; every attempt carries the same "
        "Idempotency-Key, so the merchant makes one checkout."
    ),
    arbiter_queue.DELIVER_CALLBACK: _safe(
        "Sends the callback the entries it has not had yet, in order; none twice."
    ),
    "arbiter_app.tasks.sweep_deliveries": _safe(_SWEPT_DELIVERIES),
    "arbiter_app.tasks.maintain_signing_keys": _safe(
        "Rotates or retires a signing key only if the key policy says it is due."
    ),
    "arbiter_app.tasks.check_integrity": _safe(
        "Checks the session heads and hash chains against their entries again."
    ),
    queue.ANSWER_SESSION: _safe(
        "Sends the hosted agent's answers still pending; an answer made already is not made again."
    ),
    "sessions_app.tasks.sweep_answers": _safe("Sends the hosted agents' answers still pending."),
    queue.REVEAL_AFTER_END: _safe(
        "Reveals the hosted agent's limits once the session ended; a second reveal is taken "
        "as done."
    ),
    "sessions_app.tasks.sweep_reveals": _safe("Sends the reveals after the end still owed."),
    queue.RUN_EXPORT: _not_offered(
        "Not retried here: run again as it stands, a failed export is left alone. Its own "
        "Retry, on the Exports page, clears the failure and queues it."
    ),
    "arbiter_app.tasks.heartbeat": _not_offered(
        "Not retried: beat sends the next within seconds, and one run late would report a "
        "wait in the queue that never happened."
    ),
}
UNKNOWN = _not_offered("Not retried: not one of the arbiter's tasks known to be safe to run twice.")
ARGUMENTS_NOT_KEPT = (
    "Not retried: its arguments were not kept (it failed before they were, or they were not "
    "plain values), so it cannot be sent again as it was."
)


def error_in_words(error: str) -> str:
    """What an exception's class means to an operator; the message beside it says more."""
    if error in ("OperationalError", "InterfaceError"):
        return "The database was busy or unreachable."
    if error in ("SoftTimeLimitExceeded", "TimeLimitExceeded"):
        return "It ran past its time limit and was stopped."
    if error == "WorkerLostError":
        return "Its worker stopped while running it."
    if error in ("TimeoutError", "ReadTimeout", "ConnectTimeout"):
        return "Something it waited on did not answer in time."
    if error in ("ConnectionError", "ConnectionRefusedError", "OSError"):
        return "A connection it needed failed, or a file could not be written."
    return f"It stopped on an unexpected error ({error})."


@dataclass(frozen=True)
class FailedTask:
    failure: TaskFailure

    @property
    def rerun(self) -> Rerun:
        return RERUNS.get(self.failure.task, UNKNOWN)

    @property
    def short_name(self) -> str:
        """The task as people say it: "deliver handoff"."""
        return self.failure.task.rsplit(".", 1)[-1].replace("_", " ")

    @property
    def error_in_words(self) -> str:
        return error_in_words(self.failure.error)

    @property
    def refusal(self) -> str:
        """Why it cannot be retried now; "" when it can."""
        if not self.rerun.safe:
            return self.rerun.says
        if self.failure.args is None:
            return ARGUMENTS_NOT_KEPT
        if self.failure.retried_at is not None:
            return "Queued again already; a new failure of it is listed on its own."
        return ""

    @property
    def retryable(self) -> bool:
        return not self.refusal


class RetryRefused(ValueError):
    """A failure this retry cannot send again; the message says why."""


def failed_tasks(scope: Scope) -> list[FailedTask]:
    """The failures of the last :data:`LISTED_DAYS`, newest first; operators and admins only,
    since every tenant's work is in them."""
    require_staff(scope)
    since = timezone.now() - timedelta(days=LISTED_DAYS)
    return [FailedTask(f) for f in arbiter.task_failures(since=since, limit=LISTED_MAX)]


def failed_task(scope: Scope, failure_id: int) -> FailedTask:
    require_staff(scope)
    found = arbiter.task_failure(failure_id)
    if found is None:
        raise Http404("no such failed task")
    return FailedTask(found)


def retry(*, actor: AbstractBaseUser, scope: Scope, failure_id: int) -> FailedTask:
    """Queue a failed task again with the arguments it failed with, once; audited as
    ``task.retry``. ``RetryRefused`` when it is not safe, its arguments were not kept, or it
    was queued again already."""
    found = failed_task(scope, failure_id)
    if found.refusal:
        raise RetryRefused(found.refusal)
    failure = found.failure
    args: list[Any] = list(failure.args or [])
    with transaction.atomic():
        if not services.mark_task_retried(failure_id=failure.pk):
            raise RetryRefused("Queued again already, a moment ago.")
        AuditEvent.objects.create(
            actor=actor,
            action="task.retry",
            target=f"{failure.task} {failure.task_id}",
            detail={"failure": failure.pk, "args": args},
        )
        transaction.on_commit(
            partial(
                queue.enqueue,
                failure.task,
                args=args,
                about=f"the retry of {found.short_name} {args}; its sweep or beat does it later",
            )
        )
    return found
