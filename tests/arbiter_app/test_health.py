"""/healthz, /readyz and /metrics, against real dependencies: the suite's worker killed and
started again, a PostgreSQL cluster and a Redis server of the test's own stopped and started
under a running server, and two servers whose counters one scrape adds up."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from arbiter_app import health, selectors
from arbiter_app.models import Heartbeat, ProcessKind
from arbiter_app.probes import Probe
from tests.conftest import HEARTBEATS, ROOT, LiveServer, Worker, serve
from tests.support.factories.agents import HttpNegotiation, make_agent
from tests.support.factories.sessions import sfo_jfk_agents
from tests.support.processes import free_port, start_redis
from tests.support.waiting import wait_for

Readiness = dict[str, Any]


def readyz(server: LiveServer) -> tuple[int, Readiness]:
    started = time.monotonic()
    response = httpx.get(f"{server.url}/readyz", timeout=10)
    # Every check has a deadline of its own: a probe is answered, whatever hangs.
    assert time.monotonic() - started < 5
    body: Readiness = response.json()
    assert set(body["checks"]) == {
        "database",
        "broker",
        "channel_layer",
        "worker",
        "beat",
        "processes",
        "connections",
        "log",
    }
    assert (response.status_code == 200) == (body["status"] == "ok")
    return response.status_code, body


# Without a server --------------------------------------------------------------------------------


def test_healthz_answers_without_a_login_or_a_dependency(client: Any) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert client.post("/healthz").status_code == 405


@pytest.mark.django_db
def test_healthz_touches_no_database_even_for_a_signed_in_browser(
    client: Any, django_assert_num_queries: Any
) -> None:
    client.cookies["sessionid"] = "x" * 32
    with django_assert_num_queries(0):
        assert client.get("/healthz").status_code == 200
        assert client.head("/healthz").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_check_that_hangs_costs_each_probe_its_deadline_and_runs_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = threading.Event()
    calls = []

    def hangs() -> dict[str, Any]:
        calls.append(1)
        release.wait(30)
        return {}

    monkeypatch.setattr(
        health, "PROBES", {**health.PROBES, "broker": Probe(health._checked(hangs))}
    )
    monkeypatch.setattr(health, "REUSE_SECONDS", 0)
    # A shorter deadline than production's 2 s: what is checked is that each probe costs one.
    monkeypatch.setattr(health, "CHECK_SECONDS", 0.5)
    try:
        for _ in range(3):
            started = time.monotonic()
            status, checks = health.readiness()
            assert time.monotonic() - started < health.CHECK_SECONDS + 0.5
            assert status == "degraded"
            assert checks["broker"]["ok"] is False
            assert "no answer within 0.5 s" in checks["broker"]["error"]
            assert checks["database"]["ok"]
        running = re.search(r"has run for ([0-9.]+) s", checks["broker"]["error"])
        assert running is not None
        assert float(running[1]) >= 2 * health.CHECK_SECONDS
        assert len(calls) == 1  # the later probes waited on the run under way
    finally:
        release.set()


@pytest.mark.django_db
def test_a_worker_is_alive_while_its_heartbeat_is_fresh_and_it_has_not_stopped(
    settings: Any,
) -> None:
    settings.OANP_WORKER_LOST_SECONDS = 45
    now = timezone.now()
    Heartbeat.objects.all().delete()
    for name, seen, stopped in (
        ("fresh", now - timedelta(seconds=44), None),
        ("silent", now - timedelta(seconds=46), None),
        ("stopped", now, now),
    ):
        Heartbeat.objects.create(
            kind=ProcessKind.WORKER,
            name=name,
            started_at=now - timedelta(hours=1),
            seen_at=seen,
            stopped_at=stopped,
        )
    alive = {w.name: w.alive for w in selectors.workers(now)}
    assert alive == {"fresh": True, "silent": False, "stopped": False}
    assert [w.name for w in selectors.workers(now)] == ["stopped", "fresh", "silent"]


# The suite's worker --------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_readyz_turns_503_when_the_worker_dies_and_200_when_it_is_back(
    live_arbiter: LiveServer, celery_worker_process: Worker
) -> None:
    def answered() -> Readiness | None:
        # Alive, and beat's heartbeat task answered through the broker.
        status, body = readyz(live_arbiter)
        workers = body["checks"]["worker"]["processes"]
        return body if status == 200 and workers[0]["queue_wait_ms"] is not None else None

    def found_lost() -> tuple[int, Readiness] | None:
        status, body = readyz(live_arbiter)
        worker = body["checks"]["worker"]
        # Beat's last tick may have been sent after the worker last ran its heartbeat from a
        # queue (the busier the machine, the likelier): that queue is then found unserved
        # while the worker still counts as alive, before the worker is found lost.
        if worker["ok"] or (worker["alive"] and worker.get("queues_unserved")):
            return None
        return status, body

    body = wait_for(answered, 20, interval=0.2)
    assert body["status"] == "ok"
    assert body["checks"]["worker"]["alive"] >= 1
    assert body["checks"]["beat"]["ok"]

    celery_worker_process.kill()
    try:
        killed = time.monotonic()
        # Worker and beat die together, but either may be the first found silent.
        status, body = wait_for(found_lost, 20, interval=0.2)
        lost = float(HEARTBEATS["OANP_WORKER_LOST_SECONDS"])
        assert time.monotonic() - killed < lost + 3
        assert status == 503
        assert body["status"] == "degraded"
        assert not body["checks"]["worker"]["ok"]
        assert "no worker seen in the last 4 s" in body["checks"]["worker"]["error"]
        assert body["checks"]["database"]["ok"]
        assert body["checks"]["broker"]["ok"]
        # Beat ran inside the killed worker: its ticks stop too.
        wait_for(
            lambda: not readyz(live_arbiter)[1]["checks"]["beat"]["ok"], lost + 3, interval=0.2
        )
    finally:
        celery_worker_process.start()
    _, body = wait_for(lambda: (r := readyz(live_arbiter))[0] == 200 and r, 20, interval=0.2)
    assert body["checks"]["worker"]["ok"]
    assert body["checks"]["beat"]["ok"]


@pytest.mark.django_db(transaction=True)
def test_readyz_stays_200_while_event_streams_wait_on_the_channel_layer(
    live_arbiter: LiveServer, celery_worker_process: Worker
) -> None:
    """A stream waits in the channel layer's receive(); the readiness check of the layer must
    not receive on that same layer from another event loop, which channels_redis refuses."""
    wait_for(lambda: readyz(live_arbiter)[0] == 200, 20, interval=0.2)
    agents = [make_agent(f"ready-buyer-{n}", "buyer") for n in range(3)]
    with contextlib.ExitStack() as streams, live_arbiter.client() as client:
        for agent in agents:
            stream = streams.enter_context(
                client.stream("GET", "/oanp/v0.1/inbox", headers=agent.headers)
            )
            assert stream.status_code == 200
        time.sleep(0.5)  # every stream has joined its groups and waits in receive()
        for _ in range(3):
            time.sleep(health.REUSE_SECONDS + 0.2)  # a fresh reading, not the last one reused
            status, body = readyz(live_arbiter)
            assert status == 200, body["checks"]
            assert body["checks"]["channel_layer"]["ok"], body["checks"]["channel_layer"]


# Dependencies of the test's own -----------------------------------------------------------------


def _postgres_bin() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not found:
        pytest.fail("PostgreSQL's server programs (initdb, pg_ctl) are not installed")
    return found[-1].parent


class PrivateCluster:
    """A PostgreSQL cluster in a temporary folder on a port of its own, run as the postgres
    user when the tests run as root (the server refuses to run as root)."""

    def __init__(self, folder: Path) -> None:
        self.bin = _postgres_bin()
        self.data = folder / "data"
        self.port = free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(folder, "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")

    def _run(self, program: str, *args: str) -> None:
        # No pipes: the server pg_ctl starts would inherit them and hold them open forever.
        subprocess.run(
            [*self.as_user, str(self.bin / program), *args],
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1"
        log = str(self.data.parent / "server.log")
        self._run("pg_ctl", "-D", str(self.data), "-l", log, "-o", options, "-w", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"


@pytest.fixture
def cluster() -> Iterator[PrivateCluster]:
    folder = Path(tempfile.mkdtemp(prefix="oanp-pg-"))
    cluster = PrivateCluster(folder)
    cluster.start()
    try:
        env = {**os.environ, "DATABASE_URL": cluster.url}
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
        )
        yield cluster
    finally:
        subprocess.run(
            [*cluster.as_user, str(cluster.bin / "pg_ctl"), "-D", str(cluster.data), "stop"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        shutil.rmtree(folder, ignore_errors=True)


def test_readyz_reports_a_stopped_database_and_its_return(cluster: PrivateCluster) -> None:
    with serve({"DATABASE_URL": cluster.url, **HEARTBEATS}) as server:
        status, body = readyz(server)
        assert body["checks"]["database"] == {"ok": True, "vendor": "postgresql"}
        assert status == 503
        assert body["status"] == "degraded"  # no worker on this database

        cluster.stop()
        status, body = wait_for(
            lambda: (r := readyz(server))[1]["status"] == "down" and r, 20, interval=0.2
        )
        assert status == 503
        assert not body["checks"]["database"]["ok"]
        assert body["checks"]["database"]["error"]
        # The liveness probe does not depend on the database: the process still answers.
        assert httpx.get(f"{server.url}/healthz").status_code == 200
        # A scrape says the database's figures are missing instead of waiting for its pool
        # (3 s a figure before): the bound is loose, the point is not to wait on each.
        started = time.monotonic()
        scraped = httpx.get(f"{server.url}/metrics", timeout=10)
        assert time.monotonic() - started < 3
        assert scraped.status_code == 200
        assert 'oanp_live_figure_up{figure="sessions"} 0.0' in scraped.text
        assert 'oanp_live_figure_up{figure="workers"} 0.0' in scraped.text
        assert "oanp_sessions{" not in scraped.text

        cluster.start()
        status, body = wait_for(
            lambda: (r := readyz(server))[1]["checks"]["database"]["ok"] and r, 20, interval=0.2
        )
        assert body["status"] == "degraded"  # back, with no restart of the server
        scraped = wait_for(
            lambda: (
                'oanp_live_figure_up{figure="sessions"} 1.0'
                in (text := httpx.get(f"{server.url}/metrics").text)
                and text
            ),
            20,
            interval=0.2,
        )
        assert "oanp_workers_alive" in scraped


@pytest.fixture
def redis_server() -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    """A Redis server of the test's own: ``start()`` (again) on one fixed port."""
    port = free_port()
    running: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        process = start_redis(port)
        running.append(process)
        return process

    start.port = port  # type: ignore[attr-defined]
    yield start
    for process in running:
        process.kill()
        process.wait(5)


