"""What an operator's probes and scrapers read: ``/healthz``, ``/readyz`` and ``/metrics``.

``/healthz`` says the process answers and touches nothing. ``/readyz`` checks every dependency
at once, each under a deadline, so a database or broker that hangs makes the answer 503, never
a wait. ``/metrics`` adds up every process's counters and reads the live figures.
"""

from __future__ import annotations

import glob
import ipaddress
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import wait
from datetime import datetime, timedelta
from typing import Any

# The project's Celery app, which loading Django's settings makes current: the apps reach the
# broker through it without importing the project's wiring.
from celery import current_app as app
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_safe
from kombu import Connection
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector

from arbiter_app import events, selectors
from arbiter_app.probes import Probe
from arbiter_app.problems import JSON, refusal_response
from arbiter_app.refusals import MetricsForbidden
from arbiter_app.tlog.reads import log_health

log = logging.getLogger(__name__)

#: Each check's deadline: a probe wants an answer, even one that says "no answer".
CHECK_SECONDS = 2.0

Detail = dict[str, Any]


# The checks ----------------------------------------------------------------------------------


def _database() -> Detail:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return {"vendor": connection.vendor}


# One connection to the broker, kept: opening one costs more than the question it answers.
_broker_lock = threading.Lock()
_broker_connection: Connection | None = None


def _depths() -> dict[str, int]:
    """Tasks waiting in each queue (not those a worker holds until their ETA)."""
    global _broker_connection  # shared by the probes of this process, one at a time
    with _broker_lock:
        if _broker_connection is None:
            # Socket timeouts: a broker that accepts and then says nothing would hold the
            # probe forever.
            timeouts = {"socket_timeout": CHECK_SECONDS, "socket_connect_timeout": CHECK_SECONDS}
            _broker_connection = app.connection_for_read(transport_options=timeouts)
        try:
            # One try: kombu would otherwise retry a broker that is away for minutes.
            _broker_connection.ensure_connection(
                max_retries=1, interval_start=0, timeout=CHECK_SECONDS
            )
            # Not passive: Redis forgets an empty queue; declaring one is harmless.
            channel = _broker_connection.default_channel
            return {
                queue: int(channel.queue_declare(queue=queue, passive=False).message_count)
                for queue in settings.OANP_QUEUES
            }
        except Exception:
            _broker_connection.close()  # a fresh connection next time, once the broker is back
            _broker_connection = None
            raise


_depth_probe: Probe[dict[str, int]] = Probe(_depths)


def queue_depth(within: float = CHECK_SECONDS) -> int | None:
    """The tasks waiting in all queues, or ``None`` when the broker did not answer
    ``within``."""
    try:
        return sum(_depth_probe.ask(within).values())
    except Exception:  # refused, hung, misconfigured: to a reader all are "unreachable"
        return None


def _broker() -> Detail:
    # The URL's scheme: the transport classes of oanp_site adapt kombu's for that broker.
    depths = _depths()
    return {
        "transport": str(app.conf.broker_url).partition("://")[0],
        "queue_depth": sum(depths.values()),
        "queues": depths,
    }


def _channel_layer() -> Detail:
    backend = events.echo(CHECK_SECONDS)
    detail: Detail = {"backend": backend}
    if backend == "InMemoryChannelLayer":
        detail["note"] = "in this process only; live pages poll the database for the rest"
    return detail


def _seen(processes: list[selectors.ProcessSeen], what: str, now: datetime) -> Detail:
    alive = [p for p in processes if p.alive]
    last = processes[0] if processes else None
    detail: Detail = {
        "ok": bool(alive),
        "alive": len(alive),
        "last_seen": None if last is None else last.seen_at.isoformat(),
        "seconds_ago": None if last is None else round((now - last.seen_at).total_seconds(), 1),
        "processes": [p.as_json(now) for p in processes[:10]],
    }
    if not alive:
        lost = settings.OANP_WORKER_LOST_SECONDS
        detail["error"] = (
            f"no {what} seen in the last {lost:g} s" if processes else f"no {what} ever reported"
        )
    return detail


