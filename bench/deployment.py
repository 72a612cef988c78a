"""A whole deployment on this machine for the soak: a Redis server of its own, which the soak
kills and starts again, and the Procfile's processes run as ``make serve`` runs them.

The Redis server is never the machine's shared one: it keeps nothing (``--save ""``), so a
restart loses every task it held, as a crash of an unpersisted Redis does. The Procfile's
processes run under :class:`oanp_site.supervisor.Supervisor`, each line of the Procfile as it
stands (its queues, pools and concurrency), with their logs, their metrics and the
supervisor's status file in a folder of the run's own, so a ``make serve`` running in the same
checkout is left alone.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from oanp_site.procfile import STATUS_FILE, programs, status, write_status
from oanp_site.supervisor import Supervisor
from tests.support.processes import ROOT, free_port, start_redis, tail, wait_ready
from tests.support.waiting import wait_for

#: The Procfile's Celery workers, whose logs say when each is ready.
WORKERS = ("timers", "hosted", "worker")


class RedisServer:
    """``redis-server`` on a free port of 127.0.0.1, keeping nothing on disk."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = start_redis(self.port, error=RuntimeError)

    def kill(self) -> None:
        """SIGKILL, as a crash: whatever it held is gone."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(5)
            self.process = None


@contextmanager
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.kill()


# The Daphne processes the web process starts again itself (oanp_site.serve), unseen by the
# supervisor, each say so on a line of the web's log.
_DAPHNE_EXITED = re.compile(rb"^web: process [0-9]+ exited with", re.MULTILINE)
# A Celery worker's consumer says so each time it connects to the broker.
_CONNECTED = re.compile(
    rb"^([0-9T:.-]+Z) INFO celery\.worker\.consumer\.connection Connected to ", re.MULTILINE
)


@dataclass
class Deployment:
    url: str
    env: dict[str, str]
    supervisor: Supervisor
    folder: Path

    def status(self) -> dict[str, Any]:
        """What ``var/processes.json`` says under ``make serve``: each process's pid, restarts
        and last exit."""
        return status(self.supervisor)

    def restarts(self) -> dict[str, int]:
        """How often each Procfile process was started again by the supervisor, and (as
        ``daphne``) how often the web started one of its Daphne processes again."""
        counted = {name: child.exits for name, child in self.supervisor.children.items()}
        counted["daphne"] = len(_DAPHNE_EXITED.findall(self.supervisor["web"].output()))
        return counted

    def connected(self, name: str) -> list[datetime]:
        """Each time the Procfile's Celery worker ``name`` connected to the broker."""
        return [
            datetime.fromisoformat(stamp.decode())
            for stamp in _CONNECTED.findall(self.supervisor[name].output())
        ]

    def alive(self) -> bool:
        return all(child.process.poll() is None for child in self.supervisor.children.values())

    def log_tails(self) -> str:
        return "\n".join(
            f"--- {name}\n{tail(child.program.log)}"
            for name, child in self.supervisor.children.items()
        )


def say(message: str) -> None:
    print(f"bench: soak: {message}", file=sys.stderr, flush=True)


@contextmanager
def procfile(env: dict[str, str], port: int, folder: Path) -> Iterator[Deployment]:
    """The Procfile's processes on ``env`` (its database migrated beforehand), the web on
    127.0.0.1:``port``, once the web answers and every worker says it is ready."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics").mkdir(exist_ok=True)
    status_path = folder / STATUS_FILE
    env = {
        **env,
        "HOST": "127.0.0.1",
        "PORT": str(port),
        # The Procfile names `python` and `celery`: this interpreter's, as make serve has them.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "OANP_PROCESSES_FILE": str(status_path),
        "PROMETHEUS_MULTIPROC_DIR": str(folder / "metrics"),
    }

    def report(message: str) -> None:
        say(f"supervisor: {message}")
        write_status(status_path, supervisor)

    supervisor = Supervisor(programs(ROOT / "Procfile", folder), say=report, cwd=ROOT, env=env)
    supervisor.start()
    write_status(status_path, supervisor)
    deployment = Deployment(f"http://127.0.0.1:{port}", env, supervisor, folder)
    try:
        for name in WORKERS:
            child = supervisor[name]
            wait_ready(child.process, child.program.log, timeout=90, error=RuntimeError)
        wait_for(lambda: _answers(deployment.url), 60, interval=0.2, error=RuntimeError)
        say(", ".join(f"{c.name} (pid {c.process.pid})" for c in supervisor.children.values()))
        yield deployment
    except BaseException:
        say(f"the deployment's logs:\n{deployment.log_tails()}")
        raise
    finally:
        supervisor.stop()
        status_path.unlink(missing_ok=True)


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False