@pytest.mark.django_db(transaction=True)
def test_readyz_reports_an_unreachable_redis_and_its_return(redis_server: Any) -> None:
    from tests.conftest import suite_database_url

    redis = redis_server()
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    with serve({"DATABASE_URL": suite_database_url(), "REDIS_URL": url, **HEARTBEATS}) as server:
        status, body = readyz(server)
        checks = body["checks"]
        assert checks["broker"]["ok"]
        assert checks["broker"]["transport"] == "redis"
        assert checks["channel_layer"] == {"ok": True, "backend": "RedisLayer"}

        redis.kill()
        redis.wait(5)
        # Within a second, as an answer is reused that long.
        status, body = wait_for(
            lambda: (r := readyz(server))[1]["checks"]["broker"]["ok"] is False and r,
            3,
            interval=0.2,
        )
        checks = body["checks"]
        assert status == 503
        assert body["status"] == "degraded"
        assert not checks["broker"]["ok"]
        assert "Error" in checks["broker"]["error"]
        assert not checks["channel_layer"]["ok"]
        assert checks["database"]["ok"]

        redis_server()
        wait_for(lambda: readyz(server)[1]["checks"]["broker"]["ok"], 20, interval=0.2)
        wait_for(lambda: readyz(server)[1]["checks"]["channel_layer"]["ok"], 20, interval=0.2)


