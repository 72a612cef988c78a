"""``python -m bench.prepare PAIRS``: ready the service section's fresh database.

Run with ``DJANGO_SETTINGS_MODULE=bench.site`` and ``DATABASE_URL`` naming the bench's own
database: migrates it, creates the bare peer's table, makes the arbiter's signing key, and
issues API keys for ``PAIRS`` buyer/merchant pairs through the arbiter's own service.
Prints the pairs as JSON on stdout.
"""

from __future__ import annotations

import json
import sys

import django


def main(argv: list[str]) -> int:
    pairs = int(argv[0])
    django.setup()

    from django.core.management import call_command
    from django.db import connection

    from arbiter_app import services
    from arbiter_app.signing_keys import ensure_active_key
    from bench.peer import CREATE_TABLE

    call_command("migrate", verbosity=0, interactive=False)
    with connection.cursor() as cursor:
        cursor.execute(CREATE_TABLE)
    ensure_active_key()
    issued = []
    for number in range(pairs):
        name = f"p{number:03d}"
        buyer = services.issue_credential(agent_id=f"buyer-{name}", role="buyer")
        merchant = services.issue_credential(agent_id=f"merchant-{name}", role="merchant")
        issued.append(
            {
                "name": name,
                "buyer_id": f"buyer-{name}",
                "buyer_key": buyer.api_key,
                "merchant_id": f"merchant-{name}",
                "merchant_key": merchant.api_key,
            }
        )
    print(json.dumps(issued))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
