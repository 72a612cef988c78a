# The Celery app loads with Django, so on_commit can send tasks from any process.
from oanp_site.celery import app as celery_app

__all__ = ("celery_app",)
