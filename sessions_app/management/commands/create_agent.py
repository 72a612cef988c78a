import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from arbiter_app import services
from arbiter_app.models import AgentRole
from sessions_app.agent_lifecycle import ROLE_OF_KIND, NotClaimable, adopt_agent
from sessions_app.models import Merchant


class Command(BaseCommand):
    help = (
        'Issue an API key for an agent and print {"agent_id", "role", "api_key"} as JSON. '
        "With --owner naming an organisation of the dashboard (its slug) on the role's side, "
        "the agent shows among that organisation's agents; else admins see it as unclaimed, "
        "and claim it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--role", required=True, choices=AgentRole.values)
        parser.add_argument("--agent-id", required=True)
        parser.add_argument("--label", default="", help="a note for operators")
        parser.add_argument(
            "--owner",
            default="",
            help="who the key is issued to: an organisation's slug, whose agents it then "
            "joins, or any other name; the arbiter refuses a session between two agents of "
            "one owner",
        )

    def handle(
        self, *args: Any, role: str, agent_id: str, label: str, owner: str, **options: Any
    ) -> None:
        # An organisation on the other side (a merchant's slug on a buyer's key) only owns
        # the key: the arbiter then refuses sessions between that buyer and its merchants.
        organisation = Merchant.objects.filter(
            slug=owner, kind__in=[kind for kind, r in ROLE_OF_KIND.items() if r == role]
        ).first()
        try:
            with transaction.atomic():
                issued = services.issue_credential(
                    agent_id=agent_id, role=role, label=label, owner=owner
                )
                if organisation is not None:
                    adopt_agent(agent_id=agent_id, organisation=organisation)
        except (ValueError, NotClaimable) as exc:
            raise CommandError(str(exc)) from exc
        printed = {"agent_id": agent_id, "role": role, "api_key": issued.api_key}
        if owner:
            printed["owner"] = owner
        if organisation is not None:
            printed["organisation"] = organisation.name
        self.stdout.write(json.dumps(printed))
