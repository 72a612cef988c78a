"""The Celery application: ``celery -A oanp_site worker -B`` runs a worker with beat."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oanp_site.settings")

app = Celery("oanp_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
