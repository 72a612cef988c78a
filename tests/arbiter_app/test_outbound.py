"""Where the arbiter may send, how it signs, what it sends on agreement, and how targets and
callbacks are configured: everything about deliveries that needs no worker."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction
from django.urls import reverse

from arbiter_app import services
from arbiter_app.deliveries import outbound
from arbiter_app.deliveries.handoff import read_checkout
from arbiter_app.deliveries.outbound import Outcome, TargetNotAllowed, check_target, classify
from arbiter_app.models import AgentCallback, AgentCredential, Handoff, HandoffTarget, Session
from oanp.envelope import parse_envelope
from tests.support.factories.agents import Agent, ClientNegotiation

pytestmark = pytest.mark.django_db

CALLBACK = "/oanp/v0.1/callback"


@pytest.fixture
def private_refused(settings: Any) -> None:
    settings.OANP_ALLOW_PRIVATE_TARGETS = False


# SSRF ------------------------------------------------------------------------------------------

REFUSED = [
    "http://127.0.0.1:8000/acp",
    "http://localhost/acp",
    "http://10.1.2.3/acp",
    "http://172.16.0.1/acp",
    "http://192.168.1.1/acp",
    "http://169.254.169.254/latest/meta-data",
    "http://100.64.0.1/acp",
    "http://0.0.0.0/acp",
    "http://224.0.0.1/acp",
    "http://240.0.0.1/acp",
    "http://[::1]/acp",
    "http://[fe80::1]/acp",
    "http://[fc00::1]/acp",
    "http://[::ffff:127.0.0.1]/acp",
    "http://[::ffff:10.0.0.1]/acp",
    "http://[::ffff:169.254.169.254]/acp",
    "ftp://93.184.215.14/acp",
    "file:///etc/passwd",
    "http:///acp",
    "http://user:pass@93.184.215.14/acp",
]


@pytest.mark.usefixtures("private_refused")
@pytest.mark.parametrize("url", REFUSED)
def test_a_target_off_the_public_internet_is_refused(url: str) -> None:
    with pytest.raises(TargetNotAllowed) as refused:
        check_target(url)
    assert refused.value.code == "target_not_allowed"
    assert isinstance(refused.value, ValueError)


@pytest.mark.usefixtures("private_refused")
@pytest.mark.parametrize(
    "url", ["http://93.184.215.14/acp", "https://8.8.8.8:8443/x", "https://[2606:4700::1111]/"]
)
def test_a_public_address_is_allowed(url: str) -> None:
    check_target(url)


@pytest.mark.usefixtures("private_allowed")
def test_private_targets_are_allowed_only_when_the_setting_says_so() -> None:
    check_target("http://127.0.0.1:9/acp")
    with pytest.raises(TargetNotAllowed):
        check_target("gopher://127.0.0.1/")


@pytest.mark.usefixtures("private_refused")
def test_configuring_a_private_handoff_target_is_refused(merchant: Agent) -> None:
    with pytest.raises(ValueError, match="not a public address"):
        services.configure_handoff(
            merchant_agent_id=merchant.agent_id, endpoint="http://10.0.0.7/acp", api_key="k"
        )
    out = io.StringIO()
    with pytest.raises(CommandError, match="not a public address"):
        call_command(
            "configure_handoff",
            "--merchant-agent-id",
            merchant.agent_id,
            "--endpoint",
            "http://169.254.169.254/",
            "--api-key",
            "k",
            stdout=out,
        )
    assert not HandoffTarget.objects.exists()


@pytest.mark.usefixtures("private_refused")
@pytest.mark.parametrize("url", ["http://127.0.0.1:9/hook", "http://[::ffff:10.0.0.1]/hook"])
def test_registering_a_private_callback_is_refused_with_a_problem(
    client: Any, buyer: Agent, url: str
) -> None:
    response = client.put(
        CALLBACK, data=json.dumps({"url": url}), content_type="application/json", **_auth(buyer)
    )
    assert response.status_code == 422
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "target_not_allowed"
    assert not AgentCallback.objects.exists()


# Signatures and answers ------------------------------------------------------------------------


def test_signatures_follow_standard_webhooks() -> None:
    # The published test vector of the Standard Webhooks libraries.
    headers = outbound.signature_headers(
        secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        message_id="msg_p5jXN8AQM9LWM0D4loKWxJek",
        body=b'{"test": 2432232314}',
        timestamp=1614265330,
    )
    assert headers == {
        "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
        "webhook-timestamp": "1614265330",
        "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    }


def test_a_new_secret_is_whsec_and_32_random_bytes() -> None:
    secret = outbound.new_webhook_secret()
    outbound.check_webhook_secret(secret)
    assert len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
    assert secret != outbound.new_webhook_secret()
    for bad in ("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!", "whsec_c2hvcnQ="):
        with pytest.raises(ValueError, match="secret"):
            outbound.check_webhook_secret(bad)


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, Outcome.DELIVERED),
        (201, Outcome.DELIVERED),
        (204, Outcome.DELIVERED),
        (408, Outcome.RETRY),
        (409, Outcome.RETRY),
        (429, Outcome.RETRY),
        (500, Outcome.RETRY),
        (503, Outcome.RETRY),
        (410, Outcome.GONE),
        (400, Outcome.REJECTED),
        (401, Outcome.REJECTED),
        (404, Outcome.REJECTED),
        (422, Outcome.REJECTED),
        (301, Outcome.REJECTED),
    ],
)
def test_answers_are_classified_as_protocol_section_8_says(status: int, outcome: Outcome) -> None:
    assert classify(status) is outcome


def test_retries_double_up_to_an_hour_and_span_about_a_day(settings: Any) -> None:
    settings.OANP_DELIVERY_RETRY_BASE_SECONDS = 30
    settings.OANP_DELIVERY_RETRY_CAP_SECONDS = 3600
    settings.OANP_DELIVERY_MAX_ATTEMPTS = 31
    waits = [outbound.retry_wait(n) for n in range(1, 31)]
    assert waits[:4] == [30, 60, 120, 240]
    assert max(w for w in waits if w is not None) == 3600
    total = sum(w for w in waits if w is not None)
    assert 23 * 3600 < total < 25 * 3600
    assert outbound.retry_wait(31) is None
    assert outbound.retry_wait(1, asked=600) == 600  # Retry-After asks for longer
    assert outbound.retry_wait(1, asked=10**6) == 3600  # within the cap


# The handoff on agreement ----------------------------------------------------------------------


def _auth(agent: Agent) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {agent.api_key}"}


def _configure(merchant: Agent) -> services.Configured:
    return services.configure_handoff(
        merchant_agent_id=merchant.agent_id,
        endpoint="http://127.0.0.1:9/acp",
        api_key="acp_live_123",
    )


@pytest.mark.usefixtures("private_allowed")
def test_an_agreement_writes_its_handoff_with_the_checkout_body(
    client: Any, buyer: Agent, merchant: Agent
) -> None:
    _configure(merchant)
    run = ClientNegotiation(client, buyer, merchant, session_id="sess-body")
    run.open()
    log = run.finish()
    agree = log[-1]["envelope"]
    assert agree["type"] == "session.agree"
    handoff = Handoff.objects.get(session__session_id="sess-body")
    assert (handoff.state, handoff.attempts) == ("pending", 0)
    body = json.loads(handoff.body)
    item_id = body["line_items"][0]["id"]
    assert item_id.startswith("oanp-item-")
    assert body == {
        "line_items": [{"id": item_id, "unit_amount": 34000}],
        "currency": "usd",
        "capabilities": {},
        "quote_id": "sess-body",
        "metadata": {
            "oanp_session_id": "sess-body",
            "oanp_session_digest": agree["payload"]["session_digest"],
            "oanp_agreement_jws": agree["payload"]["signature"],
            "oanp_kid": agree["payload"]["kid"],
            "oanp_jwks_uri": agree["payload"]["jwks_uri"],
        },
    }


@pytest.mark.usefixtures("private_allowed")
def test_the_item_sku_names_the_line_item(client: Any, buyer: Agent, merchant: Agent) -> None:
    _configure(merchant)
    run = ClientNegotiation(client, buyer, merchant, session_id="sess-sku")
    run.open(item={"route": "SFO-JFK", "sku": "SFOJFK-0428", "id": 7})
    run.finish()
    body = json.loads(Handoff.objects.get(session__session_id="sess-sku").body)
    assert body["line_items"][0]["id"] == "SFOJFK-0428"


def test_no_target_no_handoff(client: Any, buyer: Agent, merchant: Agent) -> None:
    run = ClientNegotiation(client, buyer, merchant, session_id="sess-no-target")
    run.open()
    run.finish()
    assert Session.objects.get(session_id="sess-no-target").phase == "AGREED"
    assert not Handoff.objects.exists()


@pytest.mark.usefixtures("private_allowed")
def test_the_handoff_rolls_back_with_the_agreement(
    client: Any, buyer: Agent, merchant: Agent
) -> None:
    _configure(merchant)
    run = ClientNegotiation(client, buyer, merchant, session_id="sess-rollback")
    run.open()
    run.run_until("offer.accept")
    key, envelope = run.peek()
    agent = AgentCredential.objects.get(agent_id=key.agent_id, role=key.role)

    class CommitFailed(Exception):
        pass

    def agree_then_fail() -> None:
        with transaction.atomic():
            services.receive_envelope(
                agent=agent, envelope=parse_envelope(json.dumps(envelope).encode())
            )
            assert Handoff.objects.filter(session__session_id="sess-rollback").exists()
            raise CommitFailed

    with pytest.raises(CommitFailed):
        agree_then_fail()
    assert not Handoff.objects.exists()
    assert Session.objects.get(session_id="sess-rollback").phase == "NEGOTIATING"


def test_the_checkout_must_carry_the_agreed_unit_amount() -> None:
    sent = json.dumps({"line_items": [{"id": "x", "unit_amount": 34000}], "currency": "usd"})

    def read(checkout: Any) -> tuple[str, str]:
        return read_checkout(sent, json.dumps(checkout).encode())

    assert read({"id": "cs_1", "line_items": [{"unit_amount": 34000}]}) == ("cs_1", "")
    base = {"item": {"id": "x", "quantity": 1}, "base_amount": 34000}
    assert read({"id": "cs_2", "currency": "usd", "line_items": [base]}) == ("cs_2", "")
    assert "33900 is not the agreed 34000" in read({"line_items": [{"unit_amount": 33900}]})[1]
    twice = {"item": {"id": "x", "quantity": 2}, "base_amount": 68000}
    assert "no unit amount" in read({"line_items": [twice]})[1]
    assert "no line item" in read({"id": "cs_3"})[1]
    assert "currency" in read({"currency": "EUR", "line_items": [{"unit_amount": 34000}]})[1]
    assert read_checkout(sent, b"<html>")[1] == "the checkout response is not JSON"


@pytest.mark.usefixtures("private_allowed")
def test_an_operator_redelivers_a_failed_handoff_from_the_admin(
    admin_client: Any, client: Any, buyer: Agent, merchant: Agent
) -> None:
    _configure(merchant)
    run = ClientNegotiation(client, buyer, merchant, session_id="sess-redeliver")
    run.open()
    run.finish()
    Handoff.objects.update(state="failed", attempts=31, next_attempt_at=None)
    handoff = Handoff.objects.get()
    changelist = reverse("admin:arbiter_app_handoff_changelist")
    answer = admin_client.post(
        changelist, {"action": "redeliver", "_selected_action": [handoff.pk]}, follow=True
    )
    assert answer.status_code == 200
    handoff.refresh_from_db()
    assert (handoff.state, handoff.attempts) == ("pending", 0)
    assert handoff.next_attempt_at is not None
    HandoffTarget.objects.update(disabled_at=handoff.created_at, disabled_reason="answered 410")
    with pytest.raises(ValueError, match="configure it again first"):
        services.redeliver_handoff(handoff=handoff)


# Configuration ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("private_allowed")
def test_the_command_prints_the_webhook_secret_once_and_keeps_it_encrypted(
    merchant: Agent,
) -> None:
    out = io.StringIO()
    call_command(
        "configure_handoff",
        "--merchant-agent-id",
        merchant.agent_id,
        "--endpoint",
        "http://127.0.0.1:9/acp",
        "--api-key",
        "acp_live_123",
        stdout=out,
    )
    printed = json.loads(out.getvalue())
    assert printed["merchant_agent_id"] == merchant.agent_id
    secret = printed["webhook_secret"]
    outbound.check_webhook_secret(secret)
    target = HandoffTarget.objects.get(merchant_agent_id=merchant.agent_id)
    assert secret.encode() not in bytes(target.webhook_secret_encrypted)
    assert b"acp_live_123" not in bytes(target.api_key_encrypted)
    assert outbound.unseal(target.webhook_secret_encrypted) == secret
    assert outbound.unseal(target.api_key_encrypted) == "acp_live_123"
    # Configuring again replaces the target; a given secret is kept as given.
    given = "whsec_" + base64.b64encode(b"k" * 32).decode()
    again = services.configure_handoff(
        merchant_agent_id=merchant.agent_id,
        endpoint="http://127.0.0.1:9/acp2",
        api_key="acp_live_456",
        webhook_secret=given,
    )
    assert again.secret == given
    assert HandoffTarget.objects.get().endpoint == "http://127.0.0.1:9/acp2"


@pytest.mark.usefixtures("private_allowed")
def test_an_agent_registers_reads_and_removes_its_callback(client: Any, buyer: Agent) -> None:
    assert client.get(CALLBACK, **_auth(buyer)).json()["code"] == "no_callback"
    put = client.put(
        CALLBACK,
        data=json.dumps({"url": "http://127.0.0.1:9/hook"}),
        content_type="application/json",
        **_auth(buyer),
    )
    assert put.status_code == 200, put.content
    secret = put.json()["secret"]
    assert put.json()["url"] == "http://127.0.0.1:9/hook"
    outbound.check_webhook_secret(secret)
    read = client.get(CALLBACK, **_auth(buyer))
    assert read.status_code == 200
    assert read.json() == {
        "url": "http://127.0.0.1:9/hook",
        "disabled_at": None,
        "disabled_reason": None,
    }
    stored = AgentCallback.objects.get(agent_id=buyer.agent_id, role="buyer")
    assert outbound.unseal(stored.secret_encrypted) == secret
    again = client.put(
        CALLBACK,
        data=json.dumps({"url": "http://127.0.0.1:9/hook"}),
        content_type="application/json",
        **_auth(buyer),
    )
    assert again.json()["secret"] != secret  # a fresh secret each time
    assert client.delete(CALLBACK, **_auth(buyer)).status_code == 204
    assert client.get(CALLBACK, **_auth(buyer)).status_code == 404
    assert client.delete(CALLBACK, **_auth(buyer)).status_code == 204


@pytest.mark.parametrize(
    ("body", "code"),
    [(b"{", "malformed_json"), (b'{"uri": "x"}', "schema_invalid"), (b"[1]", "schema_invalid")],
)
def test_a_bad_callback_body_is_refused(client: Any, buyer: Agent, body: bytes, code: str) -> None:
    response = client.put(CALLBACK, data=body, content_type="application/json", **_auth(buyer))
    assert response.status_code == 400
    assert response.json()["code"] == code


def test_the_callback_needs_a_key(client: Any) -> None:
    assert client.get(CALLBACK).status_code == 401
