"""Fixtures shared by every test package: a live ASGI server and a real Celery worker, both
on the test database, as they run in production.

The tests run against the database ``DATABASE_URL`` names (PostgreSQL under ``make test``).
"""

from __future__ import annotations

import inspect
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection
from hypothesis import settings as hypothesis_settings

from tests.support.processes import (
    ROOT,
    free_port,
    kill_group,
    purge,
    spawn,
    start_daphne,
    start_redis,
    terminate,
    wait_ready,
    worker_argv,
)

# Hypothesis: a small run by default, for the edit-and-test loop; `make test` runs the large
# one, with no deadline since a loaded machine's slow example is no failure, and each failure's
# blob printed to replay it (@reproduce_failure). Tests with settings of their own keep them.
hypothesis_settings.register_profile("default", max_examples=50)
hypothesis_settings.register_profile("ci", max_examples=1000, deadline=None, print_blob=True)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

#: The Redis servers of a parallel run, one for each of its processes, kept by the process
#: that starts those (pytest-xdist's controller) until the run ends.
PARALLEL_REDIS = pytest.StashKey[list[subprocess.Popen[bytes]]]()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config, specs: list[Any]) -> None:
    """Each process of a parallel run has a test database of its own (pytest-django); it gets a
    Redis server and a metrics folder of its own too, in the environment it starts with, so
    that its settings read them. On a shared Redis, one process's Celery worker would take the
    other's tasks and run them on its own database, its purge would drop them, and a page's
    socket would hear of the other's sessions; in a shared folder, /metrics would add up the
    other's counters."""
    servers = config.stash.setdefault(PARALLEL_REDIS, [])
    metrics = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    for spec in specs:
        spec.env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics / spec.id)
        if os.environ.get("REDIS_URL"):
            port = free_port()
            servers.append(start_redis(port, error=RuntimeError))
            spec.env["REDIS_URL"] = f"redis://127.0.0.1:{port}/0"


def pytest_unconfigure(config: pytest.Config) -> None:
    for server in config.stash.get(PARALLEL_REDIS, []):
        server.terminate()
        server.wait(10)


#: Fixtures that bring up a server, a worker or a service of their own, or give a test the
#: environment to start a worker with (worker_env).
LIVE_FIXTURES = frozenset(
    {"live_arbiter", "celery_worker_process", "worker_env", "cluster", "redis_server"}
)
#: The test support's launchers: Daphne (serve), any process of the project (spawn), and
#: headless Chromium (chromium), recognised by name so that moving them keeps them found.
LIVE_LAUNCHERS = frozenset({"serve", "spawn"})
BROWSER_LAUNCHERS = frozenset({"chromium"})


def _launchers(function: Any, namespace: dict[str, Any], seen: set[int]) -> set[str]:
    """The test support's launchers that ``function`` calls, itself or through the functions
    and fixtures of its module it calls (lambdas and nested functions included)."""
    function = inspect.unwrap(function)
    code = getattr(function, "__code__", None)
    if code is None or id(code) in seen:
        return set()
    seen.add(id(code))
    found: set[str] = set()
    codes = [code]
    while codes:
        current = codes.pop()
        codes.extend(const for const in current.co_consts if inspect.iscode(const))
        for name in current.co_names:
            target = namespace.get(name)
            module = getattr(target, "__module__", None) or ""
            if not module.startswith("tests."):
                continue
            if name in LIVE_LAUNCHERS | BROWSER_LAUNCHERS:
                found.add(name)
            elif module == namespace["__name__"]:
                found |= _launchers(target, namespace, seen)
    return found


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks ``live`` the tests that need a live server, worker or service of their own, and
    ``browser`` those that drive Chromium, so that ``-m "not live and not browser"`` (make
    test-fast) runs the rest: by the fixtures they use, and by the launchers their bodies, the
    functions of their module and its fixtures call."""
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        namespace = vars(item.module)
        launched = _launchers(item.function, namespace, set())
        for name in item.fixturenames:
            if name in namespace:
                launched |= _launchers(namespace[name], namespace, set())
        if launched & BROWSER_LAUNCHERS:
            item.add_marker(pytest.mark.browser)
        if launched & LIVE_LAUNCHERS or LIVE_FIXTURES.intersection(item.fixturenames):
            item.add_marker(pytest.mark.live)


@dataclass(frozen=True)
class LiveServer:
    url: str
    process: subprocess.Popen[bytes]

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=10, **kwargs)


def suite_database_url() -> str:
    settings = connection.settings_dict
    if connection.vendor != "postgresql":
        pytest.fail("the live-server tests need DATABASE_URL to name a PostgreSQL server")
    user = settings.get("USER") or ""
    password = f":{settings['PASSWORD']}" if settings.get("PASSWORD") else ""
    at = f"{user}{password}@" if user else ""
    host = settings.get("HOST") or "127.0.0.1"
    port = settings.get("PORT") or "5432"
    return f"postgres://{at}{host}:{port}/{settings['NAME']}"


class Worker:
    """A real Celery worker with beat, on the test database and the test broker."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.env = env
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        # Beat runs in a child process of the worker: a group of its own lets kill() take
        # both down, as a crash of the machine would, with no beat left behind.
        self.process = spawn(
            worker_argv(4, beat_schedule=self.log_path.with_suffix(".beat")),
            self.env,
            self.log_path,
            append=True,
        )
        wait_ready(
            self.process,
            self.log_path,
            offset=offset,
            timeout=60,
            message=f"the Celery worker did not start; see {self.log_path}",
        )

    def kill(self) -> None:
        """SIGKILL, as a crash would: no chance to finish or hand anything back."""
        assert self.process is not None
        kill_group(self.process, 10)

    def stop(self) -> None:
        if self.process is not None:
            terminate(self.process, 20)


