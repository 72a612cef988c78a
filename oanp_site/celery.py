"""The Celery application: ``celery -A oanp_site worker -B`` runs a worker with beat."""

import logging.config
import os
from functools import partial
from typing import Any

from celery import Celery, bootsteps, signals
from celery.worker import consumer

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oanp_site.settings")

app = Celery("oanp_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


class RearmTimers(bootsteps.StartStopStep):
    """A step of the worker's consumer, started each time it connects to the broker: at the
    worker's start, and again after the broker was lost (arbiter_app.timers.connected)."""

    requires = frozenset({"celery.worker.consumer.tasks:Tasks"})

    def start(self, parent: Any) -> None:
        from arbiter_app import timers

        timers.connected(serving=set(parent.app.amqp.queues.consume_from))


app.steps["consumer"].add(RearmTimers)


class Consumer(consumer.Consumer):
    """Celery's consumer, trying a lost broker again every second, at most two apart: with
    Celery's 2, 4, 6 … s a worker could wait most of a step past the broker's return, and every
    timer it should close waits with it (docs/scaling.md, The broker going away)."""

    def ensure_connected(self, conn: Any) -> Any:
        conn.ensure_connection = partial(
            conn.ensure_connection, interval_start=1, interval_step=1, interval_max=2
        )
        return super().ensure_connected(conn)


@signals.setup_logging.connect
def _log_like_the_server(**kwargs: Any) -> None:
    """Connected, this replaces Celery's own logging set-up: the worker and beat write the
    server's format (oanp_site.logs), JSON lines included."""
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)


@signals.worker_init.connect
@signals.beat_init.connect
def _refuse_development_secrets(**kwargs: Any) -> None:
    """The worker and beat run no system checks: on development secrets they stop here.
    SystemExit, because Celery logs and ignores any other exception a signal handler raises."""
    from django.core.exceptions import ImproperlyConfigured

    from oanp_site.checks import refuse_to_start

    try:
        refuse_to_start()
    except ImproperlyConfigured as unsafe:
        raise SystemExit(str(unsafe)) from None
