"""Deliveries bounded per target: a slow or hanging receiver holds at most
``OANP_DELIVERIES_PER_TARGET`` attempts in flight at once; one more to it is deferred without
spending its retry budget, and deliveries to anyone else go on. The sweep makes no attempt
itself: it hands each due delivery to a task of its own."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from arbiter_app import selectors, services, tasks
from arbiter_app.deliveries import bound, callbacks, handoff, outbound
from arbiter_app.models import CallbackCursor, DeliveryAttempt, Handoff, HandoffState
from tests.arbiter_app.test_deliveries import ITEM, Hold, Receiver, Reply, Request, register
from tests.support.factories.agents import Agent, ClientNegotiation, make_agent
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db


@dataclass
class Queued:
    """The tasks sent to the broker, as (task name, args, countdown); ``away`` makes every
    send fail, as :func:`arbiter_app.queue.enqueue` reports a broker that is away."""

    sent: list[tuple[str, list[Any], float | None]] = field(default_factory=list)
    away: bool = False

    def __call__(self, task: str, *, args: list[Any], about: str, **options: Any) -> bool:
        if self.away:
            return False
        self.sent.append((task.rsplit(".", 1)[1], args, options.get("countdown")))
        return True


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> Queued:
    queue = Queued()
    monkeypatch.setattr(handoff, "enqueue", queue)
    monkeypatch.setattr(callbacks, "enqueue", queue)
    return queue


@pytest.fixture(autouse=True)
def two_per_target(settings: Any) -> None:
    settings.OANP_ALLOW_PRIVATE_TARGETS = True
    settings.OANP_DELIVERIES_PER_TARGET = 2
    # A receiver that holds its answer is given up on within the second, should it be asked.
    settings.OANP_DELIVERY_TIMEOUT_SECONDS = 1


@pytest.fixture
def receivers() -> Iterator[Callable[..., Receiver]]:
    started: list[Receiver] = []
    holds: list[Hold] = []

    def start(*statuses: int, hang: bool = False) -> Receiver:
        """A receiver that answers ``statuses`` in turn, then 201; one that hangs keeps every
        answer back until the test ends."""
        hold = Hold()
        if not hang:
            hold.released.set()
        holds.append(hold)
        replies = list(statuses)

        def answer(request: Request) -> Reply:
            hold()
            return (replies.pop(0) if replies else 201), {}, b'{"id": "cs_1"}'

        started.append(Receiver(answer).start())
        return started[-1]

    yield start
    for hold in holds:
        hold.released.set()
    for receiver in started:
        receiver.stop()


def handoff_target(merchant: Agent, url: str) -> None:
    services.configure_handoff(
        merchant_agent_id=merchant.agent_id, endpoint=f"{url}/acp", api_key="acp_live_123"
    )


def agreed(client: Any, buyer: Agent, merchant: Agent, session_id: str) -> Handoff:
    """An agreed session of ``merchant``, whose handoff is due and not yet attempted."""
    run = ClientNegotiation(client, buyer, merchant, session_id=session_id)
    run.open(item=ITEM)
    assert run.finish()[-1]["envelope"]["type"] == "session.agree"
    return Handoff.objects.select_related("target").get(session__session_id=session_id)


def in_flight(delivery: Handoff, started: datetime | None = None) -> DeliveryAttempt:
    """What a claim leaves while its POST runs: the handoff leased until the attempt's end,
    and the attempt, unanswered, counted at its target's origin."""
    started = started or timezone.now()
    delivery.attempts += 1
    delivery.next_attempt_at = outbound.lease_until(started)
    delivery.save()
    return DeliveryAttempt.objects.create(
        handoff=delivery,
        number=delivery.attempts,
        started_at=started,
        origin=bound.origin_of(handoff.checkout_url(delivery.target)),
    )


def due_now(delivery: Handoff | CallbackCursor) -> None:
    """Time moved on to the delivery's next attempt."""
    type(delivery).objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())


def deferred(delivery: Handoff | CallbackCursor, asked_at: datetime) -> bool:
    """Due again a moment later, as the bound defers a delivery."""
    delivery.refresh_from_db()
    assert delivery.next_attempt_at is not None
    wait = (delivery.next_attempt_at - asked_at).total_seconds()
    return bound.DEFER_SECONDS <= wait <= 2 * bound.DEFER_SECONDS + 1


