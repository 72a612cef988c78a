"""The web process (the Procfile's ``web``): Daphne serving the project's ASGI application in
``$WEB_CONCURRENCY`` processes (default: two per core) that listen on ``$HOST:$PORT`` (default
``0.0.0.0:8000``), each on a socket of its own bound with ``SO_REUSEPORT``, so that the kernel
spreads the connections evenly over them.

Why not one shared socket: every process then races to accept, and Twisted accepts a whole
burst of connections in whichever process wakes first. Under load the keep-alive connections
of the clients piled up on one or two processes (10 connections: all on one process in 7 of 15
trials), which serve their synchronous views one at a time, while the others idled; with a
socket per process the same 10 connections were spread 3-2-3-2 and served 125 envelopes/s
against 74 (docs/BENCHMARKS.md, service). Where the platform has no ``SO_REUSEPORT``, or
``OANP_WEB_REUSEPORT=0`` asks for it, the processes share one socket as before.

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


#: The queue of connections not yet accepted, per socket.
BACKLOG = 1024

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


def reuse_port() -> bool:
    """Whether each process gets a socket of its own (see the module's docstring)."""
    wanted = os.environ.get("OANP_WEB_REUSEPORT", "1").strip().lower() not in {"0", "false", "no"}
    return wanted and hasattr(socket, "SO_REUSEPORT")


def bind(host: str, port: int, *, reuse: bool) -> socket.socket:
    """A socket bound to ``host:port``, not yet listening, for a Daphne process to inherit as a
    file descriptor; with ``reuse``, one of several bound with ``SO_REUSEPORT``, among which the
    kernel shares the connections once they listen."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def served_already(host: str, port: int) -> bool:
    """Whether something answers on ``host:port``: with ``SO_REUSEPORT`` a second server of the
    same user could bind the port beside ours and take part of its connections unnoticed."""
    target = "127.0.0.1" if host in {"0.0.0.0", ""} else "::1" if host == "::" else host  # noqa: S104
    try:
        with socket.create_connection((target, port), timeout=1.0):
            return True
    except OSError:
        return False


class Sockets:
    """Where the web processes accept: one shared socket, or with ``SO_REUSEPORT`` one per
    process.

    A process's own socket is bound here and made anew for each process started, and the process
    listens on it only once its application is loaded (:mod:`oanp_site.web_process`): until
    then the kernel hands its share of the connections to the others. It is closed here once
    the process holds it, so that when the process dies the kernel stops handing it
    connections."""

    def __init__(self, host: str, port: int, *, reuse: bool) -> None:
        self.host, self.reuse = host, reuse
        #: The shared socket; with ``SO_REUSEPORT``, the first process's, bound here before any
        #: process starts so that a port taken fails the start at once.
        self.first: socket.socket | None = bind(host, port, reuse=reuse)
        self.port = self.first.getsockname()[1]  # port 0 asks for one: every socket takes it
        if not reuse:
            self.first.listen(BACKLOG)

    def for_process(self) -> socket.socket:
        if not self.reuse:
            assert self.first is not None
            return self.first
        if self.first is not None:
            sock, self.first = self.first, None
            return sock
        return bind(self.host, self.port, reuse=True)

    def handed(self, sock: socket.socket) -> None:
        """The process started with ``sock`` holds it now."""
        if self.reuse:
            sock.close()

    def address(self) -> tuple[str, int]:
        return self.host, self.port


def process_argv(fd: int) -> list[str]:
    """One web process on the socket ``fd`` (:mod:`oanp_site.web_process`)."""
    return [sys.executable, "-m", "oanp_site.web_process", str(fd)]


class Web:
    """``count`` Daphne processes listening on ``sockets``, kept running until :meth:`stop`."""

    def __init__(self, sockets: Sockets, count: int) -> None:
        self.sockets, self.count = sockets, count
        self.children: dict[int, subprocess.Popen[bytes]] = {}
        self.started: dict[int, float] = {}
        self.failures: dict[int, int] = {}
        self.stopping = False

    def start(self, slot: int) -> None:
        sock = self.sockets.for_process()
        self.children[slot] = subprocess.Popen(  # noqa: S603 - the project's own server
            process_argv(sock.fileno()),
            pass_fds=(sock.fileno(),),
        )
        self.sockets.handed(sock)
        self.started[slot] = time.monotonic()

    def run(self) -> int:
        for slot in range(self.count):
            self.start(slot)
        sharing = "a socket each (SO_REUSEPORT)" if self.sockets.reuse else "one socket"
        print(
            f"web: {self.count} Daphne process(es) on {self.sockets.address()}, {sharing}",
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
    reuse = reuse_port()
    if reuse and served_already(host, port):
        print(f"web: something already answers on {host}:{port}", file=sys.stderr, flush=True)
        return 1
    web = Web(Sockets(host, port, reuse=reuse), concurrency())
    signal.signal(signal.SIGTERM, web.stop)
    signal.signal(signal.SIGINT, web.stop)
    return web.run()


if __name__ == "__main__":
    sys.exit(main())
