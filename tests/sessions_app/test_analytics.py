"""Analytics once the parties revealed: the zone of agreement, the Nash point and the surplus
split of one session; across sessions, agreements and rounds by hosted strategy."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.template.loader import render_to_string
from django.test import Client

from arbiter_app.models import Session
from sessions_app import hosted_agents
from sessions_app.analytics import analyse
from sessions_app.models import AgentProfile, MemberRole, Merchant
from tests.support.factories.accounts import (
    HostedNegotiation,
    hosted_agent,
    member,
    merchant,
    signed_in,
)
from tests.support.factories.agents import ClientNegotiation, make_agent, post

pytestmark = pytest.mark.django_db

SESSION = "sess-sfo-jfk"
PAGE = f"/sessions/{SESSION}/"


@pytest.fixture
def agreed(client: Client) -> ClientNegotiation:
    run = ClientNegotiation(
        client, make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant")
    )
    run.open()
    assert run.finish()[-1]["envelope"]["payload"]["final_price"] == 340
    return run


def reveal(client: Client, run: ClientNegotiation, role: str) -> None:
    key, agent = (run.buyer_key, run.buyer) if role == "buyer" else (run.merchant_key, run.merchant)
    response = post(client, key, agent.reveal(), path=f"/oanp/v0.1/sessions/{SESSION}/reveal")
    assert response.status_code == 200, response.content


def cell(html: str, cell_id: str) -> str:
    return html.split(f'id="{cell_id}">', 1)[1].split("</td>", 1)[0]


def page_of(role: str = MemberRole.OPERATOR) -> str:
    response = signed_in(member("olga", role)).get(PAGE)
    assert response.status_code == 200
    return str(response.content.decode())


def test_both_reveals_give_the_zone_the_nash_point_and_the_split(
    client: Client, agreed: ClientNegotiation
) -> None:
    reveal(client, agreed, "buyer")
    reveal(client, agreed, "merchant")
    html = page_of()
    assert cell(html, "zone") == "[280, 420], 140 wide"
    assert cell(html, "nash").startswith("350 <small>(the zone's midpoint: with linear")
    assert cell(html, "buyer-surplus") == "80 (57.1 %)"
    assert cell(html, "merchant-surplus") == "60 (42.9 %)"
    # The bar: the merchant's share from the floor, the buyer's to the ceiling, Nash mid-way,
    # to the whole percent (the stylesheet's classes: the pages allow no style attribute).
    assert 'class="zone-merchant pct-43">merchant 60<' in html
    assert 'class="zone-buyer pct-57">buyer 80<' in html
    assert 'class="zone-mark nash pct-50"' in html
    assert "style=" not in html


def test_one_reveal_shows_what_is_known(client: Client, agreed: ClientNegotiation) -> None:
    reveal(client, agreed, "buyer")
    html = page_of()
    assert "<td>420</td>" in html
    assert "<td>not revealed</td>" in html
    assert cell(html, "zone") == "needs both reveals"
    assert cell(html, "nash") == "–"
    assert cell(html, "buyer-surplus") == "80"
    assert cell(html, "merchant-surplus") == "unknown until the merchant reveals"
    assert 'class="zone-bar"' not in html


def test_no_reveal_no_analytics(agreed: ClientNegotiation) -> None:
    assert 'id="analytics-h"' not in page_of()


def test_a_merchant_member_sees_its_own_sessions_analytics(
    client: Client, agreed: ClientNegotiation
) -> None:
    reveal(client, agreed, "merchant")
    shop = merchant("sfo")
    AgentProfile.objects.create(merchant=shop, agent_id="merchant-sfo", mode="external")
    alice = signed_in(member("alice", MemberRole.MERCHANT_MANAGER, shop))
    html = alice.get(PAGE).content.decode()
    assert cell(html, "merchant-surplus") == "60"
    other = signed_in(member("bob", MemberRole.MERCHANT_MANAGER, merchant("b")))
    assert other.get(PAGE).status_code == 404


@pytest.mark.parametrize(
    ("ceiling", "floor", "price", "zone", "nash", "buyer", "merchant"),
    [
        ("420", "280", "340", True, "350", ("80", "57.1"), ("60", "42.9")),
        ("250.50", "300", None, False, None, None, None),
        ("400", "400", "400", True, "400", ("0", None), ("0", None)),
        ("420", "280", "430", True, "350", ("-10", None), ("150", None)),
    ],
)
def test_the_figures(
    ceiling: str,
    floor: str,
    price: str | None,
    zone: bool,
    nash: str | None,
    buyer: tuple[str, str | None] | None,
    merchant: tuple[str, str | None] | None,
) -> None:
    analysis = analyse(
        {"buyer": {"true_ceiling": ceiling}, "merchant": {"floor_price": floor}},
        None if price is None else Decimal(price),
    )
    assert analysis.has_zone is zone
    assert analysis.nash == (None if nash is None else Decimal(nash))
    surplus = analysis.surplus
    if buyer is None or merchant is None:
        assert surplus is None
        return
    assert surplus is not None
    assert (str(surplus.buyer), str(surplus.merchant)) == (buyer[0], merchant[0])
    pcts = (surplus.buyer_pct, surplus.merchant_pct)
    assert pcts == tuple(None if p is None else Decimal(p) for p in (buyer[1], merchant[1]))


def test_no_zone_is_said_so() -> None:
    analysis = analyse({"buyer": {"true_ceiling": 250}, "merchant": {"floor_price": 300}}, None)
    html = render_to_string(
        "sessions_app/_session_analytics.html",
        {"analysis": analysis, "session": Session(currency="USD")},
    )
    assert cell(html, "zone") == "no zone: the floor 300 is above the ceiling 250"
    assert cell(html, "nash") == "–"
    assert "<td>no agreement</td>" in html
    assert 'class="zone-bar"' not in html


# Across sessions -----------------------------------------------------------------------------


def hosted_session(client: Client, agent_id: str, session_id: str, **play: Any) -> Session:
    negotiation = HostedNegotiation(client, agent_id, session_id=session_id)
    negotiation.play(nudge=lambda: hosted_agents.answer(session_id), **play)
    return Session.objects.get(session_id=session_id)


def strategy_rows(html: str) -> list[list[str]]:
    body = html.split('id="by-strategy"', 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [
        [cell.split(">", 1)[1] for cell in row.split("</td>")[:-1]]
        for row in body.split("<tr>")[1:]
    ]


def test_the_strategy_table(client: Client) -> None:
    shop: Merchant = merchant("sfo")
    reference = hosted_agent(shop, "hosted-ref", strategy="reference")
    hosted_agent(shop, "hosted-boulware", strategy="boulware")
    first = hosted_session(client, "hosted-ref", "sess-ref-1")
    second = hosted_session(client, "hosted-ref", "sess-ref-2")
    boulware = hosted_session(client, "hosted-boulware", "sess-boulware-1")
    assert (first.phase, second.phase) == ("AGREED", "AGREED")
    # A session still waiting for its first answer counts, not as an agreement.
    HostedNegotiation(client, "hosted-boulware", session_id="sess-boulware-2").open()
    # A session counts under the strategy it opened with, whatever the agent uses now.
    reference.strategy = "conceder"
    reference.save()
    # Sessions of an agent we do not host are not anyone's strategy.
    ClientNegotiation(
        client, make_agent("buyer-002", "buyer"), make_agent("merchant-ext", "merchant")
    ).open()

    # Boulware holds out longer against the reference buyer: agreed at 380 in round 4.
    assert (boulware.phase, boulware.round, boulware.final_price) == ("AGREED", 4, 380)
    assert (first.round, second.round) == (2, 2)

    operator = signed_in(member("olga", MemberRole.OPERATOR))
    rows = strategy_rows(operator.get("/").content.decode())
    assert rows == [
        ["boulware", "2", "1", "50 %", "4.0"],
        ["reference", "2", "2", "100 %", "2.0"],
    ]
    # A merchant member of another shop sees no strategy figures of this one.
    bob = signed_in(member("bob", MemberRole.MERCHANT_MANAGER, merchant("b")))
    assert 'id="by-strategy"' not in bob.get("/").content.decode()
