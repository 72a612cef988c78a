"""Two roles on real PostgreSQL, as the README sets them up: an owner that migrates and an
application role that owns nothing. The application's work (a whole negotiation over HTTP, a
worker with beat running the integrity check) goes through as the application's role; what
would undo the log is refused to it, TRUNCATE is refused to the owner too, and the guards fire
even in a superuser's replica mode. Roles and database have names of this run, dropped after."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from django.conf import settings
from psycopg import errors

from tests.conftest import serve
from tests.support.factories.agents import Agent, HttpNegotiation
from tests.support.factories.sessions import sfo_jfk_agents
from tests.support.processes import ROOT, spawn, terminate, wait_ready, worker_argv
from tests.support.waiting import wait_for

DEFAULT = settings.DATABASES["default"]


@pytest.fixture(autouse=True)
def _postgresql() -> None:
    # Roles are PostgreSQL's: on another database these tests cannot run, and say so.
    if DEFAULT["ENGINE"] != "django.db.backends.postgresql":
        pytest.fail("the role tests need DATABASE_URL to name a PostgreSQL server")


SESSION_ID = "sess-roles"


@dataclass(frozen=True)
class Roles:
    database: str
    app: str
    owner: str
    #: role -> password
    passwords: dict[str, str]

    def url(self, role: str) -> str:
        host, port = DEFAULT.get("HOST") or "127.0.0.1", DEFAULT.get("PORT") or 5432
        return f"postgres://{role}:{self.passwords[role]}@{host}:{port}/{self.database}"

    def connect(self, role: str | None = None) -> psycopg.Connection[Any]:
        """A connection as ``role``, or as the suite's own (superuser) role."""
        if role is None:
            return superuser(self.database)
        return psycopg.connect(self.url(role), autocommit=True)

    def env(self, **extra: str) -> dict[str, str]:
        """The application's environment: DATABASE_URL of the application's role, no Redis (the
        suite's broker belongs to the suite's worker), a broker folder of its own."""
        return {
            "DATABASE_URL": self.url(self.app),
            "DATABASE_OWNER_URL": self.url(self.owner),
            "REDIS_URL": "",
            **extra,
        }


def superuser(database: str = "postgres") -> psycopg.Connection[Any]:
    return psycopg.connect(
        host=DEFAULT.get("HOST") or "127.0.0.1",
        port=DEFAULT.get("PORT") or 5432,
        user=DEFAULT.get("USER") or None,
        password=DEFAULT.get("PASSWORD") or None,
        dbname=database,
        autocommit=True,
    )


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def roles(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Roles]:
    tag = secrets.token_hex(4)
    made = Roles(
        database=f"oanp_roles_{tag}",
        app=f"oanp_app_{tag}",
        owner=f"oanp_owner_{tag}",
        passwords={
            f"oanp_app_{tag}": secrets.token_hex(8),
            f"oanp_owner_{tag}": secrets.token_hex(8),
        },
    )
    with superuser() as admin:
        for role, password in made.passwords.items():
            admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        admin.execute(f"CREATE DATABASE {made.database} OWNER {made.owner}")
    try:
        broker = tmp_path_factory.mktemp("broker")
        # As the README says: migrations as the owner, which then grants the application's role.
        manage(made.env(OANP_BROKER_DIR=str(broker)), "migrate", "--database", "owner")
        yield made
    finally:
        with superuser() as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {made.database} WITH (FORCE)")
            for role in made.passwords:
                admin.execute(f"DROP ROLE IF EXISTS {role}")


@pytest.fixture(scope="module")
def negotiated(roles: Roles, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """A whole SFO→JFK session over HTTP, on a live Daphne connected as the application's role;
    its agents' keys issued as that role too."""
    env = roles.env(OANP_BROKER_DIR=str(tmp_path_factory.mktemp("broker")))
    keys = [
        Agent(
            agent_id,
            role,
            json.loads(manage(env, "create_agent", "--role", role, "--agent-id", agent_id))[
                "api_key"
            ],
        )
        for agent_id, role in (("buyer-001", "buyer"), ("merchant-sfo", "merchant"))
    ]
    buyer, merchant = sfo_jfk_agents()
    with serve(env) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        return HttpNegotiation(client, buyer, merchant, *keys).run(SESSION_ID)


def test_the_application_role_runs_a_whole_negotiation(negotiated: list[dict[str, Any]]) -> None:
    assert [e["envelope"]["type"] for e in negotiated][-1] == "session.agree"
    assert len(negotiated) == 9


def test_the_application_role_owns_nothing_and_has_only_its_grants(roles: Roles) -> None:
    with roles.connect() as db:
        owned = db.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner "
            "WHERE r.rolname = %s",
            [roles.app],
        ).fetchone()
        grants: dict[str, set[str]] = {}
        for table, privilege in db.execute(
            "SELECT table_name, privilege_type FROM information_schema.role_table_grants "
            "WHERE grantee = %s",
            [roles.app],
        ):
            grants.setdefault(table, set()).add(privilege)
    assert owned == (0,)
    assert grants["arbiter_app_entry"] == {"SELECT", "INSERT"}
    assert grants["arbiter_app_session"] == {"SELECT", "INSERT", "UPDATE"}
    assert grants["arbiter_app_integrityalarm"] == {"SELECT", "INSERT", "UPDATE"}
    assert grants["django_migrations"] == {"SELECT"}
    assert grants["arbiter_app_heartbeat"] == {"SELECT", "INSERT", "UPDATE", "DELETE"}
    assert not {"TRUNCATE", "TRIGGER", "REFERENCES"} & set().union(*grants.values())


