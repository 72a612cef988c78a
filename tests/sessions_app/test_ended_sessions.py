"""An agreed session is over for the operators' pages too: no terminate button, a confirm page
that says there is nothing to terminate, and a POST that changes nothing (the closed case is in
test_terminate)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from arbiter_app.models import Session
from sessions_app.models import MemberRole, Membership
from tests.support.factories.agents import ClientNegotiation, make_agent

pytestmark = pytest.mark.django_db

SESSION = "sess-agreed"
TERMINATE = f"/sessions/{SESSION}/terminate/"


@pytest.fixture
def operator() -> Client:
    user = User.objects.create_user("operator", password="correct horse battery")
    Membership.objects.create(user=user, role=MemberRole.OPERATOR)
    browser = Client(HTTP_HOST="localhost")
    assert browser.login(username="operator", password="correct horse battery")
    return browser


@pytest.fixture
def agreed(client: Client) -> ClientNegotiation:
    buyer, merchant = make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant")
    run = ClientNegotiation(client, buyer, merchant, SESSION)
    run.open()
    run.finish()
    assert Session.objects.get(session_id=SESSION).phase == "AGREED"
    return run


def test_an_agreed_session_offers_no_termination(
    agreed: ClientNegotiation, operator: Client
) -> None:
    assert f'href="{TERMINATE}"' not in operator.get(f"/sessions/{SESSION}/").content.decode()

    confirm = operator.get(TERMINATE).content.decode()
    assert "This session has ended" in confirm
    assert "It is agreed: there is nothing to terminate." in confirm
    assert "Terminate session</button>" not in confirm

    head = len(agreed.log())
    answer = operator.post(TERMINATE, {"detail": "too late"})
    assert answer.status_code == 400
    assert "already ended" in answer.content.decode()
    assert len(agreed.log()) == head
    assert Session.objects.get(session_id=SESSION).phase == "AGREED"
