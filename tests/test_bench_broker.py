"""The broker section in quick mode: a real worker on the embedded broker, then on Redis.

The assertions are on what it reports, never on a time.
"""

import json
from typing import Any

import pytest

from bench import broker
from bench.__main__ import main

# Quick runs of the bench, on the real servers and workers `make bench` starts.
pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def section(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    directory = tmp_path_factory.mktemp("bench-broker")
    assert main(["--quick", "--only", "broker", "--out", str(directory)]) == 0
    results = json.loads((directory / "results.json").read_text(encoding="utf-8"))
    found: dict[str, Any] = results["sections"]["broker"]
    return found


def test_it_ran_quick_and_wrote_its_table(section: dict[str, Any]) -> None:
    assert section["quick"] is True
    assert len(section["table"]) == 2
    assert all(row["figure"] and row["beside"] for row in section["table"])


@pytest.mark.parametrize("name", broker.BROKERS)
def test_every_task_ran_on_each_broker(section: dict[str, Any], name: str) -> None:
    figures = section["figures"][name]
    burst, handover = figures["burst"], figures["handover"]
    assert burst["tasks"] == broker.QUICK.burst <= burst["runs"]
    assert handover["tasks"] == broker.QUICK.paced <= handover["runs"]
    assert burst["tasks_per_s"] > 0
    assert burst["sent_per_s"] > 0
    assert 0 <= handover["min_ms"] <= handover["p50_ms"] <= handover["p99_ms"]
    assert handover["p99_ms"] <= handover["max_ms"]
    assert figures["rejected"] == 0


def test_the_embedded_broker_is_set_beside_redis(section: dict[str, Any]) -> None:
    figures = section["figures"]
    ratio = figures["embedded"]["burst"]["tasks_per_s"] / figures["redis"]["burst"]["tasks_per_s"]
    assert figures["throughput_embedded_over_redis"] == pytest.approx(ratio)
