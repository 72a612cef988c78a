"""make bench-quick's check: guarded ratios held to a baseline, the baseline written from runs,
and the committed baseline against the sections' declarations.

The check's logic is tried on sections and figures made here, so what it decides is known; one
quick run of the core section shows that its guards read its real figures.
"""

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import bench.__main__ as bench_main
from bench import core
from bench.baseline import ATTEMPTS, BaselineError, check, judge, write_baseline
from bench.report import Guard, Options, Section, SectionResult, Timing, best_of

COMMITTED = Path(bench_main.__file__).resolve().parent / "quick-baseline.json"


def _ratio(name: str) -> Guard:
    return Guard(name, lambda figures: figures[name], 0.25)


def _unused(options: Options) -> SectionResult:
    raise AssertionError("the check measures through the measure it is given")


FAKE = Section("fake", "a section made here", _unused, (_ratio("a/b"), _ratio("c/d")))


def _baseline(path: Path, sections: dict[str, dict[str, float]], tolerance: float = 0.25) -> Path:
    held = {
        section: {
            name: {"baseline": value, "tolerance": tolerance} for name, value in ratios.items()
        }
        for section, ratios in sections.items()
    }
    path.write_text(json.dumps({"version": 1, "sections": held}), encoding="utf-8")
    return path


class Runs:
    """A measure that answers the given figures, one run after another, and counts the runs."""

    def __init__(self, *figures: dict[str, float]) -> None:
        self._figures: Iterator[dict[str, float]] = iter(figures)
        self.count = 0

    def __call__(self, section: Section) -> SectionResult:
        self.count += 1
        return SectionResult(section.name, section.title, dict(next(self._figures)), [])


def test_ratios_within_their_tolerance_pass_and_each_is_tabled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = _baseline(tmp_path / "b.json", {"fake": {"a/b": 2.0, "c/d": 4.0}})
    runs = Runs({"a/b": 2.49, "c/d": 2.0})
    assert check([FAKE], runs, baseline) == 0
    assert runs.count == 1
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split() == ["ratio", "baseline", "tolerance", "limit", "this", "run"]
    assert lines[1].split()[:7] == ["fake:", "a/b", "2.00×", "+25%", "2.50×", "2.49×", "ok"]
    # Far under its baseline: passes, and says the baseline could hold the gain.
    assert lines[2].split()[:7] == ["fake:", "c/d", "4.00×", "+25%", "5.00×", "2.00×", "ok,"]
    assert "make bench-baseline holds the gain" in lines[2]
    assert "SLOWER" not in out
    assert err == ""


def test_a_ratio_past_its_tolerance_on_every_attempt_fails_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = _baseline(tmp_path / "b.json", {"fake": {"a/b": 8.3, "c/d": 1.0}})
    runs = Runs(*({"a/b": value, "c/d": 1.0} for value in (10.9, 11.5, 10.6)))
    assert check([FAKE], runs, baseline) == 1
    assert runs.count == ATTEMPTS == 3
    out, err = capsys.readouterr()
    failures = [line for line in err.splitlines() if " > baseline " in line]
    assert failures == ["fake: a/b 10.60× > baseline 8.30× + 25% (lowest of 3 runs)"]
    assert "SLOWER (lowest of 3: 10.90, 11.50, 10.60)" in out


def test_a_ratio_over_its_limit_once_runs_again_and_passes_when_it_comes_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = _baseline(tmp_path / "b.json", {"fake": {"a/b": 1.0, "c/d": 1.0}})
    runs = Runs({"a/b": 1.6, "c/d": 1.0}, {"a/b": 1.1, "c/d": 1.3})
    assert check([FAKE], runs, baseline) == 0
    assert runs.count == 2
    out, err = capsys.readouterr()
    assert "fake: a/b over the limit; running it again (2 of 3)" in err
    # Each ratio is judged by its lowest: c/d's 1.3 on the second run does not count against it.
    assert "ok (lowest of 2: 1.60, 1.10)" in out
    assert "ok (lowest of 2: 1.00, 1.30)" in out


def test_a_ratio_the_baseline_lacks_is_refused(tmp_path: Path) -> None:
    baseline = _baseline(tmp_path / "b.json", {"fake": {"a/b": 1.0}})
    with pytest.raises(BaselineError, match="no baseline for fake: c/d"):
        check([FAKE], Runs({"a/b": 1.0, "c/d": 1.0}), baseline)


def test_without_a_readable_baseline_the_check_stops_before_measuring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none.json"
    assert bench_main.main(["--check", "--baseline", str(missing), "--out", str(tmp_path)]) == 2
    assert "make bench-baseline" in capsys.readouterr().err
    assert not (tmp_path / "results.json").exists()


