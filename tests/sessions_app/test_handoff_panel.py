"""The session page shows the ACP handoff of an agreement, attempt by attempt; operators and
admins may redeliver it, and that is audited."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from arbiter_app import services as arbiter_services
from arbiter_app import tasks
from arbiter_app.models import Handoff, HandoffState
from sessions_app import services
from sessions_app.models import AuditEvent, Merchant, Mode, Role
from tests.arbiter_app.factories import ClientNegotiation, make_agent
from tests.arbiter_app.test_deliveries import Receiver, Reply, Request
from tests.sessions_app.agent_factories import admin, member, merchant, signed_in

pytestmark = pytest.mark.django_db

SESSION = "sess-handoff"
ITEM = {"route": "SFO-JFK", "date": "2026-04-28", "sku": "SFOJFK-0428"}
PAGE = f"/sessions/{SESSION}/"
REDELIVER = f"/sessions/{SESSION}/redeliver/"


@pytest.fixture
def shop() -> Merchant:
    return merchant("sfo")


@pytest.fixture
def acp_server() -> Iterator[Receiver]:
    """First a 503, then a checkout whose unit amount is not the agreed one."""
    replies = [(503, b'{"type": "processing_error"}')]

    def answer(request: Request) -> Reply:
        if replies:
            status, body = replies.pop(0)
            return status, {}, body
        sent = json.loads(request.body)
        checkout = {
            "id": "cs_42",
            "currency": sent["currency"],
            "line_items": [{"id": "li_1", "unit_amount": 35000}],
        }
        return 201, {}, json.dumps(checkout).encode()

    server = Receiver(answer).start()
    yield server
    assert server.server is not None
    server.server.shutdown()
    server.server.server_close()


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


def panel(page: Any) -> str:
    assert page.status_code == 200, page.status_code
    html: str = page.content.decode()
    return html.split('id="handoff-h"', 1)[1].split("</section>", 1)[0]


def rows(html: str) -> list[str]:
    return html.split('id="handoff-attempts"', 1)[1].split("<tbody>", 1)[1].split("<tr>")[1:]


def test_the_panel_lists_the_target_state_flag_and_every_attempt(
    handed_off: Handoff, shop: Merchant, acp_server: Receiver
) -> None:
    alice = signed_in(member("alice", Role.MERCHANT, shop))
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
    operator = signed_in(member("olga", Role.OPERATOR))
    page = operator.get(PAGE)
    assert page.status_code == 200
    assert 'id="handoff-h"' not in page.content.decode()


def test_an_operator_redelivers_and_it_is_audited(
    handed_off: Handoff, acp_server: Receiver
) -> None:
    operator_user = member("olga", Role.OPERATOR)
    operator = signed_in(operator_user)
    assert 'id="redeliver"' in panel(operator.get(PAGE))
    response = operator.post(REDELIVER)
    assert response.status_code == 302
    assert response["Location"] == f"{PAGE}#handoff-h"
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


def test_an_admin_redelivers_a_refused_one_and_sees_why(handed_off: Handoff) -> None:
    ada = signed_in(member("ada", Role.ADMIN))
    # An attempt still running cannot be doubled: the arbiter refuses, and the refusal is
    # shown and audited.
    handed_off.attempt_log.update(outcome="")
    page = ada.post(REDELIVER, follow=True)
    messages = page.content.decode().split('class="messages"', 1)[1].split("</div>", 1)[0]
    assert "Not redelivered: an attempt is running; wait for its answer" in messages
    event = AuditEvent.objects.get(action="handoff.redeliver")
    assert event.detail == {
        "redelivered": False,
        "refused": "an attempt is running; wait for its answer",
    }
    handed_off.refresh_from_db()
    assert handed_off.state == HandoffState.DELIVERED


def test_merchants_cannot_redeliver(handed_off: Handoff, shop: Merchant) -> None:
    own = signed_in(member("alice", Role.MERCHANT, shop))
    other = signed_in(member("bob", Role.MERCHANT, merchant("b")))
    assert own.post(REDELIVER).status_code == 403
    assert other.post(REDELIVER).status_code == 403
    assert other.get(PAGE).status_code == 404
    assert own.get(REDELIVER).status_code == 405
    handed_off.refresh_from_db()
    assert handed_off.state == HandoffState.DELIVERED
    assert not AuditEvent.objects.filter(action="handoff.redeliver").exists()


def test_redelivering_needs_the_csrf_token(handed_off: Handoff) -> None:
    operator = signed_in(member("olga", Role.OPERATOR), enforce_csrf_checks=True)
    assert operator.post(REDELIVER).status_code == 403
    handed_off.refresh_from_db()
    assert handed_off.state == HandoffState.DELIVERED
