"""``python -m bench [--soak] [--quick] [--only SECTION[,SECTION]] [--out DIR]``, and
``python -m bench --check | --write-baseline [--runs N] [--only ...] [--baseline FILE]``.

Runs the sections of :data:`SECTIONS` (all, or those named), or with ``--soak`` those of
:data:`SOAK_SECTIONS`, merges each one's figures into results.json and renders BENCHMARKS.md
from the whole file.

``--check`` (make bench-quick) runs the sections that guard ratios on their quick sizes and
holds the ratios to the baseline (:mod:`bench.baseline`); ``--write-baseline`` (make
bench-baseline) writes that baseline from several runs. Both file their figures under
var/bench-quick/, never in bench/results.json or docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from bench import broker, core, export, health, idle_streams, live, service, soak, timers, tlog
from bench.baseline import BASELINE_RUNS, BaselineError, check, write_baseline
from bench.report import (
    Options,
    Section,
    SectionResult,
    load_results,
    machine_info,
    merge,
    render_markdown,
    write_markdown,
    write_results,
)

#: Every section, in the order they run and appear on the page. Add new ones here.
SECTIONS: tuple[Section, ...] = (
    core.SECTION,
    service.SECTION,
    live.SECTION,
    timers.SECTION,
    tlog.SECTION,
    export.SECTION,
    broker.SECTION,
    health.SECTION,
)
#: The sections that take minutes of faults and idling (make soak), after the others on the page.
SOAK_SECTIONS: tuple[Section, ...] = (soak.SECTION, idle_streams.SECTION)
#: The sections make bench-quick runs: those that declare ratios to guard.
GUARDED: tuple[Section, ...] = tuple(s for s in SECTIONS if s.guards)
ORDER = [s.name for s in (*SECTIONS, *SOAK_SECTIONS)]

ROOT = Path(__file__).resolve().parent.parent
RESULTS_PATH = ROOT / "bench" / "results.json"
MARKDOWN_PATH = ROOT / "docs" / "BENCHMARKS.md"
BASELINE_PATH = ROOT / "bench" / "quick-baseline.json"
#: Where --check and --write-baseline file their figures.
QUICK_OUT = ROOT / "var" / "bench-quick"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    parser.add_argument(
        "--soak",
        action="store_true",
        help="run the soak's sections instead: " + ", ".join(s.name for s in SOAK_SECTIONS),
    )
    parser.add_argument(
        "--only",
        metavar="SECTION[,SECTION]",
        help="run only these sections: "
        + ", ".join(s.name for s in SECTIONS)
        + "; with --soak: "
        + ", ".join(s.name for s in SOAK_SECTIONS),
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="write results.json and BENCHMARKS.md here (default: bench/ and docs/; "
        "var/bench-quick/ with --check or --write-baseline)",
    )
    guarded = parser.add_mutually_exclusive_group()
    guarded.add_argument(
        "--check",
        action="store_true",
        help="run the sections that guard ratios, quick, and fail when a ratio is over its "
        "baseline by more than its tolerance: " + ", ".join(s.name for s in GUARDED),
    )
    guarded.add_argument(
        "--write-baseline",
        action="store_true",
        help="run the sections that guard ratios, quick, --runs times and write the baseline",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=BASELINE_RUNS,
        metavar="N",
        help=f"runs the baseline is the median of (default {BASELINE_RUNS})",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=BASELINE_PATH,
        metavar="FILE",
        help="the baseline file (default: bench/quick-baseline.json)",
    )
    return parser


def chosen(only: str | None, registry: Sequence[Section] = SECTIONS) -> list[Section]:
    """The sections of ``registry`` ``--only`` names, in its order; all when it names none."""
    if not only:
        return list(registry)
    names = {name.strip() for name in only.split(",") if name.strip()}
    unknown = names - {s.name for s in registry}
    if unknown:
        raise SystemExit(
            f"unknown section {', '.join(sorted(unknown))}; "
            f"known: {', '.join(s.name for s in registry)}"
        )
    return [s for s in registry if s.name in names]


def paths(out: Path | None) -> tuple[Path, Path]:
    """results.json and BENCHMARKS.md: under ``out``, or the committed ones."""
    if out is None:
        return RESULTS_PATH, MARKDOWN_PATH
    return out / "results.json", out / "BENCHMARKS.md"


def measured(section: Section, options: Options, out: Path | None) -> SectionResult:
    """Run ``section``, file its figures into results.json and BENCHMARKS.md (under ``out``, or
    the committed ones) and say them."""
    results_path, markdown_path = paths(out)
    print(f"bench: {section.name} ...", file=sys.stderr, flush=True)
    result = section.run(options)
    results = merge(load_results(results_path), result, machine=machine_info(), quick=options.quick)
    write_results(results_path, results)
    write_markdown(markdown_path, render_markdown(results, ORDER))
    for row in result.rows:
        aim = f"  [{row.aim}]" if row.aim else ""
        print(f"  {row.measure}: {row.figure}  ({row.beside}){aim}", file=sys.stderr)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.check or args.write_baseline:
        if args.soak:
            parser.error("--soak guards no ratios")
        if args.runs < 1:
            parser.error("--runs must be 1 or more")
        if args.write_baseline and args.only:
            parser.error("the baseline is written whole, every guarded section: drop --only")
        out = args.out or QUICK_OUT
        quick = Options(quick=True)
        guarded = chosen(args.only, GUARDED)

        def measure(section: Section) -> SectionResult:
            return measured(section, quick, out)

        try:
            if args.write_baseline:
                return write_baseline(guarded, measure, args.baseline, args.runs)
            return check(guarded, measure, args.baseline)
        except BaselineError as error:
            print(f"bench: {error}", file=sys.stderr)
            return 2
    options = Options(quick=args.quick)
    for section in chosen(args.only, SOAK_SECTIONS if args.soak else SECTIONS):
        measured(section, options, args.out)
    results_path, markdown_path = paths(args.out)
    print(f"bench: wrote {results_path} and {markdown_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
