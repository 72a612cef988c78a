"""Timers fire on a real Celery worker: a session left waiting closes on time, exactly once,
however a late move races the timer and whether or not the worker was up when it fell due;
and, without one, what firing and re-arming do."""

from __future__ import annotations

import base64
import json
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import redis

from arbiter_app import timers
from arbiter_app.models import Entry, Session
from oanp.audit import verify_log
from tests.arbiter_app.test_timer_sweep import WINDOW, open_sessions
from tests.conftest import LiveServer, Worker
from tests.support.factories.agents import ENVELOPES, Agent, ClientNegotiation
from tests.support.processes import purge
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def closed(session_id: str) -> bool:
    return Session.objects.filter(session_id=session_id, phase="CLOSED").exists()


def closes(session_id: str) -> int:
    """How many times the arbiter closed the session."""
    return Entry.objects.filter(
        session__session_id=session_id, type="session.close", sender_role="arbiter"
    ).count()


def test_a_session_past_its_deadline_closes_on_time(
    celery_worker_process: Worker, client: Any, buyer: Agent, merchant: Agent
) -> None:
    deadline = datetime.now(UTC) + timedelta(seconds=2)
    run = ClientNegotiation(client, buyer, merchant, session_id="sess-deadline")
    run.open(deadline=deadline)
    wait_for(lambda: closed("sess-deadline"), 20)
    session = Session.objects.get(session_id="sess-deadline")
    assert session.close_reason == "deadline_expired"
    assert session.ended_at is not None
    assert session.ended_at >= deadline
    assert closes("sess-deadline") == 1


def expire_tasks_received(worker: Worker) -> int:
    """How many timer tasks the worker has taken from the broker, as its log tells."""
    lines = worker.log_path.read_bytes().splitlines()
    return sum(b"tasks.expire_session[" in line and line.endswith(b"] received") for line in lines)


def timer_tasks_waiting(worker: Worker) -> list[str]:
    """The sessions of the timer tasks waiting on the broker's timers queue, as its messages
    name them (kombu keeps a queue as a Redis list of JSON messages)."""
    broker = redis.Redis.from_url(worker.env["REDIS_URL"])
    try:
        messages = [json.loads(m) for m in broker.lrange("timers", 0, -1)]
    finally:
        broker.close()
    # A message's body is base64 of JSON [args, kwargs, embed] (Celery's protocol 2).
    return [
        json.loads(base64.b64decode(m["body"]))[0][0]
        for m in messages
        if m["headers"].get("task") == "arbiter_app.tasks.expire_session"
    ]


def last_move_at(run: ClientNegotiation) -> datetime:
    return datetime.fromisoformat(run.log()[-1]["received_at"])


def test_a_party_that_does_not_answer_within_its_window_times_out(
    celery_worker_process: Worker, client: Any, buyer: Agent, merchant: Agent
) -> None:
    run = ClientNegotiation(client, buyer, merchant, session_id="sess-window")
    run.open(response_window_s=10)  # the protocol's shortest window
    run.run_until("offer.counter")  # the buyer proposed; the merchant never answers
    due = last_move_at(run) + timedelta(seconds=10)
    assert Session.objects.get(session_id="sess-window").next_deadline == due

    wait_for(lambda: closed("sess-window"), timeout=15)
    session = Session.objects.get(session_id="sess-window")
    assert session.close_reason == "response_timeout"
    assert due <= session.ended_at <= due + timedelta(seconds=2)
    assert closes("sess-window") == 1
    close = run.log()[-1]["envelope"]
    assert close["type"] == "session.close"
    assert close["payload"]["reason"] == "response_timeout"


RACERS = 6


