from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Sessions"

    def ready(self) -> None:
        # Hosted agents hear of committed entries the way the arbiter announces them to anyone.
        from arbiter_app import services
        from arbiter_app.events import entries_committed
        from sessions_app import access, hosted_agents, selectors

        entries_committed.connect(hosted_agents.on_entries_committed, dispatch_uid="hosted-agents")
        # A window that runs out on a hosted agent is the arbiter's failure, not its merchant's.
        services.runs_agents(selectors.hosted_among)
        # Live pages close when their viewer's access ends.
        access.connect_signals()
