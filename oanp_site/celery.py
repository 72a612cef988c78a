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
