"""A merchant configures its agent's ACP handoff target on the agent page and sends it a test."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from arbiter_app.deliveries import outbound
from arbiter_app.models import HandoffTarget
from sessions_app.models import AgentProfile, AuditEvent, MemberRole, Merchant
from sessions_app.templatetags.ago import when
from tests.arbiter_app.test_deliveries import Receiver, Reply, Request, acp_signed_by, signed_by
from tests.sessions_app.pages import error_summary_in, messages_in
from tests.support.factories.accounts import member, merchant, signed_in

pytestmark = pytest.mark.django_db

API_KEY = "acp_live_key_never_shown_9f3a"
ACP = "/agents/hosted-a/acp/"
TEST = "/agents/hosted-a/acp/test/"


@pytest.fixture
def alice(shop_a: Merchant, agent_a: AgentProfile) -> Client:
    return signed_in(member("alice", MemberRole.MERCHANT_MANAGER, shop_a))


@pytest.fixture
def acp_server() -> Iterator[Receiver]:
    """An ACP server on 127.0.0.1 that answers every POST with a 200 and a small JSON body."""

    def answer(request: Request) -> Reply:
        return 200, {}, b'{"id": "cs_test", "status": "not_ready_for_payment"}'

    server = Receiver(answer).start()
    yield server
    server.stop()


def configure(browser: Client, endpoint: str, **fields: str) -> Any:
    return browser.post(ACP, {"endpoint": endpoint, "api_key": API_KEY, **fields})


def test_a_loopback_target_is_configured_and_its_key_never_shown(
    private_allowed: None, alice: Client, acp_server: Receiver
) -> None:
    response = configure(alice, f"{acp_server.url}/acp")
    assert response.status_code == 302
    target = HandoffTarget.objects.get(merchant_agent_id="hosted-a")
    assert target.endpoint == f"{acp_server.url}/acp"
    page = alice.get("/agents/hosted-a/").content.decode()
    assert messages_in(page) == ["ACP handoff target saved."]
    assert f"<dt>Updated</dt><dd>{when(target.updated_at)}</dd>" in page
    assert "key set" in page
    assert API_KEY not in page
    # The generated secret is shown on the page after the save, and on that one only.
    secret = page.split('id="acp-secret" class="secret" value="', 1)[1].split('"', 1)[0]
    assert secret.startswith("whsec_")
    again = alice.get("/agents/hosted-a/").content.decode()
    assert secret not in again
    assert API_KEY not in again
    assert "key set" in again
    event = AuditEvent.objects.get(action="acp.configured", target="hosted-a")
    assert event.detail == {"endpoint": f"{acp_server.url}/acp", "secret": "generated"}
    assert API_KEY not in json.dumps(event.detail)
    assert secret not in json.dumps(event.detail)


def test_an_entered_secret_is_kept_and_not_shown(
    private_allowed: None, alice: Client, acp_server: Receiver
) -> None:
    secret = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODk="
    assert configure(alice, f"{acp_server.url}/acp", webhook_secret=secret).status_code == 302
    page = alice.get("/agents/hosted-a/").content.decode()
    assert secret not in page
    assert 'id="acp-secret"' not in page
    assert AuditEvent.objects.get(action="acp.configured").detail["secret"] == "entered"


def test_a_private_target_is_refused_with_the_reason(settings: Any, alice: Client) -> None:
    settings.OANP_ALLOW_PRIVATE_TARGETS = False
    response = configure(alice, "http://127.0.0.1:9/acp")
    assert response.status_code == 400
    page = response.content.decode()
    assert "The arbiter refused this target" in page
    assert "not a public address" in page
    assert API_KEY not in page  # not even back into the form that failed
    assert not HandoffTarget.objects.exists()
    assert not AuditEvent.objects.filter(action="acp.configured").exists()


def test_form_errors_name_the_field(private_allowed: None, alice: Client) -> None:
    response = alice.post(ACP, {"endpoint": "not a url", "api_key": ""})
    assert response.status_code == 400
    page = response.content.decode()
    summary = error_summary_in(page)
    assert "The ACP target was not saved. Please fix:" in summary
    assert '<a href="#id_endpoint">ACP endpoint: Enter a valid URL.</a>' in summary
    assert '<a href="#id_api_key">ACP API key: This field is required.</a>' in summary
    assert 'id="id_endpoint_error"' in page
    assert 'value="not a url"' in page  # kept, to be corrected
    bad_secret = configure(alice, "http://127.0.0.1:9/acp", webhook_secret="hunter2")
    refusal = "a webhook secret is &#x27;whsec_&#x27; followed by base64"
    assert refusal in bad_secret.content.decode()
    assert not HandoffTarget.objects.exists()


def test_send_test_posts_a_signed_test_marked_request_and_shows_the_result(
    private_allowed: None, alice: Client, acp_server: Receiver
) -> None:
    configure(alice, f"{acp_server.url}/acp")
    page = alice.get("/agents/hosted-a/").content.decode()
    secret = page.split('id="acp-secret" class="secret" value="', 1)[1].split('"', 1)[0]

    response = alice.post(TEST)
    assert response.status_code == 302
    [request] = acp_server.requests
    assert request.path == "/acp/checkout_sessions"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.headers["idempotency-key"].startswith("oanp-test-")
    assert request.headers["webhook-id"] == request.headers["idempotency-key"]
    assert request.headers["oanp-test"] == "true"
    assert signed_by(secret, request.headers, request.body)
    # The Standard Webhooks reference package agrees, as a merchant's receiver would use it.
    assert Webhook(secret).verify(request.body, request.headers) == json.loads(request.body)
    with pytest.raises(WebhookVerificationError):
        Webhook(outbound.new_webhook_secret()).verify(request.body, request.headers)
    assert acp_signed_by(secret, request.headers, request.body)
    tampered = request.body.replace(b'"oanp_test":true', b'"oanp_test":false')
    assert not acp_signed_by(secret, request.headers, tampered)
    assert not acp_signed_by(outbound.new_webhook_secret(), request.headers, request.body)
    body = json.loads(request.body)
    assert body["metadata"] == {"oanp_test": True}
    assert body["line_items"] == []  # nothing a server ignoring the marks could sell

    event = AuditEvent.objects.get(action="acp.tested", target="hosted-a")
    assert event.detail["status"] == 200
    assert event.detail["outcome"] == "delivered"
    assert isinstance(event.detail["latency_ms"], int)
    assert "cs_test" in event.detail["excerpt"]
    shown = alice.get("/agents/hosted-a/").content.decode()
    table = shown.split('id="acp-test"', 1)[1].split("</table>", 1)[0]
    assert "<td>200</td>" in table
    assert "accepted" in table
    assert f"{event.detail['latency_ms']} ms" in table
    assert "cs_test" in table


def test_send_test_records_an_endpoint_that_does_not_answer(
    private_allowed: None, alice: Client, acp_server: Receiver
) -> None:
    configure(alice, f"{acp_server.url}/acp")
    acp_server.stop()
    alice.post(TEST)
    event = AuditEvent.objects.get(action="acp.tested")
    assert event.detail["status"] is None
    assert event.detail["outcome"] == "retry"
    assert "could not be reached" in event.detail["error"]
    assert "Errno" not in event.detail["error"]
    assert "no answer" in alice.get("/agents/hosted-a/").content.decode()


def test_send_test_without_a_target_says_so(alice: Client) -> None:
    response = alice.post(TEST, follow=True)
    assert "No test sent: &#x27;hosted-a&#x27; has no handoff target." in response.content.decode()
    assert not AuditEvent.objects.filter(action="acp.tested").exists()


def test_another_merchant_can_neither_configure_nor_test(
    private_allowed: None, alice: Client, acp_server: Receiver
) -> None:
    configure(alice, f"{acp_server.url}/acp")
    bob: User = member("bob", MemberRole.MERCHANT_MANAGER, merchant("b"))
    other = signed_in(bob)
    assert configure(other, "http://127.0.0.1:9/evil").status_code == 404
    assert other.post(TEST).status_code == 404
    assert other.get("/agents/hosted-a/").status_code == 404
    assert HandoffTarget.objects.get().endpoint == f"{acp_server.url}/acp"
    assert acp_server.requests == []
    assert not AuditEvent.objects.filter(actor=bob).exists()


def test_an_operator_may_look_but_not_configure(
    private_allowed: None, alice: Client, acp_server: Receiver
) -> None:
    configure(alice, f"{acp_server.url}/acp")
    operator = signed_in(member("olga", MemberRole.OPERATOR))
    page = operator.get("/agents/hosted-a/").content.decode()
    assert "key set" in page
    assert 'id="acp-form"' not in page
    assert "Send test" not in page
    assert configure(operator, "http://127.0.0.1:9/x").status_code == 403
    assert operator.post(TEST).status_code == 403
    assert acp_server.requests == []


def test_an_admin_configures_any_merchants_agent(
    private_allowed: None, agent_a: AgentProfile, acp_server: Receiver
) -> None:
    admin = signed_in(member("ada", MemberRole.ADMIN))
    assert configure(admin, f"{acp_server.url}/acp").status_code == 302
    assert admin.post(TEST).status_code == 302
    assert len(acp_server.requests) == 1
