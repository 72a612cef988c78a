"""``python -m oanp_site.procfile``: the Procfile's processes in the foreground (``make serve``).

Each runs under :class:`oanp_site.supervisor.Supervisor`: one that exits is reported (which,
how, the last lines of its log) and started again, and the others keep running. Each writes its
own log under ``var/`` (``serve-<name>.log``), and their lines are echoed here, prefixed with
the process's name. ``var/processes.json`` records the supervisor's pid and each process's pid,
restarts and last exit; ``/readyz`` reports it (:mod:`arbiter_app.health`). SIGTERM or SIGINT
(Ctrl-C) stops them all, the last started first.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from oanp_site import procfile_format
from oanp_site.supervisor import Program, Supervisor

ROOT = Path(__file__).resolve().parent.parent
#: Where the supervisor says what its processes are doing, for /readyz.
STATUS_FILE = "processes.json"
#: How often the echo looks for new lines in the processes' logs.
ECHO_SECONDS = 0.2


def programs(procfile: Path, var: Path) -> list[Program]:
    """Each process of the Procfile, its log under ``var``; a bad line refuses the file."""
    processes, problems = procfile_format.read(procfile.read_text(), source=str(procfile))
    if problems:
        raise ValueError("; ".join(problems))
    return [Program(p.name, p.args, var / f"serve-{p.name}.log") for p in processes]


def status(supervisor: Supervisor) -> dict[str, Any]:
    """What :data:`STATUS_FILE` holds: the supervisor's pid, and each process's."""
    children = {}
    for name, child in supervisor.children.items():
        last = child.last_exit
        children[name] = {
            "pid": child.process.pid,
            "restarts": child.exits,
            "last_exit": None if last is None else last[0],
            "last_exit_at": None if last is None else last[1].isoformat(timespec="seconds"),
        }
    return {"supervisor_pid": os.getpid(), "processes": children}


def write_status(path: Path, supervisor: Supervisor) -> None:
    # Written aside and renamed, so a reader never sees half of it.
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(status(supervisor)))
    partial.replace(path)


class Echo(threading.Thread):
    """Copies each new line of the processes' logs to stdout, prefixed with its name."""

    def __init__(self, programs: Sequence[Program], stopping: threading.Event) -> None:
        super().__init__(name="echo", daemon=True)
        self.programs = programs
        self.stopping = stopping
        self.width = max(len(p.name) for p in programs)

    def run(self) -> None:
        offsets = {p.name: 0 for p in self.programs}
        partial = {p.name: b"" for p in self.programs}
        while not self.stopping.wait(ECHO_SECONDS):
            for program in self.programs:
                try:
                    with program.log.open("rb") as log:
                        log.seek(offsets[program.name])
                        chunk = log.read()
                except FileNotFoundError:
                    continue
                offsets[program.name] += len(chunk)
                *lines, partial[program.name] = (partial[program.name] + chunk).split(b"\n")
                for line in lines:
                    text = line.decode(errors="replace")
                    print(f"{program.name:<{self.width}} | {text}", flush=True)


def say(message: str) -> None:
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    print(f"{stamp} supervisor: {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] = ()) -> int:
    procfile = Path(argv[0]) if argv else ROOT / "Procfile"
    var = ROOT / "var"
    var.mkdir(exist_ok=True)
    status_path = var / STATUS_FILE
    found = programs(procfile, var)
    stopped = threading.Event()

    def report(message: str) -> None:
        say(message)
        write_status(status_path, supervisor)

    # The processes' /readyz reads the status from there (settings.OANP_PROCESSES_FILE).
    env = {**os.environ, "OANP_PROCESSES_FILE": str(status_path)}
    supervisor = Supervisor(found, say=report, cwd=ROOT, env=env)

    def stop(signum: int, frame: FrameType | None) -> None:
        stopped.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    supervisor.start()
    write_status(status_path, supervisor)
    echo = Echo(found, supervisor.stopping)
    echo.start()
    say(", ".join(f"{c.name} (pid {c.process.pid})" for c in supervisor.children.values()))
    stopped.wait()
    say("stopping")
    supervisor.stop()
    status_path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
