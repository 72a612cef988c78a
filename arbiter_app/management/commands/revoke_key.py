import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from arbiter_app import services


class Command(BaseCommand):
    help = (
        "Revoke an agent's API key, or all of them. Requests with a revoked key get 401 and "
        "every stream opened with it ends within seconds. Prints what it revoked as JSON."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agent-id", required=True)
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--key-prefix", help="the key's prefix: oanp_<prefix>_…")
        which.add_argument(
            "--all", dest="revoke_all", action="store_true", help="every live key of the agent"
        )

    def handle(self, *args: Any, agent_id: str, key_prefix: str | None, **options: Any) -> None:
        revoked = services.revoke_credentials(agent_id=agent_id, prefix=key_prefix)
        if key_prefix is not None and not revoked:
            raise CommandError(f"agent {agent_id!r} has no live key with prefix {key_prefix!r}")
        self.stdout.write(
            json.dumps(
                {
                    "agent_id": agent_id,
                    "revoked": [
                        {
                            "prefix": credential.prefix,
                            "role": credential.role,
                            "label": credential.label,
                            "created_at": credential.created_at.isoformat(),
                            "revoked_at": credential.revoked_at.isoformat()
                            if credential.revoked_at
                            else None,
                        }
                        for credential in revoked
                    ],
                }
            )
        )
