"""The health section in quick mode: a real Daphne and worker on PostgreSQL + Redis, then on
SQLite and the file broker. The assertions are on what it reports, never on a time."""

import json
import os
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from bench import health
from bench.__main__ import main

# Quick runs of the bench, on the real servers and workers `make bench` starts.
pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("bench-health")
    assert main(["--quick", "--only", "health", "--out", str(directory)]) == 0
    return directory


@pytest.fixture(scope="module")
def section(out: Path) -> dict[str, Any]:
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    found: dict[str, Any] = results["sections"]["health"]
    return found


def test_it_ran_quick_and_wrote_its_table(section: dict[str, Any]) -> None:
    assert section["quick"] is True
    rows = 2 * len(health.ENDPOINTS) + len(health.QUICK.added_processes)
    assert len(section["table"]) == rows
    assert all(row["figure"] and row["beside"] for row in section["table"])


@pytest.mark.parametrize("deployment", health.DEPLOYMENTS)
def test_every_endpoint_answered_every_request(section: dict[str, Any], deployment: str) -> None:
    measured = section["figures"][deployment]["endpoints"]
    assert list(measured) == list(health.ENDPOINTS)
    for path, figures in measured.items():
        assert figures["requests"] == health.QUICK.requests[path]
        assert 0 < figures["p50_ms"] <= figures["p99_ms"] <= figures["max_ms"]
        assert figures["server_cpu_ms_per_request"] >= 0
        assert figures["postgres_cpu_ms_per_request"] >= 0


def test_each_scrape_read_the_files_of_more_processes(section: dict[str, Any]) -> None:
    growth = section["figures"]["postgresql"]["growth"]
    assert len(growth) == 1 + len(health.QUICK.added_processes)
    first = growth[0]
    assert first["processes"] >= 1
    assert first["metrics"] == section["figures"]["postgresql"]["endpoints"]["/metrics"]
    added = 0
    for step, count in zip(growth[1:], health.QUICK.added_processes, strict=True):
        added += count
        # Each added process leaves a counter file and a histogram file; the run's own
        # processes may have opened a file of another kind meanwhile (the worker's first task).
        assert step["processes"] >= first["processes"] + added
        assert step["files"] >= first["files"] + 2 * added
        assert step["bytes"] > first["bytes"]
        assert step["metrics"]["requests"] == health.QUICK.growth_requests


def test_an_added_process_writes_every_metric_of_the_arbiter(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    health.add_processes(env, 1)
    facts = health.folder_facts(tmp_path)
    # One file each for the counters, the histograms and the integrity gauge.
    assert (facts["files"], facts["processes"]) == (3, 1)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(tmp_path))
    names = {metric.name for metric in registry.collect()}
    assert {
        "oanp_envelopes",
        "oanp_refusals",
        "oanp_verdicts",
        "oanp_timer_lateness_seconds",
        "oanp_deliveries",
        "oanp_request_duration_seconds",
        "oanp_tasks",
        "oanp_integrity_mismatches",
    } <= names


def test_markdown_holds_the_health_table(out: Path) -> None:
    text = (out / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert "## health:" in text
    for path in health.ENDPOINTS:
        assert f"| PostgreSQL + Redis: GET {path}, latency p50 / p99" in text
        assert f"| SQLite + file broker: GET {path}, latency p50 / p99" in text
    assert "processes' counters in the folder" in text
