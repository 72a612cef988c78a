"""make bench-quick: the ratios the sections guard, from a quick run, against a committed baseline.

Each section declares the same-run ratios it guards (:class:`bench.report.Guard`): its path over
the peer measured beside it, so a slower machine moves both and the ratio little, while a slower
path moves the ratio. :func:`check` runs the guarded sections on their quick sizes and holds
each ratio to ``bench/quick-baseline.json``: a ratio fails when it comes above its baseline by
more than its tolerance. Other work on the machine can only slow one side of a ratio for a
while, so a section with a ratio over its limit runs again, up to :data:`ATTEMPTS` times in all,
and each ratio is judged by the lowest it reached: noise passes on a later attempt, a slower path
stays slower on every one.

:func:`write_baseline` (make bench-baseline) runs them several times and writes the median of
each ratio as its baseline, with every run's value, the spread around the median and the
tolerance its section declares, so that whoever reads the file sees what the tolerance was
chosen over.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.report import Section, SectionResult, machine_info

BASELINE_VERSION = 1
#: Runs of a section whose ratio came over its limit, the first one included.
ATTEMPTS = 3
#: Runs make bench-baseline takes the median of.
BASELINE_RUNS = 5

ABOUT = (
    "Written by make bench-baseline (python -m bench --write-baseline): the ratios each "
    "section guards (bench.report.Guard, declared beside each section's SECTION), each "
    "measured on the quick sizes in every one of the runs below. baseline is their median; "
    "make bench-quick fails when a run's ratio (the lowest of up to three attempts) comes above "
    "baseline × (1 + tolerance). The tolerance is the section's own, chosen above the highest "
    "spread seen here (spread.high, the largest run over the median, with the machine busy "
    "with other work for some runs: see load) and under 0.5, so that a path 1.5× slower than "
    "its peer fails. Refresh it deliberately, when a change makes a path faster or slower on "
    "purpose, and commit it with that change."
)

#: The measure of one section: runs it on its quick sizes, files its results, returns them.
Measure = Callable[[Section], SectionResult]
#: Section name → guard name → its value in each run or attempt, in order.
Seen = dict[str, dict[str, list[float]]]


class BaselineError(Exception):
    """The baseline file is missing, unreadable, or holds no baseline for a guarded ratio."""


def ratios_of(section: Section, result: SectionResult) -> dict[str, float]:
    return {guard.name: guard.read(result.figures) for guard in section.guards}


# The check -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    section: str
    name: str
    #: This run's value of each attempt; the ratio is judged by the lowest.
    values: tuple[float, ...]
    baseline: float
    tolerance: float

    @property
    def measured(self) -> float:
        return min(self.values)

    @property
    def limit(self) -> float:
        return self.baseline * (1 + self.tolerance)

    @property
    def passed(self) -> bool:
        return self.measured <= self.limit

    @property
    def gained(self) -> bool:
        """Below its baseline by more than the tolerance: a gain the baseline could hold."""
        return self.measured * (1 + self.tolerance) < self.baseline

    def failure(self) -> str:
        attempts = "" if len(self.values) == 1 else f" (lowest of {len(self.values)} runs)"
        return (
            f"{self.section}: {self.name} {self.measured:.2f}× > baseline "
            f"{self.baseline:.2f}× + {self.tolerance:.0%}{attempts}"
        )


def load_baseline(path: Path) -> dict[str, Any]:
    try:
        baseline = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise BaselineError(
            f"no readable baseline at {path} ({error}); make bench-baseline"
        ) from error
    if not isinstance(baseline, dict) or not isinstance(baseline.get("sections"), dict):
        raise BaselineError(f"{path} holds no sections; make bench-baseline")
    return baseline


def judge(baseline: Mapping[str, Any], seen: Seen) -> list[Verdict]:
    """Every ratio seen against its baseline and tolerance, in the order seen."""
    verdicts = []
    for section, ratios in seen.items():
        for name, values in ratios.items():
            held = baseline["sections"].get(section, {}).get(name)
            if held is None:
                raise BaselineError(
                    f"no baseline for {section}: {name}; write one with make bench-baseline"
                )
            verdicts.append(
                Verdict(section, name, tuple(values), held["baseline"], held["tolerance"])
            )
    return verdicts


def table(verdicts: Sequence[Verdict]) -> str:
    """One line per ratio: its baseline, tolerance, limit, this run's value and the verdict."""
    width = max((len(f"{v.section}: {v.name}") for v in verdicts), default=5)
    lines = [
        f"{'ratio':<{width}}  {'baseline':>8}  {'tolerance':>9}  {'limit':>7}  {'this run':>8}",
    ]
    for v in verdicts:
        mark = "ok" if v.passed else "SLOWER"
        if v.passed and v.gained:
            mark = "ok, faster: make bench-baseline holds the gain"
        if len(v.values) > 1:
            mark += f" (lowest of {len(v.values)}: " + ", ".join(f"{x:.2f}" for x in v.values) + ")"
        lines.append(
            f"{f'{v.section}: {v.name}':<{width}}  {v.baseline:>7.2f}×  {v.tolerance:>+9.0%}"
            f"  {v.limit:>6.2f}×  {v.measured:>7.2f}×  {mark}"
        )
    return "\n".join(lines)


