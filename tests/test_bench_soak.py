"""The soak in quick mode (``python -m bench --soak --quick --only soak``): the Procfile's
processes on a PostgreSQL database and a Redis server of their own, Redis killed under load, a
slow merchant's callback, a crowd of deadlines. The assertions are on what the deployment did
(no process started again, every session closed, no 500, the bound per target held), never on
a time."""

import json
from pathlib import Path
from typing import Any

import pytest

from bench import soak
from bench.__main__ import SECTIONS, SOAK_SECTIONS, chosen, main

# A quick run of the soak, on the real processes `make soak` starts.
pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("bench-soak")
    assert main(["--soak", "--quick", "--only", "soak", "--out", str(directory)]) == 0
    return directory


@pytest.fixture(scope="module")
def figures(out: Path) -> dict[str, Any]:
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert set(results["sections"]) == {"soak"}
    section = results["sections"]["soak"]
    assert section["quick"] is True
    assert all(row["figure"] and row["beside"] for row in section["table"])
    found: dict[str, Any] = section["figures"]
    return found


def test_the_soak_sections_are_apart_from_the_bench() -> None:
    assert [s.name for s in SOAK_SECTIONS] == ["soak", "streams"]
    assert [s.name for s in chosen(None, SOAK_SECTIONS)] == ["soak", "streams"]
    assert not {s.name for s in SOAK_SECTIONS} & {s.name for s in SECTIONS}
    with pytest.raises(SystemExit, match="unknown section soak"):
        chosen("soak")


def test_no_process_was_started_again(figures: dict[str, Any]) -> None:
    processes = figures["processes"]
    assert set(processes["restarts"]) == {"web", "timers", "hosted", "worker", "beat", "daphne"}
    assert set(processes["restarts"].values()) == {0}
    assert processes["alive_at_end"] is True


def test_every_session_opened_through_the_blips_closed(figures: dict[str, Any]) -> None:
    blips = figures["blips"]
    assert blips["outages"] == soak.QUICK.blips
    assert blips["accepted"] == blips["sessions"] == blips["closed"] > 0
    assert blips["left_open"] == 0
    assert blips["close_reasons"] == {"deadline_expired": blips["closed"]}
    assert "500" not in blips["statuses"]
    assert blips["lateness_all"]["count"] == blips["closed"]
    # Deadlines fall on both sides of the outage: some are due around it.
    assert blips["lateness_around_blips"]["count"] > 0
    # Every worker found Redis again after each outage.
    back = blips["worker_back_after_redis_s"]
    assert set(back) == {"timers", "hosted", "worker"}
    assert all(len(each) == soak.QUICK.blips and None not in each for each in back.values())


def test_the_slow_merchant_held_no_more_than_its_bound(figures: dict[str, Any]) -> None:
    slow = figures["slow_merchant"]
    assert slow["deliveries"] >= slow["slow_sessions"] == soak.QUICK.slow_sessions
    assert 1 <= slow["most_in_flight"] <= 2
    assert slow["bystanders"] == soak.QUICK.bystanders
    assert slow["bystanders_left_open"] == 0
    assert slow["lateness"]["count"] == slow["bystanders"]


def test_the_crowd_closed_entire(figures: dict[str, Any]) -> None:
    crowd = figures["crowd"]
    assert crowd["sessions"] == crowd["closed"] == soak.QUICK.crowd
    assert crowd["lateness"]["count"] == crowd["sessions"]
    # A close's timestamp is read before its batch is written, so the last is seen after it.
    assert crowd["all_seen_closed_ms"] >= crowd["lateness"]["max_ms"]


def test_markdown_holds_the_soak_table(out: Path) -> None:
    text = (out / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert "## soak:" in text
    assert "processes started again" in text
    assert "make soak" in text
