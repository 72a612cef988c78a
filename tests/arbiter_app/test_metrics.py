"""What /metrics lists before anything has happened, and the figures the alert rules of
deploy/prometheus read: every counter with a known set of labels at zero on a fresh server,
each check of /readyz as a gauge, and how overdue the first due timer is."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connections, transaction
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from arbiter_app import health, queue
from arbiter_app.deliveries.outbound import AttemptOutcome
from arbiter_app.metric_zeros import party_types, refusal_codes
from arbiter_app.models import Heartbeat, ProcessKind, Session
from oanp.wire.profiles import VerdictStatus
from oanp.wire.state import Phase
from tests.arbiter_app.test_health import scrape
from tests.arbiter_app.test_timer_sweep import WINDOW, open_sessions
from tests.conftest import serve

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples_of(client: Any) -> Samples:
    response = client.get("/metrics")
    assert response.status_code == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


@pytest.mark.django_db(transaction=True)
def test_a_fresh_server_lists_every_counter_with_known_labels_at_zero(tmp_path: Path) -> None:
    from tests.conftest import suite_database_url

    # A folder of its own: no earlier process of the suite has counted anything in it.
    env = {"DATABASE_URL": suite_database_url(), "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    with serve(env) as server:
        samples = scrape(server)

    expected = {
        **{
            ("oanp_deliveries_total", (("kind", kind), ("outcome", outcome.value))): 0
            for kind in ("callback", "handoff")
            for outcome in AttemptOutcome
        },
        **{
            ("oanp_envelopes_total", (("outcome", outcome), ("type", kind))): 0
            for kind in party_types()
            for outcome in ("accepted", "refused", "replayed")
        },
        # The scrape itself is a request, but not a refusal.
        **{("oanp_refusals_total", (("code", code),)): 0 for code in refusal_codes()},
        **{("oanp_verdicts_total", (("status", status.value),)): 0 for status in VerdictStatus},
        **{("oanp_sessions", (("phase", phase.value),)): 0 for phase in Phase},
        ("oanp_timer_lateness_seconds_count", ()): 0,
        ("oanp_timer_overdue_seconds", ()): 0,
    }
    assert {key: samples.get(key) for key in expected} == expected
    # Known only once an integrity check has run: absent until then, never a zero it did not find.
    assert ("oanp_integrity_mismatches", ()) not in samples
    # Both catalogues, the server's and the protocol's.
    assert {"metrics_forbidden", "malformed_json", "rate_limited"} <= set(refusal_codes())
    assert "session.open" in party_types()
    assert "round.verdict" not in party_types()
    for check in ("database", "broker", "channel_layer", "worker", "beat"):
        assert ("oanp_ready", (("check", check),)) in samples


@pytest.mark.django_db(transaction=True)
def test_each_check_of_readyz_is_a_gauge_that_follows_it(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert set(health.GAUGED_CHECKS) == {"database", "broker", "channel_layer", "worker", "beat"}
    # What the gauge follows is the check's answer, not how fast a busy machine gives it.
    monkeypatch.setattr(health, "LIVE_SECONDS", 60)
    beat = ("oanp_ready", (("check", "beat"),))
    # No beat seen (a worker of the suite may run one: its heartbeats are not looked at).
    with monkeypatch.context() as unseen:
        unseen.setattr(health.selectors, "beats", lambda now: [])
        health.PROBES["beat"].start().result(timeout=60)  # not a run begun before the patch
        before = samples_of(client)
    assert before[("oanp_ready", (("check", "database"),))] == 1
    assert before[("oanp_ready", (("check", "broker"),))] == 1
    assert before[beat] == 0
    now = timezone.now()
    Heartbeat.objects.create(kind=ProcessKind.BEAT, name="beat@test", started_at=now, seen_at=now)
    health.PROBES["beat"].start().result(timeout=60)  # a run started before the row is stale
    assert samples_of(client)[beat] == 1


@contextmanager
def held(session_id: str) -> Iterator[bool]:
    """The session's row locked by another connection for the block; whether it was still open
    when locked. A sweep skips locked rows, so one run by a worker another test left with beat
    cannot close the session meanwhile."""
    locked, release = threading.Event(), threading.Event()
    still_open: list[bool] = []

    def hold() -> None:
        try:
            with transaction.atomic():
                row = Session.objects.select_for_update().get(session_id=session_id)
                still_open.append(row.ended_at is None)
                locked.set()
                release.wait(60)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(30)
        yield still_open[0]
    finally:
        release.set()
        holder.join(30)


@pytest.mark.django_db(transaction=True)
def test_a_timer_nobody_fired_shows_how_overdue_it_is(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nobody fires it: its task is never sent, as with the broker away, and its row is held
    # while the figure is read, so that a worker another test left running closes it neither
    # by its task nor by its sweep. Between the commit and the lock a sweep may still win: the
    # session is then opened again under another id.
    monkeypatch.setattr(queue.broker_breaker, "allows", lambda: False)
    assert samples_of(client)[("oanp_timer_overdue_seconds", ())] == 0
    for attempt in range(5):
        (session_id,) = open_sessions(
            1, prefix=f"overdue-{attempt}", at=timezone.now() - timedelta(seconds=300)
        )
        with held(session_id) as still_open:
            if still_open:
                overdue = samples_of(client)[("oanp_timer_overdue_seconds", ())]
                break
    else:
        pytest.fail("a sweep closed each overdue session before it could be held")
    # Due at opened + window; the scrape came moments after.
    assert 300 - WINDOW <= overdue < 300 - WINDOW + 30
