"""``make demo``: the arbiter served by Daphne with a Celery worker and beat beside it, the
demo accounts and hosted merchant agents seeded (``seed_demo``), the SFO→JFK session run live
against SkyFare's hosted agent, a session left to its deadline and closed by the worker, then
buyer agents that keep negotiating in the background so the dashboard has something to show."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from oanp.agents import BuyerAgent
from oanp.audit import verify_log
from oanp.envelope import format_timestamp
from oanp.ids import new_ulid
from oanp.log import Entry
from oanp.net.client import ArbiterClient
from oanp.transcript import describe_entry
from oanp.vaults import BuyerVault
from oanp_site import processes
from oanp_site.supervisor import Child, Program, Supervisor
from sessions_app.demo_buyers import BackgroundBuyers, Stalled, buyer_agent, negotiate
from sessions_app.management.commands.seed_demo import (
    DEMO_BUYERS,
    accounts_table,
    issue_buyer_keys,
    seed,
)

STARTUP_SECONDS = 30
# The timer demo's session ends this long after it opens, with nobody moving.
DEADLINE_SECONDS = 5
WALKTHROUGH_BUYER = "buyer-demo"
WALKTHROUGH_MERCHANT = "merchant-sfo"
SFO_JFK = {"route": "SFO-JFK", "date": "2026-04-28"}


class Stop(Exception):
    """SIGTERM: unwind like Ctrl-C, so the children are stopped, not orphaned."""


def _stop(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once is enough; see the cleanup
    raise Stop


def _forget_earlier_metrics() -> None:
    """This demo starts every process of its deployment, so counters start at zero with it:
    the files of an earlier run's processes (``counter_<pid>.db`` and the like, their pids gone)
    would otherwise be added to this one's."""
    for stale in Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).glob("*_*.db"):
        pid = stale.stem.rpartition("_")[2]
        if pid.isdigit() and not processes.alive(int(pid)):
            stale.unlink(missing_ok=True)


def programs(host: str, port: int) -> list[Program]:
    """The server, the worker and beat, each a process of its own with its own log, so each
    can die and come back alone."""
    var = settings.VAR_DIR
    python = [sys.executable, "-m"]
    daphne = [*python, "daphne", "-b", host, "-p", str(port)]
    celery = [*python, "celery", "-A", "oanp_site"]
    loglevel = ["--loglevel", "INFO"]
    return [
        Program(
            "server",
            [*daphne, "--access-log", str(var / "demo-access.log"), "oanp_site.asgi:application"],
            var / "demo-server.log",
        ),
        Program(
            "worker",
            [
                *celery,
                "worker",
                "--pool",
                "threads",
                "--concurrency",
                "2",
                *loglevel,
                "--without-heartbeat",
                "--without-gossip",
                "--without-mingle",
            ],
            var / "demo-worker.log",
        ),
        # The schedule is a file under var/: no schedule tables for SQLite to lock.
        Program(
            "beat",
            [
                *celery,
                "beat",
                "--scheduler",
                "celery.beat:PersistentScheduler",
                "--schedule",
                str(var / "demo-beat-schedule"),
                *loglevel,
            ],
            var / "demo-beat.log",
        ),
    ]


