"""The session page shows the ACP handoff of an agreement, attempt by attempt; operators and
admins may redeliver one not cleanly delivered, through the deliveries' confirmation page, and
that is audited."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import F
from django.test import Client
from django.utils import timezone

from arbiter_app import services as arbiter_services
from arbiter_app import tasks
from arbiter_app.deliveries import outbound
from arbiter_app.models import DeliveryAttempt, Handoff, HandoffState
from sessions_app import services
from sessions_app.models import AuditEvent, MemberRole, Merchant, Mode
from tests.arbiter_app.test_deliveries import Receiver, Reply, Request, deliveries_counted
from tests.sessions_app.pages import error_summary_in, messages_in
from tests.support.factories.accounts import admin, member, merchant, signed_in
from tests.support.factories.agents import ClientNegotiation, make_agent

pytestmark = pytest.mark.django_db

SESSION = "sess-handoff"
ITEM = {"route": "SFO-JFK", "date": "2026-04-28", "sku": "SFOJFK-0428"}
PAGE = f"/sessions/{SESSION}/"
RESEND = "/deliveries/resend/"


@pytest.fixture
def shop() -> Merchant:
    return merchant("sfo")


def checkout_at_another_price(request: Request) -> Reply:
    """A checkout made (201) with a unit amount of 350.00, whatever was agreed."""
    sent = json.loads(request.body)
    checkout = {
        "id": "cs_42",
        "currency": sent["currency"],
        "line_items": [{"id": "li_1", "unit_amount": 35000}],
    }
    return 201, {}, json.dumps(checkout).encode()


@pytest.fixture
def acp_server() -> Iterator[Receiver]:
    """First a 503, then a checkout whose unit amount is not the agreed one."""
    replies = [(503, b'{"type": "processing_error"}')]

    def answer(request: Request) -> Reply:
        if replies:
            status, body = replies.pop(0)
            return status, {}, body
        return checkout_at_another_price(request)

    server = Receiver(answer).start()
    yield server
    server.stop()


def agree_and_hand_off(
    client: Client, shop: Merchant, acp_url: str
) -> tuple[Handoff, ClientNegotiation]:
    """An agreed SFO→JFK session of the shop's external agent, handed off to ``acp_url`` by
    as many attempts as it takes (retries fall due at once: the settings say so)."""
    services.create_agent(
        actor=admin(),
        merchant=shop,
        agent_id="merchant-sfo",
        display_name="",
        mode=Mode.EXTERNAL,
        strategy="reference",
        limits=None,
    )
    arbiter_services.configure_handoff(
        merchant_agent_id="merchant-sfo", endpoint=acp_url, api_key="acp_123"
    )
    run = ClientNegotiation(
        client, make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant"), SESSION
    )
    run.open(item=ITEM)
    assert run.finish()[-1]["envelope"]["type"] == "session.agree"
    handoff = Handoff.objects.get(session__session_id=SESSION)
    # What the worker would do, in-process: one attempt per call.
    while tasks.deliver_handoff(handoff.pk):
        pass
    handoff.refresh_from_db()
    return handoff, run


@pytest.fixture
def handed_off(settings: Any, client: Client, shop: Merchant, acp_server: Receiver) -> Handoff:
    """Handed off in two attempts: a 503, then a checkout at the wrong price."""
    settings.OANP_ALLOW_PRIVATE_TARGETS = True
    settings.OANP_DELIVERY_RETRY_BASE_SECONDS = 0
    handoff, _ = agree_and_hand_off(client, shop, f"{acp_server.url}/acp")
    assert handoff.state == HandoffState.DELIVERED
    assert handoff.attempt_log.count() == 2
    return handoff


def redeliver(client: Client, handoff: Handoff, **answer: str) -> Any:
    """The panel's Redeliver, and with ``confirm="yes"`` the confirmation page's button."""
    return client.post(RESEND, {"handoff": str(handoff.pk), **answer})


def panel(page: Any) -> str:
    assert page.status_code == 200, page.status_code
    html: str = page.content.decode()
    return html.split('id="handoff-h"', 1)[1].split("</section>", 1)[0]


def rows(html: str) -> list[str]:
    return html.split('id="handoff-attempts"', 1)[1].split("<tbody>", 1)[1].split("<tr>")[1:]


def test_the_panel_lists_the_target_state_flag_and_every_attempt(
    handed_off: Handoff, shop: Merchant, acp_server: Receiver
) -> None:
    alice = signed_in(member("alice", MemberRole.MERCHANT_MANAGER, shop))
    html = panel(alice.get(PAGE))
    assert f"{acp_server.url}/acp/checkout_sessions" in html
    assert ">delivered<" in html
    assert "cs_42" in html
    assert "flagged" in html
    assert "the checkout&#x27;s unit amount 35000 is not the agreed 34000" in html
    first, second = rows(html)
    assert '<th scope="row">1</th>' in first
    assert "<td>503</td>" in first
    assert "<td>retry</td>" in first
    assert "processing_error" in first
    assert '<th scope="row">2</th>' in second
    assert "<td>201</td>" in second
    assert "<td>delivered</td>" in second
    for attempt, row in zip(
        handed_off.attempt_log.order_by("number"), (first, second), strict=True
    ):
        assert f"{attempt.latency_ms} ms" in row
        assert attempt.started_at.strftime("%Y-%m-%d %H:%M:%S") in row
    # A merchant member watches; redelivering is for operators and admins.
    assert 'id="redeliver"' not in html


def test_a_session_without_a_handoff_shows_no_panel(
    settings: Any, client: Client, shop: Merchant
) -> None:
    run = ClientNegotiation(
        client, make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant"), SESSION
    )
    run.open()
    run.finish()
    operator = signed_in(member("olga", MemberRole.OPERATOR))
    page = operator.get(PAGE)
    assert page.status_code == 200
    assert 'id="handoff-h"' not in page.content.decode()


def test_an_operator_redelivers_after_confirming_and_it_is_audited(
    handed_off: Handoff, acp_server: Receiver
) -> None:
    operator_user = member("olga", MemberRole.OPERATOR)
    operator = signed_in(operator_user)
    button = panel(operator.get(PAGE)).split('id="redeliver"', 1)[0].rsplit("<form", 1)[1]
    assert f'action="{RESEND}"' in button
    assert f'name="handoff" value="{handed_off.pk}"' in button
    # The button asks first: nothing is resent until the confirmation page's answer.
    asked = redeliver(operator, handed_off)
    assert asked.status_code == 200
    assert 'id="confirm-resend"' in asked.content.decode()
    assert not AuditEvent.objects.filter(action="handoff.redeliver").exists()
    response = redeliver(operator, handed_off, confirm="yes")
    assert response.status_code == 302
    assert response["Location"] == f"/deliveries/handoff/{handed_off.pk}/"
    assert messages_in(operator.get(response["Location"]).content.decode()) == [
        "Resending 1 delivery now."
    ]
    handed_off.refresh_from_db()
    assert handed_off.state == HandoffState.PENDING
    assert handed_off.attempts == 0
    assert not handed_off.flagged
    event = AuditEvent.objects.get(action="handoff.redeliver")
    assert event.actor == operator_user
    assert event.target == SESSION
    assert event.detail == {"redelivered": True, "refused": ""}
    # The next attempt goes out with the same Idempotency-Key and is listed too.
    assert tasks.deliver_handoff(handed_off.pk) is True
    keys = {r.headers["idempotency-key"] for r in acp_server.requests}
    assert keys == {f"oanp-{SESSION}"}
    assert len(rows(panel(operator.get(PAGE)))) == 3


def test_a_cleanly_delivered_handoff_offers_no_redeliver(handed_off: Handoff) -> None:
    Handoff.objects.filter(pk=handed_off.pk).update(flagged=False, flag_reason="")
    operator = signed_in(member("olga", MemberRole.OPERATOR))
    assert 'id="redeliver"' not in panel(operator.get(PAGE))
    refused = redeliver(operator, handed_off, confirm="yes")
    assert refused.status_code == 400
    assert "delivered already" in error_summary_in(refused.content.decode())
    assert not AuditEvent.objects.filter(action="handoff.redeliver").exists()


def test_an_admin_redelivers_a_refused_one_and_sees_why(handed_off: Handoff) -> None:
    ada = signed_in(member("ada", MemberRole.ADMIN))
    # An attempt still running cannot be doubled: the arbiter refuses, and the refusal is
    # shown and audited.
    handed_off.attempt_log.update(outcome="")
    answer = redeliver(ada, handed_off, confirm="yes")
    assert answer.status_code == 302
    assert messages_in(ada.get(answer["Location"]).content.decode()) == [
        f"Not resent, the handoff of {SESSION}: an attempt is running; wait for its answer"
    ]
    event = AuditEvent.objects.get(action="handoff.redeliver")
    assert event.detail == {
        "redelivered": False,
        "refused": "an attempt is running; wait for its answer",
    }
    handed_off.refresh_from_db()
    assert handed_off.state == HandoffState.DELIVERED


def test_merchants_cannot_redeliver(handed_off: Handoff, shop: Merchant) -> None:
    own = signed_in(member("alice", MemberRole.MERCHANT_MANAGER, shop))
    other = signed_in(member("bob", MemberRole.MERCHANT_MANAGER, merchant("b")))
    assert redeliver(own, handed_off, confirm="yes").status_code == 403
    assert redeliver(other, handed_off, confirm="yes").status_code == 403
    assert other.get(PAGE).status_code == 404
    assert own.get(RESEND).status_code == 405
    handed_off.refresh_from_db()
    assert handed_off.state == HandoffState.DELIVERED
    assert not AuditEvent.objects.filter(action="handoff.redeliver").exists()


def test_redelivering_needs_the_csrf_token(handed_off: Handoff) -> None:
    operator = signed_in(member("olga", MemberRole.OPERATOR), enforce_csrf_checks=True)
    assert redeliver(operator, handed_off, confirm="yes").status_code == 403
    handed_off.refresh_from_db()
    assert handed_off.state == HandoffState.DELIVERED


# An attempt whose worker died (the real kill is in tests/arbiter_app/test_deliveries.py) ------


def died_inside_the_post(handoff: Handoff, ago: timedelta) -> DeliveryAttempt:
    """What a worker killed during the handoff's POST ``ago`` leaves behind: the handoff
    claimed and leased until the attempt's end, and the attempt with no answer. The earlier
    attempts are moved back as far, to come before it."""
    started = timezone.now() - ago
    handoff.attempt_log.update(started_at=F("started_at") - ago)
    handoff.attempts += 1
    handoff.state, handoff.next_attempt_at = HandoffState.PENDING, outbound.lease_until(started)
    handoff.save()
    return DeliveryAttempt.objects.create(
        handoff=handoff, number=handoff.attempts, started_at=started
    )


@pytest.fixture
def short_lease(settings: Any) -> timedelta:
    settings.OANP_DELIVERY_TIMEOUT_SECONDS = 2
    settings.OANP_DELIVERY_LEASE_MARGIN_SECONDS = 1
    return outbound.lease()


def test_redeliver_waits_for_a_live_attempt_and_closes_a_dead_one(
    handed_off: Handoff, short_lease: timedelta, acp_server: Receiver
) -> None:
    operator = signed_in(member("olga", MemberRole.OPERATOR))
    live = died_inside_the_post(handed_off, short_lease / 2)
    # Within its lease the attempt may still be answered: shown running, not doubled.
    assert "<td>running</td>" in rows(panel(operator.get(PAGE)))[2]
    redeliver(operator, handed_off, confirm="yes")
    audited = AuditEvent.objects.filter(action="handoff.redeliver").order_by("pk")
    assert audited.get().detail["refused"] == "an attempt is running; wait for its answer"
    # Past it, the worker is presumed dead: the redeliver closes the attempt and is taken.
    handed_off.attempt_log.update(started_at=F("started_at") - short_lease / 2)
    assert redeliver(operator, handed_off, confirm="yes").status_code == 302
    assert audited.last().detail == {"redelivered": True, "refused": ""}
    live.refresh_from_db()
    assert live.outcome == "abandoned"
    assert live.error.startswith("the worker stopped before an answer; found abandoned at ")
    assert tasks.deliver_handoff(handed_off.pk) is True
    handed_off.refresh_from_db()
    assert handed_off.state == HandoffState.DELIVERED
    third, fourth = rows(panel(operator.get(PAGE)))[2:]
    assert ">abandoned</span>" in third
    assert "the worker stopped before an answer; found abandoned at " in third
    assert "<td>delivered</td>" in fourth
    assert {r.headers["idempotency-key"] for r in acp_server.requests} == {f"oanp-{SESSION}"}


def test_the_sweep_closes_a_dead_attempt_once_and_delivers_the_handoff(
    handed_off: Handoff, short_lease: timedelta, shop: Merchant, client: Client
) -> None:
    counted = deliveries_counted(client, "handoff", "abandoned")
    dead = died_inside_the_post(handed_off, short_lease)
    tasks.sweep_deliveries()
    dead.refresh_from_db()
    assert dead.outcome == "abandoned"
    # Found once: neither a second sweep nor the next claim, the task the sweep asked for,
    # rewrites or counts it again.
    found = dead.error
    assert outbound.abandon_dead(timezone.now(), handoffs=[handed_off.pk]) == 0
    tasks.sweep_deliveries()
    assert tasks.deliver_handoff(handed_off.pk) is True
    dead.refresh_from_db()
    assert dead.error == found
    handed_off.refresh_from_db()
    assert handed_off.state == HandoffState.DELIVERED
    assert handed_off.attempt_log.filter(outcome="").count() == 0
    assert deliveries_counted(client, "handoff", "abandoned") == counted + 1
    alice = signed_in(member("alice", MemberRole.MERCHANT_MANAGER, shop))
    abandoned, delivered = (row.split("</td><td>")[2] for row in rows(panel(alice.get(PAGE)))[2:])
    assert abandoned.startswith('<span class="badge warn" title="The worker stopped during')
    assert abandoned.endswith(">abandoned</span>")
    assert delivered == "delivered"


def test_a_flagged_handoffs_last_status_agrees_with_its_outcome(handed_off: Handoff) -> None:
    """The list's last status of a flagged handoff says the checkout was made at another
    price, not "delivered" beside the flag."""
    operator = signed_in(member("olga", MemberRole.OPERATOR))
    listed = operator.get("/deliveries/").content.decode()
    row = listed.split(f'id="select-handoff-{handed_off.pk}"', 1)[1].split("</tr>", 1)[0]
    assert "price mismatch flagged" in row
    assert "<td>201: checkout made at another price</td>" in row
    assert "(delivered)" not in row
    # A clean delivery still reads as one.
    Handoff.objects.filter(pk=handed_off.pk).update(flagged=False, flag_reason="")
    clean = operator.get("/deliveries/").content.decode().split("<tbody>", 1)[1]
    assert "<td>201 (delivered)</td>" in clean
