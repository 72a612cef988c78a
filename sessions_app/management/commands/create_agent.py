import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from arbiter_app import services
from arbiter_app.models import AgentRole


class Command(BaseCommand):
    help = 'Issue an API key for an agent and print {"agent_id", "role", "api_key"} as JSON.'

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--role", required=True, choices=AgentRole.values)
        parser.add_argument("--agent-id", required=True)
        parser.add_argument("--label", default="", help="a note for operators")
        parser.add_argument(
            "--owner",
            default="",
            help="who the key is issued to (a dashboard merchant's slug, or any name): the "
            "arbiter refuses a session between two agents of one owner",
        )

    def handle(
        self, *args: Any, role: str, agent_id: str, label: str, owner: str, **options: Any
    ) -> None:
        try:
            issued = services.issue_credential(
                agent_id=agent_id, role=role, label=label, owner=owner
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        printed = {"agent_id": agent_id, "role": role, "api_key": issued.api_key}
        if owner:
            printed["owner"] = owner
        self.stdout.write(json.dumps(printed))
