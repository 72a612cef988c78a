"""Keeps a few named child processes running (the demo's, and the Procfile's under
``make serve``): each in a process group of its own, writing to its own log file; when one
exits, says so (which, how, the last lines of its log) and starts it again after a pause that
doubles with each quick failure."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

TAIL_LINES = 10
# Enough of a log's end for TAIL_LINES lines, without reading hours of output.
TAIL_BYTES = 64 * 1024
# How long a stopped child has to exit before its whole group is killed.
GRACE_SECONDS = 15.0


@dataclass(frozen=True)
class Program:
    name: str
    argv: Sequence[str]
    log: Path


@dataclass(frozen=True)
class Backoff:
    """Restart after ``first`` seconds, twice as long after each failure in a row, at most
    ``cap``; a child that stayed up ``stable`` seconds failed afresh."""

    first: float = 1.0
    cap: float = 30.0
    stable: float = 60.0

    def delay(self, failures: int) -> float:
        return float(min(self.first * 2**failures, self.cap))


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


def end(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the child's whole group, so nothing it started outlives it, then SIGKILL for
    whatever is still there after a grace period."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(5)
    except ProcessLookupError:
        pass


class Child:
    """One program and its current process; a thread of its own waits on it."""

    def __init__(self, program: Program, supervisor: Supervisor) -> None:
        self.program = program
        self._supervisor = supervisor
        self._offset = 0
        self.exits = 0
        #: How the last process ended and when (UTC), for whoever reports on the children.
        self.last_exit: tuple[str, datetime] | None = None
        self.process = self._spawn()
        self._thread = threading.Thread(target=self._watch, name=program.name, daemon=True)
        self._thread.start()

    @property
    def name(self) -> str:
        return self.program.name

    def output(self) -> bytes:
        """What the current process has written so far."""
        with self.program.log.open("rb") as log:
            log.seek(self._offset)
            return log.read()

    def tail(self) -> list[str]:
        with self.program.log.open("rb") as log:
            log.seek(max(self._offset, log.seek(0, os.SEEK_END) - TAIL_BYTES))
            text = log.read().decode(errors="replace")
        return text.splitlines()[-TAIL_LINES:]

    def _spawn(self) -> subprocess.Popen[bytes]:
        # Appended with a marker line, so the log of the run before stays readable after it.
        with self.program.log.open("ab") as log:
            stamp = datetime.now(UTC).isoformat(timespec="seconds")
            log.write(f"--- {stamp} starting {self.name}: {' '.join(self.program.argv)}\n".encode())
            log.flush()
            self._offset = log.tell()
            return subprocess.Popen(  # noqa: S603 - the caller's own programs
                list(self.program.argv),
                cwd=self._supervisor.cwd,
                env=self._supervisor.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Ctrl-C reaches only the supervising process, which stops each child in turn.
                start_new_session=True,
            )

    def _watch(self) -> None:
        supervisor = self._supervisor
        failures = 0
        while True:
            started = time.monotonic()
            returncode = self.process.wait()
            if supervisor.stopping.is_set():
                return
            self.exits += 1
            self.last_exit = (describe_exit(returncode), datetime.now(UTC))
            # Whatever the child left running in its group goes with it.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            if time.monotonic() - started >= supervisor.backoff.stable:
                failures = 0
            delay = supervisor.backoff.delay(failures)
            failures += 1
            lines = "".join(f"\n  | {line}" for line in self.tail())
            supervisor.say(
                f"{self.name} (pid {self.process.pid}) {self.last_exit[0]}; "
                f"the last lines of {self.program.log}:{lines}\n"
                f"restarting {self.name} in {delay:g} s"
            )
            while True:
                if supervisor.stopping.wait(delay):
                    return
                with supervisor.lock:
                    if supervisor.stopping.is_set():
                        return
                    try:
                        self.process = self._spawn()
                        break
                    except OSError as error:  # a full disk, a vanished interpreter: try again
                        delay = supervisor.backoff.delay(failures)
                        failures += 1
                        supervisor.say(
                            f"could not start {self.name}: {error}; trying again in {delay:g} s"
                        )
            supervisor.say(f"restarted {self.name} (pid {self.process.pid})")

    def join(self) -> None:
        self._thread.join()


class Supervisor:
    """``start()`` starts each program; ``stop()`` ends them all, last started first."""

    def __init__(
        self,
        programs: Sequence[Program],
        *,
        say: Callable[[str], object],
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.say = say
        self.cwd = cwd
        # Unbuffered, so the lines before a crash are in the log when it is reported.
        self.env = {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"}
        self.backoff = backoff or Backoff()
        self.stopping = threading.Event()
        # Held while a child is restarted, so stop() never misses a process started under it.
        self.lock = threading.Lock()
        self.programs = programs
        self.children: dict[str, Child] = {}

    def start(self) -> None:
        for program in self.programs:
            # Each run of the supervisor starts the logs afresh; restarts append.
            program.log.write_bytes(b"")
            with self.lock:
                self.children[program.name] = Child(program, self)

    def __getitem__(self, name: str) -> Child:
        return self.children[name]

    def stop(self) -> None:
        with self.lock:
            self.stopping.set()
        for child in reversed(self.children.values()):
            end(child.process)
        for child in self.children.values():
            child.join()
