"""A hosted merchant agent reveals its limits after a session ends when, and only when, its
merchant chose to: through the arbiter's reveal service, once, whatever runs it again."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from arbiter_app import selectors as arbiter
from arbiter_app import services as arbiter_services
from arbiter_app.models import Session
from oanp.wire.canonical import canonical_bytes
from oanp.wire.errors import AlreadyRevealed
from sessions_app import hosted_agents, services, tasks
from sessions_app.models import AgentProfile, AuditEvent, HostedSession, MemberRole, Merchant
from tests.sessions_app.test_agents import agent_form
from tests.support.factories.accounts import (
    HostedNegotiation,
    admin,
    hosted_agent,
    member,
    merchant,
    signed_in,
)

pytestmark = pytest.mark.django_db

SESSION = "sess-hosted"


@pytest.fixture
def shop() -> Merchant:
    return merchant("sfo")


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[Any]]]:
    """The tasks the runner queues, by name and arguments, instead of sending them."""
    sent: list[tuple[str, list[Any]]] = []

    def enqueue(name: str, *, args: list[Any], about: str) -> bool:
        sent.append((name.rsplit(".", 1)[1], args))
        return True

    monkeypatch.setattr(hosted_agents, "enqueue", enqueue)
    return sent


def played(client: Client) -> HostedNegotiation:
    negotiation = HostedNegotiation(client, "hosted-sfo")
    negotiation.play(nudge=lambda: hosted_agents.answer(SESSION))
    return negotiation


def buyer_reveals(client: Client, negotiation: HostedNegotiation) -> None:
    response = client.post(
        f"/oanp/v0.1/sessions/{SESSION}/reveal",
        data=json.dumps(negotiation.buyer.reveal()),
        content_type="application/json",
        headers=negotiation.buyer_key.headers,
    )
    assert response.status_code == 200, response.content


def session_page(shop: Merchant) -> str:
    page = signed_in(member("alice", MemberRole.MERCHANT_MANAGER, shop)).get(
        f"/sessions/{SESSION}/"
    )
    assert page.status_code == 200
    return str(page.content.decode())


def cell(html: str, name: str) -> str:
    return html.split(f'id="{name}">', 1)[1].split("</td>", 1)[0]


def test_the_end_queues_the_reveal_which_goes_in_once_and_fills_the_zone(
    client: Client, shop: Merchant, queued: list[tuple[str, list[Any]]]
) -> None:
    hosted_agent(shop, reveal_after_end=True)
    negotiation = played(client)
    log = negotiation.log()
    assert log[-1]["envelope"]["type"] == "session.agree"
    # The hook as the arbiter calls it after the commits: the ending commit queues the reveal.
    hosted_agents.on_entries_committed(
        None, session_id=SESSION, merchant_agent_id="hosted-sfo", entries=log[:1]
    )
    assert ("reveal_after_end", [SESSION]) not in queued
    hosted_agents.on_entries_committed(
        None, session_id=SESSION, merchant_agent_id="hosted-sfo", entries=log[-2:]
    )
    assert ("reveal_after_end", [SESSION]) in queued

    assert tasks.reveal_after_end.apply(args=[SESSION]).get() is True
    session = Session.objects.get(session_id=SESSION)
    revealed = arbiter.revealed_constraints(session)
    assert revealed["merchant"]["floor_price"] == 280
    assert json.loads(session.reveals)["merchant"]["breaches"] == []
    # Again, by the task or the sweep: nothing more goes in, nothing fails.
    assert tasks.reveal_after_end.apply(args=[SESSION]).get() is False
    assert tasks.sweep_reveals.apply().get() == 0
    assert HostedSession.objects.get(session_id=SESSION).reveal_done_at is not None
    # The arbiter itself refuses a second reveal of the merchant's.
    with pytest.raises(AlreadyRevealed):
        arbiter_services.reveal_constraints(
            session=session,
            agent=services.hosted_credential("hosted-sfo"),
            data=canonical_bytes({"constraints": {}, "salt": "x"}),
        )

    buyer_reveals(client, negotiation)
    html = session_page(shop)
    assert cell(html, "zone") == "[280, 420], 140 wide"
    assert 'class="zone"' in html
    assert cell(html, "merchant-surplus") == "60 (42.9 %)"


def test_without_the_merchants_choice_there_is_no_reveal(
    client: Client, shop: Merchant, queued: list[tuple[str, list[Any]]]
) -> None:
    hosted_agent(shop)
    negotiation = played(client)
    log = negotiation.log()
    hosted_agents.on_entries_committed(
        None, session_id=SESSION, merchant_agent_id="hosted-sfo", entries=log[-2:]
    )
    assert [name for name, _ in queued if name == "reveal_after_end"] == []
    assert hosted_agents.reveal_after_end(SESSION) is False
    assert hosted_agents.sweep_reveals() == 0
    assert "merchant" not in arbiter.revealed_constraints(Session.objects.get(session_id=SESSION))
    buyer_reveals(client, negotiation)
    html = session_page(shop)
    assert cell(html, "zone") == "needs both reveals"
    assert 'class="zone"' not in html


def test_a_choice_withdrawn_before_the_end_is_respected(client: Client, shop: Merchant) -> None:
    profile = hosted_agent(shop, reveal_after_end=True)
    negotiation = HostedNegotiation(client, "hosted-sfo")
    negotiation.open()
    hosted_agents.answer(SESSION)
    AgentProfile.objects.filter(pk=profile.pk).update(reveal_after_end=False)
    negotiation.play(nudge=lambda: hosted_agents.answer(SESSION))
    assert hosted_agents.reveal_after_end(SESSION) is False
    assert "merchant" not in arbiter.revealed_constraints(Session.objects.get(session_id=SESSION))


def test_a_choice_made_mid_session_waits_for_the_next_session(
    client: Client, shop: Merchant
) -> None:
    profile = hosted_agent(shop)
    negotiation = HostedNegotiation(client, "hosted-sfo")
    negotiation.open()
    hosted_agents.answer(SESSION)
    AgentProfile.objects.filter(pk=profile.pk).update(reveal_after_end=True)
    negotiation.play(nudge=lambda: hosted_agents.answer(SESSION))
    assert hosted_agents.sweep_reveals() == 0
    assert "merchant" not in arbiter.revealed_constraints(Session.objects.get(session_id=SESSION))


def test_the_sweep_sends_a_reveal_whose_task_was_lost(client: Client, shop: Merchant) -> None:
    hosted_agent(shop, reveal_after_end=True)
    negotiation = HostedNegotiation(client, "hosted-sfo")
    negotiation.open()
    hosted_agents.answer(SESSION)
    # Not ended yet: nothing to reveal.
    assert hosted_agents.sweep_reveals() == 0
    assert hosted_agents.reveal_after_end(SESSION) is False
    negotiation.play(nudge=lambda: hosted_agents.answer(SESSION))
    assert hosted_agents.sweep_reveals() == 1
    assert hosted_agents.sweep_reveals() == 0
    revealed = arbiter.revealed_constraints(Session.objects.get(session_id=SESSION))
    assert revealed["merchant"]["floor_price"] == 280


def test_the_setting_is_off_by_default_and_the_merchants_to_turn_on(
    browser: Client, shop_a: Merchant
) -> None:
    assert browser.post("/agents/new/", agent_form()).status_code == 302
    profile = AgentProfile.objects.get(agent_id="hosted-a")
    assert profile.reveal_after_end is False
    page = browser.get("/agents/hosted-a/").content.decode()
    assert '<dd id="agent-reveal-after-end">no (kept sealed)</dd>' in page
    form = browser.get("/agents/hosted-a/edit/").content.decode()
    assert "Reveal my floor after the session ends" in form
    assert 'name="reveal_after_end"' in form
    assert 'name="reveal_after_end" checked' not in form

    edited = agent_form(reveal_after_end="on", floor_price="", ideal_price="")
    del edited["agent_id"]
    assert browser.post("/agents/hosted-a/edit/", edited).status_code == 302
    profile.refresh_from_db()
    assert profile.reveal_after_end is True
    event = AuditEvent.objects.filter(action="agent.updated").latest("at")
    assert event.detail["changed"] == ["reveal_after_end"]
    assert event.detail["reveal_after_end"] is True
    page = browser.get("/agents/hosted-a/").content.decode()
    assert "yes, once each session that opened with this on has ended" in page
    form = browser.get("/agents/hosted-a/edit/").content.decode()
    assert "checked" in form.split('name="reveal_after_end"', 1)[1].split(">", 1)[0]


def test_an_edit_that_does_not_say_so_turns_the_reveal_off(shop: Merchant) -> None:
    profile = services.update_agent(
        actor=admin(),
        profile=hosted_agent(shop, reveal_after_end=True),
        display_name="",
        mode="hosted",
        strategy="reference",
        limits=None,
    )
    # An edit that does not say so turns the reveal off: revealing is never a default.
    assert profile.reveal_after_end is False
