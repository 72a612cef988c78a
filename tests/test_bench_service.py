"""The service section in quick mode: the Procfile's web on a PostgreSQL database of its own,
and beside it at the judged level one Daphne process alone and the Procfile's processes sharing
one socket."""

import json
from pathlib import Path
from typing import Any

import pytest

from bench.__main__ import main
from bench.service import QUICK, WEB_PROCESSES, bench_database

# Quick runs of the bench, on the real servers and workers `make bench` starts.
pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("bench-service")
    assert main(["--quick", "--only", "service", "--out", str(directory)]) == 0
    return directory


@pytest.fixture(scope="module")
def service(out: Path) -> dict[str, Any]:
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    section: dict[str, Any] = results["sections"]["service"]
    return section


def test_every_level_of_the_quick_run_was_measured(service: dict[str, Any]) -> None:
    assert service["quick"] is True
    measured = [
        (level["web_processes"], level["shared_socket"], level["pairs"])
        for level in service["figures"]["levels"]
    ]
    judged = max(QUICK.levels)
    assert measured == [(WEB_PROCESSES, False, pairs) for pairs in QUICK.levels] + [
        (1, False, judged),
        (WEB_PROCESSES, True, judged),
    ]


def test_every_session_ended_agreed_with_six_party_envelopes(service: dict[str, Any]) -> None:
    for level in service["figures"]["levels"]:
        arbiter = level["arbiter"]
        sessions = level["pairs"] * level["sessions_per_pair"]
        assert arbiter["sessions"] == sessions > 0
        assert arbiter["states"] == {"AGREED": sessions}
        assert arbiter["agreed"] == sessions
        assert arbiter["envelopes"] == 6 * sessions


def test_the_arbiter_and_the_bare_endpoint_have_positive_rates(service: dict[str, Any]) -> None:
    for level in service["figures"]["levels"]:
        arbiter, bare = level["arbiter"], level["bare"]
        assert arbiter["envelopes_per_s"] > 0
        assert arbiter["sessions_per_s"] > 0
        assert 0 < arbiter["p50_ms"] <= arbiter["p99_ms"]
        # The peer saw the very bodies the pairs sent, one request each.
        assert bare["requests"] == arbiter["envelopes"]
        assert bare["requests_per_s"] > 0
        assert 0 < bare["p50_ms"] <= bare["p99_ms"]
        assert level["bare_over_arbiter"] == pytest.approx(
            bare["requests_per_s"] / arbiter["envelopes_per_s"]
        )


def test_cpu_of_both_sides_is_reported(service: dict[str, Any]) -> None:
    for level in service["figures"]["levels"]:
        for run in (level["arbiter"], level["bare"]):
            assert run["client_cpu_cores"] > 0
            assert run["server_cpu_cores"] > 0
            assert run["machine_busy_cores"] > 0
            assert run["server_cpu_ms_per_request"] > 0


def test_aims_are_judged(service: dict[str, Any]) -> None:
    aims = service["figures"]["aims"]
    assert aims["envelopes_per_s"]["aim"] == 300
    assert aims["p99_ms"]["aim"] == 50
    assert aims["bare_over_arbiter"]["aim"] == 1.5
    assert aims["scaling"]["aim"] == 2.5
    levels = service["figures"]["levels"]
    production = [
        lv for lv in levels if lv["web_processes"] == WEB_PROCESSES and not lv["shared_socket"]
    ]
    at = next(lv for lv in production if lv["pairs"] == max(QUICK.levels))
    one = next(lv for lv in production if lv["pairs"] == min(QUICK.levels))
    assert aims["envelopes_per_s"]["value"] == at["arbiter"]["envelopes_per_s"]
    assert aims["scaling"]["value"] == pytest.approx(
        at["arbiter"]["envelopes_per_s"] / one["arbiter"]["envelopes_per_s"]
    )
    assert all(isinstance(aim["met"], bool) for aim in aims.values())


def test_markdown_holds_the_service_table(out: Path) -> None:
    text = (out / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert "## service:" in text
    assert "| Measure | Figure | Beside it, same run | Aim |" in text
    web = f"{WEB_PROCESSES} web processes" if WEB_PROCESSES > 1 else "1 web process"
    shared = f"2 pairs, {web}, one shared socket"
    for who in (f"1 pair, {web}", f"2 pairs, {web}", "2 pairs, 1 web process", shared):
        assert f"| arbiter, {who}: envelopes/s |" in text
        assert f"| arbiter, {who}: envelope latency p50 / p99 |" in text
        assert f"| arbiter, {who}: bare endpoint throughput / arbiter throughput |" in text
    assert "bare endpoint:" in text
    assert "| scaling: envelopes/s at 2 pairs over 1 pair |" in text
    assert "Why a socket each" in text


def test_the_bench_database_is_its_own_on_the_configured_server() -> None:
    database = bench_database(
        "oanp_bench", {"DATABASE_URL": "postgres://alice:s%40cret@db.example:6543/oanp"}
    )
    assert (database.host, database.port, database.user, database.password) == (
        "db.example",
        6543,
        "alice",
        "s@cret",
    )
    assert database.url == "postgres://alice:s%40cret@db.example:6543/oanp_bench"
    default = bench_database("oanp_bench", {})
    assert default.url == "postgres://postgres@127.0.0.1:5432/oanp_bench"


def test_the_statements_of_each_envelope_are_counted(service: dict[str, Any]) -> None:
    statements = service["figures"]["statements_per_envelope"]
    # After the open: the ack, two proposes, a counter and the accept.
    assert statements["envelopes"] == 5
    assert all(count >= 4 for count in statements["statements_per_envelope"])
    assert statements["mean"] == sum(statements["statements_per_envelope"]) / 5
    assert {"INSERT", "UPDATE"} <= set(statements["kinds"])