def _worker() -> Detail:
    now = timezone.now()
    workers = selectors.workers(now)
    detail = _seen(workers, "worker", now)
    # A live worker process is not enough: while beat sends its heartbeat task on every queue,
    # some worker must have run one lately on each, or that queue's tasks wait unserved. Right
    # after beat or a worker started there was no time to: no verdict yet.
    recent = now - timedelta(seconds=settings.OANP_WORKER_LOST_SECONDS)
    beats = [b for b in selectors.beats(now) if b.alive]
    settling = any(b.started_at >= recent for b in beats) or any(
        w.alive and w.started_at >= recent for w in workers
    )
    if detail["ok"] and beats and not settling:
        served = {q.name for q in selectors.queues(now) if q.alive}
        unserved = [queue for queue in settings.OANP_QUEUES if queue not in served]
        detail["queues_unserved"] = unserved
        if unserved:
            detail["ok"] = False
            detail["error"] = (
                f"workers are alive but none ran beat's heartbeat task on {', '.join(unserved)} "
                f"in the last {settings.OANP_WORKER_LOST_SECONDS:g} s: nothing is taking those "
                "queues' tasks"
            )
    return detail


def _beat() -> Detail:
    now = timezone.now()
    return _seen(selectors.beats(now), "beat", now)


def _processes() -> Detail:
    """Under the Procfile's supervisor (``make serve``), which names its status file in
    ``OANP_PROCESSES_FILE``: each process's pid, restarts and last exit. A restart is reported,
    not judged: the worker and beat checks say whether the work is being done."""
    path = settings.OANP_PROCESSES_FILE
    if not path:
        return {"supervised": False}
    try:
        with open(path) as file:
            status = json.load(file)
    except FileNotFoundError:
        return {"supervised": False}
    restarted = sorted(name for name, p in status["processes"].items() if p["restarts"])
    detail: Detail = {"supervised": True, **status}
    if restarted:
        detail["note"] = f"restarted after an exit: {', '.join(restarted)}"
    return detail


#: PostgreSQL's limits on connections change only when it restarts: read them this seldom.
LIMITS_SECONDS = 300.0
_limits: tuple[float, int, int] | None = None


def server_limits() -> tuple[int, int]:
    """The server's ``max_connections``, and how many of them are reserved for other roles
    (superusers; from PostgreSQL 16, also ``pg_use_reserved_connections``)."""
    global _limits  # one reading shared by this process's probes, which run one at a time
    limits = _limits
    if limits is None or time.monotonic() - limits[0] >= LIMITS_SECONDS:
        with connection.cursor() as cursor:
            # missing_ok: reserved_connections is not a setting before PostgreSQL 16.
            cursor.execute(
                "SELECT current_setting('max_connections')::int,"
                " current_setting('superuser_reserved_connections')::int"
                " + coalesce(current_setting('reserved_connections', true)::int, 0)"
            )
            ((most, reserved),) = cursor.fetchall()
        limits = _limits = (time.monotonic(), int(most), int(reserved))
    return limits[1], limits[2]


def _connections() -> Detail:
    budget = settings.OANP_DB_BUDGET
    if budget is None:
        return {"skipped": "no pool: SQLite opens a connection per thread"}
    detail: Detail = budget.as_json()
    if settings.OANP_DB_TRANSACTION_POOLER:
        detail["skipped"] = "behind a transaction pooler, which bounds the server's connections"
        return detail
    most, reserved = server_limits()
    available = most - reserved
    detail.update(server_max_connections=most, server_reserved=reserved)
    if budget.most > available:
        detail["warning"] = (
            f"the deployment's processes may hold {budget.most} connections, more than the "
            f"{available} the server allows (max_connections {most} less {reserved} reserved): "
            "lower OANP_DB_CONNECTIONS or OANP_DB_POOL_SIZE, or put PgBouncer in front"
        )
    return detail


def _checked(check: Callable[[], Detail]) -> Callable[[], Detail]:
    def run() -> Detail:
        try:
            return {"ok": True, **check()}
        except Exception as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}

    return run


PROBES: dict[str, Probe[Detail]] = {
    name: Probe(_checked(check))
    for name, check in (
        ("database", _database),
        ("broker", _broker),
        ("channel_layer", _channel_layer),
        ("worker", _worker),
        ("beat", _beat),
        ("connections", _connections),
        ("processes", _processes),
        ("log", log_health),
    )
}
#: Checks that only inform: a process is no less ready for what they find, and every process
#: finds the same, so a 503 on it would take all of them out of rotation at once. The
#: transparency log's too: a witness away or the integrator behind delays checkpoints only.
ADVISORY = frozenset({"connections", "processes", "log"})
#: A flood of probes costs the dependencies one round of checks per this many seconds.
REUSE_SECONDS = 1.0
_last: tuple[float, str, dict[str, Detail]] | None = None


