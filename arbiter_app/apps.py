from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _first_signing_key(sender: AppConfig, **kwargs: Any) -> None:
    # A fresh install can sign agreements without a manual step.
    from arbiter_app.keys import ensure_active_key

    ensure_active_key()


class ArbiterAppConfig(AppConfig):
    name = "arbiter_app"
    verbose_name = "Arbiter"

    def ready(self) -> None:
        from arbiter_app.callbacks import on_entries_committed
        from arbiter_app.events import entries_committed

        post_migrate.connect(_first_signing_key, sender=self)
        entries_committed.connect(on_entries_committed, dispatch_uid="oanp-callbacks")