def check(sections: Sequence[Section], measure: Measure, baseline_path: Path) -> int:
    """Run each guarded section, again while a ratio of it is over its limit (up to
    :data:`ATTEMPTS` runs); print the table; 1, naming each ratio still over, or 0."""
    baseline = load_baseline(baseline_path)
    seen: Seen = {}
    for section in sections:
        ratios: dict[str, list[float]] = {guard.name: [] for guard in section.guards}
        seen[section.name] = ratios
        for attempt in range(1, ATTEMPTS + 1):
            for name, value in ratios_of(section, measure(section)).items():
                ratios[name].append(value)
            over = [v.name for v in judge(baseline, {section.name: ratios}) if not v.passed]
            if not over or attempt == ATTEMPTS:
                break
            print(
                f"bench: {section.name}: {', '.join(over)} over the limit; "
                f"running it again ({attempt + 1} of {ATTEMPTS})",
                file=sys.stderr,
                flush=True,
            )
    verdicts = judge(baseline, seen)
    print(table(verdicts))
    failures = [v for v in verdicts if not v.passed]
    for verdict in failures:
        print(verdict.failure(), file=sys.stderr)
    if failures:
        print(
            "bench: a path is slower beside its peer than the baseline allows; if that is "
            "meant, refresh the baseline with make bench-baseline and commit it",
            file=sys.stderr,
        )
    return 1 if failures else 0


# The baseline ----------------------------------------------------------------------------------


def baseline_from(
    sections: Sequence[Section], runs: Sequence[Seen], load: Sequence[float]
) -> dict[str, Any]:
    """The baseline file: for each guarded ratio the median of ``runs`` (each one value per
    ratio), every value, their spread around the median, and the declared tolerance."""
    held: dict[str, Any] = {}
    for section in sections:
        held[section.name] = {}
        for guard in section.guards:
            values = [run[section.name][guard.name][0] for run in runs]
            median = statistics.median(values)
            held[section.name][guard.name] = {
                "baseline": round(median, 4),
                "tolerance": guard.tolerance,
                "spread": {
                    "low": round(min(values) / median - 1, 3),
                    "high": round(max(values) / median - 1, 3),
                },
                "runs": [round(value, 4) for value in values],
            }
    return {
        "version": BASELINE_VERSION,
        "about": ABOUT,
        "machine": machine_info(),
        "load": [round(value, 2) for value in load],
        "sections": held,
    }


def write_baseline(
    sections: Sequence[Section], measure: Measure, path: Path, runs: int = BASELINE_RUNS
) -> int:
    """Run every guarded section ``runs`` times and write the baseline of their ratios."""
    collected: list[Seen] = []
    load: list[float] = []
    for number in range(1, runs + 1):
        print(f"bench: baseline run {number} of {runs}", file=sys.stderr, flush=True)
        collected.append(
            {
                section.name: {
                    name: [value] for name, value in ratios_of(section, measure(section)).items()
                }
                for section in sections
            }
        )
        # The minute's load average as the run ends: how busy the machine was during it.
        load.append(os.getloadavg()[0])
    baseline = baseline_from(sections, collected, load)
    path.write_text(json.dumps(baseline, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for section, ratios in baseline["sections"].items():
        for name, held in ratios.items():
            spread = held["spread"]
            print(
                f"  {section}: {name} {held['baseline']:.2f}× (runs {spread['low']:+.0%} … "
                f"{spread['high']:+.0%}; tolerance {held['tolerance']:+.0%})",
                file=sys.stderr,
            )
    print(f"bench: wrote {path}", file=sys.stderr)
    return 0
