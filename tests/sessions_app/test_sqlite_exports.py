"""Exports on the embedded default's SQLite, with writers busy beside them (the demo's web
process, worker and buyers): none fails with "database is locked". Before exports read in
whole batches, most did: a connection that writes its progress while its own read is still
open is refused at once by SQLite whenever another writer waits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_exports_finish_while_other_threads_write(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        OANP_BROKER_DIR=str(tmp_path / "broker"),
    )
    done = subprocess.run(
        [sys.executable, "-m", "tests.sessions_app.sqlite_export_load"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = done.stdout.splitlines()
    assert said == ["done "] * 6, said
