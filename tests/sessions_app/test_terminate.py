"""An operator terminates a live session: the arbiter closes it as ``operator_terminated``,
the action is audited, and merchants can neither see the button nor use it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from arbiter_app.models import Session
from sessions_app.models import AgentProfile, AuditEvent, MemberRole, Membership, Merchant
from tests.sessions_app.pages import error_summary_in, messages_in
from tests.support.factories.agents import Agent, ClientNegotiation, make_agent

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"
SESSION = "sess-to-end"
TERMINATE = f"/sessions/{SESSION}/terminate/"


def member(username: str, role: str, merchant: Merchant | None = None) -> Client:
    user = User.objects.create_user(username, password=PASSWORD)
    Membership.objects.create(user=user, role=role, merchant=merchant)
    browser = Client(HTTP_HOST="localhost")
    assert browser.login(username=username, password=PASSWORD)
    return browser


@pytest.fixture
def live(client: Client, buyer: Agent) -> ClientNegotiation:
    """A session in its first round: the buyer proposed, the merchant has yet to answer."""
    merchant = Merchant.objects.create(name="Skyways", slug="skyways")
    AgentProfile.objects.create(merchant=merchant, agent_id="merchant-sfo", mode="external")
    run = ClientNegotiation(client, buyer, make_agent("merchant-sfo", "merchant"), SESSION)
    run.open()
    run.run_until("offer.counter")
    return run


@pytest.fixture
def buyer(db: None) -> Agent:
    return make_agent("buyer-001", "buyer")


def test_an_operator_terminates_a_live_session(live: ClientNegotiation) -> None:
    operator = member("operator", MemberRole.OPERATOR)
    page = operator.get(f"/sessions/{SESSION}/").content.decode()
    assert f'href="{TERMINATE}"' in page

    confirm = operator.get(TERMINATE)
    assert confirm.status_code == 200
    assert "csrfmiddlewaretoken" in confirm.content.decode()
    assert Session.objects.get(session_id=SESSION).phase == "NEGOTIATING"  # GET only asks

    answer = operator.post(TERMINATE, {"detail": "counterparty reported abuse"})
    assert answer.status_code == 302
    assert answer["Location"] == f"/sessions/{SESSION}/"

    session = Session.objects.get(session_id=SESSION)
    assert (session.phase, session.close_reason) == ("CLOSED", "operator_terminated")
    assert session.next_deadline is None
    close = live.log()[-1]["envelope"]
    assert close["type"] == "session.close"
    assert close["sender"]["role"] == "arbiter"
    assert close["payload"]["reason"] == "operator_terminated"
    assert close["payload"]["detail"] == "counterparty reported abuse"

    event = AuditEvent.objects.get(action="session.terminate")
    assert event.actor.get_username() == "operator"
    assert event.target == SESSION
    assert event.detail == {"detail": "counterparty reported abuse", "closed": True}
    # Ended, the session says so once and offers no button; a second POST changes nothing.
    page = operator.get(f"/sessions/{SESSION}/").content.decode()
    assert messages_in(page) == [f"Session {SESSION} terminated."]
    assert f'href="{TERMINATE}"' not in page
    again = operator.post(TERMINATE, {"detail": ""})
    assert again.status_code == 400
    summary = error_summary_in(again.content.decode())
    assert "Nothing was terminated:" in summary
    assert "The session had already ended; nothing was changed." in summary
    assert len(live.log()) == session.head_seq


def test_a_reason_too_long_is_in_the_error_summary_kept_and_terminates_nothing(
    live: ClientNegotiation,
) -> None:
    operator = member("operator", MemberRole.OPERATOR)
    reason = "abuse " * 200
    answer = operator.post(TERMINATE, {"detail": reason})
    assert answer.status_code == 400
    page = answer.content.decode()
    assert '<a href="#id_detail">' in error_summary_in(page)
    assert 'aria-describedby="id_detail_error"' in page
    assert f">\n{reason}</textarea>" in page
    assert Session.objects.get(session_id=SESSION).phase == "NEGOTIATING"
    assert not AuditEvent.objects.filter(action="session.terminate").exists()


def test_an_admin_may_terminate_without_a_reason(live: ClientNegotiation) -> None:
    admin = member("admin", MemberRole.ADMIN)
    assert admin.post(TERMINATE).status_code == 302
    close = live.log()[-1]["envelope"]["payload"]
    assert close["reason"] == "operator_terminated"
    assert close["detail"] == "terminated by the arbiter's operator"


def test_terminating_requires_csrf(live: ClientNegotiation) -> None:
    User.objects.create_user("operator", password=PASSWORD)
    Membership.objects.create(user=User.objects.get(username="operator"), role=MemberRole.OPERATOR)
    strict = Client(HTTP_HOST="localhost", enforce_csrf_checks=True)
    assert strict.login(username="operator", password=PASSWORD)
    assert strict.post(TERMINATE).status_code == 403
    assert Session.objects.get(session_id=SESSION).phase == "NEGOTIATING"


@pytest.mark.parametrize("own", [True, False], ids=["own session", "another's session"])
def test_a_merchant_neither_sees_nor_uses_terminate(live: ClientNegotiation, own: bool) -> None:
    merchant = Merchant.objects.get(slug="skyways")
    if not own:
        merchant = Merchant.objects.create(name="Other", slug="other")
    browser = member("merchant-user", MemberRole.MERCHANT_MANAGER, merchant)
    if own:
        page = browser.get(f"/sessions/{SESSION}/").content.decode()
        assert "Terminate" not in page
    assert browser.get(TERMINATE).status_code in (403, 404)
    assert browser.post(TERMINATE, {"detail": "no"}).status_code in (403, 404)
    assert Session.objects.get(session_id=SESSION).phase == "NEGOTIATING"
    assert not AuditEvent.objects.exists()


def test_signed_out_terminate_is_the_sign_in_page(live: ClientNegotiation) -> None:
    answer = Client(HTTP_HOST="localhost").post(TERMINATE)
    assert answer.status_code == 302
    assert answer["Location"].startswith("/login/")
    assert Session.objects.get(session_id=SESSION).phase == "NEGOTIATING"