def readiness() -> tuple[str, dict[str, Detail]]:
    """``("ok" | "degraded" | "down", checks)``: down when the database is, since then nothing
    can be recorded; degraded when anything else but an :data:`ADVISORY` check fails. All
    checks run at once and the answer comes within CHECK_SECONDS, whatever hangs."""
    global _last  # one reading shared by the requests of this process
    last = _last
    if last is not None and time.monotonic() - last[0] < REUSE_SECONDS:
        return last[1], last[2]
    futures = {name: probe.start() for name, probe in PROBES.items()}
    wait(futures.values(), timeout=CHECK_SECONDS)
    results: dict[str, Detail] = {
        name: future.result()
        if future.done()
        else {"ok": False, "error": PROBES[name].late(CHECK_SECONDS)}
        for name, future in futures.items()
    }
    if not results["database"]["ok"]:
        status = "down"
    else:
        needed = (r["ok"] for name, r in results.items() if name not in ADVISORY)
        status = "ok" if all(needed) else "degraded"
    _last = (time.monotonic(), status, results)
    return status, results


# The views -----------------------------------------------------------------------------------


def _json(body: Detail, status: int = 200) -> HttpResponse:
    response = HttpResponse(json.dumps(body), status=status, content_type=JSON)
    response["Cache-Control"] = "no-store"
    return response


# The probes read no cookie and change nothing, so CSRF protects nothing here; exempt, a
# POST (or any other method) gets its 405 with Allow, not the CSRF failure page's 403.
@csrf_exempt
@require_safe
def healthz(request: HttpRequest) -> HttpResponse:
    return _json({"status": "ok"})


@csrf_exempt
@require_safe
def readyz(request: HttpRequest) -> HttpResponse:
    status, checks = readiness()
    warnings = [f"{name}: {c['warning']}" for name, c in checks.items() if "warning" in c]
    response = _json(
        {"status": status, "checks": checks, "warnings": warnings},
        200 if status == "ok" else 503,
    )
    # A 503 here is an answer, not a failure of the server: keep it out of Django's error log
    # (the body says what is wrong, and the request line is logged anyway).
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response


#: How long a scrape waits for the live figures: a scraper's own timeout is often a few
#: seconds, and a database that is away must not cost it that (its pool waits 3 s).
LIVE_SECONDS = 0.8


def _phases() -> Metric:
    phases = GaugeMetricFamily("oanp_sessions", "Sessions, by phase.", labels=["phase"])
    for phase, count in sorted(selectors.sessions_by_phase().items()):
        phases.add_metric([phase], count)
    return phases


def _workers() -> Metric:
    return GaugeMetricFamily(
        "oanp_workers_alive",
        "Workers seen within OANP_WORKER_LOST_SECONDS.",
        value=sum(w.alive for w in selectors.workers()),
    )


def _queue() -> Metric:
    depth = queue_depth()
    if depth is None:
        raise RuntimeError("the broker did not answer")
    return GaugeMetricFamily(
        "oanp_queue_depth", "Tasks waiting in the broker's queues.", value=depth
    )


def _overdue() -> Metric:
    # A timer's lateness is observed only when it closes its session: one that never fires (no
    # worker takes the timers queue, the sweep keeps failing) shows here instead.
    first = selectors.earliest_deadline()
    overdue = 0.0 if first is None else (timezone.now() - first).total_seconds()
    return GaugeMetricFamily(
        "oanp_timer_overdue_seconds",
        "How long ago the most overdue timer of an open session fell due (0: none is due).",
        value=max(0.0, overdue),
    )


def _log() -> Metric:
    """The transparency log's figures, in one family so that one reading serves them all."""
    health = log_health()
    figures = GaugeMetricFamily(
        "oanp_log",
        "The transparency log: entries waiting to be integrated, its tree size, and seconds "
        "since its last checkpoint (-1: none yet).",
        labels=["figure"],
    )
    age = health["seconds_since_checkpoint"]
    figures.add_metric(["entries_waiting"], float(health["entries_waiting"]))  # type: ignore[arg-type]
    figures.add_metric(["tree_size"], float(health["tree_size"]))  # type: ignore[arg-type]
    figures.add_metric(["seconds_since_checkpoint"], -1.0 if age is None else float(age))  # type: ignore[arg-type]
    return figures