def test_the_baseline_is_written_whole(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        bench_main.main(["--write-baseline", "--only", "core"])
    assert stopped.value.code == 2
    assert "the baseline is written whole" in capsys.readouterr().err


def test_the_baseline_is_the_median_of_its_runs_beside_their_spread(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    values = (1.0, 1.2, 0.9, 1.1, 1.05)
    runs = Runs(*({"a/b": value, "c/d": 2 * value} for value in values))
    assert write_baseline([FAKE], runs, path, runs=5) == 0
    written = json.loads(path.read_text(encoding="utf-8"))
    held = written["sections"]["fake"]["a/b"]
    assert held["baseline"] == 1.05
    assert held["tolerance"] == 0.25
    assert held["runs"] == list(values)
    assert held["spread"] == {"low": round(0.9 / 1.05 - 1, 3), "high": round(1.2 / 1.05 - 1, 3)}
    assert written["sections"]["fake"]["c/d"]["baseline"] == 2.1
    assert len(written["load"]) == 5
    assert {"cpu", "cores", "date"} <= set(written["machine"])
    # What it wrote is what the check reads.
    verdicts = judge(written, {"fake": {"a/b": [1.3], "c/d": [2.7]}})
    assert [v.passed for v in verdicts] == [True, False]


# The committed baseline ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def committed() -> dict[str, Any]:
    found: dict[str, Any] = json.loads(COMMITTED.read_text(encoding="utf-8"))
    return found


def test_the_committed_baseline_holds_every_guard_as_declared(committed: dict[str, Any]) -> None:
    declared = {s.name: {g.name: g.tolerance for g in s.guards} for s in bench_main.GUARDED}
    held = {
        section: {name: ratio["tolerance"] for name, ratio in ratios.items()}
        for section, ratios in committed["sections"].items()
    }
    assert held == declared
    assert committed["about"]


def test_each_tolerance_clears_the_spread_it_was_chosen_over_and_catches_a_path_half_as_slow(
    committed: dict[str, Any],
) -> None:
    for ratios in committed["sections"].values():
        for ratio in ratios.values():
            assert len(ratio["runs"]) >= 5
            assert ratio["spread"]["high"] < ratio["tolerance"] < 0.5


def _core_figures(baseline: dict[str, Any], machine_pace: float) -> dict[str, Any]:
    """Core's figures with its ratios at their baselines, the machine ``machine_pace`` times as
    slow; the terms corpus goes through the same machine, so it slows with it."""
    held = {name: ratio["baseline"] for name, ratio in baseline["sections"]["core"].items()}
    machine = held["machine/bare"] * machine_pace
    return {
        "bare": {"best_cpu_s": 1.0, "envelopes": 100},
        "parse_hash": {"best_cpu_s": held["parse+hash/bare"], "envelopes": 100},
        "machine": {"best_cpu_s": machine, "envelopes": 100},
        "machine_with_terms": {
            "best_cpu_s": machine * held["terms machine/machine"] * 1.2,
            "envelopes": 120,
        },
        "signing": {
            "jws": {"best_cpu_s": held["JWS/raw Ed25519"] * 0.01},
            "raw": {"best_cpu_s": 0.01},
        },
    }


def test_a_machine_path_half_as_slow_again_fails_the_committed_baseline(
    committed: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    steady = _core_figures(committed, 1.0)
    assert check([core.SECTION], Runs(steady), COMMITTED) == 0
    capsys.readouterr()
    slower = _core_figures(committed, 1.5)
    assert check([core.SECTION], Runs(slower, slower, slower), COMMITTED) == 1
    failures = [line for line in capsys.readouterr().err.splitlines() if " > baseline " in line]
    assert [line.split(" ", 2)[1] for line in failures] == ["machine/bare"]
    assert failures[0].startswith("core: machine/bare ")


# The real thing --------------------------------------------------------------------------------


def test_a_quick_check_of_core_reads_its_figures_and_leaves_the_committed_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    committed_files = {p: p.read_bytes() for p in bench_main.paths(None)}
    monkeypatch.setattr(bench_main, "QUICK_OUT", tmp_path / "bench-quick")
    # A baseline no machine's pace reaches: only the reading of the figures is tried.
    roomy = _baseline(tmp_path / "b.json", {"core": {g.name: 1000.0 for g in core.SECTION.guards}})
    assert bench_main.main(["--check", "--only", "core", "--baseline", str(roomy)]) == 0
    out = capsys.readouterr().out
    for guard in core.SECTION.guards:
        name = f"core: {guard.name} "
        line = next(line for line in out.splitlines() if line.startswith(name))
        baseline, tolerance, limit, this_run = line[len(name) :].split()[:4]
        assert (baseline, tolerance, limit) == ("1000.00×", "+25%", "1250.00×")
        assert float(this_run.rstrip("×")) > 0
    results = json.loads((tmp_path / "bench-quick" / "results.json").read_text(encoding="utf-8"))
    assert results["sections"]["core"]["quick"] is True
    assert {p: p.read_bytes() for p in bench_main.paths(None)} == committed_files


# Timing in parts -------------------------------------------------------------------------------


def test_works_take_turns_part_by_part_and_each_best_is_the_sum_of_its_parts_best(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(time, "thread_time", lambda: clock[0] / 2)
    order: list[str] = []
    # Each part takes the time its round gives it: a part's best is its fastest round.
    durations = {"a1": [3.0, 1.0], "a2": [2.0, 4.0], "b1": [5.0, 6.0], "b2": [1.0, 1.0]}
    rounds = {name: iter(times) for name, times in durations.items()}

    def part(name: str) -> Any:
        def work() -> None:
            order.append(name)
            clock[0] += next(rounds[name])

        return work

    a, b = best_of(2, [part("a1"), part("a2")], [part("b1"), part("b2")])
    assert order == ["a1", "b1", "a2", "b2"] * 2
    assert a == Timing(best_s=1.0 + 2.0, runs_s=(5.0, 5.0), best_cpu_s=1.5)
    assert b == Timing(best_s=5.0 + 1.0, runs_s=(6.0, 7.0), best_cpu_s=3.0)
