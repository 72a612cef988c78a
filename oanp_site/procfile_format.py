"""The Procfile's format, read in one place: one ``name: command`` a line, blank lines and
``#`` comments aside. The runner (:mod:`oanp_site.procfile`) refuses a file with a bad line;
the connection budget (:mod:`oanp_site.connections`), read by the settings, skips them, since a
server must not fail to start over a line it only counts."""

from __future__ import annotations

import shlex
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Process:
    """One line of the Procfile: the process's name and its command, split as a shell would."""

    name: str
    args: list[str]


def read(text: str, *, source: str = "Procfile") -> tuple[list[Process], list[str]]:
    """The processes ``text`` names, and a sentence for each line that names none."""
    processes, problems = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, colon, command = line.partition(":")
        try:
            args = shlex.split(command)
        except ValueError as unreadable:  # an unclosed quote
            problems.append(f"{source}:{number}: {unreadable}: {line!r}")
            continue
        if not colon or not name.strip() or not args:
            problems.append(f"{source}:{number}: expected 'name: command', not {line!r}")
            continue
        processes.append(Process(name.strip(), args))
    return processes, problems
