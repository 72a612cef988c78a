"""The Celery application: ``celery -A oanp_site worker -B`` runs a worker with beat."""

import logging.config
import os
from typing import Any

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oanp_site.settings")

app = Celery("oanp_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


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
