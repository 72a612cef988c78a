"""/readyz compares the deployment's connection budget with the real server's max_connections,
and warns, never 503s, when the pools together could exceed it; a worker sizes its own pool."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import connection

from arbiter_app import health, pools
from oanp_site.connections import budget

#: Over any server's default: 10 web processes with pools of 20.
OVER = budget(connections=500, web_processes=10, task_connections=5, pool_size=20)


@pytest.fixture
def readiness_of_the_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """Readiness with the database's checks only (no worker runs here), each call afresh."""
    monkeypatch.setattr(
        health, "PROBES", {name: health.PROBES[name] for name in ("database", "connections")}
    )
    monkeypatch.setattr(health, "REUSE_SECONDS", 0)
    monkeypatch.setattr(health, "_last", None)
    monkeypatch.setattr(health, "_limits", None)


def server_setting(name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SHOW {name}")
        ((value,),) = cursor.fetchall()
    return int(value)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("readiness_of_the_database")
def test_readyz_reads_the_servers_limit_and_finds_the_budget_within_it(client: Any) -> None:
    body = client.get("/readyz").json()
    check = body["checks"]["connections"]
    assert check["ok"] is True
    assert check["server_max_connections"] == server_setting("max_connections")
    assert check["server_reserved"] == server_setting("superuser_reserved_connections")
    assert check["most"] == check["web_processes"] * check["web_pool"] + check["task_connections"]
    assert "warning" not in check
    assert body["warnings"] == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("readiness_of_the_database")
def test_readyz_warns_when_the_pools_could_exceed_the_server_but_stays_ready(
    client: Any, settings: Any
) -> None:
    settings.OANP_DB_BUDGET = OVER
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 200
    assert body["status"] == "ok"
    check = body["checks"]["connections"]
    allowed = server_setting("max_connections") - server_setting("superuser_reserved_connections")
    assert OVER.most > allowed
    assert f"may hold {OVER.most} connections, more than the {allowed}" in check["warning"]
    assert body["warnings"] == [f"connections: {check['warning']}"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("readiness_of_the_database")
def test_the_servers_limit_is_read_once_and_kept(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A limit read a moment ago, lower than this server's: the check believes it, asking nothing.
    monkeypatch.setattr(health, "_limits", (time.monotonic(), 12, 3))
    check = client.get("/readyz").json()["checks"]["connections"]
    assert (check["server_max_connections"], check["server_reserved"]) == (12, 3)
    assert "max_connections 12 less 3 reserved" in check["warning"]
    # Once it is LIMITS_SECONDS old, the server is asked again.
    monkeypatch.setattr(health, "_limits", (time.monotonic() - health.LIMITS_SECONDS, 12, 3))
    check = client.get("/readyz").json()["checks"]["connections"]
    assert check["server_max_connections"] == server_setting("max_connections")


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("readiness_of_the_database")
def test_without_a_pool_of_its_own_to_size_the_check_is_skipped(client: Any, settings: Any) -> None:
    settings.OANP_DB_BUDGET = None
    assert "SQLite" in client.get("/readyz").json()["checks"]["connections"]["skipped"]
    settings.OANP_DB_BUDGET = OVER
    settings.OANP_DB_TRANSACTION_POOLER = True
    body = client.get("/readyz").json()
    assert "transaction pooler" in body["checks"]["connections"]["skipped"]
    assert body["warnings"] == []


def test_a_worker_sizes_its_pool_to_its_task_slots_and_its_heartbeat() -> None:
    options = connection.settings_dict["OPTIONS"]["pool"]
    web_pool = options["max_size"]
    try:
        pools.on_worker_init(sender=SimpleNamespace(concurrency=12))
        assert connection.pool.max_size == 13
    finally:
        options["max_size"] = web_pool
        connection.close_pool()
    assert connection.pool.max_size == web_pool
