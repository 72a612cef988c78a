"""The alert rules of deploy/prometheus: valid for promtool, each one's own unit tests passing
(each rule with series that make it fire and series that must not), each with its runbook in
docs/alerts.md, and every series they read one that /metrics exports."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT

RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "alerts_test.yml"
RUNBOOK = ROOT / "docs" / "alerts.md"
#: The suffixes a counter's or a histogram's samples add to its family's name.
SUFFIXES = re.compile(r"_(total|bucket|count|sum)$")


def promtool() -> str:
    """Debian's promtool, on the PATH or where `make promtool` unpacks it."""
    found = shutil.which("promtool") or shutil.which(
        "promtool", path=str(Path(sys.executable).parent)
    )
    # make test and make test-fast install it first: missing is a broken setup, not a skip.
    assert found is not None, "promtool is missing: `make promtool` installs it"
    return found


def run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *args], capture_output=True, text=True, timeout=60, cwd=RULES.parent
    )


def rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_promtool_finds_the_rules_valid() -> None:
    checked = run_promtool("check", "rules", RULES.name)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules())} rules found" in checked.stdout


def test_the_rules_pass_their_unit_tests() -> None:
    tested = run_promtool("test", "rules", RULE_TESTS.name)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_each_rule_is_tested_firing_and_quiet_and_has_a_runbook() -> None:
    cases = [
        case
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test["alert_rule_test"]
    ]
    headings = set(re.findall(r"^## (\w+)$", RUNBOOK.read_text(), flags=re.MULTILINE))
    for rule in rules():
        name = rule["alert"]
        mine = [case for case in cases if case["alertname"] == name]
        assert any(case["exp_alerts"] for case in mine), f"{name} is never tested firing"
        assert any(not case["exp_alerts"] for case in mine), f"{name} is never tested quiet"
        assert rule["annotations"]["summary"]
        assert rule["annotations"]["runbook_url"] == f"docs/alerts.md#{name.lower()}"
        assert name in headings, f"{name} has no section in docs/alerts.md"


@pytest.mark.django_db
def test_every_series_the_rules_read_is_exported(client: Any) -> None:
    client.get("/healthz")  # a request, for the request counter the rules divide by
    exported = {
        family.name
        for family in text_string_to_metric_families(client.get("/metrics").content.decode())
    }
    read = {
        SUFFIXES.sub("", name)
        for rule in rules()
        for name in re.findall(r"\boanp_\w+", rule["expr"])
    }
    assert read, "the rules read no series of the arbiter's"
    assert read <= exported, read - exported
