"""Merchant A learns nothing of merchant B's sessions: not in pages, not over WebSockets."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from oanp_site.asgi import application
from sessions_app.models import AgentProfile, MemberRole, Membership, Merchant
from tests.support.factories.agents import ClientNegotiation, make_agent

PASSWORD = "correct horse battery"


def merchant_member(name: str) -> tuple[User, Merchant]:
    merchant = Merchant.objects.create(name=name, slug=name)
    AgentProfile.objects.create(merchant=merchant, agent_id=f"agent-{name}", mode="external")
    user = User.objects.create_user(f"user-{name}", password=PASSWORD)
    Membership.objects.create(user=user, role=MemberRole.MERCHANT_MANAGER, merchant=merchant)
    return user, merchant


@pytest.fixture
def tenants(client: Client) -> dict[str, Any]:
    """Two merchants with a session each, negotiated by the same buyer."""
    buyer = make_agent("buyer-001", "buyer")
    for name in ("a", "b"):
        merchant_member(name)
        run = ClientNegotiation(
            client,
            buyer,
            make_agent(f"agent-{name}", "merchant"),
            session_id=f"sess-{name}",
            tag=f"{name}-",
        )
        run.open()
        run.finish()
    return {"a": "sess-a", "b": "sess-b"}


def signed_in(username: str) -> Client:
    browser = Client(HTTP_HOST="localhost")
    assert browser.login(username=username, password=PASSWORD)
    return browser


@pytest.mark.django_db
def test_the_list_shows_only_the_merchants_own_sessions(tenants: dict[str, str]) -> None:
    page = signed_in("user-a").get("/sessions/").content.decode()
    assert "sess-a" in page
    assert "sess-b" not in page


@pytest.mark.django_db
def test_another_merchants_session_page_does_not_exist(tenants: dict[str, str]) -> None:
    browser = signed_in("user-a")
    assert browser.get("/sessions/sess-a/").status_code == 200
    assert browser.get("/sessions/sess-b/").status_code == 404
    assert browser.get("/sessions/sess-none/").status_code == 404


@pytest.mark.django_db
def test_the_overview_counts_only_the_merchants_own_sessions(tenants: dict[str, str]) -> None:
    page = signed_in("user-a").get("/").content.decode()
    assert "sess-a" in page
    assert "sess-b" not in page


@pytest.mark.django_db
def test_an_operator_sees_both(tenants: dict[str, str]) -> None:
    user = User.objects.create_user("operator", password=PASSWORD)
    Membership.objects.create(user=user, role=MemberRole.OPERATOR)
    page = signed_in("operator").get("/sessions/").content.decode()
    assert "sess-a" in page
    assert "sess-b" in page


@pytest.mark.django_db
def test_signed_out_the_overview_is_the_sign_in_page(client: Client) -> None:
    response = client.get("/", HTTP_HOST="localhost")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


async def _socket(session_cookie: str, session_id: str) -> tuple[bool, Any]:
    communicator = WebsocketCommunicator(
        application,
        f"/ws/sessions/{session_id}/",
        headers=[
            (b"host", b"localhost"),
            (b"origin", b"http://localhost"),
            (b"cookie", f"sessionid={session_cookie}".encode()),
        ],
    )
    connected, code = await communicator.connect()
    await communicator.disconnect()
    return connected, code


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_websocket_to_another_merchants_session_is_refused(
    tenants: dict[str, str],
) -> None:
    browser = await sync_to_async(signed_in)("user-a")
    cookie = browser.cookies["sessionid"].value
    assert await _socket(cookie, "sess-a") == (True, None)
    connected, code = await _socket(cookie, "sess-b")
    assert not connected
    assert code == 4404


@pytest.mark.django_db
def test_the_head_of_another_merchants_session_does_not_exist(tenants: dict[str, str]) -> None:
    browser = signed_in("user-a")
    own = browser.get("/sessions/sess-a/head/")
    assert own.json() == {"head_seq": 9, "state": "AGREED"}
    assert browser.get("/sessions/sess-b/head/").status_code == 404
