"""streams (a section of ``make soak``): what idle event streams cost the rest of the API, as
:mod:`bench.streams` measures it: one Daphne process, the p50 and p99 of an authenticated GET
with no stream open, with N inboxes just opened, and once they have idled a while; then the
process's CPU with the streams open and no request coming."""

from __future__ import annotations

from typing import Any

from bench import streams
from bench.report import Options, Row, Section, SectionResult

TITLE = "idle event streams: what they cost the API's requests"


def _phase(phase: dict[str, Any]) -> str:
    return f"{phase['p50_ms']:,.2f} / {phase['p99_ms']:,.2f} ms"


def rows_for(report: dict[str, Any]) -> list[Row]:
    count = report["streams"]
    base, fresh, idle = report["baseline"], report["fresh"], report["idle"]
    quiet = report["idle_without_requests"]
    refused = report["opened"]["refused"]
    return [
        Row(
            f"GET of a session summary, p50 / p99, {count} idle streams open",
            _phase(idle),
            f"no stream open: {_phase(base)}; p50 {idle['p50_over_baseline']:g}× the baseline",
        ),
        Row(
            f"the same, just after {count} inboxes opened",
            _phase(fresh),
            f"p50 {fresh['p50_over_baseline']:g}× the baseline; the streams received "
            f"{fresh['stream_bytes']:,} bytes meanwhile",
        ),
        Row(
            f"Daphne's CPU with {count} idle streams and no request",
            f"{quiet['server_cpu_per_s']:.3f} cores",
            f"over {quiet['seconds']:g} s; the streams received {quiet['stream_bytes']:,} "
            f"bytes (keep-alives); streams refused: {sum(refused.values())}",
        ),
    ]


def run(options: Options) -> SectionResult:
    size = streams.QUICK if options.quick else streams.FULL
    report = streams.run(size)
    notes = [
        f"One Daphne process on PostgreSQL and Redis; {report['streams'] // 2} agent pairs "
        f"first negotiate {size.sessions_per_pair} whole sessions each "
        f"({report['envelopes_posted']:,} envelopes), then each agent opens its inbox with no "
        "Last-Event-ID, from a process of their own. Another client times "
        f"{size.requests} GETs, one at a time, in each phase; the idle phase begins "
        f"{size.settle_s:g} s after the streams opened.",
    ]
    return SectionResult("streams", TITLE, report, rows_for(report), notes)


SECTION = Section("streams", TITLE, run)
