"""The background work on the dashboard: operators read a health panel on the overview; every
signed-in page says when no worker answers, and so does an export that waits for one; it costs
a page at most one query, and the login page none."""

from __future__ import annotations

import re
import threading
import time
from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from arbiter_app import health as arbiter_health
from arbiter_app import selectors as arbiter
from arbiter_app.models import Heartbeat, ProcessKind, TaskFailure
from arbiter_app.probes import Probe
from sessions_app import background
from sessions_app.models import Export, MemberRole
from sessions_app.templatetags.ago import ago
from tests.support.factories.accounts import member, merchant, signed_in

pytestmark = pytest.mark.django_db

HEARTBEATS = Heartbeat._meta.db_table
OUTAGE = r'<div class="outage" id="worker-outage" role="alert">(.*?)</div>'


@pytest.fixture(autouse=True)
def only_our_heartbeats(db: None) -> None:
    """The heartbeats each test writes, and no others: a worker running for other tests of the
    suite waits to write its own until this test's transaction has rolled back."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLE {HEARTBEATS} IN EXCLUSIVE MODE")
    Heartbeat.objects.all().delete()


def heartbeat(name: str, seen: timedelta, kind: str = ProcessKind.WORKER, **fields: object) -> None:
    """A process last seen ``seen`` ago."""
    at = timezone.now() - seen
    Heartbeat.objects.create(kind=kind, name=name, started_at=at, seen_at=at, **fields)


def banner(page: str) -> str | None:
    found = re.search(OUTAGE, page, re.S)
    return None if found is None else " ".join(found.group(1).split())


def heartbeat_queries(queries: CaptureQueriesContext) -> int:
    return sum(HEARTBEATS in query["sql"] for query in queries.captured_queries)


def staff(role: str = MemberRole.OPERATOR) -> Client:
    return signed_in(member(role, role))


# Is any worker alive? ------------------------------------------------------------------------


def test_a_worker_seen_lately_means_no_outage() -> None:
    heartbeat("lost@a", timedelta(minutes=5))
    heartbeat("fresh@b", timedelta(seconds=3))
    assert background.worker_outage() is None


def test_workers_stale_or_stopped_are_an_outage_since_the_last_seen() -> None:
    heartbeat("lost@a", timedelta(minutes=5))
    heartbeat("stopped@b", timedelta(seconds=2), stopped_at=timezone.now())
    outage = background.worker_outage()
    assert outage is not None
    assert outage.last_seen == Heartbeat.objects.get(name="stopped@b").seen_at


def test_no_worker_in_the_last_day_is_an_outage_since_no_known_time() -> None:
    heartbeat("ancient@a", timedelta(days=2))
    assert background.worker_outage() == background.Outage(last_seen=None)


# The banner -------------------------------------------------------------------------------------


def test_every_page_of_a_signed_in_member_says_no_worker_answers() -> None:
    heartbeat("lost@a", timedelta(minutes=3, seconds=5))
    seen = Heartbeat.objects.get().seen_at
    # Hosted agents and exports wait for a worker too: merchants are told, without the link to
    # the operators' health panel.
    pages = [
        (staff(), ["/", "/sessions/", "/agents/"], True),
        (
            signed_in(member("m", MemberRole.MERCHANT_MANAGER, merchant("m"))),
            ["/", "/exports/"],
            False,
        ),
    ]
    for browser, paths, linked in pages:
        for path in paths:
            text = banner(browser.get(path).content.decode())
            assert text is not None, path
            assert text.startswith(
                # The time of day in UTC until times.js writes it in the viewer's zone.
                f"<strong>No worker has answered</strong> since <time datetime="
                f'"{seen.isoformat(timespec="seconds")}" title="{seen:%Y-%m-%d %H:%M:%S} UTC" '
                f'data-local="time">{seen:%H:%M:%S}</time> (3 min ago):'
                " timers, hosted agents and exports are waiting."
            )
            assert ('href="/#machinery"' in text) is linked


def test_no_banner_while_a_worker_answers() -> None:
    heartbeat("fresh@a", timedelta(seconds=10))
    assert banner(staff().get("/sessions/").content.decode()) is None


def test_the_banner_never_lost_a_worker_in_the_last_day() -> None:
    text = banner(staff().get("/sessions/").content.decode())
    assert text is not None
    assert "No worker has answered</strong> in the last day:" in text


def test_the_banner_costs_one_query_and_the_login_page_none() -> None:
    heartbeat("lost@a", timedelta(minutes=3))
    browser = staff(MemberRole.ADMIN)
    for n in range(3):  # queued exports show the outage too, from the same read
        Export.objects.create(requested_by=User.objects.get(), scope={"kind": "range", "n": n})
    with CaptureQueriesContext(connection) as queries:
        page = browser.get("/exports/").content.decode()
    assert banner(page) is not None
    assert page.count("waiting for a worker") == 3
    assert heartbeat_queries(queries) == 1

    with CaptureQueriesContext(connection) as queries:
        page = Client().get("/login/").content.decode()
    assert "<h1>Sign in</h1>" in page
    assert banner(page) is None
    assert heartbeat_queries(queries) == 0


# An export that waits -------------------------------------------------------------------------


def export_status(browser: Client, export: Export) -> str:
    page = browser.get(f"/exports/{export.pk}/status/").content.decode()
    return " ".join(re.sub(r"<[^>]+>", "", page).split())


def test_a_queued_export_with_no_worker_says_it_waits_for_one() -> None:
    heartbeat("lost@a", timedelta(minutes=2, seconds=2))
    seen = Heartbeat.objects.get().seen_at
    browser = staff(MemberRole.ADMIN)
    queued = Export.objects.create(requested_by=User.objects.get(), scope={"kind": "range"})
    assert export_status(browser, queued) == (
        f"waiting for a worker (none seen since {seen:%H:%M:%S}, 2 min ago)"
    )
    Heartbeat.objects.all().delete()
    assert export_status(browser, queued) == "waiting for a worker (none seen in the last day)"


def test_a_queued_export_with_a_worker_alive_is_just_queued_and_a_running_one_runs() -> None:
    browser = staff(MemberRole.ADMIN)
    user = User.objects.get()
    queued = Export.objects.create(requested_by=user, scope={"kind": "range"})
    running = Export.objects.create(requested_by=user, scope={}, state="running", total=4)
    heartbeat("fresh@a", timedelta(seconds=1))
    assert export_status(browser, queued) == "queued"
    Heartbeat.objects.all().delete()
    # A running export already has its worker; whether it still lives is the banner's to say.
    with CaptureQueriesContext(connection) as queries:
        assert export_status(browser, running).startswith("running: 0 of 4 sessions")
    assert heartbeat_queries(queries) == 0


# The health panel -----------------------------------------------------------------------------


def panel(page: str) -> str:
    found = re.search(r'<section class="card machinery".*?</section>', page, re.S)
    assert found is not None, "no health panel"
    return " ".join(re.sub(r"<[^>]+>", " ", found.group(0)).split())


@pytest.fixture
def backlog(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arbiter, "delivery_backlog", lambda: arbiter.DeliveryBacklog(3, 1, 2))


@pytest.fixture
def depth(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tasks waiting in each queue: the panel shows them all.
    monkeypatch.setattr(arbiter_health, "_depth_probe", Probe(lambda: {"timers": 3, "hosted": 4}))


def failure(before: timedelta) -> None:
    TaskFailure.objects.create(
        task="sessions_app.tasks.run_export",
        task_id="t",
        error="OSError",
        failed_at=timezone.now() - before,
    )


@pytest.mark.usefixtures("backlog", "depth")
def test_operators_read_workers_beat_queue_failures_and_deliveries() -> None:
    browsers = [staff(MemberRole.OPERATOR), staff(MemberRole.ADMIN)]
    heartbeat("celery@one", timedelta(seconds=3), answered_at=timezone.now(), queue_wait_ms=12)
    heartbeat("celery@two", timedelta(minutes=4))
    heartbeat("celery@three", timedelta(seconds=20), stopped_at=timezone.now())
    heartbeat("beat@one", timedelta(minutes=2), kind=ProcessKind.BEAT)
    failure(timedelta(minutes=5))
    failure(timedelta(minutes=58))
    failure(timedelta(minutes=61))
    for browser in browsers:
        text = panel(browser.get("/").content.decode())
        assert "Workers alive 1 " in text
        assert "Beat's last tick 2 min ago lost " in text
        assert "Queue depth 7 tasks waiting " in text
        assert "Tasks failed, last hour 2 " in text
        assert "Handoffs retrying · failed 3 · 1 " in text
        assert "Callbacks retrying 2 " in text
        rows = re.findall(r"celery@(\w+) (\w+) \d+ (s|min) ago (\S+(?: ms)?)", text)
        assert rows == [
            ("one", "alive", "s", "12 ms"),
            ("three", "stopped", "s", "–"),
            ("two", "lost", "min", "–"),
        ]
        assert "celery@two lost 4 min ago" in text


def test_a_broker_away_reads_unreachable_and_no_worker_reads_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused() -> int:
        raise ConnectionRefusedError("no broker")

    monkeypatch.setattr(arbiter_health, "_depth_probe", Probe(refused))
    text = panel(staff().get("/").content.decode())
    assert "Queue depth broker unreachable " in text
    assert "Workers alive 0 " in text
    assert "Beat's last tick none in the last day " in text
    assert "No worker has reported in the last day." in text


def test_a_broker_that_hangs_costs_the_page_one_second_not_the_hang(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = threading.Event()

    def hangs() -> int:
        release.wait(30)
        return 1

    monkeypatch.setattr(arbiter_health, "_depth_probe", Probe(hangs))
    started = time.monotonic()
    try:
        assert background.health().queue_depth is None
    finally:
        release.set()
    assert time.monotonic() - started < background.QUEUE_DEPTH_SECONDS + 0.5


def test_merchants_see_no_health_panel() -> None:
    heartbeat("fresh@a", timedelta(seconds=1))
    page = (
        signed_in(member("m", MemberRole.MERCHANT_MANAGER, merchant("m"))).get("/").content.decode()
    )
    assert 'id="machinery"' not in page
    assert 'id="machinery"' in staff().get("/").content.decode()


# Relative times ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "reads"),
    [
        (timedelta(seconds=-5), "just now"),
        (timedelta(milliseconds=400), "just now"),
        (timedelta(seconds=3), "3 s ago"),
        (timedelta(seconds=59), "59 s ago"),
        (timedelta(seconds=60), "1 min ago"),
        (timedelta(minutes=59, seconds=59), "59 min ago"),
        (timedelta(hours=2, minutes=30), "2 h ago"),
        (timedelta(days=3, hours=1), "3 d ago"),
    ],
)
def test_ago_reads_in_one_unit(before: timedelta, reads: str) -> None:
    moment: datetime = timezone.now() - before
    assert ago(moment) == reads


def test_ago_of_nothing_is_nothing() -> None:
    assert ago(None) == ""