def test_the_origin_is_scheme_host_and_port() -> None:
    assert bound.origin_of("https://Shop.example/acp/checkout_sessions") == (
        "https://shop.example:443"
    )
    assert bound.origin_of("http://shop.example/a") == bound.origin_of("http://shop.example:80/b")
    assert bound.origin_of("http://shop.example:8080/a") != bound.origin_of("http://shop.example/a")
    assert bound.origin_of("https://shop.example/a") != bound.origin_of("http://shop.example/a")
    assert bound.origin_of("http://[2001:db8::1]:8443/hook") == "http://[2001:db8::1]:8443"


def test_a_target_at_its_bound_defers_the_next_attempt_and_another_target_goes_on(
    client: Any,
    buyer: Agent,
    receivers: Callable[..., Receiver],
    queued: Queued,
    django_capture_on_commit_callbacks: Any,
) -> None:
    slow, fast = receivers(), receivers()
    shop = make_agent("merchant-slow", "merchant")
    other_shop = make_agent("merchant-fast", "merchant")
    handoff_target(shop, slow.url)
    handoff_target(other_shop, fast.url)
    first, second, third = (agreed(client, buyer, shop, f"sess-slow-{n}") for n in range(3))
    in_flight(first)
    in_flight(second)

    asked_at = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        assert handoff.deliver(third.pk) is False
    assert deferred(third, asked_at)
    assert (third.state, third.attempts) == (HandoffState.PENDING, 0)
    assert not third.attempt_log.exists()
    assert slow.requests == []
    # The worker is asked again for the moment it is due: no sweep needed.
    [(task, args, countdown)] = queued.sent
    assert (task, args) == ("deliver_handoff", [third.pk])
    assert countdown is not None
    assert bound.DEFER_SECONDS <= countdown <= 2 * bound.DEFER_SECONDS

    elsewhere = agreed(client, buyer, other_shop, "sess-fast")
    assert handoff.deliver(elsewhere.pk) is True
    elsewhere.refresh_from_db()
    assert elsewhere.state == HandoffState.DELIVERED
    assert len(fast.requests) == 1

    # One of the slow target's attempts is answered: its place is free for the deferred one,
    # which goes out as its first attempt.
    first.attempt_log.update(outcome=outbound.AttemptOutcome.DELIVERED.value)
    due_now(third)
    assert handoff.deliver(third.pk) is True
    third.refresh_from_db()
    assert third.state == HandoffState.DELIVERED
    assert list(third.attempt_log.values_list("number", "status_code")) == [(1, 201)]
    assert len(slow.requests) == 1


def test_deferrals_spend_no_retries(
    settings: Any, client: Any, buyer: Agent, receivers: Callable[..., Receiver], queued: Queued
) -> None:
    settings.OANP_DELIVERY_MAX_ATTEMPTS = 2
    shop = make_agent("merchant-slow", "merchant")
    handoff_target(shop, receivers(503).url)
    first, second, third = (agreed(client, buyer, shop, f"sess-slow-{n}") for n in range(3))
    in_flight(first)
    in_flight(second)
    for _ in range(3):
        due_now(third)
        assert handoff.deliver(third.pk) is False
    third.refresh_from_db()
    assert (third.state, third.attempts) == (HandoffState.PENDING, 0)

    # Room again: the first attempt is answered 503, and the second of two is still to come.
    DeliveryAttempt.objects.filter(handoff=first).update(
        outcome=outbound.AttemptOutcome.DELIVERED.value
    )
    due_now(third)
    assert handoff.deliver(third.pk) is True
    third.refresh_from_db()
    assert (third.state, third.attempts) == (HandoffState.PENDING, 1)
    assert list(third.attempt_log.values_list("number", "status_code")) == [(1, 503)]


def test_an_attempt_past_its_lease_holds_no_place(
    client: Any, buyer: Agent, receivers: Callable[..., Receiver], queued: Queued
) -> None:
    shop = make_agent("merchant-slow", "merchant")
    target = receivers()
    handoff_target(shop, target.url)
    first, second, third = (agreed(client, buyer, shop, f"sess-slow-{n}") for n in range(3))
    # The worker of the first died during its POST: its lease ran out, and with it its place.
    in_flight(first, started=timezone.now() - outbound.lease() - timedelta(seconds=1))
    in_flight(second)
    assert handoff.deliver(third.pk) is True
    assert len(target.requests) == 1


