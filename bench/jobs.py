"""``python -m bench.jobs JOB [ARGS]``: work the timers and live sections do inside Django.

Run with ``DJANGO_SETTINGS_MODULE=bench.site`` and ``DATABASE_URL`` naming the section's own
database; each job prints its report as JSON, one line, on stdout.

- ``timers-sweep OPEN DUE LEAD_S``: migrate, then open ``OPEN`` sessions through the arbiter's
  own :func:`arbiter_app.services.receive_envelope`, ``DUE`` of them (every other one) with a
  deadline ``LEAD_S`` after their opening and the rest with a response window of an hour; wait
  until the short deadlines pass; time one UPDATE per due session on a copy of their rows (the
  peer), then the ``sweep_timers`` task's own body, run until it finds nothing due.
- ``timers-lateness COUNT SPREAD_S LEAD_S [TAG]``: open ``COUNT`` sessions (their ids start
  with ``TAG``, ``eta`` by default) whose deadlines fall ``LEAD_S`` from now and over
  ``SPREAD_S`` after, each armed as in production (a Celery task at the due time); wait until a
  worker closed them all; report each one's lateness.
- ``closes PREFIX``: the sessions whose id starts with ``PREFIX``: how many, how many are
  still open, and for each one the arbiter closed, its close entry's ``received_at`` and the
  session's close reason.
- ``operator``: an operator member signed in; prints its session cookie.
- ``envelope-queries``: one whole SFO→JFK session posted through Django's test client; the SQL
  statements each envelope's POST ran after the open (authentication and transaction control
  included), and their mean.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import django

TIMER_BUYER = "buyer-timers"
TIMER_MERCHANT = "merchant-timers"


def _opening(number: int, tag: str, **timer: Any) -> Any:
    from bench.load import SFO_JFK_ITEM
    from oanp.wire.envelope import envelope_from_json
    from tests.support.factories.sessions import sfo_jfk_agents

    buyer, _ = sfo_jfk_agents(
        f"{tag}{number:05d}-", buyer_id=TIMER_BUYER, merchant_id=TIMER_MERCHANT
    )
    return envelope_from_json(
        buyer.open(
            session_id=f"{tag}{number:05d}",
            merchant_agent_id=TIMER_MERCHANT,
            item=SFO_JFK_ITEM,
            currency="USD",
            max_rounds=5,
            now=datetime.now(UTC),
            **timer,
        )
    )


def _agents() -> tuple[Any, Any]:
    from arbiter_app import services
    from arbiter_app.models import AgentCredential

    for agent_id, role in ((TIMER_BUYER, "buyer"), (TIMER_MERCHANT, "merchant")):
        if not AgentCredential.objects.filter(agent_id=agent_id).exists():
            services.issue_credential(agent_id=agent_id, role=role)
    buyer = AgentCredential.objects.get(agent_id=TIMER_BUYER)
    merchant = AgentCredential.objects.get(agent_id=TIMER_MERCHANT)
    return buyer, merchant


def timers_sweep(open_count: int, due_count: int, lead_s: float) -> dict[str, Any]:
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.utils import timezone

    from arbiter_app import events, services, tasks
    from arbiter_app.models import Session
    from arbiter_app.signing_keys import ensure_active_key

    call_command("migrate", verbosity=0, interactive=False)
    ensure_active_key()
    buyer, _ = _agents()
    due_every = max(1, open_count // max(1, due_count))
    start = time.perf_counter()
    due_ids: list[str] = []
    for number in range(open_count):
        if number % due_every == 0 and len(due_ids) < due_count:
            timer: dict[str, Any] = {
                "deadline": datetime.now(UTC) + timedelta(seconds=lead_s),
            }
            due_ids.append(f"t{number:05d}")
        else:
            timer = {"response_window_s": 3600}
        services.receive_envelope(agent=buyer, envelope=_opening(number, "t", **timer))
    opened_s = time.perf_counter() - start
    last_due = Session.objects.filter(session_id__in=due_ids).order_by("-next_deadline").first()
    assert last_due is not None
    assert last_due.next_deadline is not None
    while timezone.now() <= last_due.next_deadline + timedelta(milliseconds=50):
        time.sleep(0.05)
    armed = Session.objects.filter(next_deadline__isnull=False).count()
    due_now = Session.objects.filter(next_deadline__lte=timezone.now()).count()

    # The peer: one UPDATE per due session, each its own transaction, on a copy of their rows.
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE bench_timer_peer AS "
            "SELECT session_id, next_deadline FROM arbiter_app_session"
        )
        cursor.execute("CREATE UNIQUE INDEX ON bench_timer_peer (session_id)")
        cursor.execute("ANALYZE bench_timer_peer")
        cursor.execute("ANALYZE arbiter_app_session")
    start = time.perf_counter()
    for session_id in due_ids:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "UPDATE bench_timer_peer SET next_deadline = NULL WHERE session_id = %s",
                [session_id],
            )
    peer_s = time.perf_counter() - start

    # The sweep, as the periodic task runs it, until it finds nothing due. The wake-up each
    # commit sends the channel layer is timed on the side: it runs as is, through a wrapper.
    sweeps: list[int] = []
    announcing = [0.0]
    announce = events.announce_all

    def timed_announce(*args: Any) -> None:
        began = time.perf_counter()
        try:
            announce(*args)
        finally:
            announcing[0] += time.perf_counter() - began

    events.announce_all = timed_announce
    start = time.perf_counter()
    try:
        while closed := tasks.sweep_timers():
            sweeps.append(closed)
    finally:
        sweep_s = time.perf_counter() - start
        events.announce_all = announce
    closed_sessions = Session.objects.filter(
        session_id__in=due_ids, close_reason="deadline_expired"
    ).count()
    still_open = Session.objects.filter(ended_at__isnull=True).count()
    return {
        "open_sessions": open_count,
        "armed": armed,
        "due": due_now,
        "opened_s": opened_s,
        "opened_per_s": open_count / opened_s,
        "sweep_s": sweep_s,
        "sweep_calls": len(sweeps) + 1,
        "sweep_batch": services.EXPIRY_BATCH,
        "sweep_closed": sum(sweeps),
        "sweep_announce_s": announcing[0],
        "closed_deadline_expired": closed_sessions,
        "still_open": still_open,
        "peer_s": peer_s,
        "peer_updates": len(due_ids),
    }


def timers_lateness(count: int, spread_s: float, lead_s: float, tag: str = "eta") -> dict[str, Any]:
    from arbiter_app import services
    from arbiter_app.models import Entry, Session

    buyer, _ = _agents()
    base = datetime.now(UTC) + timedelta(seconds=lead_s)
    ids = []
    # Each session's deadline as opened: on a busy machine an early one may already have been
    # closed (its row's next_deadline cleared) before the last is opened.
    due = {}
    for number in range(count):
        deadline = base + timedelta(seconds=spread_s * number / max(1, count))
        envelope = _opening(number, tag, deadline=deadline)
        services.receive_envelope(agent=buyer, envelope=envelope)
        ids.append(envelope.session_id)
        due[envelope.session_id] = deadline
    armed_late = datetime.now(UTC) > base
    give_up = time.monotonic() + lead_s + spread_s + 60
    while Session.objects.filter(session_id__in=ids, ended_at__isnull=True).exists():
        if time.monotonic() > give_up:
            break
        time.sleep(0.05)
    # A close's received_at is its transaction's clock, read before the batch it belongs to is
    # written: this is when the last close could be seen, committed, after the last deadline.
    all_seen_s = (datetime.now(UTC) - max(due.values())).total_seconds()
    closes = Entry.objects.filter(
        session__session_id__in=ids, type="session.close", sender_role="arbiter"
    ).values_list("session__session_id", "received_at")
    lateness = [
        (datetime.fromisoformat(received_at) - due[session_id]).total_seconds()
        for session_id, received_at in closes
    ]
    return {
        "sessions": count,
        "closed": len(lateness),
        "armed_after_first_due": armed_late,
        "lateness_s": lateness,
        "all_seen_closed_s": all_seen_s,
    }


def closes(prefix: str) -> dict[str, Any]:
    from arbiter_app.models import Entry, Session

    sessions = Session.objects.filter(session_id__startswith=prefix)
    closed = Entry.objects.filter(
        session__session_id__startswith=prefix, type="session.close", sender_role="arbiter"
    ).values_list("session__session_id", "received_at", "session__close_reason")
    return {
        "sessions": sessions.count(),
        "open": sessions.filter(ended_at__isnull=True).count(),
        "closes": {sid: received_at for sid, received_at, _ in closed},
        "reasons": dict(Counter(reason for _, _, reason in closed)),
    }


def operator() -> dict[str, Any]:
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.test import Client

    from sessions_app.models import MemberRole, Membership

    user, _ = User.objects.get_or_create(username="bench-operator")
    Membership.objects.get_or_create(user=user, defaults={"role": MemberRole.OPERATOR})
    client = Client()
    client.force_login(user)
    return {
        "cookie": settings.SESSION_COOKIE_NAME,
        "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
    }


def envelope_queries() -> dict[str, Any]:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from tests.support.factories.agents import ClientNegotiation, make_agent, post

    stamp = f"q{int(time.time() * 1000) % 10**9}"
    buyer, merchant = make_agent(f"{stamp}-b", "buyer"), make_agent(f"{stamp}-m", "merchant")
    client = Client(HTTP_HOST="127.0.0.1")
    run = ClientNegotiation(client, buyer, merchant, session_id=f"{stamp}-s", tag=f"{stamp}-")
    run.open()  # the first POST warms what a process does once; counted from the ack on
    counts: list[int] = []
    kinds: set[str] = set()
    while run.outbox:
        key, envelope = run.outbox.popleft()
        with CaptureQueriesContext(connection) as captured:
            assert post(run.client, key, envelope).status_code == 201
        counts.append(len(captured.captured_queries))
        kinds |= {q["sql"].split()[0].upper() for q in captured.captured_queries}
        run.catch_up()  # the agents read the log: not the POST's work
    return {
        "envelopes": len(counts),
        "statements_per_envelope": counts,
        "mean": sum(counts) / len(counts),
        "kinds": sorted(kinds),
    }


def tlog_integration(backlog: int, rate: float, seconds: float) -> dict[str, Any]:
    """The transparency log's integrator: the cost of one batch of ``backlog`` waiting entries
    against JCS + SHA-256 of the same leaves alone; then, with envelopes arriving at ``rate``
    a second for ``seconds`` and the integrator run every second (as beat runs it), how long
    after its commit each entry was in a signed checkpoint."""
    import threading

    from django.core.management import call_command
    from django.db import connection

    from arbiter_app import services
    from arbiter_app.log_records import LogCheckpoint, LogLeaf
    from arbiter_app.models import Entry
    from arbiter_app.signing_keys import ensure_active_key
    from arbiter_app.tlog.integrator import integrate
    from oanp.audit.merkle import leaf_hash
    from oanp.tlog.tree import leaf_data
    from oanp.wire.envelope import parse_timestamp

    call_command("migrate", verbosity=0, interactive=False)
    ensure_active_key()
    buyer, _ = _agents()
    for number in range(backlog):
        services.receive_envelope(agent=buyer, envelope=_opening(number, "l"))
    integrate(batch=1)  # the log's key made and the tree begun outside the clock
    rows = list(
        Entry.objects.order_by("id").values_list("session__session_id", "seq", "entry_hash")
    )
    start = time.perf_counter()
    batch = integrate(batch=backlog)
    batch_s = time.perf_counter() - start
    start = time.perf_counter()
    for session_id, seq, entry_hash in rows[1 : 1 + batch.added]:
        leaf_hash(leaf_data(session_id, seq, entry_hash))
    hashing_s = time.perf_counter() - start

    stop = threading.Event()
    runs: list[float] = []

    def integrator() -> None:
        while not stop.wait(1.0):
            began = time.perf_counter()
            integrate()
            runs.append(time.perf_counter() - began)
        connection.close()

    thread = threading.Thread(target=integrator)
    thread.start()
    first_id = Entry.objects.order_by("-id").values_list("id", flat=True).first() or 0
    started = time.perf_counter()
    sent = 0
    while time.perf_counter() - started < seconds:
        due = started + sent / rate
        if due > time.perf_counter():
            time.sleep(due - time.perf_counter())
        services.receive_envelope(agent=buyer, envelope=_opening(backlog + sent, "l"))
        sent += 1
    waited = time.perf_counter()
    while LogLeaf.objects.filter(entry_id__gt=first_id).count() < sent:
        time.sleep(0.05)
        if time.perf_counter() - waited > 60:
            raise RuntimeError("the integrator did not take every entry within a minute")
    stop.set()
    thread.join()
    checkpoints = list(LogCheckpoint.objects.order_by("size").values_list("size", "signed_at"))
    latencies = []
    leaves = LogLeaf.objects.filter(entry_id__gt=first_id).values_list(
        "index", "entry__received_at"
    )
    for index, received_at in leaves:
        signed_at = next(at for size, at in checkpoints if size > index)
        latencies.append((signed_at - parse_timestamp(received_at)).total_seconds())
    return {
        "backlog": backlog,
        "batch_added": batch.added,
        "batch_s": batch_s,
        "hashing_s": hashing_s,
        "rate": rate,
        "seconds": seconds,
        "sent": sent,
        "achieved_rate": sent / (waited - started),
        "latency_s": sorted(latencies),
        "integrator_runs_s": runs,
    }


def main(argv: list[str]) -> int:
    django.setup()
    job, args = argv[0], argv[1:]
    if job == "timers-sweep":
        report = timers_sweep(int(args[0]), int(args[1]), float(args[2]))
    elif job == "timers-lateness":
        report = timers_lateness(int(args[0]), float(args[1]), float(args[2]), *args[3:4])
    elif job == "closes":
        report = closes(args[0])
    elif job == "operator":
        report = operator()
    elif job == "envelope-queries":
        report = envelope_queries()
    elif job == "tlog-integration":
        report = tlog_integration(int(args[0]), float(args[1]), float(args[2]))
    else:
        raise SystemExit(f"unknown job {job!r}")
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
