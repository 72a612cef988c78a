"""The demo's supervisor: a child that exits is reported (name, status, its log's last lines)
and started again after a pause that doubles; stop() leaves nothing running."""

from __future__ import annotations

import os
import queue
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from oanp_site import supervisor as supervisor_module
from oanp_site.demo.deployment import programs
from oanp_site.supervisor import Backoff, Program, Supervisor
from tests.support.waiting import wait_for

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]
# Sixteen lines, then status 3: the report shows only the last ten.
BOOM = [
    sys.executable,
    "-c",
    "import sys\nfor i in range(15): print(f'line {i}')\nprint('boom'); sys.exit(3)",
]
FAILING = [sys.executable, "-c", "raise SystemExit(1)"]


class Console:
    """What the supervisor says, line by line as it says it."""

    def __init__(self) -> None:
        self.messages: queue.Queue[str] = queue.Queue()

    def say(self, message: str) -> None:
        self.messages.put(message)

    def next(self, timeout: float = 10) -> str:
        return self.messages.get(timeout=timeout)

    def until(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while True:
            message = self.next(max(deadline - time.monotonic(), 0.01))
            if match := re.search(pattern, message):
                return match


@pytest.fixture
def console() -> Console:
    return Console()


@pytest.fixture
def supervise(tmp_path: Path, console: Console) -> Iterator[Callable[..., Supervisor]]:
    started: list[Supervisor] = []

    def start(commands: dict[str, list[str]], backoff: Backoff, **kwargs: Any) -> Supervisor:
        programs = [
            Program(name, argv, tmp_path / f"{name}.log") for name, argv in commands.items()
        ]
        supervisor = Supervisor(programs, say=console.say, backoff=backoff, **kwargs)
        started.append(supervisor)
        supervisor.start()
        return supervisor

    yield start
    for supervisor in started:
        supervisor.stop()


def group_members(pgid: int) -> int:
    """How many processes of the group are still running (zombies waiting for a reaper that
    is not ours count as gone)."""
    members = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members += 1
    return members


def group_alive(pgid: int) -> bool:
    return group_members(pgid) > 0


def test_an_exit_is_reported_with_the_name_the_status_and_the_last_lines_of_the_log(
    supervise: Callable[..., Supervisor], console: Console
) -> None:
    supervisor = supervise({"boom": BOOM}, Backoff(first=30))
    pid = supervisor["boom"].process.pid

    report = console.next()

    assert report.startswith(f"boom (pid {pid}) exited with status 3;")
    assert re.findall(r"\| (.*)", report) == [*(f"line {i}" for i in range(6, 15)), "boom"]
    assert report.endswith("restarting boom in 30 s")


def test_a_signal_is_reported_by_its_name(
    supervise: Callable[..., Supervisor], console: Console
) -> None:
    supervisor = supervise({"sleeper": SLEEPER}, Backoff(first=30))
    pid = supervisor["sleeper"].process.pid
    os.kill(pid, signal.SIGKILL)

    assert console.next().startswith(f"sleeper (pid {pid}) was killed by SIGKILL;")


def test_a_child_that_keeps_failing_is_restarted_after_pauses_that_double_up_to_the_cap(
    supervise: Callable[..., Supervisor], console: Console, tmp_path: Path
) -> None:
    supervise({"failing": FAILING}, Backoff(first=0.1, cap=0.4))
    delays, pids = [], set()
    for _ in range(4):
        restarting = console.until(r"restarting failing in (\S+) s")
        waited_from = time.monotonic()
        pids.add(int(console.until(r"restarted failing \(pid (\d+)\)")[1]))
        delays.append(float(restarting[1]))
        assert time.monotonic() - waited_from >= delays[-1] * 0.9

    assert delays == [0.1, 0.2, 0.4, 0.4]
    assert len(pids) == 4
    # Each run appends to the log after a marker line of its own.
    assert (tmp_path / "failing.log").read_text().count("starting failing:") >= 5


def test_a_child_that_stayed_up_long_enough_is_restarted_after_the_first_pause(
    supervise: Callable[..., Supervisor], console: Console
) -> None:
    brief = [sys.executable, "-c", "import time; time.sleep(0.3); raise SystemExit(1)"]
    supervise({"brief": brief}, Backoff(first=0.05, cap=10, stable=0.2))

    delays = [float(console.until(r"restarting brief in (\S+) s")[1]) for _ in range(3)]

    assert delays == [0.05, 0.05, 0.05]


def test_a_program_that_cannot_be_started_again_is_retried_until_it_can(
    supervise: Callable[..., Supervisor], console: Console, tmp_path: Path
) -> None:
    program = tmp_path / "program"
    program.write_text("#!/bin/sh\nsleep 60\n")
    program.chmod(0o755)
    supervisor = supervise({"program": [str(program)]}, Backoff(first=0.1, cap=0.2))
    moved = program.rename(tmp_path / "program.away")
    os.killpg(supervisor["program"].process.pid, signal.SIGKILL)

    console.until(r"could not start program: .*No such file")
    console.until(r"could not start program")  # and again, still missing
    moved.rename(program)

    pid = int(console.until(r"restarted program \(pid (\d+)\)")[1])
    assert supervisor["program"].process.pid == pid
    assert supervisor["program"].process.poll() is None


def test_stop_ends_every_child_and_whatever_it_started(
    supervise: Callable[..., Supervisor], console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(supervisor_module, "GRACE_SECONDS", 0.5)
    parent = [
        sys.executable,
        "-c",
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "time.sleep(60)",
    ]
    # Deaf to SIGTERM: only the SIGKILL after the grace period ends it.
    stubborn = [
        sys.executable,
        "-c",
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('deaf', flush=True)\n"
        "time.sleep(60)",
    ]
    supervisor = supervise(
        {"parent": parent, "sleeper": SLEEPER, "stubborn": stubborn}, Backoff(first=0.01)
    )
    wait_for(
        lambda: b"deaf" in supervisor["stubborn"].output(),
        10,
        message=lambda: "\n".join(supervisor["stubborn"].tail()),
    )
    groups = [child.process.pid for child in supervisor.children.values()]
    # Stopped only once the parent has started its own child, or that child could be forked
    # after the group was signalled and outlive it.
    wait_for(lambda: group_members(supervisor["parent"].process.pid) == 2, 10)

    supervisor.stop()

    # A signalled process takes a moment to go; one that outlived its group's signals would not.
    wait_for(lambda: not any(group_alive(pgid) for pgid in groups), 10)
    assert console.messages.empty()  # exits on the way out are neither reported nor restarted


def test_a_restart_due_after_stop_never_happens(
    supervise: Callable[..., Supervisor], console: Console
) -> None:
    supervisor = supervise({"failing": FAILING}, Backoff(first=30))
    console.until("restarting failing in 30 s")

    began = time.monotonic()
    supervisor.stop()

    assert time.monotonic() - began < 5
    assert console.messages.empty()
    assert supervisor["failing"].exits == 1


def test_the_demo_worker_killed_is_reported_and_comes_back_ready(
    supervise: Callable[..., Supervisor], console: Console, worker_env: dict[str, str]
) -> None:
    """The demo's own worker command, on a queue of its own so it takes no other test's tasks."""
    worker = next(program for program in programs("127.0.0.1", 0) if program.name == "worker")
    # A name of its own too: the suite's worker reports its heartbeats as celery@<host>.
    name = f"supervisor-test-{os.getpid()}"
    argv = [*worker.argv, "--queues", name, "--hostname", f"{name}@%h"]
    supervisor = supervise({"worker": argv}, Backoff(first=0.2), env=worker_env)
    child = supervisor["worker"]

    def ready() -> None:
        wait_for(
            lambda: b" ready." in child.output(),
            20,
            interval=0.1,
            message=lambda: "\n".join(child.tail()),
        )

    ready()
    first = child.process.pid
    os.killpg(first, signal.SIGKILL)

    assert console.next().startswith(f"worker (pid {first}) was killed by SIGKILL;")
    second = int(console.until(r"restarted worker \(pid (\d+)\)")[1])
    assert second != first
    assert child.process.pid == second
    ready()
    supervisor.stop()
    assert not group_alive(first)
    assert not group_alive(second)
