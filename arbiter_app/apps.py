from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _grant_app_role(sender: AppConfig, using: str, **kwargs: Any) -> None:
    from arbiter_app.db_privileges import after_migrate

    after_migrate(using)


def _first_signing_key(sender: AppConfig, **kwargs: Any) -> None:
    # A fresh install can sign agreements without a manual step.
    from arbiter_app.signing_keys import ensure_active_key

    ensure_active_key()


class ArbiterAppConfig(AppConfig):
    name = "arbiter_app"
    verbose_name = "Arbiter"

    def ready(self) -> None:
        from arbiter_app import heartbeats, pools
        from arbiter_app.deliveries.callbacks import on_batch_committed
        from arbiter_app.events import batch_committed, deadlines_set, entries_committed
        from arbiter_app.metric_zeros import start_at_zero
        from arbiter_app.metrics import count_verdicts
        from arbiter_app.timers import on_deadlines_set

        # Grants first: the signing key is written over the application's own connection.
        post_migrate.connect(_grant_app_role, sender=self)
        post_migrate.connect(_first_signing_key, sender=self)
        batch_committed.connect(on_batch_committed, dispatch_uid="oanp-callbacks")
        deadlines_set.connect(on_deadlines_set, dispatch_uid="oanp-timers")
        entries_committed.connect(count_verdicts, dispatch_uid="oanp-verdict-metrics")
        heartbeats.connect()
        pools.connect()
        start_at_zero()
