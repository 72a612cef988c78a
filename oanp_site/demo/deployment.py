"""The processes ``make demo`` runs, the server, the worker and beat, and how it waits for them
to come up."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import httpx
from django.conf import settings
from django.core.management.base import CommandError

from oanp_site import processes
from oanp_site.supervisor import Child, Program

STARTUP_SECONDS = 30


def forget_earlier_metrics() -> None:
    """This demo starts every process of its deployment, so counters start at zero with it:
    the files of an earlier run's processes (``counter_<pid>.db`` and the like, their pids gone)
    would otherwise be added to this one's."""
    for stale in Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).glob("*_*.db"):
        pid = stale.stem.rpartition("_")[2]
        if pid.isdigit() and not processes.alive(int(pid)):
            stale.unlink(missing_ok=True)


def environment(url: str) -> dict[str, str]:
    """What the demo's processes run with on top of this one's environment.

    They publish the address they serve at (the discovery document, every agreement's
    ``jwks_uri``, the handoffs' metadata), whatever ``--port`` chose, unless an
    ``OANP_PUBLIC_URL`` was set for them. DEBUG is off, so that a visitor meets the site's
    own 404 and 500 pages, and a development machine stays one (``OANP_DEVELOPMENT``).
    """
    return {
        "OANP_PUBLIC_URL": os.environ.get("OANP_PUBLIC_URL") or url,
        "DJANGO_DEBUG": "0",
        "OANP_DEVELOPMENT": "1" if settings.DEVELOPMENT else "0",
    }


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


def wait_until_ready(worker: Child) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while b" ready." not in worker.output():
        if worker.exits:
            raise CommandError(f"the Celery worker exited; see {worker.program.log}")
        if time.monotonic() > deadline:
            raise CommandError(f"the Celery worker was not ready in {STARTUP_SECONDS} s")
        time.sleep(0.2)


def wait_until_up(url: str, server: Child) -> None:
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
