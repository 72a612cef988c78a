"""The timer sweep closes due sessions set by set: a batch takes its rows SKIP LOCKED, writes
them in one UPDATE and their closes in one INSERT, continues each chain from its own head,
and costs the same number of queries for 3 sessions as for 30; sweepers racing each other
share the due sessions and never close one twice."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from arbiter_app import selectors, services, timers
from arbiter_app.deliveries import callbacks
from arbiter_app.models import AgentCallback, CallbackCursor, Entry, Session
from oanp.audit import verify_log
from oanp.wire.envelope import envelope_from_json
from tests.support.factories.logs import session_log
from tests.support.factories.sessions import (
    BUYER,
    BUYER_COMMIT,
    ITEM,
    MERCHANT,
    MERCHANT_COMMIT,
    envelope,
)

#: The sessions' clock: each opens at T0 with the protocol's shortest window. A day ahead of
#: the real clock, so a live worker's own sweep, sharing the database with a committed test,
#: never finds them due before the test's sweepers do.
T0 = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
WINDOW = 10
DUE = T0 + timedelta(seconds=WINDOW + 1)


def open_sessions(count: int, prefix: str = "sweep", at: datetime = T0) -> list[str]:
    """``count`` sessions opened at ``at``, each waiting for the merchant's ack."""
    buyer = services.issue_credential(agent_id=BUYER, role="buyer").credential
    if not selectors.credentials_of(agent_id=MERCHANT, role="merchant").exists():
        services.issue_credential(agent_id=MERCHANT, role="merchant")
    ids = [f"{prefix}-{n:03d}" for n in range(count)]
    for session_id in ids:
        opening = envelope(
            "session.open",
            {
                "merchant_agent_id": MERCHANT,
                "item": ITEM,
                "currency": "USD",
                "constraints_commit": BUYER_COMMIT,
                "response_window_s": WINDOW,
            },
            session_id=session_id,
        )
        services.receive_envelope(agent=buyer, envelope=opening, now=at)
    return ids


def closes(session_id: str) -> list[Entry]:
    return list(
        Entry.objects.filter(
            session__session_id=session_id, type="session.close", sender_role="arbiter"
        )
    )


@pytest.mark.django_db
def test_a_sweep_closes_what_is_due_in_batches_and_leaves_the_rest() -> None:
    due = open_sessions(7)
    later = open_sessions(2, prefix="later", at=T0 + timedelta(seconds=30))
    batches = [services.expire_due_sessions(now=DUE, limit=3) for _ in range(4)]
    assert batches == [3, 3, 1, 0]
    for session_id in due:
        [close] = closes(session_id)
        session = Session.objects.get(session_id=session_id)
        assert (session.phase, session.close_reason) == ("CLOSED", "response_timeout")
        assert (session.ended_at, session.next_deadline) == (DUE, None)
        assert (session.head_seq, session.head_hash) == (close.seq, close.entry_hash)
        log = selectors.session_entries(session)
        assert [e["seq"] for e in log] == [1, 2]
        assert log[1]["prev_hash"] == log[0]["entry_hash"]
        assert verify_log(log, selectors.every_public_jwk()).ok
    for session_id in later:
        assert closes(session_id) == []
        assert Session.objects.get(session_id=session_id).phase == "OPENING"


@pytest.mark.django_db
def test_a_batch_costs_the_same_queries_whatever_its_size() -> None:
    def queries(count: int, prefix: str) -> int:
        open_sessions(count, prefix=prefix)
        with CaptureQueriesContext(connection) as captured:
            assert services.expire_due_sessions(now=DUE) == count
        return len(captured.captured_queries)

    assert queries(3, "small") == queries(30, "large")