# Metrics ----------------------------------------------------------------------------------------


def scrape(
    server: LiveServer, **headers: str
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = httpx.get(f"{server.url}/metrics", headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


class RoundRobin:
    """An HTTP client that sends each request to the next of several servers."""

    def __init__(self, clients: list[httpx.Client]) -> None:
        self.clients = clients
        self.sent = [0] * len(clients)

    def _next(self) -> httpx.Client:
        index = sum(self.sent) % len(self.clients)
        self.sent[index] += 1
        return self.clients[index]

    def post(self, *args: Any, **kwargs: Any) -> httpx.Response:
        return self._next().post(*args, **kwargs)

    def get(self, *args: Any, **kwargs: Any) -> httpx.Response:
        return self._next().get(*args, **kwargs)


@pytest.mark.django_db(transaction=True)
def test_metrics_add_up_the_counters_of_every_server_process(tmp_path: Path) -> None:
    from tests.conftest import suite_database_url

    env = {"DATABASE_URL": suite_database_url(), "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    buyer_key = make_agent("buyer-001", "buyer")
    merchant_key = make_agent("merchant-sfo", "merchant")
    buyer, merchant = sfo_jfk_agents()
    with serve(env) as first, serve(env) as second:
        clients = [first.client(), second.client()]
        spread = RoundRobin(clients)
        log = HttpNegotiation(spread, buyer, merchant, buyer_key, merchant_key).run("sess-metrics")
        refused = clients[1].post("/oanp/v0.1/envelopes", content=b"{", headers=buyer_key.headers)
        assert refused.status_code == 400
        for client in clients:
            client.close()
        assert all(n > 3 for n in spread.sent)  # both servers took part

        samples = scrape(first)

    party = [e for e in log if e["envelope"]["sender"]["role"] != "arbiter"]
    for kind in {e["envelope"]["type"] for e in party}:
        sent = sum(e["envelope"]["type"] == kind for e in party)
        key = ("oanp_envelopes_total", (("outcome", "accepted"), ("type", kind)))
        assert samples[key] == sent, kind
    verdicts = [
        e["envelope"]["payload"]["status"] for e in log if e["envelope"]["type"] == "round.verdict"
    ]
    for status in set(verdicts):
        assert samples[("oanp_verdicts_total", (("status", status),))] == verdicts.count(status)
    code = refused.json()["code"]
    assert samples[("oanp_refusals_total", (("code", code),))] == 1
    requests = sum(
        value
        for (name, labels), value in samples.items()
        if name == "oanp_request_duration_seconds_count"
        and dict(labels)["route"] == "/oanp/v0.1/envelopes"
    )
    assert requests == len(party) + 1
    assert samples[("oanp_sessions", (("phase", "AGREED"),))] >= 1
    assert ("oanp_queue_depth", ()) in samples


@pytest.mark.django_db
def test_metrics_are_guarded_by_network_or_token(client: Any, settings: Any) -> None:
    assert client.get("/metrics").status_code == 200  # the test client comes from 127.0.0.1
    settings.OANP_METRICS_ALLOW = ["10.0.0.0/8"]
    refused = client.get("/metrics")
    assert refused.status_code == 403
    assert refused.json()["code"] == "metrics_forbidden"
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    settings.OANP_METRICS_TOKEN = "s3cret-token"
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 403
    wrong = {"Authorization": "Bearer nope"}
    assert client.get("/metrics", headers=wrong).status_code == 403
    right = {"Authorization": "Bearer s3cret-token"}
    assert client.get("/metrics", headers=right, REMOTE_ADDR="192.0.2.1").status_code == 200


@pytest.mark.django_db
def test_a_client_cannot_mint_time_series_with_its_own_http_method(client: Any) -> None:
    client.generic("X-INVENTED", "/no-such-page")
    methods = {
        sample.labels["method"]
        for family in text_string_to_metric_families(client.get("/metrics").content.decode())
        for sample in family.samples
        if sample.name.startswith("oanp_request_duration_seconds")
    }
    assert "X-INVENTED" not in methods
    assert "other" in methods


@pytest.mark.django_db
def test_an_empty_file_left_by_a_killed_process_does_not_break_the_scrape(client: Any) -> None:
    folder = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    left = folder / "counter_999999999.db"  # a pid no process of the suite has
    left.touch()
    try:
        response = client.get("/metrics")
        assert response.status_code == 200
        assert b"oanp_request_duration_seconds_count" in response.content
    finally:
        left.unlink()
