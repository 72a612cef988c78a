"""The agents list's figures per agent, and the ACP form as a settings form."""

from __future__ import annotations

import socket
from typing import Any

import httpx
import pytest
from django.test import Client

from arbiter_app.deliveries import outbound
from arbiter_app.models import HandoffTarget
from sessions_app import selectors, tenancy
from sessions_app.models import AgentProfile, AuditEvent, MemberRole, Merchant
from tests.sessions_app.test_analytics import hosted_session
from tests.support.factories.accounts import HostedNegotiation, hosted_agent, member, merchant

pytestmark = pytest.mark.django_db

ACP = "/agents/hosted-a/acp/"
KEY = "acp_live_key_kept_7c1e"
SECRET = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODk="


# Per-agent figures ---------------------------------------------------------------------------


def test_each_agent_has_its_sessions_agreement_rate_and_last_activity_within_scope(
    client: Client, shop_a: Merchant, agent_a: AgentProfile, django_assert_num_queries: Any
) -> None:
    hosted_agent(shop_a, "hosted-idle")
    hosted_agent(merchant("b"), "hosted-b")
    hosted_session(client, "hosted-a", "sess-a-1")
    HostedNegotiation(client, "hosted-a", session_id="sess-a-2").open()
    hosted_session(client, "hosted-b", "sess-b-1")

    alice = tenancy.scope_of(member("alice", MemberRole.MERCHANT_MANAGER, shop_a))
    assert alice is not None
    with django_assert_num_queries(2):  # the agents, then one grouped query: no N+1
        rows = {row.agent.agent_id: row for row in selectors.agent_rows(alice)}
    assert set(rows) == {"hosted-a", "hosted-idle"}  # another merchant's agent is not listed
    a = rows["hosted-a"]
    assert (a.sessions, a.agreed, a.agreement_rate) == (2, 1, 0.5)
    assert a.last_activity is not None
    assert (rows["hosted-idle"].sessions, rows["hosted-idle"].agreement_rate) == (0, None)

    admin = tenancy.scope_of(member("ada", MemberRole.ADMIN))
    assert admin is not None
    everyone = {row.agent.agent_id: row for row in selectors.agent_rows(admin)}
    assert (everyone["hosted-b"].sessions, everyone["hosted-b"].agreement_rate) == (1, 1.0)
    assert everyone["hosted-a"].sessions == 2


def test_the_list_shows_the_figures(client: Client, browser: Client, agent_a: AgentProfile) -> None:
    hosted_session(client, "hosted-a", "sess-a-1")
    HostedNegotiation(client, "hosted-a", session_id="sess-a-2").open()
    page = browser.get("/agents/").content.decode()
    row = page.split('href="/agents/hosted-a/"', 1)[1].split("</tr>", 1)[0]
    assert "<td>2</td>" in row
    assert "50 %" in row
    assert "data-relative" in row


# The ACP form --------------------------------------------------------------------------------


@pytest.fixture
def configured(private_allowed: None, browser: Client, agent_a: AgentProfile) -> HandoffTarget:
    response = browser.post(
        ACP, {"endpoint": "http://127.0.0.1:9/acp", "api_key": KEY, "webhook_secret": SECRET}
    )
    assert response.status_code == 302
    return HandoffTarget.objects.get()


def form_of(page: str) -> str:
    return page.split('<details id="acp-settings"', 1)[1].split("</details>", 1)[0]


def test_the_form_is_open_for_a_first_target(browser: Client, agent_a: AgentProfile) -> None:
    form = form_of(browser.get("/agents/hosted-a/").content.decode())
    assert form.startswith(" open>")
    assert "new_secret" not in form  # nothing to renew yet


def test_the_form_is_folded_and_prefilled_once_set_never_with_secrets(
    browser: Client, configured: HandoffTarget
) -> None:
    form = form_of(browser.get("/agents/hosted-a/").content.decode())
    assert form.startswith(">")
    assert 'value="http://127.0.0.1:9/acp"' in form
    assert KEY not in form
    assert SECRET not in form
    assert form.count("Leave empty to keep the current one.") == 2


def test_empty_key_and_secret_keep_the_stored_ones(
    browser: Client, configured: HandoffTarget
) -> None:
    response = browser.post(ACP, {"endpoint": "http://127.0.0.1:9/other", "api_key": ""})
    assert response.status_code == 302
    target = HandoffTarget.objects.get()
    assert target.endpoint == "http://127.0.0.1:9/other"
    assert outbound.unseal(target.api_key_encrypted) == KEY
    assert outbound.unseal(target.webhook_secret_encrypted) == SECRET
    assert 'id="acp-secret"' not in browser.get("/agents/hosted-a/").content.decode()
    saved = AuditEvent.objects.filter(action="acp.configured").latest("pk")
    assert saved.detail["secret"] == "kept"


def test_a_new_secret_is_generated_on_request_and_shown_once(
    browser: Client, configured: HandoffTarget
) -> None:
    browser.post(ACP, {"endpoint": "http://127.0.0.1:9/acp", "new_secret": "on"})
    renewed = outbound.unseal(HandoffTarget.objects.get().webhook_secret_encrypted)
    assert renewed != SECRET
    assert renewed in browser.get("/agents/hosted-a/").content.decode()


def test_an_unknown_host_is_a_sentence_by_the_endpoint_and_the_typing_is_kept(
    settings: Any, browser: Client, agent_a: AgentProfile
) -> None:
    settings.OANP_ALLOW_PRIVATE_TARGETS = False
    response = browser.post(
        ACP, {"endpoint": "https://shop.invalid/acp", "api_key": KEY, "webhook_secret": SECRET}
    )
    assert response.status_code == 400
    form = form_of(response.content.decode())
    assert form.startswith(" open>")
    assert "The host shop.invalid could not be found." in form
    assert "Errno" not in form
    assert 'value="https://shop.invalid/acp"' in form
    assert KEY not in form
    assert SECRET not in form
    assert 'id="acp-retype"' in form  # why the key and secret must be typed again
    assert not HandoffTarget.objects.exists()


def test_an_unreachable_host_reads_as_a_sentence() -> None:
    request = httpx.Request("POST", "https://shop.example/acp")
    slow = httpx.ConnectTimeout("timed out", request=request)
    assert outbound.failure(slow, host="shop.example", timeout=10.0) == (
        "The host shop.example did not answer within 10 s."
    )
    missing = httpx.ConnectError("[Errno -2] Name or service not known", request=request)
    missing.__cause__ = socket.gaierror(-2, "Name or service not known")
    assert outbound.failure(missing, host="shop.example", timeout=10.0) == (
        "The host shop.example could not be found."
    )
