"""``make demo``: the arbiter served by Daphne with a Celery worker and beat beside it, the
demo accounts and hosted merchant agents seeded (:mod:`~sessions_app.demo.seed`), the SFO→JFK
session run live against SkyFare's hosted agent, a session left to its deadline and closed by
the worker, then buyer agents that keep negotiating in the background so the dashboard has
something to show."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from types import FrameType

from django.conf import settings
from django.core.management import call_command

from oanp_site.demo.deployment import (
    environment,
    forget_earlier_metrics,
    programs,
    wait_until_ready,
    wait_until_up,
)
from oanp_site.supervisor import Supervisor
from sessions_app.demo.buyers import BackgroundBuyers
from sessions_app.demo.seed import DEMO_BUYERS, Seeded, accounts_table, issue_buyer_keys, seed
from sessions_app.demo.walkthrough import WALKTHROUGH_BUYER, Walkthrough


class Stop(Exception):
    """SIGTERM: unwind like Ctrl-C, so the children are stopped, not orphaned."""


def _stop(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once is enough; see the cleanup
    raise Stop


def _welcome(url: str, supervisor: Supervisor, seeded: Seeded, say: Callable[[str], None]) -> None:
    say(f"\nThe arbiter is serving at {url}/")
    say(f"  Dashboard: {url}/  (sign in at {url}/login/)")
    say(
        f"  Admin:   {url}/keys/ (signing keys), {url}/exports/ (audit exports), "
        f"{url}/audit/ (who did what), for the admin account"
    )
    say(f"  API:     {url}/oanp/v0.1/  (OpenAPI: {url}/oanp/v0.1/openapi.json)")
    say(f"  JWKS:    {url}/.well-known/jwks.json")
    say("  Timers:  a Celery worker and beat")
    say(f"  Health:  {url}/readyz  (metrics: {url}/metrics)")
    say("  Each process is restarted when it exits; their logs:")
    for child in supervisor.children.values():
        say(f"    {child.name}: {child.program.log}")
    say(f"  Access log: {settings.VAR_DIR / 'demo-access.log'}")
    say(
        "  Mail:    printed in the server's log, password-reset links included "
        "(each demo account's address is <name>@demo.invalid)\n"
    )
    say("Demo accounts (passwords are kept only hashed, so they are shown")
    say("when set; `manage.py demo --reset-passwords` sets new ones):")
    for line in accounts_table(seeded):
        say(f"  {line}")
    say(f"Hosted merchant agents: {', '.join(seeded.agents)}\n")


def run(
    *,
    host: str,
    port: int,
    no_serve: bool,
    buyers: int,
    reset_passwords: bool,
    say: Callable[[str], None],
) -> None:
    call_command("migrate", verbosity=0)
    seeded = seed(reset_passwords=reset_passwords)
    keys = issue_buyer_keys()
    url = f"http://{host}:{port}"
    signal.signal(signal.SIGTERM, _stop)
    forget_earlier_metrics()
    supervisor = Supervisor(
        programs(host, port),
        say=say,
        cwd=settings.BASE_DIR,
        env={**os.environ, **environment(url)},
    )
    background: BackgroundBuyers | None = None
    try:
        supervisor.start()
        wait_until_up(url, supervisor["server"])
        wait_until_ready(supervisor["worker"])
        _welcome(url, supervisor, seeded, say)
        walkthrough = Walkthrough(url, keys, say)
        walkthrough.negotiate()
        walkthrough.time_out()
        if no_serve:
            return
        if buyers > 0:
            strategies = {b.agent_id: b.strategy for b in DEMO_BUYERS}
            del strategies[WALKTHROUGH_BUYER]
            background = BackgroundBuyers(
                url,
                {agent_id: keys[agent_id] for agent_id in strategies},
                strategies,
                say,
                concurrency=buyers,
            )
            background.start()
            say(
                f"\nBackground buyers ({', '.join(strategies)}) keep negotiating with the "
                f"hosted merchants, {buyers} session(s) at a time. Most reveal their limits "
                "after the end (the session page's zone and surplus), some settle by "
                "reveal, some negotiate checked bags and the fare class with SkyFare besides "
                "the fare (the issue table and, once both revealed, the Pareto frontier), "
                "and a few renege on purpose for the arbiter to catch."
            )
        say(f"\nStill serving at {url}/ - press Ctrl-C to stop.")
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
