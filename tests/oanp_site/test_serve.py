"""The Procfile's web process: several Daphne processes share one port; one that dies is
started again while the others go on answering; SIGTERM stops them all, gracefully."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings

from oanp_site.serve import concurrency, daphne_argv, main
from tests.conftest import ROOT, suite_database_url
from tests.support.processes import children, free_port, spawn, tail
from tests.support.waiting import wait_for


def answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.django_db
def test_web_processes_share_a_port_are_restarted_and_stop_together(
    tmp_path: Path, django_db_blocker: Any
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DATABASE_URL": suite_database_url(),
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "WEB_CONCURRENCY": "2",
        "PYTHONUNBUFFERED": "1",
    }
    log = tmp_path / "web.log"
    web = spawn([sys.executable, "-m", "oanp_site.serve"], env, log)
    try:
        wait_for(lambda: answers(url), 30, message=lambda: tail(log))
        wait_for(lambda: len(children(web.pid)) == 2, 10, message=lambda: tail(log))
        first = children(web.pid)

        os.kill(min(first), signal.SIGKILL)
        wait_for(lambda: answers(url), 10)  # the other one still answers meanwhile
        wait_for(
            lambda: len(children(web.pid)) == 2 and children(web.pid) != first,
            15,
            message=lambda: tail(log),
        )
        assert f"process {min(first)} exited with -9" in log.read_text()
        assert all(answers(url) for _ in range(10))

        running = children(web.pid)
        web.send_signal(signal.SIGTERM)
        assert web.wait(30) == 0
        assert not any(Path(f"/proc/{pid}").exists() for pid in running)
        assert not answers(url)
    finally:
        if web.poll() is None:
            web.kill()


def test_the_web_concurrency_defaults_to_two_per_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WEB_CONCURRENCY", raising=False)
    assert concurrency() == 2 * len(os.sched_getaffinity(0))
    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    assert concurrency() == 3
    monkeypatch.setenv("WEB_CONCURRENCY", "0")
    with pytest.raises(ValueError, match="at least 1"):
        concurrency()


def test_daphne_never_believes_forwarded_addresses_itself() -> None:
    # Daphne's --proxy-headers takes the left-most X-Forwarded-For entry, the client's to
    # forge; the application picks the right one (oanp_site.forwarded).
    assert "--proxy-headers" not in daphne_argv(3)


def test_a_proxy_setting_that_is_no_number_stops_the_web_before_it_listens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OANP_PROXY_HEADERS", "maybe")
    monkeypatch.setenv("PORT", str(free_port()))
    with pytest.raises(ValueError, match="OANP_PROXY_HEADERS"):
        main()


def test_the_procfile_serves_each_queue_from_one_process_of_its_own() -> None:
    """Timers, hosted agents and deliveries each have workers of their own, so a slow merchant's
    deliveries cannot hold up anyone's timer; every queue is served, and by one process."""
    lines = dict(
        line.split(": ", 1) for line in (ROOT / "Procfile").read_text().splitlines() if line
    )
    assert set(lines) == {"web", "timers", "hosted", "worker", "beat"}
    assert lines["web"] == "python -m oanp_site.serve"
    assert lines["beat"].startswith("celery -A oanp_site beat")
    served: dict[str, str] = {}
    for name in ("timers", "hosted", "worker"):
        argv = lines[name].split()
        assert argv[:4] == ["celery", "-A", "oanp_site", "worker"]
        for queue in argv[argv.index("-Q") + 1].split(","):
            assert queue not in served, f"{queue} is served by {served[queue]} and {name}"
            served[queue] = name
    assert set(served) == set(settings.OANP_QUEUES)
    assert served["timers"] != served["deliveries"] != served["hosted"] != served["timers"]
