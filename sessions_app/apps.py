from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Sessions"

    def ready(self) -> None:
        # Hosted agents hear of committed entries the way the arbiter announces them to anyone.
        from arbiter_app.events import entries_committed
        from sessions_app import access, runner

        entries_committed.connect(runner.on_entries_committed, dispatch_uid="hosted-agents")
        # Live pages close when their viewer's access ends.
        access.connect_signals()
