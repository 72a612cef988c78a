"""The bench in quick mode: the core section's figures, the merge into results.json, the table."""

import json
from pathlib import Path
from typing import Any

import pytest

from bench.__main__ import main

OTHER_SECTION = {
    "title": "a section measured earlier",
    "quick": False,
    "machine": {"cpu": "elsewhere", "cores": 1, "python": "CPython 3.11", "date": "2026-01-01"},
    "figures": {"sessions_per_s": 12.5},
    "table": [{"measure": "earlier figure", "figure": "12.5 /s", "beside": "", "aim": ""}],
    "notes": [],
}


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One quick run of the core section into a directory that already holds another section."""
    directory = tmp_path_factory.mktemp("bench")
    (directory / "results.json").write_text(
        json.dumps({"version": 1, "sections": {"earlier": OTHER_SECTION}}), encoding="utf-8"
    )
    assert main(["--quick", "--only", "core", "--out", str(directory)]) == 0
    return directory


@pytest.fixture(scope="module")
def core(out: Path) -> dict[str, Any]:
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    section: dict[str, Any] = results["sections"]["core"]
    return section


def test_machine_and_both_peers_have_positive_rates(core: dict[str, Any]) -> None:
    figures = core["figures"]
    rates = [figures[name]["envelopes_per_s"] for name in ("machine", "parse_hash", "bare")]
    assert all(rate > 0 for rate in rates)
    assert figures["machine"]["entries_per_s"] > 0
    assert figures["signing"]["jws_per_s"] > 0


def test_the_three_measurements_see_the_same_envelopes(core: dict[str, Any]) -> None:
    figures = core["figures"]
    counts = {figures[name]["envelopes"] for name in ("machine", "parse_hash", "bare")}
    assert counts == {figures["corpus"]["party_envelopes"]}
    assert figures["corpus"]["party_envelopes"] > figures["corpus"]["sessions"] > 0


def test_aims_are_judged(core: dict[str, Any]) -> None:
    aims = core["figures"]["aims"]
    assert aims["envelopes_per_s"]["aim"] == 10_000
    assert aims["machine_over_bare"]["aim"] == 2.0
    assert all(isinstance(aim["met"], bool) for aim in aims.values())


def test_the_run_is_marked_quick_with_the_machine_it_ran_on(core: dict[str, Any]) -> None:
    assert core["quick"] is True
    assert {"cpu", "cores", "python", "date"} <= set(core["machine"])


def test_other_sections_figures_are_kept(out: Path) -> None:
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["sections"]["earlier"] == OTHER_SECTION


def test_markdown_holds_the_table_of_every_section(out: Path) -> None:
    text = (out / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert "| Measure | Figure | Beside it, same run | Aim |" in text
    assert "| machine time / bare time |" in text
    assert "## core:" in text
    assert "## earlier:" in text
    assert "Quick run" in text


def test_an_unknown_section_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="unknown section"):
        main(["--quick", "--only", "nosuch", "--out", str(tmp_path)])
