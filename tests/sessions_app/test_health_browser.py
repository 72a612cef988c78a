"""In Chromium against the real server and Celery worker: with the worker stopped every page
says no worker answers, the health panel counts none alive and an export says it waits for
one; with the worker back the banner goes, the panel reads it alive with its queue wait, and the
waiting export runs. A session's page says "live" only while the session is open and its socket
connected: "offline" without a network, "ended" once the session has ended."""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import TypeVar

import pytest
from django.core.files.storage import default_storage
from django.db import connections
from django.test import Client
from django.utils import timezone
from playwright.sync_api import Page, expect

from arbiter_app.models import Heartbeat, ProcessKind, TaskFailure
from sessions_app.models import Export, MemberRole
from tests.conftest import LiveServer, Worker
from tests.sessions_app.browser import chromium, screenshot, sign_in
from tests.support.factories.accounts import PASSWORD, member
from tests.support.factories.agents import ClientNegotiation, make_agent
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

LAST_SEEN = timedelta(minutes=3)
T = TypeVar("T")


def all_quiet() -> str:
    """Every worker stopped and beat silent since ``LAST_SEEN`` ago: a stop that did not get to
    mark its row, or a row another test left, must not count as alive. Returns the time the
    banner shows."""
    last = timezone.now() - LAST_SEEN
    Heartbeat.objects.update(started_at=last - timedelta(hours=1), seen_at=last)
    Heartbeat.objects.filter(kind=ProcessKind.WORKER).update(stopped_at=last)
    return f"{last:%H:%M:%S}"


def worker_answered_since(since: datetime) -> Callable[[], bool]:
    def answered() -> bool:
        """a worker ran beat's heartbeat task and recorded its queue wait"""
        return Heartbeat.objects.filter(
            kind=ProcessKind.WORKER,
            stopped_at=None,
            answered_at__gte=since,
            queue_wait_ms__isnull=False,
        ).exists()

    return answered


def off_the_loop(work: Callable[[], T]) -> T:
    """Django refuses its ORM on the thread where Playwright's event loop runs."""

    def run() -> T:
        try:
            return work()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result()


def fact(page: Page, name: str) -> str:
    return page.locator(f"#{name}").inner_text().strip()


#: This test's failures, by minutes ago: the last is older than the panel's hour.
FAILED_AGO = (5, 30, 90)
OURS = [f"t-{minutes}" for minutes in FAILED_AGO]


def failed_in_the_hour() -> str:
    """What the panel should count: this test's two failures of the last hour (not the one of
    90 minutes ago), and any the worker itself recorded meanwhile. The worker is shared with the
    suite: a task of an earlier test may fail against the database emptied under it."""
    recorded = off_the_loop(lambda: TaskFailure.objects.exclude(task_id__in=OURS).count())
    return str(2 + recorded)


