"""Each kind of work travels on its queue (settings.CELERY_TASK_ROUTES), and beat's heartbeat
on every queue, so /readyz can tell each one is served."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings

from oanp_site.celery import app

ROUTES = {
    "arbiter_app.tasks.expire_session": "timers",
    "arbiter_app.tasks.sweep_timers": "timers",
    "arbiter_app.tasks.rearm_timers": "timers",
    "arbiter_app.tasks.deliver_handoff": "deliveries",
    "arbiter_app.tasks.deliver_callback": "deliveries",
    "arbiter_app.tasks.sweep_deliveries": "deliveries",
    "arbiter_app.tasks.integrate_log": "timers",
    "arbiter_app.tasks.cosign_checkpoint": "deliveries",
    "sessions_app.tasks.answer_session": "hosted",
    "sessions_app.tasks.reveal_after_end": "hosted",
    "sessions_app.tasks.sweep_reveals": "hosted",
    "sessions_app.tasks.sweep_answers": "hosted",
    "sessions_app.tasks.run_export": "background",
    "arbiter_app.tasks.check_integrity": "background",
    "arbiter_app.tasks.maintain_signing_keys": "background",
}


@pytest.mark.parametrize(("task", "queue"), ROUTES.items())
def test_each_task_travels_on_the_queue_of_its_kind(task: str, queue: str) -> None:
    app.loader.import_default_modules()
    assert task in app.tasks
    assert app.amqp.router.route({}, task)["queue"].name == queue


def test_every_task_of_the_project_has_a_queue_named_here() -> None:
    app.loader.import_default_modules()
    ours = {
        name
        for name in app.tasks
        if name.startswith(("arbiter_app.", "sessions_app.")) and not name.endswith(".heartbeat")
    }
    assert ours <= set(ROUTES), f"route these, and name them here: {ours - set(ROUTES)}"


def test_beat_sends_its_heartbeat_on_every_queue() -> None:
    heartbeats = [
        entry["options"]["queue"]
        for entry in settings.CELERY_BEAT_SCHEDULE.values()
        if entry["task"] == "arbiter_app.tasks.heartbeat"
    ]
    assert sorted(heartbeats) == sorted(settings.OANP_QUEUES)


def test_a_worker_tries_a_lost_broker_again_every_second_or_two() -> None:
    """Celery's own steps (2, 4, 6 … s) could leave a worker waiting most of a step past the
    broker's return, and every timer with it; and with them, its 100 tries would end a
    worker after 200 s, so it tries for as long as it takes."""
    from oanp_site.celery import Consumer

    asked: dict[str, Any] = {}

    class Conn:
        def ensure_connection(self, *args: Any, **kwargs: Any) -> Conn:
            asked.update(kwargs)
            return self

    consumer = Consumer.__new__(Consumer)
    consumer.app = app
    consumer.first_connection_attempt = False
    consumer.broker_connection_retry_attempt = 0
    consumer.ensure_connected(Conn())
    assert (asked["interval_start"], asked["interval_step"], asked["interval_max"]) == (1, 1, 2)
    assert app.conf.broker_connection_max_retries is None
    assert app.conf.worker_consumer == "oanp_site.celery:Consumer"