class Command(BaseCommand):
    help = "Serve the arbiter with demo accounts, hosted agents and buyers negotiating live."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--no-serve", action="store_true", help="stop the server after the negotiation"
        )
        parser.add_argument(
            "--buyers",
            type=int,
            default=3,
            help="background sessions at a time while serving (0: none)",
        )
        parser.add_argument(
            "--reset-passwords",
            action="store_true",
            help="give the demo accounts new passwords (they are printed only when set)",
        )

    def handle(
        self,
        *args: Any,
        host: str,
        port: int,
        no_serve: bool,
        buyers: int,
        reset_passwords: bool,
        **options: Any,
    ) -> None:
        call_command("migrate", verbosity=0)
        seeded = seed(reset_passwords=reset_passwords)
        keys = issue_buyer_keys()
        self.url = url = f"http://{host}:{port}"
        signal.signal(signal.SIGTERM, _stop)
        _forget_earlier_metrics()
        supervisor = Supervisor(programs(host, port), say=self.stdout.write, cwd=settings.BASE_DIR)
        background: BackgroundBuyers | None = None
        try:
            supervisor.start()
            self._wait_until_up(url, supervisor["server"])
            self._wait_until_ready(supervisor["worker"])
            self.stdout.write(f"\nThe arbiter is serving at {url}/")
            self.stdout.write(f"  Dashboard: {url}/  (sign in at {url}/login/)")
            self.stdout.write(
                f"  Admin:   {url}/keys/ (signing keys), {url}/exports/ (audit exports), "
                f"{url}/audit/ (who did what), for the admin account"
            )
            self.stdout.write(
                f"  API:     {url}/oanp/v0.1/  (OpenAPI: {url}/oanp/v0.1/openapi.json)"
            )
            self.stdout.write(f"  JWKS:    {url}/.well-known/jwks.json")
            self.stdout.write("  Timers:  a Celery worker and beat")
            self.stdout.write(f"  Health:  {url}/readyz  (metrics: {url}/metrics)")
            self.stdout.write("  Each process is restarted when it exits; their logs:")
            for child in supervisor.children.values():
                self.stdout.write(f"    {child.name}: {child.program.log}")
            self.stdout.write(f"  Access log: {settings.VAR_DIR / 'demo-access.log'}\n")
            self.stdout.write("Demo accounts (passwords are kept only hashed, so they are shown")
            self.stdout.write("when set; `manage.py demo --reset-passwords` sets new ones):")
            for line in accounts_table(seeded):
                self.stdout.write(f"  {line}")
            self.stdout.write(f"Hosted merchant agents: {', '.join(seeded.agents)}\n")
            self._negotiate(keys)
            self._time_out(keys)
            if no_serve:
                return
            if buyers > 0:
                strategies = {b.agent_id: b.strategy for b in DEMO_BUYERS}
                del strategies[WALKTHROUGH_BUYER]
                background = BackgroundBuyers(
                    url,
                    {agent_id: keys[agent_id] for agent_id in strategies},
                    strategies,
                    self.stdout.write,
                    concurrency=buyers,
                )
                background.start()
                self.stdout.write(
                    f"\nBackground buyers ({', '.join(strategies)}) keep negotiating with the "
                    f"hosted merchants, {buyers} session(s) at a time. Most reveal their limits "
                    "after the end (the session page's zone and surplus), some settle by "
                    "reveal, some negotiate checked bags and the fare class with SkyFare besides "
                    "the fare (the issue table and, once both revealed, the Pareto frontier), "
                    "and a few renege on purpose for the arbiter to catch."
                )
            self.stdout.write(f"\nStill serving at {url}/ - press Ctrl-C to stop.")
            while True:  # the children are watched by threads; here we only wait for a signal
                signal.pause()
        except (KeyboardInterrupt, Stop):
            pass
        finally:
            # A second signal must not cut the cleanup short: `timeout`, for one, sends SIGTERM
            # to the command and then to its whole process group.
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            try:
                if background is not None:
                    background.close()
                supervisor.stop()
            finally:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, previous)

    def _wait_until_ready(self, worker: Child) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while b" ready." not in worker.output():
            if worker.exits:
                raise CommandError(f"the Celery worker exited; see {worker.program.log}")
            if time.monotonic() > deadline:
                raise CommandError(f"the Celery worker was not ready in {STARTUP_SECONDS} s")
            time.sleep(0.2)

    def _wait_until_up(self, url: str, server: Child) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if server.exits:
                raise CommandError(f"the server exited; is {url} taken?")
            try:
                httpx.get(f"{url}/.well-known/jwks.json", timeout=1)
                return
            except httpx.TransportError:
                time.sleep(0.2)
        raise CommandError(f"the server did not answer at {url} within {STARTUP_SECONDS} s")

    def _buyer(self, keys: dict[str, str]) -> tuple[BuyerAgent, ArbiterClient]:
        """The published example's buyer (ceiling 420, budget 400), in this process."""
        vault = BuyerVault(true_ceiling=Decimal(420), budget_cap=Decimal(400), urgency="medium")
        client = ArbiterClient(self.url, keys[WALKTHROUGH_BUYER])
        return buyer_agent(WALKTHROUGH_BUYER, vault, "reference"), client

    def _show(self, entry: dict[str, Any]) -> None:
        self.stdout.write(describe_entry(Entry(**entry)))

    def _negotiate(self, keys: dict[str, str]) -> None:
        """The buyer negotiates over HTTP; the hosted merchant answers through the worker."""
        buyer, client = self._buyer(keys)
        session_id = new_ulid()
        self.stdout.write(
            f"Live demo: session {session_id}, {buyer.agent_id} (here, over HTTP) and "
            f"{WALKTHROUGH_MERCHANT} (hosted: SkyFare's agent, answered by the worker)"
        )
        self.stdout.write("Each side's private limit stays on its own side.\n")
        opening = buyer.open(
            session_id=session_id,
            merchant_agent_id=WALKTHROUGH_MERCHANT,
            item=SFO_JFK,
            currency="USD",
            max_rounds=5,
            now=datetime.now(UTC),
        )
        with client:
            log = self._drive(client, buyer, opening)
            jwks = client.jwks()
        outcome = log[-1]["envelope"]["payload"]
        if log[-1]["envelope"]["type"] == "session.agree":
            rounds = sum(e["envelope"]["type"] == "round.verdict" for e in log)
            self.stdout.write(
                f"\nSettled at {outcome['final_price']} {outcome['currency']} in {rounds} rounds."
            )
        report = verify_log(log, jwks)
        self.stdout.write(f"Verified offline from the JWKS: {report.summary()}")
        self.stdout.write(
            f"Watch it on the dashboard: {self.url}/sessions/{session_id}/\n"
            "\nTry it yourself (this run's buyer key, shown once):\n"
            f"  curl -H 'Authorization: Bearer {keys[WALKTHROUGH_BUYER]}' "
            f"{self.url}/oanp/v0.1/sessions/{session_id}/log > log.json\n"
            f"  curl {self.url}/.well-known/jwks.json > jwks.json\n"
            "  oanp verify log.json --jwks jwks.json"
        )

    def _drive(
        self,
        client: ArbiterClient,
        buyer: BuyerAgent,
        opening: dict[str, Any],
        *,
        moves: int | None = None,
        patience: float = STARTUP_SECONDS,
    ) -> list[dict[str, Any]]:
        try:
            return negotiate(
                client,
                buyer,
                opening,
                stop=threading.Event(),
                moves=moves,
                on_entry=self._show,
                patience=patience,
            )
        except Stalled as stalled:
            worker_log = settings.VAR_DIR / "demo-worker.log"
            raise CommandError(f"{stalled}; is the worker answering? See {worker_log}") from None

    def _time_out(self, keys: dict[str, str]) -> None:
        """A session with a deadline a few seconds away, then silence: the worker's timer
        closes it, with nobody calling the server."""
        buyer, client = self._buyer(keys)
        session_id = new_ulid()
        deadline = datetime.now(UTC) + timedelta(seconds=DEADLINE_SECONDS)
        self.stdout.write(
            f"\nTimers: session {session_id} must end by {format_timestamp(deadline)}; "
            "the hosted merchant acknowledges, then the buyer goes quiet."
        )
        opening = buyer.open(
            session_id=session_id,
            merchant_agent_id=WALKTHROUGH_MERCHANT,
            item=SFO_JFK,
            currency="USD",
            max_rounds=5,
            now=datetime.now(UTC),
            deadline=deadline,
        )
        # The task fires at the deadline; the sweep would catch it within one period anyway.
        patience = DEADLINE_SECONDS + settings.OANP_TIMER_SWEEP_SECONDS + STARTUP_SECONDS
        with client:
            log = self._drive(client, buyer, opening, moves=1, patience=patience)
        close = log[-1]
        late = datetime.fromisoformat(close["received_at"]) - deadline
        self.stdout.write(
            f"closed: {close['envelope']['payload'].get('reason')} at {close['received_at']}, "
            f"{late.total_seconds():.2f} s after the deadline, by the worker's timer"
        )
