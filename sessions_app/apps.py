from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Sessions"

    def ready(self) -> None:
        # Hosted agents hear of committed entries the way the arbiter announces them to anyone.
        from django.db.models.signals import post_delete, post_save

        from arbiter_app import services
        from arbiter_app.events import entries_committed
        from sessions_app import access, hosted_agents, hosted_directory, selectors
        from sessions_app.models import AgentProfile

        entries_committed.connect(hosted_agents.on_entries_committed, dispatch_uid="hosted-agents")
        for changed in (post_save, post_delete):
            changed.connect(hosted_directory.forget, sender=AgentProfile, dispatch_uid="hosted")
        # A window that runs out on a hosted agent is the arbiter's failure, not its merchant's.
        services.runs_agents(selectors.hosted_among)
        # Live pages close when their viewer's access ends.
        access.connect_signals()