def test_a_move_racing_its_timer_is_either_taken_or_refused_never_both(
    celery_worker_process: Worker,
    live_arbiter: LiveServer,
    client: Any,
    buyer: Agent,
    merchant: Agent,
) -> None:
    """Each buyer moves between 300 ms before and 150 ms after its session's deadline, as the
    timer fires: the move is applied before the close, or refused with ``timer_expired``."""
    deadline = datetime.now(UTC) + timedelta(seconds=4)
    runs = []
    for i in range(RACERS):
        run = ClientNegotiation(client, buyer, merchant, session_id=f"sess-race-{i}", tag=f"r{i}")
        run.open(deadline=deadline)
        run.run_until("offer.propose")
        runs.append(run)
    due = Session.objects.get(session_id="sess-race-0").next_deadline
    assert due == deadline

    answers: dict[str, tuple[float, httpx.Response]] = {}

    def move_at(run: ClientNegotiation, offset: float) -> None:
        key, envelope = run.peek()
        body = json.dumps(envelope)
        with live_arbiter.client() as http:
            time.sleep(max(0.0, due.timestamp() + offset - time.time()))  # schedules, not waits
            sent = time.time() - due.timestamp()
            answers[run.session_id] = sent, http.post(ENVELOPES, content=body, headers=key.headers)

    offsets = [-0.3 + 0.45 * i / (RACERS - 1) for i in range(RACERS)]
    assert datetime.now(UTC) < due - timedelta(seconds=0.5), "the sessions took too long to set up"
    threads = [
        threading.Thread(target=move_at, args=(run, offset))
        for run, offset in zip(runs, offsets, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert len(answers) == RACERS

    jwks = client.get("/.well-known/jwks.json").json()
    for run in runs:
        sid = run.session_id
        wait_for(lambda sid=sid: closed(sid), 20)
        sent, answer = answers[sid]
        log = run.log()
        types = [e["envelope"]["type"] for e in log]
        assert closes(sid) == 1, types
        assert types[-1] == "session.close"
        assert log[-1]["envelope"]["payload"]["reason"] == "deadline_expired"
        if answer.status_code == 201:
            # Applied before the deadline, and ahead of the close.
            assert types == ["session.open", "session.ack", "offer.propose", "session.close"]
            assert sent < 0
            assert datetime.fromisoformat(log[2]["received_at"]) < due
        else:  # refused: always so when sent after the deadline
            assert (answer.status_code, answer.json()["code"]) == (409, "timer_expired")
            assert types == ["session.open", "session.ack", "session.close"]
        assert datetime.fromisoformat(log[-1]["received_at"]) >= due
        report = verify_log(log, jwks)
        assert report.ok, [c.line() for c in report.checks if not c.ok]


def test_timers_fall_due_while_the_worker_is_down_still_close_once(
    celery_worker_process: Worker, client: Any, buyer: Agent, merchant: Agent
) -> None:
    """One timer was armed and held by the worker when it died; the other was armed while
    it was down and its task lost. Back up, the sweep closes both, once each."""
    soon = datetime.now(UTC) + timedelta(seconds=2)
    received = expire_tasks_received(celery_worker_process)
    held = ClientNegotiation(client, buyer, merchant, session_id="sess-held", tag="h")
    held.open(deadline=soon)
    wait_for(lambda: expire_tasks_received(celery_worker_process) > received, 20)
    celery_worker_process.kill()
    try:
        lost = ClientNegotiation(client, buyer, merchant, session_id="sess-lost", tag="l")
        lost.open(deadline=soon)
        # The lost timer's task is on the broker, and purged: beat's own tasks queued before
        # the kill (heartbeats, the log's integration) go with it, whatever their number.
        assert "sess-lost" in timer_tasks_waiting(celery_worker_process)
        purge(celery_worker_process.env)
        assert timer_tasks_waiting(celery_worker_process) == []
        wait_for(lambda: datetime.now(UTC) > soon + timedelta(seconds=1), 20)
        assert not closed("sess-held")  # nobody is there to close them
        assert not closed("sess-lost")
    finally:
        celery_worker_process.start()
    for sid in ("sess-held", "sess-lost"):
        wait_for(lambda sid=sid: closed(sid), 20)
        assert closes(sid) == 1
        assert Session.objects.get(session_id=sid).close_reason == "deadline_expired"


def test_two_hundred_deadlines_at_one_instant_close_within_seconds(
    celery_worker_process: Worker,
) -> None:
    """A crowd of deadlines (one buyer's burst of sessions) closes on time on a real worker:
    the first timer task to fire closes the whole crowd in batches."""
    from bench.jobs import timers_lateness

    # The deadline must lie ahead of every opening: 200 opens took 8 s on a busy machine.
    late = timers_lateness(200, 0, 25)
    assert late["closed"] == 200
    lateness = sorted(late["lateness_s"])
    p99 = lateness[int(len(lateness) * 0.99) - 1]
    assert p99 < 5, f"p50 {lateness[100]:.2f} s, p99 {p99:.2f} s"
    # And committed, not only timestamped, within that: the last close was seen by then.
    assert late["all_seen_closed_s"] < 5
    print(
        f"200 deadlines at one instant: p50 {lateness[100]:.3f} s, p99 {p99:.3f} s, "
        f"all seen closed {late['all_seen_closed_s']:.3f} s after the deadline"
    )


# Firing and re-arming, without a worker ------------------------------------------------------


@pytest.mark.django_db
def test_a_timer_firing_closes_every_session_due_with_its_own() -> None:
    """Deadlines come in crowds: the first timer to fire closes them all in batches, rather
    than each waiting for its own task's turn in the pool."""
    ids = open_sessions(30, prefix="crowd", at=datetime.now(UTC) - timedelta(seconds=WINDOW + 2))
    assert timers.fire(ids[-1]) == 30
    assert not Session.objects.filter(session_id__in=ids, ended_at__isnull=True).exists()
    assert Entry.objects.filter(session__session_id__in=ids, type="session.close").count() == 30
    # The others' timers then find nothing left to close.
    assert timers.fire(ids[0]) == 0


@pytest.mark.django_db
def test_re_arming_sends_a_task_for_each_timer_within_the_horizon(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    now = datetime.now(UTC)
    ids = open_sessions(3, prefix="rearm", at=now)
    armed: list[tuple[str, datetime]] = []
    monkeypatch.setattr(
        timers, "enqueue", lambda task, *, args, eta, about: armed.append((args[0], eta))
    )
    assert timers.rearm(now=now) == 3
    assert armed == [(sid, now + timedelta(seconds=WINDOW)) for sid in ids]

    settings.OANP_TIMER_HORIZON_SECONDS = WINDOW - 1  # beyond it: left to the sweep
    armed.clear()
    assert timers.rearm(now=now) == 0
    assert armed == []


def test_only_a_worker_of_the_timers_queue_re_arms_when_it_connects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[str] = []
    monkeypatch.setattr(timers, "enqueue", lambda task, **options: sent.append(task))
    timers.connected(serving={"deliveries", "background"})
    assert sent == []
    timers.connected(serving={"timers"})
    assert sent == ["arbiter_app.tasks.rearm_timers"]
