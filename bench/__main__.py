"""``python -m bench [--soak] [--quick] [--only SECTION[,SECTION]] [--out DIR]``.

Runs the sections of :data:`SECTIONS` (all, or those named), or with ``--soak`` those of
:data:`SOAK_SECTIONS`, merges each one's figures into results.json and renders BENCHMARKS.md
from the whole file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from bench import broker, core, export, health, idle_streams, live, service, soak, timers
from bench.report import (
    Options,
    Section,
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
    export.SECTION,
    broker.SECTION,
    health.SECTION,
)
#: The sections that take minutes of faults and idling (make soak), after the others on the page.
SOAK_SECTIONS: tuple[Section, ...] = (soak.SECTION, idle_streams.SECTION)

ROOT = Path(__file__).resolve().parent.parent
RESULTS_PATH = ROOT / "bench" / "results.json"
MARKDOWN_PATH = ROOT / "docs" / "BENCHMARKS.md"


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
        help="write results.json and BENCHMARKS.md here (default: bench/ and docs/)",
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


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    sections = chosen(args.only, SOAK_SECTIONS if args.soak else SECTIONS)
    results_path = args.out / "results.json" if args.out else RESULTS_PATH
    markdown_path = args.out / "BENCHMARKS.md" if args.out else MARKDOWN_PATH
    options = Options(quick=args.quick)
    order = [s.name for s in (*SECTIONS, *SOAK_SECTIONS)]
    for section in sections:
        print(f"bench: {section.name} ...", file=sys.stderr, flush=True)
        result = section.run(options)
        results = merge(
            load_results(results_path), result, machine=machine_info(), quick=options.quick
        )
        write_results(results_path, results)
        write_markdown(markdown_path, render_markdown(results, order))
        for row in result.rows:
            aim = f"  [{row.aim}]" if row.aim else ""
            print(f"  {row.measure}: {row.figure}  ({row.beside}){aim}", file=sys.stderr)
    print(f"bench: wrote {results_path} and {markdown_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
