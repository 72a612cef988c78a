"""The Procfile's web process: several Daphne processes share one port, each on a socket of its
own; one that dies is started again while the others go on answering; SIGTERM stops them all,
gracefully."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings

from oanp_site.serve import concurrency, main
from oanp_site.web_process import daphne_arguments
from tests.conftest import ROOT, suite_database_url
from tests.support.processes import children, free_port, spawn, tail
from tests.support.waiting import wait_for


def listening(port: int) -> set[int]:
    """The inodes of the sockets listening on ``port`` (IPv4), from the kernel's table."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and int(fields[1].split(":")[1], 16) == port:  # 0A: LISTEN
            inodes.add(int(fields[9]))
    return inodes


def sockets_of(pid: int, among: set[int]) -> set[int]:
    """Which of the socket inodes ``among`` the process ``pid`` holds open."""
    held = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            held.add(int(target[8:-1]))
    return held & among


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
        # A socket each, so the kernel spreads connections over them, and none kept by the
        # parent, so a dead process's connections go to the others rather than wait for it.
        wait_for(lambda: len(listening(port)) == 2, 10, message=lambda: tail(log))
        sockets = listening(port)
        assert [len(sockets_of(pid, sockets)) for pid in sorted(first)] == [1, 1]
        assert sockets_of(min(first), sockets) != sockets_of(max(first), sockets)
        assert not sockets_of(web.pid, sockets)

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


def test_a_second_web_on_a_served_port_refuses_to_start(tmp_path: Path) -> None:
    # With SO_REUSEPORT the kernel would let it bind beside the first and take a share of the
    # first one's connections.
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": suite_database_url(),
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "WEB_CONCURRENCY": "1",
    }
    first = spawn([sys.executable, "-m", "oanp_site.serve"], env, tmp_path / "first.log")
    try:
        wait_for(lambda: answers(f"http://127.0.0.1:{port}"), 30)
        second = spawn([sys.executable, "-m", "oanp_site.serve"], env, tmp_path / "second.log")
        assert second.wait(30) == 1
        assert f"something already answers on 127.0.0.1:{port}" in tail(tmp_path / "second.log")
        assert len(listening(port)) == 1
    finally:
        first.terminate()
        first.wait(30)


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
    assert "--proxy-headers" not in daphne_arguments(3)


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
