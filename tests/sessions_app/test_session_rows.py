"""The rows a live sessions list redraws (``/sessions/?ids=``): those in the viewer's scope as
they stand now, and a clear 400 for a list of ids it cannot read."""

from __future__ import annotations

import pytest
from django.test import Client

from sessions_app.models import MemberRole
from tests.sessions_app.test_hosted_agents import types
from tests.support.factories.accounts import (
    HostedNegotiation,
    hosted_agent,
    member,
    merchant,
    signed_in,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def opened(client: Client) -> HostedNegotiation:
    hosted_agent(merchant("sfo"))
    negotiation = HostedNegotiation(client, "hosted-sfo", session_id="sess-row")
    negotiation.open()
    assert types(negotiation.log()) == ["session.open"]
    return negotiation


def test_the_rows_asked_for_in_scope_as_they_stand(opened: HostedNegotiation) -> None:
    alice = signed_in(member("alice", MemberRole.MERCHANT_MANAGER, merchant("sfo")))
    answer = alice.get("/sessions/", {"ids": "sess-row,sess-unknown"})
    assert answer.status_code == 200
    rows = answer.content.decode()
    assert rows.count('data-session="sess-row" data-live>') == 1
    assert '<td class="outcome">opened, merchant to acknowledge</td>' in rows
    assert "sess-unknown" not in rows
    assert "<html" not in rows
    # Whatever filters the list has, a row asked for is the row as it stands.
    assert (
        'data-session="sess-row"'
        in alice.get("/sessions/", {"ids": "sess-row", "state": "AGREED"}).content.decode()
    )
    bob = signed_in(member("bob", MemberRole.MERCHANT_MANAGER, merchant("b")))
    assert (
        'data-session="sess-row"' not in bob.get("/sessions/", {"ids": "sess-row"}).content.decode()
    )


@pytest.mark.parametrize(
    ("ids", "says"),
    [
        ("", "ids: This field is required."),
        ("a b", "ids: A session id is 1-64 characters"),
        ("sess-row,", "ids: A session id is"),
        ("x," * 100 + "x", "ids: At most 100 sessions at a time."),
        ("x" * 7000, "ids: Ensure this value has at most 6500 characters"),
    ],
)
def test_a_bad_list_of_ids_is_a_clear_400(opened: HostedNegotiation, ids: str, says: str) -> None:
    answer = signed_in(member("olga", MemberRole.OPERATOR)).get("/sessions/", {"ids": ids})
    assert answer.status_code == 400
    assert says in answer.content.decode()