@pytest.mark.django_db(transaction=True)
def test_sweepers_racing_share_the_due_sessions_and_close_each_once() -> None:
    ids = open_sessions(60)
    closed: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def sweep() -> None:
        try:
            start.wait()
            while batch := services.expire_due_sessions(now=DUE, limit=7):
                closed.append(batch)
        except BaseException as error:  # reported below, not lost in the thread
            errors.append(error)
        finally:
            connections.close_all()

    sweepers = [threading.Thread(target=sweep) for _ in range(3)]
    for sweeper in sweepers:
        sweeper.start()
    for sweeper in sweepers:
        sweeper.join(60)
    assert errors == []
    assert sum(closed) == len(ids)
    assert all(len(closes(session_id)) == 1 for session_id in ids)
    assert not Session.objects.filter(next_deadline__isnull=False).exists()


@pytest.mark.django_db(transaction=True)
def test_a_batch_wakes_the_parties_callbacks_with_one_lookup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The closes of a whole batch reach a party's callback: a cursor per session, found by one
    query for the batch (the callbacks listener hears the batch, not each session)."""
    sent: list[int] = []
    # Recorded, not queued: a live worker of the suite would deliver them as the test ends.
    monkeypatch.setattr(callbacks, "send", lambda cursor_id, countdown=None: sent.append(cursor_id))
    ids = open_sessions(12, prefix="called")
    callback = AgentCallback.objects.create(
        agent_id=BUYER, role="buyer", url="https://agent.example/cb", secret_encrypted=b"x"
    )
    with CaptureQueriesContext(connection) as captured:
        assert services.expire_due_sessions(now=DUE) == len(ids)
    lookups = [q for q in captured.captured_queries if '"arbiter_app_agentcallback"' in q["sql"]]
    assert len(lookups) == 1
    cursors = CallbackCursor.objects.filter(callback=callback)
    assert sorted(cursors.values_list("session__session_id", flat=True)) == sorted(ids)
    assert sorted(sent) == sorted(cursors.values_list("pk", flat=True))


@pytest.mark.django_db
def test_a_timer_task_is_armed_once_per_session_not_per_envelope(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    armed: list[str] = []
    monkeypatch.setattr(timers, "arm", lambda *, session_id, due: armed.append(session_id))
    buyer = services.issue_credential(agent_id=BUYER, role="buyer").credential
    merchant = services.issue_credential(agent_id=MERCHANT, role="merchant").credential
    agents = {"buyer": buyer, "merchant": merchant}
    log = session_log()  # the published example: open, ack, two proposes, a counter, accept
    party = [e["envelope"] for e in log if e["envelope"]["sender"]["role"] != "arbiter"]
    with django_capture_on_commit_callbacks(execute=True):
        for body in party:
            services.receive_envelope(
                agent=agents[body["sender"]["role"]], envelope=envelope_from_json(body)
            )
    assert Session.objects.get(session_id=party[0]["session_id"]).phase == "AGREED"
    assert armed == [party[0]["session_id"]]


@pytest.mark.django_db
def test_a_window_past_the_timer_horizon_arms_at_every_envelope(
    monkeypatch: pytest.MonkeyPatch, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """No task may be pending for a far turn deadline, so each move arms again (queue.enqueue
    itself leaves what is still too far to the sweep)."""
    settings.OANP_TIMER_HORIZON_SECONDS = 60
    armed: list[str] = []
    monkeypatch.setattr(timers, "arm", lambda *, session_id, due: armed.append(session_id))
    with django_capture_on_commit_callbacks(execute=True):
        [session_id] = open_sessions(1, prefix="long", at=datetime.now(UTC))
    assert armed == [session_id]  # the open's window (10 s) is within the horizon
    settings.OANP_TIMER_HORIZON_SECONDS = 5
    merchant = selectors.credentials_of(agent_id=MERCHANT, role="merchant").get()
    ack = envelope("session.ack", {"constraints_commit": MERCHANT_COMMIT}, session_id=session_id)
    with django_capture_on_commit_callbacks(execute=True):
        services.receive_envelope(agent=merchant, envelope=ack)
    assert armed == [session_id, session_id]
