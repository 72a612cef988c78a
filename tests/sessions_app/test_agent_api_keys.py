"""The agent page's API keys: an expiry chosen when issuing, the last use shown, a copy button
for the new key, a revoke that asks first and says it is done, and the merchant recorded as
every key's owner."""

from __future__ import annotations

import io
import json
from datetime import UTC, timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from arbiter_app import credential_cache
from arbiter_app.models import AgentCredential
from sessions_app import services
from sessions_app.models import AgentProfile, AuditEvent, MemberRole, Merchant
from sessions_app.templatetags.ago import when
from tests.sessions_app.pages import error_summary_in, messages_in
from tests.support.api import COMMITS, problem
from tests.support.factories.accounts import member, signed_in
from tests.support.factories.agents import Agent, post
from tests.support.factories.sessions import ITEM, envelope_json

pytestmark = pytest.mark.django_db

PROBE = "/oanp/v0.1/sessions/none"


def issued_key(page: str) -> str:
    start = page.index('id="issued-key"')
    return page[start:].split('value="', 1)[1].split('"', 1)[0]


def test_a_key_issued_to_expire_says_when_and_the_api_refuses_it_after(
    browser: Client, agent_a: AgentProfile
) -> None:
    before = timezone.now()
    answer = browser.post("/agents/hosted-a/keys/", {"label": "ci", "expires": "30d"}, follow=True)
    page = answer.content.decode()
    credential = AgentCredential.objects.get(agent_id="hosted-a", label="ci")
    assert credential.expires_at is not None
    assert (
        before + timedelta(days=30) <= credential.expires_at <= timezone.now() + timedelta(days=30)
    )
    assert messages_in(page) == [f"Key {credential.prefix} issued."]
    assert f'datetime="{credential.expires_at:%Y-%m-%dT%H:%M:%S}' in page
    event = AuditEvent.objects.get(action="key.issued")
    assert event.detail["expires_at"] == credential.expires_at.isoformat()
    # The copy button is in the page for scripts to reveal; without them the field is there.
    assert 'data-copy="issued-key" hidden' in page
    assert "js/copy.js" in page

    api_key = issued_key(page)
    headers = {"Authorization": f"Bearer {api_key}"}
    assert browser.get(PROBE, headers=headers).status_code == 404
    AgentCredential.objects.filter(pk=credential.pk).update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )
    credential_cache.forget_all()
    assert browser.get(PROBE, headers=headers).status_code == 401
    listed = browser.get("/agents/hosted-a/").content.decode()
    assert '<span class="badge warn">expired</span>' in listed
    assert f"Revoke key {credential.prefix}" not in listed


def test_a_key_issued_without_expiry_never_expires(browser: Client, agent_a: AgentProfile) -> None:
    browser.post("/agents/hosted-a/keys/", {"label": "forever"})
    assert AgentCredential.objects.get(label="forever").expires_at is None


def test_an_unknown_expiry_is_a_form_error_in_the_summary_and_issues_nothing(
    browser: Client, agent_a: AgentProfile
) -> None:
    answer = browser.post("/agents/hosted-a/keys/", {"label": "x", "expires": "forever"})
    assert answer.status_code == 400
    page = answer.content.decode()
    summary = page[page.index("data-error-summary") :]
    assert 'href="#id_expires"' in summary.split("</div>", 1)[0]
    assert "Select a valid choice. forever is not one of the available choices." in summary
    # What was typed stays, and the field points at its error.
    assert 'name="label" value="x"' in page
    assert 'aria-describedby="id_expires_helptext id_expires_error"' in page
    assert 'id="id_expires_error"' in page
    assert not AgentCredential.objects.filter(label="x").exists()
    assert not AuditEvent.objects.filter(action="key.issued").exists()


def test_the_last_use_shows_once_the_key_has_opened_the_api(
    browser: Client, agent_a: AgentProfile, alice: User
) -> None:
    issued = services.issue_key(actor=alice, profile=agent_a, label="ci")
    row = browser.get("/agents/hosted-a/").content.decode().split(issued.credential.prefix, 1)[1]
    assert '<td class="last-used">never</td>' in row.split("</tr>", 1)[0]
    browser.get(PROBE, headers={"Authorization": f"Bearer {issued.api_key}"})
    issued.credential.refresh_from_db()
    assert issued.credential.last_used_at is not None
    row = browser.get("/agents/hosted-a/").content.decode().split(issued.credential.prefix, 1)[1]
    assert when(issued.credential.last_used_at) in row.split("</tr>", 1)[0]