@pytest.mark.usefixtures("negotiated")
@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE arbiter_app_entry SET envelope = '{}'",
        "DELETE FROM arbiter_app_entry",
        "TRUNCATE arbiter_app_entry",
        "DELETE FROM arbiter_app_session",
        "TRUNCATE arbiter_app_session CASCADE",
        "ALTER TABLE arbiter_app_entry DISABLE TRIGGER arbiter_entry_append_only",
        "ALTER TABLE arbiter_app_entry DISABLE TRIGGER ALL",
        "DROP TRIGGER arbiter_entry_append_only ON arbiter_app_entry",
        "SET session_replication_role = replica",
        # The flush's switch lifts the trigger for owners only; this role has no TRUNCATE.
        "SET oanp.allow_truncate = on; TRUNCATE arbiter_app_entry",
        "CREATE TABLE arbiter_app_entry_copy (id int)",
    ],
)
def test_the_application_role_is_refused_what_would_undo_the_log(roles: Roles, sql: str) -> None:
    with roles.connect(roles.app) as db, pytest.raises(errors.InsufficientPrivilege):
        db.execute(sql)
    with roles.connect() as db:
        assert db.execute("SELECT count(*) FROM arbiter_app_entry").fetchone() == (9,)


@pytest.mark.usefixtures("negotiated")
@pytest.mark.parametrize(
    "sql",
    [
        # With the transparency log's leaves, which name the entries: alone, the entries'
        # table cannot be truncated at all.
        "TRUNCATE arbiter_app_entry, arbiter_app_logleaf",
        "TRUNCATE arbiter_app_session CASCADE",
        "UPDATE arbiter_app_entry SET envelope = '{}'",
    ],
)
def test_the_owner_cannot_truncate_or_change_entries(roles: Roles, sql: str) -> None:
    with (
        roles.connect(roles.owner) as db,
        pytest.raises(errors.IntegrityConstraintViolation, match="append-only"),
    ):
        db.execute(sql)
    # Nor skip the triggers with replication's mode: that is a superuser's.
    with roles.connect(roles.owner) as db, pytest.raises(errors.InsufficientPrivilege):
        db.execute("SET session_replication_role = replica")


@pytest.mark.usefixtures("negotiated")
def test_the_guards_fire_in_a_superusers_replica_mode(roles: Roles) -> None:
    with roles.connect() as db:
        db.execute("SET session_replication_role = replica")
        for sql in (
            "UPDATE arbiter_app_entry SET envelope = '{}'",
            "TRUNCATE arbiter_app_entry, arbiter_app_logleaf",
        ):
            with pytest.raises(errors.IntegrityConstraintViolation, match="append-only"):
                db.execute(sql)
        # What the suite's flush does, and only an owner or a superuser can: rolled back here.
        with db.transaction(force_rollback=True):
            db.execute("SET LOCAL oanp.allow_truncate = on")
            db.execute("TRUNCATE arbiter_app_entry, arbiter_app_logleaf")
            assert db.execute("SELECT count(*) FROM arbiter_app_entry").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM arbiter_app_entry").fetchone() == (9,)


def test_the_worker_as_the_application_role_flags_a_head_the_owner_moved(
    roles: Roles, negotiated: list[dict[str, Any]], tmp_path: Path
) -> None:
    env = {
        **os.environ,
        **roles.env(OANP_BROKER_DIR=str(tmp_path / "broker")),
        "OANP_INTEGRITY_CHECK_SECONDS": "0.5",
        "PYTHONUNBUFFERED": "1",
    }
    log_path = tmp_path / "worker.log"
    worker = spawn(worker_argv(2, beat_schedule=tmp_path / "beat"), env, log_path)
    try:
        wait_ready(worker, log_path)
        with roles.connect() as db:

            def checks() -> list[tuple[int, int]]:
                """checks of the clean database, by the worker, as the application's role"""
                return db.execute(
                    "SELECT sessions, mismatches FROM arbiter_app_integritycheck"
                ).fetchall()

            assert set(wait_for(checks, 30)) == {(1, 0)}
            assert db.execute("SELECT count(*) FROM arbiter_app_integrityalarm").fetchone() == (0,)
        with roles.connect(roles.owner) as db:
            db.execute(
                "UPDATE arbiter_app_session SET head_seq = 8 WHERE session_id = %s", [SESSION_ID]
            )

            def alarm() -> list[tuple[str, str]]:
                """an open alarm about the moved head"""
                return db.execute(
                    "SELECT session_id, kind FROM arbiter_app_integrityalarm "
                    "WHERE resolved_at IS NULL"
                ).fetchall()

            assert wait_for(alarm, 30) == [(SESSION_ID, "head")]
            db.execute(
                "UPDATE arbiter_app_session SET head_seq = 9 WHERE session_id = %s", [SESSION_ID]
            )
    finally:
        terminate(worker)
    assert "integrity check: 1 mismatches" in log_path.read_text()
