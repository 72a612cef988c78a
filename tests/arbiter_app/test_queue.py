"""What arbiter_app.queue.enqueue sends: nothing due beyond the timer horizon, which the broker
would hand out again while a worker held it; its backstop (a sweep) does that work instead."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from arbiter_app import queue
from arbiter_app.breaker import Breaker


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