#: Heartbeats every second; a worker silent for 4 s is lost (/readyz, the dashboard's banner).
HEARTBEATS = {"OANP_HEARTBEAT_SECONDS": "1", "OANP_WORKER_LOST_SECONDS": "4"}
#: The servers and the worker share one database, so one transparency log: one origin (the
#: name its key is stored and signs under), not one per server's port and another for the
#: worker that integrates it.
LOG_ORIGIN = {"OANP_LOG_ORIGIN": "arbiter.test/oanp-log"}


@pytest.fixture(scope="session")
def worker_env(django_db_setup: None, django_db_blocker: Any) -> dict[str, str]:
    with django_db_blocker.unblock():
        database_url = suite_database_url()
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "OANP_TIMER_SWEEP_SECONDS": "1",
        **HEARTBEATS,
        **LOG_ORIGIN,
        "OANP_ALLOW_PRIVATE_TARGETS": "true",
        # Retries of deliveries 0.2 s, 0.4 s, … apart, so a test sees several in a second.
        "OANP_DELIVERY_RETRY_BASE_SECONDS": "0.2",
        # Attempts leased for 3 + 1 s: one whose worker was killed is found abandoned within
        # seconds (loopback receivers answer well within the timeout).
        "OANP_DELIVERY_TIMEOUT_SECONDS": "3",
        "OANP_DELIVERY_LEASE_MARGIN_SECONDS": "1",
        "PYTHONUNBUFFERED": "1",
    }


@pytest.fixture(scope="session")
def celery_worker_process(worker_env: dict[str, str]) -> Iterator[Worker]:
    """The worker runs for the whole session; tests that kill it start it again."""
    purge(worker_env)
    log_path = ROOT / "var" / f"worker-{os.getpid()}.log"
    worker = Worker(worker_env, log_path)
    worker.start()
    yield worker
    worker.stop()


#: Every test client is 127.0.0.1: the suite's many deliberate 401s must not add up to the
#: per-address limit of failed authentications, which its own tests set low on purpose.
UNLIMITED_ADDRESS = {"OANP_AUTH_FAILURES_PER_MINUTE": "1000000000"}


@pytest.fixture
def private_allowed(settings: Any) -> None:
    """ACP targets on this machine's own addresses, which the SSRF guard otherwise refuses."""
    settings.OANP_ALLOW_PRIVATE_TARGETS = True


#: The suite runs with DEBUG off, which requires a second factor of operators and admins; the
#: tests of that rule turn it on themselves.
NO_REQUIRED_SECOND_FACTOR = {"OANP_REQUIRE_2FA": "0"}
#: The suite's servers print their mail rather than hand it to a server on localhost:25, which
#: a production start without mail settings would, and which these machines do not run.
PRINTED_MAIL = {"EMAIL_URL": "console://"}


@pytest.fixture(autouse=True)
def _no_required_second_factor(settings: Any) -> None:
    settings.OANP_REQUIRE_2FA = False


@pytest.fixture(autouse=True)
def _unlimited_address(settings: Any) -> None:
    settings.OANP_AUTH_FAILURES_PER_MINUTE = int(UNLIMITED_ADDRESS["OANP_AUTH_FAILURES_PER_MINUTE"])


@pytest.fixture(autouse=True)
def _no_remembered_keys() -> Iterator[None]:
    """Each test's database starts over: so do the API keys this process remembers."""
    from arbiter_app import credential_cache

    credential_cache.forget_all()
    yield
    credential_cache.forget_all()


@pytest.fixture(autouse=True)
def _fast_passwords(request: pytest.FixtureRequest, settings: Any) -> None:
    """A quick hash for the passwords of tests that run in this process only: the real one is
    slow on purpose, and was half the time of the dashboard's tests. A live server checks
    passwords with its own settings, so tests that start one keep the real hasher."""
    if request.node.get_closest_marker("live") or request.node.get_closest_marker("browser"):
        return
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@contextmanager
def serve(env: dict[str, str]) -> Iterator[LiveServer]:
    """Daphne serving the project's ASGI application with ``env`` on top of this process's
    environment, on a free port; stopped on exit."""
    port = free_port()
    env = {
        **os.environ,
        "OANP_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "PYTHONUNBUFFERED": "1",
        **UNLIMITED_ADDRESS,
        **NO_REQUIRED_SECOND_FACTOR,
        **PRINTED_MAIL,
        **LOG_ORIGIN,
        **env,
    }
    process = start_daphne(port, env, ROOT / "var" / f"daphne-{port}.log")
    try:
        yield LiveServer(f"http://127.0.0.1:{port}", process)
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="session")
def live_arbiter(django_db_setup: None, django_db_blocker: Any) -> Iterator[LiveServer]:
    """Daphne serving the project's ASGI application on the test database, as in production."""
    with django_db_blocker.unblock():
        database_url = suite_database_url()
    # Keys looked up on every request: the suite revokes keys and expects the next request
    # refused at once (the one-second memory has tests of its own, on servers of their own).
    with serve(
        {"DATABASE_URL": database_url, "OANP_CREDENTIAL_CACHE_SECONDS": "0", **HEARTBEATS}
    ) as server:
        yield server
