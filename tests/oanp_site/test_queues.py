"""Each kind of work travels on its queue (settings.CELERY_TASK_ROUTES), and beat's heartbeat
on every queue, so /readyz can tell each one is served."""

from __future__ import annotations

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
