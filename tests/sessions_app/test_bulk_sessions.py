"""Bulk actions on a selection of the sessions list: operators and admins terminate exactly
the selected live sessions behind one confirmation, each audited; admins export a selection
through the export machinery; nobody else does either, and a bad selection changes nothing."""

from __future__ import annotations

import pytest
from django.test import Client

from arbiter_app.models import Session
from sessions_app.exports import sessions_for
from sessions_app.models import AuditEvent, Export, MemberRole
from tests.support.factories.accounts import member, merchant, signed_in
from tests.support.factories.agents import ClientNegotiation, make_agent

pytestmark = pytest.mark.django_db

LIVE = ["bulk-1", "bulk-2", "bulk-3"]


@pytest.fixture
def sessions(client: Client) -> None:
    """Three live sessions and one agreed, between buyer-001 and merchant-sfo."""
    buyer, seller = make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant")
    for n, session_id in enumerate(LIVE):
        ClientNegotiation(client, buyer, seller, session_id=session_id, tag=f"{n}-").open()
    agreed = ClientNegotiation(client, buyer, seller, session_id="bulk-agreed", tag="a-")
    agreed.open()
    agreed.finish()


def phases() -> dict[str, str]:
    return dict(Session.objects.values_list("session_id", "phase"))


@pytest.mark.usefixtures("sessions")
def test_an_operator_terminates_exactly_the_selected_live_sessions_after_confirming() -> None:
    browser = signed_in(member("op", MemberRole.OPERATOR))
    list_page = browser.get("/sessions/").content.decode()
    assert 'name="session" value="bulk-1"' in list_page
    before = phases()
    asked = browser.post("/selection/terminate/", {"session": ["bulk-1", "bulk-3"]})
    assert asked.status_code == 200
    page = asked.content.decode()
    assert "Terminate 2 live sessions?" in page
    assert "bulk-1" in page
    assert "bulk-3" in page
    assert "bulk-2" not in page
    assert phases() == before
    done = browser.post(
        "/selection/terminate/",
        {"session": ["bulk-1", "bulk-3"], "confirm": "yes", "detail": "cleaning up"},
    )
    assert done.status_code == 302
    after = phases()
    assert after["bulk-1"] == after["bulk-3"] == "CLOSED"
    assert after["bulk-2"] == before["bulk-2"]
    assert after["bulk-agreed"] == "AGREED"
    assert Session.objects.get(session_id="bulk-1").close_reason == "operator_terminated"
    events = AuditEvent.objects.filter(action="session.terminate")
    assert sorted(events.values_list("target", flat=True)) == ["bulk-1", "bulk-3"]
    assert all(e.detail == {"detail": "cleaning up", "closed": True} for e in events)


@pytest.mark.usefixtures("sessions")
@pytest.mark.parametrize(
    ("selection", "message"),
    [
        ([], "select at least one live session."),
        (["bulk-1", "bulk-agreed"], "a selected session has ended or is not in your list"),
        (["bulk-1", "no-such-session"], "a selected session has ended or is not in your list"),
        (["bulk-1", "not an id!"], "the selection names no session of this list."),
    ],
)
def test_a_bad_selection_is_a_400_and_terminates_nothing(
    selection: list[str], message: str
) -> None:
    browser = signed_in(member("op", MemberRole.OPERATOR))
    before = phases()
    answer = browser.post("/selection/terminate/", {"session": selection, "confirm": "yes"})
    assert answer.status_code == 400
    assert message in answer.content.decode()
    assert phases() == before
    assert not AuditEvent.objects.filter(action="session.terminate").exists()


@pytest.mark.usefixtures("sessions")
@pytest.mark.parametrize(
    "role", [MemberRole.MERCHANT_MANAGER, MemberRole.MERCHANT_MEMBER, MemberRole.BUYER_MEMBER]
)
def test_a_tenant_member_can_neither_terminate_nor_export_a_selection(role: str) -> None:
    browser = signed_in(member("tenant", role, merchant("other")))
    assert 'name="session"' not in browser.get("/sessions/").content.decode()
    before = phases()
    for path in ("/selection/terminate/", "/selection/export/"):
        answer = browser.post(path, {"session": ["bulk-1"], "confirm": "yes"})
        assert answer.status_code == 403
    assert phases() == before
    assert not Export.objects.exists()


@pytest.mark.usefixtures("sessions")
def test_an_admin_exports_a_selection_and_an_operator_may_not() -> None:
    operator = signed_in(member("op", MemberRole.OPERATOR))
    assert operator.post("/selection/export/", {"session": ["bulk-1"]}).status_code == 403
    admin = signed_in(member("root", MemberRole.ADMIN))
    assert 'id="export-selected"' in admin.get("/sessions/").content.decode()
    answer = admin.post("/selection/export/", {"session": ["bulk-2", "bulk-agreed"]})
    assert answer.status_code == 302
    assert answer["Location"] == "/exports/"
    export = Export.objects.get()
    assert export.scope == {
        "kind": "selection",
        "session_ids": ["bulk-2", "bulk-agreed"],
        "tenant": None,
    }
    assert [s.session_id for s in sessions_for(export)] == ["bulk-2", "bulk-agreed"]
    refused = admin.post("/selection/export/", {"session": ["bulk-2", "nope"]})
    assert refused.status_code == 400
    assert "A selected session is not in your list" in refused.content.decode()
    assert Export.objects.count() == 1
