"""What every section shares: options, timing, machine facts, results.json and BENCHMARKS.md.

A section returns a :class:`SectionResult`: raw figures for machines to read, and table rows
(already worded) for people. :func:`merge` files it under its name in results.json next to the
machine it ran on, leaving other sections' figures alone; :func:`render_markdown` turns the
whole file into docs/BENCHMARKS.md, so the page always shows every section last measured.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS_VERSION = 1


@dataclass(frozen=True)
class Options:
    """How a section should run: ``quick`` means small sizes, for tests, in a few seconds."""

    quick: bool = False


@dataclass(frozen=True)
class Row:
    """One line of a section's table: a figure and what it stands beside in the same run."""

    measure: str
    figure: str
    beside: str = ""
    aim: str = ""


@dataclass
class SectionResult:
    name: str
    title: str
    figures: dict[str, Any]
    rows: list[Row]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Guard:
    """A same-run ratio that ``make bench-quick`` holds to its baseline (bench/quick-baseline.json).

    ``read`` takes it from the section's figures, oriented so that higher is slower: the
    project's path over its peer. ``tolerance`` is how far above its baseline a run may come, as
    a fraction (0.3: 30 %), chosen over the spread of repeated runs on a busy machine and
    narrower than the 50 % a path 1.5× slower adds.
    """

    name: str
    read: Callable[[Mapping[str, Any]], float]
    tolerance: float


@dataclass(frozen=True)
class Section:
    """A registered section: its name on the command line, the function that measures, and the
    ratios of its figures that ``make bench-quick`` guards (none: it does not run there)."""

    name: str
    title: str
    run: Callable[[Options], SectionResult]
    guards: tuple[Guard, ...] = ()


# Timing ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    best_s: float
    #: Each round's whole time, all parts together.
    runs_s: tuple[float, ...]
    #: The best in this thread's CPU time, which does not count the time other work on the
    #: machine takes from it: what make bench-quick's ratios read.
    best_cpu_s: float

    def as_json(self) -> dict[str, Any]:
        return {"best_s": self.best_s, "runs_s": list(self.runs_s), "best_cpu_s": self.best_cpu_s}


def best_of(repeats: int, *works: Sequence[Callable[[], object]]) -> tuple[Timing, ...]:
    """Time each of ``works``, each a sequence of parts (a session's worth of work, say), over
    ``repeats`` rounds, with the collector on after a collection before each round.

    A work's best is the sum of its parts' best times: a part is short, so its best is a run
    that nothing else on the machine interrupted, however busy the machine. The works take
    turns part by part (the first part of each, then the next), so that a path and the peers
    set beside it meet the same moments of a machine whose pace changes, and their ratios
    hold. A single part is the whole work, timed as it stands.
    """
    # work → part → each round's time
    wall = [[[0.0] * repeats for _ in parts] for parts in works]
    cpu = [[[0.0] * repeats for _ in parts] for parts in works]
    for round_ in range(repeats):
        gc.collect()
        for number, turn in enumerate(zip(*works, strict=True)):
            for work, part in enumerate(turn):
                start, start_cpu = time.perf_counter(), time.thread_time()
                part()
                cpu[work][number][round_] = time.thread_time() - start_cpu
                wall[work][number][round_] = time.perf_counter() - start
    return tuple(
        Timing(
            best_s=sum(min(runs) for runs in walls),
            runs_s=tuple(sum(runs[r] for runs in walls) for r in range(repeats)),
            best_cpu_s=sum(min(runs) for runs in cpus),
        )
        for walls, cpus in zip(wall, cpu, strict=True)
    )


def cpu_per_item(timing: Mapping[str, Any], items: str = "envelopes") -> float:
    """The CPU seconds of a timing's best run (:meth:`Timing.as_json`, with the count of what it
    handled under ``items``) per item."""
    return float(timing["best_cpu_s"]) / float(timing[items])


@contextmanager
def one_core() -> Iterator[int | None]:
    """Pin this process to one CPU for the block (where the OS allows); yields which."""
    getter = getattr(os, "sched_getaffinity", None)
    setter = getattr(os, "sched_setaffinity", None)
    if getter is None or setter is None:
        yield None
        return
    allowed = getter(0)
    cpu = min(allowed)
    setter(0, {cpu})
    try:
        yield cpu
    finally:
        setter(0, allowed)


# Wording ---------------------------------------------------------------------------------------


def rate(per_second: float, unit: str = "/s") -> str:
    return f"{per_second:,.0f} {unit}"


def times(ratio: float) -> str:
    return f"{ratio:.2f}×"