def test_a_callback_waits_for_room_at_an_origin_its_agent_shares_with_handoffs(
    client: Any,
    buyer: Agent,
    receivers: Callable[..., Receiver],
    queued: Queued,
    django_capture_on_commit_callbacks: Any,
) -> None:
    shared = receivers()
    shop = make_agent("merchant-slow", "merchant")
    handoff_target(shop, shared.url)
    for delivery in [agreed(client, buyer, shop, f"sess-slow-{n}") for n in range(2)]:
        in_flight(delivery)
    register(client, buyer, f"{shared.url}/hooks/oanp")
    with django_capture_on_commit_callbacks(execute=True):  # the entry wakes the callback
        ClientNegotiation(client, buyer, shop, session_id="sess-called-back").open(item=ITEM)
    cursor = CallbackCursor.objects.get(session__session_id="sess-called-back")

    asked_at = timezone.now()
    queued.sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert callbacks.deliver(cursor.pk) == 0
    assert deferred(cursor, asked_at)
    assert (cursor.delivered_seq, cursor.attempts) == (0, 0)
    assert not cursor.attempt_log.exists()
    assert [(task, args) for task, args, _ in queued.sent] == [("deliver_callback", [cursor.pk])]
    assert shared.requests == []


def test_the_sweep_hands_each_due_delivery_to_a_task_and_waits_on_no_target(
    client: Any,
    buyer: Agent,
    receivers: Callable[..., Receiver],
    queued: Queued,
    django_capture_on_commit_callbacks: Any,
) -> None:
    hanging = receivers(hang=True)
    shop = make_agent("merchant-slow", "merchant")
    handoff_target(shop, hanging.url)
    register(client, buyer, f"{hanging.url}/hooks/oanp")
    with django_capture_on_commit_callbacks(execute=True):
        delivery = agreed(client, buyer, shop, "sess-swept")
    cursor = CallbackCursor.objects.get(session__session_id="sess-swept")
    queued.sent.clear()  # the tasks the agreement asked for were lost: the broker was away

    assert tasks.sweep_deliveries() == 2
    assert [(task, args) for task, args, _ in queued.sent] == [
        ("deliver_handoff", [delivery.pk]),
        ("deliver_callback", [cursor.pk]),
    ]
    assert hanging.requests == []
    assert not DeliveryAttempt.objects.exists()


def test_what_the_broker_does_not_take_stays_due_for_the_next_sweep(
    client: Any, buyer: Agent, receivers: Callable[..., Receiver], queued: Queued
) -> None:
    shop = make_agent("merchant-slow", "merchant")
    handoff_target(shop, receivers().url)
    delivery = agreed(client, buyer, shop, "sess-swept")
    queued.away = True
    assert tasks.sweep_deliveries() == 0
    assert selectors.due_handoffs() == [delivery.pk]
    queued.away = False
    assert tasks.sweep_deliveries() == 1
    assert queued.sent == [("deliver_handoff", [delivery.pk], None)]


def advisory_lock_awaited() -> bool:
    """a claim waits for the origin's lock"""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
        (waiting,) = cursor.fetchone()
    return bool(waiting)


@pytest.mark.django_db(transaction=True)
def test_a_claim_counts_the_lease_another_claim_is_taking_at_the_same_moment(
    settings: Any, client: Any, buyer: Agent, receivers: Callable[..., Receiver], queued: Queued
) -> None:
    settings.OANP_DELIVERIES_PER_TARGET = 1
    shop = make_agent("merchant-slow", "merchant")
    handoff_target(shop, receivers().url)
    delivery = agreed(client, buyer, shop, "sess-slow")
    origin = bound.origin_of(handoff.checkout_url(delivery.target))
    counted, answers = threading.Event(), threading.Event()
    release = threading.Event()
    seen: list[bool] = []

    def first_claim() -> None:
        # Finds room and takes the lease, but has not committed when the second one asks. It
        # holds the handoff's row first, as a claim does, so a live worker of the session
        # skips this handoff rather than locking in the opposite order.
        try:
            with transaction.atomic():
                Handoff.objects.select_for_update().get(pk=delivery.pk)
                now = timezone.now()
                seen.append(bound.has_room(origin, now))
                DeliveryAttempt.objects.create(
                    handoff=delivery, number=1, started_at=now, origin=origin
                )
                counted.set()
                release.wait(15)
        finally:
            connection.close()

    def second_claim() -> None:
        try:
            with transaction.atomic():
                seen.append(bound.has_room(origin, timezone.now()))
            answers.set()
        finally:
            connection.close()

    threads = [threading.Thread(target=first_claim), threading.Thread(target=second_claim)]
    threads[0].start()
    wait_for(counted.is_set, 15, message="the first claim never counted")
    threads[1].start()
    try:
        wait_for(advisory_lock_awaited, 15)
        assert not answers.is_set()
    finally:
        release.set()
        for thread in threads:
            thread.join(15)
    assert seen == [True, False]
