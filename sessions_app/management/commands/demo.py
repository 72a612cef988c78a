"""``make demo``: the arbiter served by Daphne, with the SFO→JFK session run live against it."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from collections import deque
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from arbiter_app import services
from oanp.agents import BuyerAgent, BuyerVault, MerchantAgent, MerchantVault
from oanp.audit import verify_log
from oanp.cli import describe_entry, new_ulid
from oanp.commitments import encode_salt
from oanp.log import Entry
from oanp.strategies import ReferenceBuyer, ReferenceMerchant

STARTUP_SECONDS = 30


class Command(BaseCommand):
    help = "Serve the arbiter and run the SFO→JFK negotiation against it over HTTP."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--no-serve", action="store_true", help="stop the server after the negotiation"
        )

    def handle(self, *args: Any, host: str, port: int, no_serve: bool, **options: Any) -> None:
        call_command("migrate", verbosity=0)
        url = f"http://{host}:{port}"
        server = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                host,
                "-p",
                str(port),
                "oanp_site.asgi:application",
            ],
            cwd=settings.BASE_DIR,
        )
        try:
            self._wait_until_up(url, server)
            self.stdout.write(f"\nThe arbiter is serving at {url}/")
            self.stdout.write(
                f"  API:     {url}/oanp/v0.1/  (OpenAPI: {url}/oanp/v0.1/openapi.json)"
            )
            self.stdout.write(f"  JWKS:    {url}/.well-known/jwks.json")
            self.stdout.write(f"  Admin:   {url}/admin/\n")
            self._negotiate(url)
            if no_serve:
                return
            self.stdout.write(f"\nStill serving at {url}/ - press Ctrl-C to stop.")
            server.wait()
        except KeyboardInterrupt:
            pass
        finally:
            server.terminate()
            server.wait(10)

    def _wait_until_up(self, url: str, server: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise CommandError(f"the server exited with {server.returncode}; is {url} taken?")
            try:
                httpx.get(f"{url}/.well-known/jwks.json", timeout=1)
                return
            except httpx.TransportError:
                time.sleep(0.2)
        raise CommandError(f"the server did not answer at {url} within {STARTUP_SECONDS} s")

    def _negotiate(self, url: str) -> None:
        """Two agents, each with its own API key, negotiate through the API like any client."""
        buyer_id, merchant_id = "buyer-demo", "merchant-sfo"
        keys = {
            "buyer": services.issue_credential(agent_id=buyer_id, role="buyer").api_key,
            "merchant": services.issue_credential(agent_id=merchant_id, role="merchant").api_key,
        }
        buyer = BuyerAgent(
            agent_id=buyer_id,
            vault=BuyerVault(true_ceiling=Decimal(420), budget_cap=Decimal(400), urgency="medium"),
            strategy=ReferenceBuyer(),
            salt=encode_salt(secrets.token_bytes(32)),
            new_message_id=new_ulid,
        )
        merchant = MerchantAgent(
            agent_id=merchant_id,
            vault=MerchantVault(floor_price=Decimal(280), ideal_price=Decimal(400)),
            strategy=ReferenceMerchant(),
            salt=encode_salt(secrets.token_bytes(32)),
            new_message_id=new_ulid,
        )
        session_id = new_ulid()
        self.stdout.write(f"Live demo: session {session_id}, {buyer_id} and {merchant_id}")
        self.stdout.write("Each side's private limit stays in its own process.\n")
        opening = buyer.open(
            session_id=session_id,
            merchant_agent_id=merchant_id,
            item={"route": "SFO-JFK", "date": "2026-04-28"},
            currency="USD",
            max_rounds=5,
            now=datetime.now(UTC),
        )
        outbox: deque[tuple[str, dict[str, Any]]] = deque([("buyer", opening)])
        shown = 0
        with httpx.Client(base_url=url, timeout=10) as client:
            while outbox:
                role, envelope = outbox.popleft()
                answer = client.post(
                    "/oanp/v0.1/envelopes",
                    content=json.dumps(envelope),
                    headers={"Authorization": f"Bearer {keys[role]}"},
                )
                if answer.status_code != 201:
                    raise CommandError(f"the arbiter refused a move: {answer.text}")
                log = client.get(
                    f"/oanp/v0.1/sessions/{session_id}/log",
                    headers={"Authorization": f"Bearer {keys['buyer']}"},
                ).json()["entries"]
                for entry in log[shown:]:
                    self.stdout.write(describe_entry(Entry(**entry)))
                    now = datetime.now(UTC)
                    outbox.extend(("buyer", e) for e in buyer.receive(entry["envelope"], now))
                    outbox.extend(("merchant", e) for e in merchant.receive(entry["envelope"], now))
                shown = len(log)
            jwks = client.get("/.well-known/jwks.json").json()
        outcome = log[-1]["envelope"]["payload"]
        if log[-1]["envelope"]["type"] == "session.agree":
            rounds = sum(e["envelope"]["type"] == "round.verdict" for e in log)
            self.stdout.write(
                f"\nSettled at {outcome['final_price']} {outcome['currency']} in {rounds} rounds."
            )
        report = verify_log(log, jwks)
        self.stdout.write(f"Verified offline from the JWKS: {report.summary()}")
        self.stdout.write(
            "\nTry it yourself (keys are shown once):\n"
            f"  curl -H 'Authorization: Bearer {keys['buyer']}' "
            f"{url}/oanp/v0.1/sessions/{session_id}/log > log.json\n"
            f"  curl {url}/.well-known/jwks.json > jwks.json\n"
            "  oanp verify log.json --jwks jwks.json"
        )
