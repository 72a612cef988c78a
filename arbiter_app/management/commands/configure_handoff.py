import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from arbiter_app import services


class Command(BaseCommand):
    help = (
        "Hand a merchant's agreements off to its ACP endpoint. Prints the webhook secret the "
        "deliveries are signed with, this once, as JSON."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--merchant-agent-id", required=True)
        parser.add_argument("--endpoint", required=True, help="the ACP base URL")
        parser.add_argument("--api-key", required=True, help="the merchant's ACP API key")
        parser.add_argument("--webhook-secret", help="whsec_…; a new one when not given")

    def handle(
        self,
        *args: Any,
        merchant_agent_id: str,
        endpoint: str,
        api_key: str,
        webhook_secret: str | None,
        **options: Any,
    ) -> None:
        try:
            configured = services.configure_handoff(
                merchant_agent_id=merchant_agent_id,
                endpoint=endpoint,
                api_key=api_key,
                webhook_secret=webhook_secret,
            )
        except ValueError as refused:
            raise CommandError(str(refused)) from refused
        self.stdout.write(
            json.dumps(
                {
                    "merchant_agent_id": merchant_agent_id,
                    "endpoint": endpoint,
                    "webhook_secret": configured.secret,
                }
            )
        )
