"""In Chromium against the real ASGI server: an operator follows the overview's failed-task
count to the list of failed tasks, retries the one safe to run again after confirming, and the
task is on the broker again, with its arguments; the retry is audited. Each page is
screenshotted and judged by axe-core at both widths in both schemes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from celery import current_app
from django.utils import timezone

from arbiter_app.models import TaskFailure
from sessions_app import queue
from sessions_app.models import AuditEvent, MemberRole
from tests.conftest import LiveServer, Worker
from tests.sessions_app.browser import chromium, look, sign_in
from tests.support.factories.accounts import PASSWORD, member

pytestmark = pytest.mark.django_db(transaction=True)

CHECK_INTEGRITY = "arbiter_app.tasks.check_integrity"


def failure(task: str, args: list[Any], error: str, message: str) -> TaskFailure:
    return TaskFailure.objects.create(
        task=task,
        task_id=f"5f1c-{task.rsplit('.', 1)[-1]}",
        error=error,
        message=message,
        args=args,
        failed_at=timezone.now() - timedelta(minutes=2),
    )


def test_an_operator_retries_a_failed_task_from_the_overview(
    live_arbiter: LiveServer, celery_worker_process: Worker
) -> None:
    safe = failure(CHECK_INTEGRITY, [], "OperationalError", "database is locked")
    failure(queue.RUN_EXPORT, [12], "OSError", "[Errno 28] No space left on device")
    olga = member("olga", MemberRole.OPERATOR)
    base = live_arbiter.url
    # The suite's worker away while the queue is read: it would take the retried task first,
    # and its beat would send its heartbeats to the same queue.
    celery_worker_process.stop()
    try:
        with current_app.connection_for_write() as broker:
            background = broker.SimpleQueue("background")
            background.clear()  # what earlier tests left: this one reads what the retry sends
            with chromium() as browser:
                page = browser.new_page()
                sign_in(page, base, "olga", PASSWORD)
                page.goto(f"{base}/")
                page.click("#tasks-failed a")
                page.wait_for_url(f"{base}/tasks/failed/")
                listed = page.inner_text("#failed-tasks")
                assert "The database was busy or unreachable." in listed
                assert "a failed export is left alone" in listed
                assert page.locator("#failed-tasks button").count() == 1
                look(page, "failed-tasks")
                page.click(f"#retry-{safe.pk}")
                page.wait_for_selector("#confirm-retry")
                look(page, "failed-task-retry")
                page.click("#confirm-retry")
                page.wait_for_url(f"{base}/tasks/failed/")
                assert page.inner_text(".messages") == "The check integrity task is queued again."
                assert "queued again" in page.inner_text(f"#failure-{safe.pk}")
            sent = background.get(timeout=10)
            sent.ack()
            background.close()
    finally:
        celery_worker_process.start()
    assert sent.headers["task"] == CHECK_INTEGRITY
    assert sent.payload[0] == []
    event = AuditEvent.objects.get(action="task.retry")
    assert (event.actor, event.target) == (olga, f"{CHECK_INTEGRITY} 5f1c-check_integrity")
