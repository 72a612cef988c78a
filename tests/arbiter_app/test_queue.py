"""What arbiter_app.queue.enqueue sends: nothing due beyond the timer horizon, which the broker
would hand out again while a worker held it; its backstop (a sweep) does that work instead.
The arbiter's own tasks go by the names of its table, each the name of a task of
arbiter_app.tasks."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from arbiter_app import queue, tasks
from arbiter_app.breaker import Breaker
from oanp_site.celery import app


class Recorder:
    """A task that records what it was sent with."""

    name = "recorder"

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def apply_async(self, *, args: list[Any], **options: Any) -> None:
        self.sent.append(options)


@pytest.fixture
def task(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Recorder:
    settings.OANP_TIMER_HORIZON_SECONDS = 900
    monkeypatch.setattr(queue, "broker_breaker", Breaker(open_seconds=5.0))
    return Recorder()


def test_a_task_due_within_the_horizon_is_sent(task: Recorder) -> None:
    eta = timezone.now() + timedelta(seconds=899)
    assert queue.enqueue(task, args=[], about="a near timer", eta=eta)
    assert queue.enqueue(task, args=[], about="a retry", countdown=899)
    assert queue.enqueue(task, args=[], about="work now")
    assert [options.get("countdown") for options in task.sent] == [None, 899, None]


def test_a_task_due_beyond_the_horizon_is_left_to_its_backstop(task: Recorder) -> None:
    eta = timezone.now() + timedelta(seconds=901)
    assert not queue.enqueue(task, args=[], about="a far timer", eta=eta)
    assert not queue.enqueue(task, args=[], about="an hour's retry", countdown=3600)
    assert task.sent == []
    # Not a broker failure: the next send goes straight out.
    assert queue.broker_breaker.allows()


class App:
    """The Celery app, recording the tasks it was asked to send by name."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, list[Any], dict[str, Any]]] = []

    def send_task(self, name: str, *, args: list[Any], **options: Any) -> None:
        self.sent.append((name, args, options))


def test_a_task_named_in_the_table_is_sent_by_its_name(
    task: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    celery = App()
    monkeypatch.setattr(queue, "app", celery)
    assert queue.enqueue(queue.DELIVER_HANDOFF, args=[7], about="a handoff", countdown=30)
    assert not queue.enqueue(queue.DELIVER_HANDOFF, args=[8], about="a retry", countdown=3600)
    assert celery.sent == [("arbiter_app.tasks.deliver_handoff", [7], {"countdown": 30})]


@pytest.mark.parametrize(
    ("name", "task"),
    [
        (queue.EXPIRE_SESSION, tasks.expire_session),
        (queue.REARM_TIMERS, tasks.rearm_timers),
        (queue.DELIVER_HANDOFF, tasks.deliver_handoff),
        (queue.DELIVER_CALLBACK, tasks.deliver_callback),
    ],
)
def test_each_name_of_the_table_is_a_task_a_worker_runs(name: str, task: Any) -> None:
    # shared_task hands out a proxy of the registered task: they share its name.
    assert app.tasks[name].name == task.name == name
