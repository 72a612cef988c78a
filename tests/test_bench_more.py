"""The live, timers, tlog and export sections in quick mode: what they report, not how fast.

Each runs as ``make bench`` runs it (Daphne, a Celery worker, PostgreSQL databases of their
own, Redis); the assertions are on the results' structure and that every figure is there and
positive where it must be, never on a time.
"""

import json
from pathlib import Path
from typing import Any

import pytest

from bench import export, live, timers, tlog
from bench.__main__ import SECTIONS, main
from oanp.net.workers import usable_cores

# Quick runs of the bench, on the real servers and workers `make bench` starts.
pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("bench-more")
    assert main(["--quick", "--only", "live,timers,tlog,export", "--out", str(directory)]) == 0
    return directory


@pytest.fixture(scope="module")
def sections(out: Path) -> dict[str, Any]:
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    found: dict[str, Any] = results["sections"]
    return found


def test_the_sections_are_registered_in_order() -> None:
    names = [section.name for section in SECTIONS]
    assert names == ["core", "service", "live", "timers", "tlog", "export", "broker", "health"]


def test_each_section_ran_quick_and_wrote_its_table(sections: dict[str, Any]) -> None:
    assert set(sections) == {"live", "timers", "tlog", "export"}
    for section in sections.values():
        assert section["quick"] is True
        assert section["table"]
        assert all(row["figure"] and row["beside"] for row in section["table"])
        assert section["machine"]["cores"] > 0


def _positive_spread(spread: dict[str, float]) -> None:
    assert spread["p50_ms"] <= spread["p99_ms"] <= spread["max_ms"]


def test_live_timed_every_envelope_after_each_opening(sections: dict[str, Any]) -> None:
    figures = sections["live"]["figures"]
    assert figures["sessions"] == live.QUICK.sessions
    assert figures["states"] == {"AGREED": live.QUICK.sessions}
    # Six party envelopes a session; the opening comes before the page subscribes.
    assert figures["envelopes"] == 5 * live.QUICK.sessions
    for name in ("frame_after_answer", "frame_after_send", "post"):
        _positive_spread(figures[name])
    assert figures["post"]["min_ms"] > 0
    assert figures["frame_after_send"]["min_ms"] > 0
    assert 0 <= figures["frames_before_answer"] <= figures["envelopes"]


def test_timers_expired_exactly_the_due_sessions(sections: dict[str, Any]) -> None:
    figures = sections["timers"]["figures"]
    sweep = figures["sweep"]
    assert sweep["open_sessions"] == sweep["armed"] == timers.QUICK.open_sessions
    assert sweep["due"] == timers.QUICK.due
    assert sweep["not_due_left_open"] == timers.QUICK.open_sessions - timers.QUICK.due
    assert sweep["sweep_s"] > 0
    assert sweep["sessions_per_s"] > 0
    assert 0 < sweep["announce_ms_per_session"] < sweep["ms_per_session"]
    bare = figures["bare_update"]
    assert bare["updates"] == sweep["due"]
    assert bare["updates_per_s"] > 0
    assert figures["sweep_over_bare"] > 0


def test_timers_fired_on_the_worker_were_all_measured(sections: dict[str, Any]) -> None:
    lateness = sections["timers"]["figures"]["lateness"]
    assert lateness["sessions"] == lateness["closed"] == timers.QUICK.eta_sessions
    # A timer never fires before it is due.
    assert lateness["min_ms"] >= 0
    _positive_spread(lateness)
    closers = lateness["closed_by"]
    assert closers["timer_task"] + closers["sweep"] == lateness["sessions"]


def test_export_bundled_and_verified_every_entry(sections: dict[str, Any]) -> None:
    figures = sections["export"]["figures"]
    assert figures["entries"] >= export.QUICK.entries
    assert figures["entries"] == figures["sessions"] * export.ENTRIES_PER_SESSION
    assert figures["file_bytes"] > figures["logs_bytes"] > 0
    entries = figures["entries"]
    assert figures["oanp_verify"]["verdict"].startswith(f"VERIFIED: {entries}/{entries} entries")
    for name in ("export", "oanp_verify", "oanp_verify_one_job", "jcs_sha256"):
        assert figures[name]["exit_code"] == 0
        assert figures[name]["entries_per_s"] > 0
        # Each process imports what its work needs, so it may peak a little under the
        # baseline's imports: only that the figure was read is certain.
        assert figures[name]["peak_rss_bytes"] > 0
    assert figures["import_only"]["peak_rss_bytes"] > 0
    verified = figures["oanp_verify"]
    assert verified["jobs"] == usable_cores()
    if verified["jobs"] > 1:  # a worker per core, each one's peak read while it lived
        assert verified["workers"] == verified["jobs"]
        assert all(peak > 0 for peak in verified["workers_peak_rss_bytes"])
        assert verified["largest_worker_rss_bytes"] > 0
        assert verified["tree_peak_rss_bytes"] == verified["peak_rss_bytes"] + sum(
            verified["workers_peak_rss_bytes"]
        )
    assert "workers" not in figures["oanp_verify_one_job"]


def test_the_log_integrated_the_backlog_and_put_every_arrival_in_a_checkpoint(
    sections: dict[str, Any],
) -> None:
    figures = sections["tlog"]["figures"]
    # The backlog less the one entry integrated before the clock started.
    assert figures["batch"]["entries"] == tlog.QUICK.backlog - 1
    assert figures["batch"]["s"] > 0
    assert figures["batch"]["hashing_s"] > 0
    arrival = figures["arrival"]
    assert arrival["entries"] > 0
    _positive_spread(arrival)


def test_markdown_holds_the_four_tables(out: Path) -> None:
    text = (out / "BENCHMARKS.md").read_text(encoding="utf-8")
    for name in ("live", "timers", "tlog", "export"):
        assert f"## {name}:" in text
    assert "| frame after the 201 answer, p50 / p99 |" in text
    assert "one bare UPDATE per session, same database" in text
    assert "JCS + SHA-256 of the same entries" in text
