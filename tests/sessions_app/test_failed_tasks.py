"""The overview's failed-task count opens the list of failed tasks, for operators and admins
only: each with its task, when, its error in words and, for a task safe to run again, a Retry
that asks first, queues the task again with its arguments once, and is audited."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from celery import current_app, signals
from django.db import OperationalError
from django.test import Client
from django.utils import timezone

from arbiter_app import queue as arbiter_queue
from arbiter_app import tasks
from arbiter_app.breaker import Breaker
from arbiter_app.models import TaskFailure
from sessions_app import queue
from sessions_app.models import AuditEvent, MemberRole
from tests.sessions_app.pages import error_summary_in, messages_in
from tests.support.factories.accounts import member, merchant, signed_in

pytestmark = pytest.mark.django_db

LIST = "/tasks/failed/"


def failed(task: str, *, args: list[Any] | None, error: str = "OperationalError") -> TaskFailure:
    return TaskFailure.objects.create(
        task=task,
        task_id=f"id-{task.rsplit('.', 1)[-1]}",
        error=error,
        message="database is locked",
        args=args,
        failed_at=timezone.now() - timedelta(minutes=3),
    )


def retry_url(failure: TaskFailure) -> str:
    return f"/tasks/failed/{failure.pk}/retry/"


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[Any], str]]:
    """What reaches the broker's client through the project's enqueue: each task's name, its
    arguments and the queue its route names."""
    out: list[tuple[str, list[Any], str]] = []

    def send_task(name: str, args: Any = None, kwargs: Any = None, **options: Any) -> None:
        out.append((name, list(args), current_app.amqp.router.route({}, name)["queue"].name))

    monkeypatch.setattr(arbiter_queue, "broker_breaker", Breaker(open_seconds=5.0))
    monkeypatch.setattr(current_app, "send_task", send_task)
    return out


def test_a_failure_is_kept_with_its_message_and_arguments() -> None:
    """What the worker's signal handler keeps: the arguments a retry sends, and the message,
    cut short; arguments that are not plain values, or keyword ones, are not kept."""
    signals.task_failure.send(
        sender=tasks.deliver_handoff,
        task_id="t-1",
        exception=OperationalError("database is locked " + "x" * 900),
        args=[7],
        kwargs={},
    )
    signals.task_failure.send(
        sender=tasks.deliver_handoff, task_id="t-2", exception=OSError(), args=[object()]
    )
    signals.task_failure.send(
        sender=tasks.deliver_handoff, task_id="t-3", exception=OSError(), args=[], kwargs={"a": 1}
    )
    kept = {f.task_id: f for f in TaskFailure.objects.all()}
    assert kept["t-1"].task == arbiter_queue.DELIVER_HANDOFF
    assert kept["t-1"].error == "OperationalError"
    assert kept["t-1"].args == [7]
    assert kept["t-1"].message.startswith("database is locked xxx")
    assert len(kept["t-1"].message) == TaskFailure.MESSAGE_LENGTH
    assert (kept["t-2"].args, kept["t-3"].args) == (None, None)


def test_the_overview_count_links_to_the_list() -> None:
    failed(arbiter_queue.DELIVER_HANDOFF, args=[7])
    olga = signed_in(member("olga", MemberRole.OPERATOR))
    html = olga.get("/").content.decode()
    count = html.split('id="tasks-failed">', 1)[1].split("</dd>", 1)[0]
    assert count.startswith(f'<a href="{LIST}">')
    assert ">1</span>" in count


def test_operators_and_admins_read_each_failure_and_where_retry_is_safe() -> None:
    handoff = failed(arbiter_queue.DELIVER_HANDOFF, args=[7])
    export = failed(queue.RUN_EXPORT, args=[3], error="OSError")
    heartbeat = failed("arbiter_app.tasks.heartbeat", args=[])
    unknown = failed("someone.elses.task", args=[], error="KeyError")
    old = failed(arbiter_queue.DELIVER_CALLBACK, args=None)
    for role in (MemberRole.OPERATOR, MemberRole.ADMIN):
        page = signed_in(member(role, role)).get(LIST)
        assert page.status_code == 200
        html = page.content.decode()
        rows = {
            f.pk: html.split(f'id="failure-{f.pk}"', 1)[1].split("</tr>", 1)[0]
            for f in (handoff, export, heartbeat, unknown, old)
        }
        assert "deliver handoff" in rows[handoff.pk]
        assert "The database was busy or unreachable." in rows[handoff.pk]
        assert "OperationalError: database is locked" in rows[handoff.pk]
        assert f'id="retry-{handoff.pk}"' in rows[handoff.pk]
        assert "same Idempotency-Key" in rows[handoff.pk]
        assert "A connection it needed failed" in rows[export.pk]
        assert "Its own Retry, on the Exports page" in rows[export.pk]
        assert "beat sends the next within seconds" in rows[heartbeat.pk]
        assert "It stopped on an unexpected error (KeyError)." in rows[unknown.pk]
        assert "not one of the arbiter&#x27;s tasks known to be safe" in rows[unknown.pk]
        assert "its arguments were not kept" in rows[old.pk]
        offered = [pk for pk, row in rows.items() if 'id="retry-' in row]
        assert offered == [handoff.pk]


@pytest.mark.parametrize(
    "someone",
    [
        lambda: member("alice", MemberRole.MERCHANT_MANAGER, merchant("a")),
        lambda: member("mo", MemberRole.MERCHANT_MEMBER, merchant("a")),
        lambda: member("bea", MemberRole.BUYER_MEMBER, merchant("tripwise")),
    ],
    ids=["merchant-manager", "merchant-member", "buyer-member"],
)
def test_tenants_are_refused_the_list_and_the_retry(
    someone: Callable[[], Any], sent: list[Any]
) -> None:
    failure = failed(arbiter_queue.DELIVER_HANDOFF, args=[7])
    client = signed_in(someone())
    assert client.get(LIST).status_code == 403
    assert client.post(retry_url(failure), {"confirm": "yes"}).status_code == 403
    # Their overview shows no background work, so no count links there either.
    assert f'href="{LIST}"' not in client.get("/").content.decode()
    assert Client().get(LIST).status_code == 302  # to sign in
    failure.refresh_from_db()
    assert failure.retried_at is None
    assert not AuditEvent.objects.filter(action="task.retry").exists()
    assert sent == []


def test_a_retry_asks_first_then_queues_the_task_again_once_audited(
    sent: list[tuple[str, list[Any], str]], django_capture_on_commit_callbacks: Any
) -> None:
    failure = failed(arbiter_queue.DELIVER_HANDOFF, args=[7])
    olga_user = member("olga", MemberRole.OPERATOR)
    olga = signed_in(olga_user)
    asked = olga.post(retry_url(failure))
    assert asked.status_code == 200
    html = asked.content.decode()
    assert "Send it again now?" in html
    assert 'id="confirm-retry"' in html
    assert olga.get(retry_url(failure)).status_code == 405
    assert sent == []
    with django_capture_on_commit_callbacks(execute=True):
        done = olga.post(retry_url(failure), {"confirm": "yes"})
    assert done.status_code == 302
    assert done["Location"] == LIST
    assert sent == [(arbiter_queue.DELIVER_HANDOFF, [7], "deliveries")]
    event = AuditEvent.objects.get(action="task.retry")
    assert (event.actor, event.target) == (
        olga_user,
        f"{arbiter_queue.DELIVER_HANDOFF} id-deliver_handoff",
    )
    assert event.detail == {"failure": failure.pk, "args": [7]}
    page = olga.get(LIST).content.decode()
    assert messages_in(page) == ["The deliver handoff task is queued again."]
    row = page.split(f'id="failure-{failure.pk}"', 1)[1].split("</tr>", 1)[0]
    assert "queued again" in row
    assert 'id="retry-' not in row
    # Once per failure: a second confirmation (another tab, a double click) queues nothing.
    with django_capture_on_commit_callbacks(execute=True):
        again = olga.post(retry_url(failure), {"confirm": "yes"})
    assert again.status_code == 400
    assert "Queued again already" in error_summary_in(again.content.decode())
    assert len(sent) == 1
    assert AuditEvent.objects.filter(action="task.retry").count() == 1


@pytest.mark.parametrize(
    ("task", "args", "says"),
    [
        (queue.RUN_EXPORT, [3], "a failed export is left alone"),
        ("arbiter_app.tasks.heartbeat", [], "beat sends the next within seconds"),
        ("someone.elses.task", [], "known to be safe to run twice"),
        (queue.ANSWER_SESSION, None, "its arguments were not kept"),
    ],
)
def test_a_task_not_safe_to_retry_is_refused_in_words(
    task: str,
    args: list[Any] | None,
    says: str,
    sent: list[Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    failure = failed(task, args=args)
    ada = signed_in(member("ada", MemberRole.ADMIN))
    with django_capture_on_commit_callbacks(execute=True):
        refused = ada.post(retry_url(failure), {"confirm": "yes"})
    assert refused.status_code == 400
    assert says in error_summary_in(refused.content.decode()).replace("&#x27;", "'")
    assert 'id="confirm-retry"' not in refused.content.decode()
    failure.refresh_from_db()
    assert failure.retried_at is None
    assert not AuditEvent.objects.filter(action="task.retry").exists()
    assert sent == []


def test_a_failure_that_is_not_there_is_not_found() -> None:
    olga = signed_in(member("olga", MemberRole.OPERATOR))
    assert olga.post("/tasks/failed/999999/retry/", {"confirm": "yes"}).status_code == 404
    assert olga.post("/tasks/failed/x/retry/").status_code == 404
    assert olga.post("/tasks/failed/99999999999999999999999/retry/").status_code == 404