def judged(aim: str, met: bool) -> str:
    """An aim and whether this run met it, e.g. ``≥ 10,000 /s: met``."""
    return f"{aim}: met" if met else f"{aim}: **not met**"


# The machine -----------------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine_info() -> dict[str, Any]:
    getter = getattr(os, "sched_getaffinity", None)
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": len(getter(0)) if getter else os.cpu_count(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


# results.json ----------------------------------------------------------------------------------


def load_results(path: Path) -> dict[str, Any]:
    """The results file as it stands, or an empty one (also when it is unreadable)."""
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"version": RESULTS_VERSION, "sections": {}}
    if not isinstance(results, dict) or not isinstance(results.get("sections"), dict):
        return {"version": RESULTS_VERSION, "sections": {}}
    return results


def merge(
    results: Mapping[str, Any], result: SectionResult, *, machine: Mapping[str, Any], quick: bool
) -> dict[str, Any]:
    """``results`` with ``result`` in place of whatever its section held before."""
    sections = dict(results.get("sections", {}))
    sections[result.name] = {
        "title": result.title,
        "quick": quick,
        "machine": dict(machine),
        "figures": result.figures,
        "table": [asdict(row) for row in result.rows],
        "notes": list(result.notes),
    }
    return {"version": RESULTS_VERSION, "sections": sections}


def write_results(path: Path, results: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


# BENCHMARKS.md ---------------------------------------------------------------------------------

HEADER = """\
# Benchmarks

Generated by `make bench` (`python -m bench`) and, for the sections that take minutes of faults
and idling, `make soak` (`python -m bench --soak`), from `bench/results.json`; do not edit by
hand. Every figure stands beside its peer or aim, measured in the same run on the same machine.
Run one section again with `python -m bench [--soak] --only NAME`; the others keep their figures.

`make bench-quick` (`python -m bench --check`; `make test` runs it after the suite) guards the
ratios a section declares (`GUARDS` beside its `SECTION`), today core's: the machine, the strict
parser and the terms corpus against their peers, detached JWS against raw Ed25519, each in the
thread's CPU time, every session timed on its own with the paths taking turns, so that other
work on the machine moves them little. It runs those sections on their quick sizes in seconds,
files the figures under `var/bench-quick/` (never here), and fails naming each ratio that comes
above its baseline in `bench/quick-baseline.json` by more than its tolerance; a section over a
limit runs again, up to three times, and is judged by its lowest. The baseline is the median of
runs on this machine, kept with every run, their spread and the machine's load; the tolerances
clear that spread and stay under the 50 % a path 1.5× slower adds. `make bench-baseline` writes
it anew from five runs, for a change that makes a path faster or slower on purpose. The other
sections stay out: on sizes that fit in seconds their ratios rest on single runs of processes,
servers and PostgreSQL commits that the machine's other work moves by half or more.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _machine_line(machine: Mapping[str, Any], quick: bool) -> str:
    cores = machine.get("cores")
    usable = machine.get("usable_cores")
    cores_text = f"{cores} cores" if usable in (None, cores) else f"{cores} cores, {usable} usable"
    line = (
        f"Measured {machine.get('date', '?')} on {machine.get('cpu', '?')} ({cores_text}), "
        f"{machine.get('python', '?')}, {machine.get('platform', '?')}."
    )
    if quick:
        line += " Quick run (small sizes): figures are indicative only."
    return line


def render_markdown(results: Mapping[str, Any], order: Sequence[str] = ()) -> str:
    """The whole page: sections in ``order`` first, then any others the file holds."""
    sections: Mapping[str, Any] = results.get("sections", {})
    names = [n for n in order if n in sections] + [n for n in sections if n not in order]
    parts = [HEADER]
    for name in names:
        section = sections[name]
        parts.append(f"## {name}: {section.get('title', '')}\n")
        parts.append(_machine_line(section.get("machine", {}), bool(section.get("quick"))) + "\n")
        lines = [
            "| Measure | Figure | Beside it, same run | Aim |",
            "| --- | ---: | --- | --- |",
        ]
        for row in section.get("table", []):
            lines.append(
                f"| {_cell(row['measure'])} | {_cell(row['figure'])} "
                f"| {_cell(row.get('beside', ''))} | {_cell(row.get('aim', ''))} |"
            )
        parts.append("\n".join(lines) + "\n")
        notes = section.get("notes", [])
        if notes:
            parts.append("\n".join(f"- {note}" for note in notes) + "\n")
    return "\n".join(parts)


def write_markdown(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
