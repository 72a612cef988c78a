"""The web process (the Procfile's ``web``): Daphne serving the project's ASGI application in
``$WEB_CONCURRENCY`` processes (default: two per core) that share one listening socket on
``$HOST:$PORT`` (default ``0.0.0.0:8000``), the kernel handing each connection to one of them.

Behind ``N`` proxies that each append to ``X-Forwarded-For``, ``OANP_PROXY_HEADERS=N`` makes the
application take the client's address from the ``N``-th entry from the right
(:mod:`oanp_site.forwarded`), so per-address limits and the metrics allow-list see clients, not
the proxy. Daphne's own ``--proxy-headers`` is never passed: it believes the left-most entry,
which is the client's to forge. A value that is not a number of proxies stops the start here,
rather than every process as it starts.

A process that dies is started again, after a pause that doubles while they keep dying, so
one bad request or a lost database does not take the whole port down. SIGTERM or SIGINT
(Ctrl-C) stops them all, each given Daphne's own graceful shutdown first.

Usage: ``python -m oanp_site.serve`` (all settings from the environment, as in the Procfile).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from types import FrameType

from oanp_site.forwarded import proxy_hops

#: How long stopping processes have to finish their requests before they are killed.
GRACE_SECONDS = 20.0
#: Pauses before a dead process is started again: the first, and the most it doubles to.
RESTART_FIRST_SECONDS, RESTART_CAP_SECONDS = 0.5, 30.0
#: A process that ran this long died afresh: its next restart waits the first pause again.
STABLE_SECONDS = 60.0


#: Default processes per core. Django runs a process's synchronous views one at a time, on one
#: thread, so a process waiting on the database or Redis leaves its core idle: at 10 agent
#: pairs on two cores, 2 processes served 86 envelopes/s, 4 served 126 (the machine then
#: saturated) and 8 no more.
PROCESSES_PER_CORE = 2


def concurrency() -> int:
    """``$WEB_CONCURRENCY``, else :data:`PROCESSES_PER_CORE` for each core this process may
    run on."""
    value = os.environ.get("WEB_CONCURRENCY", "").strip()
    if value:
        count = int(value)
        if count < 1:
            raise ValueError(f"WEB_CONCURRENCY must be at least 1, not {value!r}")
        return count
    return PROCESSES_PER_CORE * len(os.sched_getaffinity(0))


def listen(host: str, port: int) -> socket.socket:
    """The one socket every web process accepts on; inherited by each as a file descriptor."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


def daphne_argv(fd: int) -> list[str]:
    return [sys.executable, "-m", "daphne", "--fd", str(fd), "oanp_site.asgi:application"]


class Web:
    """``count`` Daphne processes on one socket, kept running until :meth:`stop`."""

    def __init__(self, sock: socket.socket, count: int) -> None:
        self.sock, self.count = sock, count
        self.children: dict[int, subprocess.Popen[bytes]] = {}
        self.started: dict[int, float] = {}
        self.failures: dict[int, int] = {}
        self.stopping = False

    def start(self, slot: int) -> None:
        self.children[slot] = subprocess.Popen(  # noqa: S603 - the project's own server
            daphne_argv(self.sock.fileno()),
            pass_fds=(self.sock.fileno(),),
        )
        self.started[slot] = time.monotonic()

    def run(self) -> int:
        for slot in range(self.count):
            self.start(slot)
        print(
            f"web: {self.count} Daphne process(es) on {self.sock.getsockname()[:2]}",
            flush=True,
        )
        while not self.stopping:
            time.sleep(0.2)
            for slot, child in list(self.children.items()):
                if child.poll() is None or self.stopping:
                    continue
                ran = time.monotonic() - self.started[slot]
                failures = 0 if ran >= STABLE_SECONDS else self.failures.get(slot, 0) + 1
                self.failures[slot] = failures
                pause = min(RESTART_FIRST_SECONDS * 2 ** (failures - 1), RESTART_CAP_SECONDS)
                print(
                    f"web: process {child.pid} exited with {child.returncode} after {ran:.1f} s;"
                    f" starting another in {pause:g} s",
                    file=sys.stderr,
                    flush=True,
                )
                time.sleep(pause)
                if not self.stopping:
                    self.start(slot)
        return self.shutdown()

    def stop(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True

    def shutdown(self) -> int:
        for child in self.children.values():
            if child.poll() is None:
                child.terminate()
        deadline = time.monotonic() + GRACE_SECONDS
        for child in self.children.values():
            try:
                child.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        return 0


def main() -> int:
    host = os.environ.get("HOST", "0.0.0.0")  # noqa: S104 - a server behind its proxy
    port = int(os.environ.get("PORT", "8000"))
    proxy_hops(os.environ.get("OANP_PROXY_HEADERS"))  # each process reads it in its settings
    web = Web(listen(host, port), concurrency())
    signal.signal(signal.SIGTERM, web.stop)
    signal.signal(signal.SIGINT, web.stop)
    return web.run()


if __name__ == "__main__":
    sys.exit(main())