def test_operators_see_the_machinery_and_sessions_say_when_they_are_live(
    live_arbiter: LiveServer, celery_worker_process: Worker, client: Client
) -> None:
    buyer, seller = make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant")
    ended = ClientNegotiation(client, buyer, seller, "sess-ended", "e-")
    ended.open()
    ended.finish()
    negotiating = ClientNegotiation(client, buyer, seller, "sess-open", "o-")
    negotiating.open()
    negotiating.run_until("offer.counter")
    member("admin", MemberRole.ADMIN)
    for minutes in FAILED_AGO:
        TaskFailure.objects.create(
            task="arbiter_app.tasks.deliver_handoff",
            task_id=f"t-{minutes}",
            error="TimeoutError",
            failed_at=timezone.now() - timedelta(minutes=minutes),
        )
    base = live_arbiter.url

    worker = celery_worker_process

    # The database was emptied before this test: let beat and the worker report again first,
    # so the page has a beat and a worker to call lost.
    def reported() -> bool:
        """beat ticked and a worker beat since the database was emptied"""
        return all(Heartbeat.objects.filter(kind=kind).exists() for kind in ProcessKind.values)

    wait_for(reported, 30, interval=0.1)
    worker.stop()
    try:
        since = all_quiet()
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            sign_in(page, base, "admin", PASSWORD)
            expect(page.get_by_role("alert")).to_have_text(
                f"No worker has answered since {since} (3 min ago): timers, hosted agents and "
                "exports are waiting. Background work",
                use_inner_text=True,
            )
            assert fact(page, "workers-alive") == "0"
            assert fact(page, "beat-tick") == "3 min ago lost"
            assert fact(page, "tasks-failed") == failed_in_the_hour()
            assert re.fullmatch(r"\d+ tasks? waiting", fact(page, "queue-depth"))
            assert page.locator("#workers tbody tr").first.inner_text().split("\t")[1] == "stopped"
            screenshot(page, "health-no-worker")

            page.click("nav >> text=Exports")
            page.check("input[name=kind][value=range]")
            page.select_option("#id_preset", "24h")
            page.click("button:has-text('Export')")
            page.wait_for_url(f"{base}/exports/")
            expect(page.locator(".export-status").first).to_have_text(
                f"waiting for a worker (none seen since {since}, 3 min ago)", use_inner_text=True
            )
            expect(page.get_by_role("alert")).to_be_visible()
            screenshot(page, "export-waiting-for-a-worker")

            # The page polls the export's status: the worker back, it runs without a reload.
            page.evaluate("window.loadedOnce = true")
            restarted = timezone.now()
            worker.start()
            page.wait_for_selector(".export-status[data-state=done]", timeout=60_000)
            assert page.evaluate("window.loadedOnce") is True
            page.reload()
            expect(page.get_by_role("alert")).to_have_count(0)

            off_the_loop(lambda: wait_for(worker_answered_since(restarted), 60, interval=0.1))
            page.click("nav >> text=Overview")
            expect(page.get_by_role("alert")).to_have_count(0)
            assert int(fact(page, "workers-alive")) >= 1
            assert re.fullmatch(r"(just now|\d+ s ago)", fact(page, "beat-tick"))
            assert fact(page, "tasks-failed") == failed_in_the_hour()

            # The handoff the stopped worker left waiting goes out now, moments after it is back.
            def backlog_cleared() -> bool:
                page.reload()
                return fact(page, "handoffs-backlog") == "0 · 0"

            wait_for(backlog_cleared, 60, interval=0.5)
            assert fact(page, "callbacks-backlog") == "0"
            newest = page.locator("#workers tbody tr").first.inner_text().split("\t")
            assert newest[1] == "alive"
            assert re.fullmatch(r"(just now|\d+ s ago)", newest[2])
            assert re.fullmatch(r"\d+ ms", newest[3])
            screenshot(page, "health-panel")

            page.goto(f"{base}/sessions/sess-ended/")
            # Connected, the page catches up once (its body replaced): "ended", never "live".
            page.evaluate("document.getElementById('session-state').dataset.before = 'connect'")
            # A function, not an expression: Playwright evaluates an expression again on each
            # poll, which the page's Content-Security-Policy refuses (no 'unsafe-eval').
            page.wait_for_function("() => !document.getElementById('session-state').dataset.before")
            connection = page.locator("#connection")
            expect(connection).to_have_attribute("data-state", "closed")
            expect(connection).to_have_text("ended")
            screenshot(page, "session-closed")

            page.goto(f"{base}/sessions/sess-open/")
            expect(connection).to_have_attribute("data-state", "live")
            page.context.set_offline(True)
            expect(connection).to_have_attribute("data-state", "offline")
            expect(connection).to_have_text("offline")
            screenshot(page, "session-offline")
            page.context.set_offline(False)
            expect(connection).to_have_attribute("data-state", "live", timeout=30_000)

            off_the_loop(negotiating.finish)  # the session ends while watched
            expect(connection).to_have_attribute("data-state", "closed", timeout=15_000)
    finally:
        # Later tests of the suite share the worker: leave it running whatever happened here.
        if worker.process is None or worker.process.poll() is not None:
            worker.start()

    for export in Export.objects.all():
        default_storage.delete(export.bundle.name)
        default_storage.delete(export.summary_csv.name)