def test_revoking_asks_first_and_a_get_or_an_unconfirmed_post_changes_nothing(
    browser: Client, agent_a: AgentProfile, alice: User
) -> None:
    issued = services.issue_key(actor=alice, profile=agent_a, label="ci")
    revoke = f"/agents/hosted-a/keys/{issued.credential.pk}/revoke/"
    page = browser.get("/agents/hosted-a/").content.decode()
    assert f'<a class="button danger" href="{revoke}"' in page
    for answer in (
        browser.get(revoke),
        browser.post(revoke),
        browser.post(revoke, {"confirmed": "no"}),
    ):
        assert answer.status_code == 200
        confirm = answer.content.decode()
        assert "Are you sure?" in confirm
        assert '<input type="hidden" name="confirmed" value="yes">' in confirm
        assert f"Revoke key {issued.credential.prefix}</button>" in confirm
    issued.credential.refresh_from_db()
    assert issued.credential.revoked_at is None
    assert not AuditEvent.objects.filter(action="key.revoked").exists()
    headers = {"Authorization": f"Bearer {issued.api_key}"}
    assert browser.get(PROBE, headers=headers).status_code == 404

    done = browser.post(revoke, {"confirmed": "yes"}, follow=True)
    assert done.redirect_chain == [("/agents/hosted-a/", 302)]
    page = done.content.decode()
    assert messages_in(page) == [f"Key {issued.credential.prefix} revoked."]
    issued.credential.refresh_from_db()
    assert f'<span class="badge bad">revoked</span> {when(issued.credential.revoked_at)}' in page
    assert browser.get(PROBE, headers=headers).status_code == 401
    # Shown once: the next page has no message left.
    assert messages_in(browser.get("/agents/hosted-a/").content.decode()) == []


def test_the_hosted_runners_key_is_refused_in_the_error_summary_and_stays(
    browser: Client, agent_a: AgentProfile
) -> None:
    hosted = services.hosted_credential(agent_a.agent_id)
    answer = browser.post(f"/agents/hosted-a/keys/{hosted.pk}/revoke/", {"confirmed": "yes"})
    assert answer.status_code == 400
    summary = error_summary_in(answer.content.decode())
    assert "Nothing was revoked:" in summary
    assert f"Key {hosted.prefix} was not revoked: the hosted runner's key is never shown" in summary
    hosted.refresh_from_db()
    assert hosted.revoked_at is None
    assert not AuditEvent.objects.filter(action="key.revoked").exists()


def test_the_keys_table_shows_its_times_relative_with_the_exact_utc_on_hover(
    browser: Client, agent_a: AgentProfile, alice: User
) -> None:
    issued = services.issue_key(
        actor=alice, profile=agent_a, label="ci", lifetime=timedelta(days=30)
    )
    row = browser.get("/agents/hosted-a/").content.decode().split(issued.credential.prefix, 1)[1]
    row = row.split("</tr>", 1)[0]
    created, expires = issued.credential.created_at, issued.credential.expires_at
    assert expires is not None
    assert f"<td>{when(created)}</td>" in row
    assert f"<td>{when(expires)}</td>" in row
    assert f'title="{expires.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC" data-relative' in row


def test_revoking_requires_a_manager(agent_a: AgentProfile, alice: User) -> None:
    issued = services.issue_key(actor=alice, profile=agent_a, label="ci")
    operator = signed_in(member("olga", MemberRole.OPERATOR))
    revoke = f"/agents/hosted-a/keys/{issued.credential.pk}/revoke/"
    assert operator.get(revoke).status_code == 403
    assert operator.post(revoke, {"confirmed": "yes"}).status_code == 403
    issued.credential.refresh_from_db()
    assert issued.credential.revoked_at is None


def test_the_merchants_keys_name_it_their_owner_so_its_own_buyers_cannot_open_with_them(
    browser: Client, client: Client, agent_a: AgentProfile, shop_a: Merchant
) -> None:
    browser.post("/agents/hosted-a/keys/", {"label": "ci"})
    issued = AgentCredential.objects.get(label="ci")
    hosted = services.hosted_credential(agent_a.agent_id)
    assert (issued.owner, hosted.owner) == (shop_a.slug, shop_a.slug)
    # A buyer an operator issues to the same name is one of the merchant's own agents.
    out = io.StringIO()
    call_command(
        "create_agent",
        *("--role", "buyer", "--agent-id", "buyer-of-a", "--owner", shop_a.slug),
        stdout=out,
    )
    buyer = Agent("buyer-of-a", "buyer", json.loads(out.getvalue())["api_key"])
    payload = {
        "merchant_agent_id": "hosted-a",
        "item": ITEM,
        "currency": "USD",
        "constraints_commit": COMMITS["buyer"],
    }
    opening = envelope_json("session.open", payload, agent="buyer-of-a", session_id="sess-own")
    problem(post(client, buyer, opening), 422, "self_dealing")