def _witnesses() -> Metric:
    answering = GaugeMetricFamily(
        "oanp_witness_answering",
        "Whether each witness answered the log's last checkpoint sent to it.",
        labels=["witness"],
    )
    for name, seen in log_health()["witnesses"].items():  # type: ignore[attr-defined]
        answering.add_metric([name], int(seen["answering"]))
    return answering


#: Each live figure read by a probe of its own (:mod:`arbiter_app.probes`): a source that
#: hangs holds one thread, however often it is scraped.
FIGURES: dict[str, Probe[Metric]] = {
    "sessions": Probe(_phases),
    "workers": Probe(_workers),
    "queue_depth": Probe(_queue),
    "timer_overdue": Probe(_overdue),
    "log": Probe(_log),
    "witnesses": Probe(_witnesses),
}
#: The checks of /readyz that turn its status, each exported as ``oanp_ready{check}``.
GAUGED_CHECKS = tuple(name for name in PROBES if name not in ADVISORY)


class _LiveFigures:
    """Gauges read at scrape time from the database and the broker, all at once and for at
    most LIVE_SECONDS. A figure whose source is away or late is left out, not zeroed, and
    ``oanp_live_figure_up`` says which: 0 for the database's while it is down.

    The checks of /readyz run in the same time, sharing its probes (so scrapes and probes
    together cost each dependency one check at a time): ``oanp_ready{check}`` is 1 for each
    that passed, 0 for one that failed or had no answer within LIVE_SECONDS, so an alert can
    tell which dependency is down without reading /readyz."""

    def collect(self) -> Iterator[Metric]:
        futures = {name: probe.start() for name, probe in FIGURES.items()}
        checks = {name: PROBES[name].start() for name in GAUGED_CHECKS}
        wait([*futures.values(), *checks.values()], timeout=LIVE_SECONDS)
        ready = GaugeMetricFamily(
            "oanp_ready",
            "Whether each check of /readyz passed this scrape (0: it failed, or had no answer "
            f"within {LIVE_SECONDS:g} s).",
            labels=["check"],
        )
        for name, check in checks.items():
            # A check never raises: _checked turns its failure into {"ok": False, ...}.
            ready.add_metric([name], int(check.done() and check.result()["ok"]))
        yield ready
        up = GaugeMetricFamily(
            "oanp_live_figure_up",
            "Whether each live figure was read this scrape (0: its source is away or late).",
            labels=["figure"],
        )
        for name, future in futures.items():
            figure = None
            if future.done():
                try:
                    figure = future.result()
                except Exception:
                    log.warning("the live figure %s could not be read", name, exc_info=True)
            up.add_metric([name], 0 if figure is None else 1)
            if figure is not None:
                yield figure
        yield up


def _allowed(request: HttpRequest) -> bool:
    token = settings.OANP_METRICS_TOKEN
    if token:
        sent = request.headers.get("Authorization", "")
        return secrets.compare_digest(sent.encode(), f"Bearer {token}".encode())
    try:
        client = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(client in ipaddress.ip_network(n, strict=False) for n in settings.OANP_METRICS_ALLOW)


#: A file shorter than its header was left by a process killed as it created it.
_HEADER_BYTES = 8


class _ProcessFiles(MultiProcessCollector):
    """Every process's counters, less the files a process killed as it started left empty:
    read, one of those would fail every scrape from then on."""

    def __init__(self, path: str) -> None:
        self.folder = path
        super().__init__(None, path)

    def collect(self) -> Iterator[Metric]:
        files = [name for name in glob.glob(os.path.join(self.folder, "*.db")) if _readable(name)]
        return self.merge(files, accumulate=True)  # type: ignore[no-any-return]


def _readable(name: str) -> bool:
    try:
        return os.path.getsize(name) >= _HEADER_BYTES
    except OSError:  # removed since it was listed: nothing to read
        return False


@csrf_exempt
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not _allowed(request):
        return refusal_response(
            MetricsForbidden("send the metrics token, or scrape from an allowed network"),
            request.path,
        )
    registry = CollectorRegistry()
    registry.register(_ProcessFiles(os.environ["PROMETHEUS_MULTIPROC_DIR"]))
    registry.register(_LiveFigures())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
