"""``make demo``: the arbiter served by Daphne with a Celery worker and beat beside it, the
SFO→JFK session run live against it, then a session left to its deadline, closed by the worker."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections import deque
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import FrameType
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
from oanp.envelope import format_timestamp
from oanp.log import Entry
from oanp.strategies import ReferenceBuyer, ReferenceMerchant

STARTUP_SECONDS = 30
# The timer demo's session ends this long after it opens, with nobody moving.
DEADLINE_SECONDS = 5


class Stop(Exception):
    """SIGTERM: unwind like Ctrl-C, so the server and the worker are stopped, not orphaned."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise Stop


def _end(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the child's whole group (the worker's beat is a process of its own), then
    SIGKILL for whatever is still there after a grace period."""
    if child.poll() is not None:
        return
    try:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(5)
    except ProcessLookupError:
        pass


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
        signal.signal(signal.SIGTERM, _stop)
        children: list[subprocess.Popen[bytes]] = []
        try:
            access_log = settings.VAR_DIR / "demo-access.log"
            daphne = ["daphne", "-b", host, "-p", str(port), "--access-log", str(access_log)]
            server = self._spawn(children, [*daphne, "oanp_site.asgi:application"])
            worker_log = settings.VAR_DIR / "demo-worker.log"
            worker = self._spawn(children, self._worker_command(), log=worker_log)
            self._wait_until_up(url, server)
            self._wait_until_ready(worker, worker_log)
            self.stdout.write(f"\nThe arbiter is serving at {url}/")
            self.stdout.write(
                f"  API:     {url}/oanp/v0.1/  (OpenAPI: {url}/oanp/v0.1/openapi.json)"
            )
            self.stdout.write(f"  JWKS:    {url}/.well-known/jwks.json")
            self.stdout.write(f"  Admin:   {url}/admin/")
            self.stdout.write(f"  Timers:  a Celery worker with beat (its log: {worker_log})")
            self.stdout.write(f"  Access log: {access_log}\n")
            self._negotiate(url)
            self._time_out(url)
            if no_serve:
                return
            self.stdout.write(f"\nStill serving at {url}/ - press Ctrl-C to stop.")
            server.wait()
        except (KeyboardInterrupt, Stop):
            pass
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            for child in reversed(children):
                _end(child)

    def _spawn(
        self,
        children: list[subprocess.Popen[bytes]],
        module_args: list[str],
        *,
        log: Any = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``python -m ...`` with this process's environment, in a process group of its
        own: Ctrl-C reaches only this command, which stops each child in turn."""
        out = None if log is None else open(log, "wb")  # noqa: SIM115 - the child keeps it
        try:
            child = subprocess.Popen(  # noqa: S603 - our own interpreter and modules
                [sys.executable, "-m", *module_args],
                cwd=settings.BASE_DIR,
                env=os.environ.copy(),
                stdout=out,
                stderr=None if out is None else subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            if out is not None:
                out.close()
        children.append(child)
        return child

    @staticmethod
    def _worker_command() -> list[str]:
        # Beat keeps its schedule in a file under var/: no schedule tables for SQLite to lock.
        return [
            "celery",
            "-A",
            "oanp_site",
            "worker",
            "-B",
            "--scheduler",
            "celery.beat:PersistentScheduler",
            "--schedule",
            str(settings.VAR_DIR / "demo-beat-schedule"),
            "--pool",
            "threads",
            "--concurrency",
            "2",
            "--loglevel",
            "INFO",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
        ]

    def _wait_until_ready(self, worker: subprocess.Popen[bytes], log: Any) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while b" ready." not in log.read_bytes():  # the log starts afresh with each demo
            if worker.poll() is not None:
                raise CommandError(f"the Celery worker exited with {worker.returncode}; see {log}")
            if time.monotonic() > deadline:
                raise CommandError(f"the Celery worker was not ready in {STARTUP_SECONDS} s")
            time.sleep(0.2)

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

    @staticmethod
    def _agents() -> tuple[BuyerAgent, MerchantAgent, dict[str, str]]:
        """The published example's two agents, each with a fresh API key of its own."""
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
        return buyer, merchant, keys

    def _exchange(
        self,
        client: httpx.Client,
        agents: tuple[BuyerAgent, MerchantAgent, dict[str, str]],
        opening: dict[str, Any],
        *,
        quiet: str | None = None,
    ) -> list[dict[str, Any]]:
        """Post ``opening``, then whatever each agent answers to every new entry, until neither
        has anything to say (``quiet`` names a role that stops answering); the log."""
        buyer, merchant, keys = agents
        session_id = opening["session_id"]
        outbox: deque[tuple[str, dict[str, Any]]] = deque([("buyer", opening)])
        shown = 0
        log: list[dict[str, Any]] = []
        while outbox:
            role, envelope = outbox.popleft()
            answer = client.post(
                "/oanp/v0.1/envelopes",
                content=json.dumps(envelope),
                headers={"Authorization": f"Bearer {keys[role]}"},
            )
            if answer.status_code != 201:
                raise CommandError(f"the arbiter refused a move: {answer.text}")
            log = self._log(client, session_id, keys["buyer"])
            for entry in log[shown:]:
                self.stdout.write(describe_entry(Entry(**entry)))
                now = datetime.now(UTC)
                if quiet != "buyer":
                    outbox.extend(("buyer", e) for e in buyer.receive(entry["envelope"], now))
                if quiet != "merchant":
                    outbox.extend(("merchant", e) for e in merchant.receive(entry["envelope"], now))
            shown = len(log)
        return log

    @staticmethod
    def _log(client: httpx.Client, session_id: str, key: str) -> list[dict[str, Any]]:
        answer = client.get(
            f"/oanp/v0.1/sessions/{session_id}/log", headers={"Authorization": f"Bearer {key}"}
        )
        entries: list[dict[str, Any]] = answer.json()["entries"]
        return entries

    def _negotiate(self, url: str) -> None:
        """Two agents, each with its own API key, negotiate through the API like any client."""
        agents = buyer, merchant, keys = self._agents()
        session_id = new_ulid()
        self.stdout.write(
            f"Live demo: session {session_id}, {buyer.agent_id} and {merchant.agent_id}"
        )
        self.stdout.write("Each side's private limit stays in its own process.\n")
        opening = buyer.open(
            session_id=session_id,
            merchant_agent_id=merchant.agent_id,
            item={"route": "SFO-JFK", "date": "2026-04-28"},
            currency="USD",
            max_rounds=5,
            now=datetime.now(UTC),
        )
        with httpx.Client(base_url=url, timeout=10) as client:
            log = self._exchange(client, agents, opening)
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

    def _time_out(self, url: str) -> None:
        """A session with a deadline a few seconds away, then silence: the worker's timer
        closes it, with nobody calling the server. Its summary is polled to show when."""
        agents = buyer, merchant, keys = self._agents()
        session_id = new_ulid()
        deadline = datetime.now(UTC) + timedelta(seconds=DEADLINE_SECONDS)
        self.stdout.write(
            f"\nTimers: session {session_id} must end by {format_timestamp(deadline)}; "
            "the merchant acknowledges, then the buyer goes quiet."
        )
        opening = buyer.open(
            session_id=session_id,
            merchant_agent_id=merchant.agent_id,
            item={"route": "SFO-JFK", "date": "2026-04-28"},
            currency="USD",
            max_rounds=5,
            now=datetime.now(UTC),
            deadline=deadline,
        )
        headers = {"Authorization": f"Bearer {keys['buyer']}"}
        # The task fires at the deadline; the sweep would catch it within one period anyway.
        patience = DEADLINE_SECONDS + settings.OANP_TIMER_SWEEP_SECONDS + STARTUP_SECONDS
        with httpx.Client(base_url=url, timeout=10) as client:
            shown = len(self._exchange(client, agents, opening, quiet="buyer"))
            self.stdout.write("  waiting for the arbiter ...")
            give_up = time.monotonic() + patience
            summary = f"/oanp/v0.1/sessions/{session_id}"
            while client.get(summary, headers=headers).json()["outcome"] is None:
                if time.monotonic() > give_up:
                    raise CommandError(f"no timer closed session {session_id} in {patience} s")
                time.sleep(0.2)
            log = self._log(client, session_id, keys["buyer"])
        for entry in log[shown:]:
            self.stdout.write(describe_entry(Entry(**entry)))
        close = log[-1]
        late = datetime.fromisoformat(close["received_at"]) - deadline
        self.stdout.write(
            f"closed: {close['envelope']['payload'].get('reason')} at {close['received_at']}, "
            f"{late.total_seconds():.2f} s after the deadline, by the worker's timer"
        )
