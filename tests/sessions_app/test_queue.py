"""The dashboard's tasks by name: each name reaches the worker's queue its task belongs on,
whether or not the sending process has loaded the task module."""

from __future__ import annotations

from typing import Any

import pytest
from celery import current_app

from arbiter_app import queue as arbiter_queue
from arbiter_app.breaker import Breaker
from sessions_app import queue, tasks


@pytest.mark.parametrize(
    ("name", "worker_queue"),
    [
        (queue.ANSWER_SESSION, "hosted"),
        (queue.REVEAL_AFTER_END, "hosted"),
        (queue.RUN_EXPORT, "background"),
    ],
)
def test_each_name_is_routed_to_its_tasks_queue(name: str, worker_queue: str) -> None:
    assert current_app.amqp.router.route({}, name)["queue"].name == worker_queue


def test_a_task_is_sent_by_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[str, Any]] = []

    def send_task(name: str, args: Any = None, kwargs: Any = None, **options: Any) -> None:
        sent.append((name, list(args)))

    monkeypatch.setattr(arbiter_queue, "broker_breaker", Breaker(open_seconds=5.0))
    monkeypatch.setattr(current_app, "send_task", send_task)
    assert queue.enqueue(queue.RUN_EXPORT, args=[7], about="export 7")
    assert sent == [(queue.RUN_EXPORT, [7])]


def test_the_task_module_registers_every_name() -> None:
    names = {tasks.answer_session.name, tasks.reveal_after_end.name, tasks.run_export.name}
    assert names == {queue.ANSWER_SESSION, queue.REVEAL_AFTER_END, queue.RUN_EXPORT}
