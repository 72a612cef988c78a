"""``make serve``'s runner: the Procfile's processes under the supervisor. One that exits is
restarted while the others run on, its lines are echoed with its name, and the restart is written
where /readyz reports it; SIGTERM stops them all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from arbiter_app import health
from oanp_site import procfile
from oanp_site.processes import alive
from tests.conftest import ROOT
from tests.support.waiting import wait_for


def test_each_line_of_a_procfile_is_a_program_with_its_own_log(tmp_path: Path) -> None:
    file = tmp_path / "Procfile"
    file.write_text(
        "# the site\nweb: python -m oanp_site.serve\n\nbeat: celery -A x beat -l 'INFO'\n"
    )
    found = procfile.programs(file, tmp_path)
    assert [(p.name, list(p.argv), p.log) for p in found] == [
        ("web", ["python", "-m", "oanp_site.serve"], tmp_path / "serve-web.log"),
        ("beat", ["celery", "-A", "x", "beat", "-l", "INFO"], tmp_path / "serve-beat.log"),
    ]


def test_a_line_that_names_no_command_stops_the_start(tmp_path: Path) -> None:
    file = tmp_path / "Procfile"
    file.write_text("web: python -m oanp_site.serve\nworker\n")
    with pytest.raises(ValueError, match="Procfile:2: expected 'name: command'"):
        procfile.programs(file, tmp_path)


def test_an_unclosed_quote_stops_the_start_naming_its_line(tmp_path: Path) -> None:
    file = tmp_path / "Procfile"
    file.write_text("web: python -m oanp_site.serve\nbeat: celery -A x beat -l 'INFO\n")
    with pytest.raises(ValueError, match="Procfile:2: No closing quotation"):
        procfile.programs(file, tmp_path)


def test_a_process_that_exits_is_restarted_and_the_others_run_on(tmp_path: Path) -> None:
    file = tmp_path / "Procfile"
    file.write_text(
        f"steady: {sys.executable} -c 'import time; time.sleep(120)'\n"
        f"crashing: {sys.executable} -c 'print(\"about to fail\"); raise SystemExit(3)'\n"
    )
    status_path = ROOT / "var" / procfile.STATUS_FILE
    output = tmp_path / "output"
    with output.open("wb") as sink:
        runner = subprocess.Popen(
            [sys.executable, "-m", "oanp_site.procfile", str(file)],
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:

        def restarted_twice() -> dict[str, Any] | None:
            try:
                status: dict[str, Any] = json.loads(status_path.read_text())
            except (FileNotFoundError, json.JSONDecodeError):
                return None
            return status if status["processes"]["crashing"]["restarts"] >= 2 else None

        status = wait_for(restarted_twice, 60)
        assert status["supervisor_pid"] == runner.pid
        steady = status["processes"]["steady"]
        assert steady["restarts"] == 0
        assert alive(steady["pid"])
        assert status["processes"]["crashing"]["last_exit"] == "exited with status 3"
        text = output.read_text()
        assert "crashing | about to fail" in text
        assert "exited with status 3; the last lines of" in text
        assert "restarting crashing in" in text
    finally:
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(30) == 0
    assert not alive(steady["pid"])
    assert not status_path.exists()


@pytest.mark.django_db
def test_readyz_reports_the_supervisors_restarts_without_failing_on_them(
    tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(health, "REUSE_SECONDS", 0)
    status = {
        "supervisor_pid": 1,
        "processes": {
            "web": {"pid": 2, "restarts": 0, "last_exit": None, "last_exit_at": None},
            "timers": {
                "pid": 3,
                "restarts": 1,
                "last_exit": "was killed by SIGKILL",
                "last_exit_at": "2026-11-28T02:00:00+00:00",
            },
        },
    }
    settings.OANP_PROCESSES_FILE = str(tmp_path / "processes.json")
    (tmp_path / "processes.json").write_text(json.dumps(status))
    _, checks = health.readiness()
    assert checks["processes"]["supervised"] is True
    assert checks["processes"]["processes"]["timers"]["last_exit"] == "was killed by SIGKILL"
    assert checks["processes"]["note"] == "restarted after an exit: timers"

    (tmp_path / "processes.json").write_text("{not json")
    _, checks = health.readiness()
    assert checks["processes"]["ok"] is False
    # Advisory: an unreadable status file says so, and takes nothing out of rotation.
    assert "processes" in health.ADVISORY

    settings.OANP_PROCESSES_FILE = ""
    _, checks = health.readiness()
    assert checks["processes"] == {"ok": True, "supervised": False}
