"""A multi-issue session (profile terms/v0.1) on its page: every offer's terms with the values
conceded since the party's previous offer marked, the issues open per verdict, the agreed terms,
and, once both sides revealed their weights, each side's utility of the agreement against the
Pareto frontier; the replay carries the standing terms; the sessions list filters on the
profile."""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from django.template.loader import render_to_string
from django.test import Client

from oanp.agents.frontier import trade_offs
from oanp.agents.vaults import BuyerVault, MerchantVault
from oanp.wire.terms import read_terms
from sessions_app import analytics
from sessions_app.analytics import analyse_terms
from sessions_app.models import MemberRole
from tests.support.factories.accounts import member, signed_in
from tests.support.factories.agents import ClientNegotiation, make_agent, post
from tests.support.factories.terms import (
    BUYER_TERMS,
    DECLARED,
    ISSUES,
    MERCHANT_TERMS,
    terms_agents,
)

pytestmark = pytest.mark.django_db

SESSION = "sess-terms"
BUYER = BuyerVault(Decimal(420), Decimal(400), terms=BUYER_TERMS).constraints()
PAGE = f"/sessions/{SESSION}/"


@pytest.fixture
def agreed(client: Client) -> ClientNegotiation:
    run = ClientNegotiation(
        client,
        make_agent("buyer-001", "buyer"),
        make_agent("merchant-sfo", "merchant"),
        SESSION,
        agents=terms_agents(),
    )
    run.open(issues=ISSUES)
    assert run.finish()[-1]["envelope"]["type"] == "session.agree"
    return run


def reveal(client: Client, run: ClientNegotiation, role: str) -> None:
    key, agent = (run.buyer_key, run.buyer) if role == "buyer" else (run.merchant_key, run.merchant)
    response = post(client, key, agent.reveal(), path=f"/oanp/v0.1/sessions/{SESSION}/reveal")
    assert response.status_code == 200, response.content


@pytest.fixture
def page() -> Callable[[], str]:
    """The session's page as an operator reads it, now."""
    browser = signed_in(member("olga", MemberRole.OPERATOR))

    def read() -> str:
        response = browser.get(PAGE)
        assert response.status_code == 200
        return str(response.content.decode())

    return read


def rows(html: str, table: str) -> list[str]:
    body = html.split(f'<table id="{table}"', 1)[1].split("</table>", 1)[0]
    return re.findall(r"<tr id=\"[^\"]+\">(.*?)</tr>", body, re.S)


def cells(row: str) -> list[str]:
    return [
        re.sub(r"<[^>]+>", "", c).strip()
        for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)
    ]


def test_every_offer_shows_its_terms_marked_where_it_conceded(
    agreed: ClientNegotiation, page: Callable[[], str]
) -> None:
    html = page()
    log = agreed.log()
    offers = [e for e in log if e["envelope"]["type"].startswith("offer.")]
    shown = rows(html, "terms")
    assert len(shown) == len(offers)
    assert '<th scope="col">delivery_days</th><th scope="col">support</th>' in html
    previous: dict[str, tuple[int, int, int]] = {}
    marked = 0
    for offer, row in zip(offers, shown, strict=True):
        envelope = offer["envelope"]
        role, payload = envelope["sender"]["role"], envelope["payload"]
        text = cells(row)
        assert text[0] == str(payload["round"])
        assert text[1].startswith(role)
        # Each value as sent, then the words a screen reader hears where it moved.
        values = [payload["price"], payload["terms"]["delivery_days"], payload["terms"]["support"]]
        # On all three axes a higher value is better for the merchant: the price, the days
        # (the buyer prefers few) and support (options run from the buyer's best).
        support = ["premium", "standard", "none"].index(payload["terms"]["support"])
        now = (payload["price"], payload["terms"]["delivery_days"], support)
        before = previous.get(role)
        for i, value in enumerate(values):
            cell = text[2 + i]
            assert cell.startswith(str(value))
            towards = (
                before is not None
                and now[i] != before[i]
                and (now[i] > before[i]) == (role == "buyer")
            )
            assert ("(moved towards the other side)" in cell) == towards, (role, i, cell)
            marked += towards
        previous[role] = now
    assert marked > 0
    assert 'class="conceded-mark" aria-hidden="true">→</span>' in html


def test_verdicts_show_the_issues_open_and_the_agreement_its_terms(
    agreed: ClientNegotiation, page: Callable[[], str]
) -> None:
    html = page()
    log = agreed.log()
    verdicts = [e["envelope"]["payload"] for e in log if e["envelope"]["type"] == "round.verdict"]
    for verdict in verdicts:
        row = cells(html.split(f'<tr id="round-{verdict["round"]}">', 1)[1].split("</tr>", 1)[0])
        assert row[-1] == str(verdict["issues_open"])
    final = log[-1]["envelope"]["payload"]["agreement"]["final_terms"]
    agreed_terms = html.split('<dl class="facts" id="final-terms">', 1)[1].split("</dl>", 1)[0]
    assert cells(agreed_terms) == []
    assert re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", agreed_terms) == [
        ("delivery_days", str(final["delivery_days"])),
        ("support", final["support"]),
    ]


def test_no_trade_offs_until_both_sides_revealed(
    client: Client, agreed: ClientNegotiation, page: Callable[[], str]
) -> None:
    assert 'id="trade-offs"' not in page()
    reveal(client, agreed, "buyer")
    assert 'id="trade-offs"' not in page()


def test_after_both_reveals_each_sides_utility_and_the_frontier(
    client: Client, agreed: ClientNegotiation, page: Callable[[], str]
) -> None:
    reveal(client, agreed, "buyer")
    reveal(client, agreed, "merchant")
    html = page()
    agreement = agreed.log()[-1]["envelope"]["payload"]
    expected = trade_offs(
        DECLARED,
        agreed.buyer.reveal()["constraints"],
        agreed.merchant.reveal()["constraints"],
        (
            Decimal(str(agreement["final_price"])),
            read_terms(DECLARED, agreement["agreement"]["final_terms"]),
        ),
    )
    assert expected is not None
    assert expected.agreement is not None
    assert expected.distance is not None
    assert expected.distance > 0

    def cell(name: str) -> str:
        return html.split(f'id="{name}">', 1)[1].split("</td>", 1)[0]

    assert cell("buyer-utility") == f"{expected.agreement.buyer:.3f}"
    assert cell("merchant-utility") == f"{expected.agreement.merchant:.3f}"
    assert cell("frontier-distance") == f"{expected.distance:.3f}"
    assert cell("frontier-nearest").startswith(f"price {expected.nearest.price.normalize()}")
    chart = json.loads(html.split('id="frontier-data">', 1)[1].split("</script>", 1)[0])
    assert len(chart["frontier"]) == len(expected.frontier.points)
    assert chart["agreement"] == {
        "x": float(expected.agreement.buyer),
        "y": float(expected.agreement.merchant),
    }


@pytest.mark.parametrize(
    ("merchant", "problem"),
    [
        ({"floor_price": 280}, "ideal_price must be a number"),
        (
            {"floor_price": 280, "ideal_price": 400, "terms": {"price_weight": "heavy"}},
            "terms.price_weight must be a number",
        ),
    ],
)
def test_reveals_that_do_not_read_as_limits_say_why(
    merchant: dict[str, object], problem: str
) -> None:
    found = analyse_terms(DECLARED, {"buyer": BUYER, "merchant": merchant}, None, {})
    assert found is not None
    assert found.found is None
    assert found.problem == f"the revealed limits do not read: {problem}"
    html = render_to_string(
        "sessions_app/_session_analytics.html", {"trade_offs": found, "analysis": None}
    )
    assert f"No utilities: the revealed limits do not read: {problem}." in html


def test_no_zone_no_frontier() -> None:
    poor = {**BUYER, "true_ceiling": 200, "budget_cap": 200}
    merchant = MerchantVault(Decimal(280), Decimal(400), terms=MERCHANT_TERMS).constraints()
    found = analyse_terms(DECLARED, {"buyer": poor, "merchant": merchant}, None, {})
    assert found is not None
    assert found.found is None
    assert found.problem is None


def test_an_analysis_is_made_once_for_the_same_reveals(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analytics, "_made", OrderedDict())
    made: list[tuple[Any, ...]] = []

    def counted(*args: Any) -> Any:
        made.append(args)
        return trade_offs(*args)

    monkeypatch.setattr(analytics, "trade_offs", counted)
    merchant = MerchantVault(Decimal(280), Decimal(400), terms=MERCHANT_TERMS).constraints()
    first = analyse_terms(DECLARED, {"buyer": BUYER, "merchant": merchant}, None, {})
    again = analyse_terms(DECLARED, {"merchant": dict(merchant), "buyer": dict(BUYER)}, None, {})
    assert again is first
    assert len(made) == 1
    # A different reveal is a different analysis, never the one made before.
    higher = analyse_terms(
        DECLARED, {"buyer": BUYER, "merchant": {**merchant, "floor_price": 300}}, None, {}
    )
    assert len(made) == 2
    assert first is not None
    assert first.found is not None
    assert higher is not None
    assert higher.found is not None
    assert (first.found.floor, higher.found.floor) == (280, 300)


def test_the_process_keeps_the_latest_analyses_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analytics, "_made", OrderedDict())
    monkeypatch.setattr(analytics, "MADE_KEPT", 2)
    merchant = MerchantVault(Decimal(280), Decimal(400), terms=MERCHANT_TERMS).constraints()

    def analysis(floor: int) -> Any:
        revealed = {"buyer": BUYER, "merchant": {**merchant, "floor_price": floor}}
        return analyse_terms(DECLARED, revealed, None, {})

    first = analysis(280)
    analysis(290)
    assert analysis(280) is first  # used again, so the most recent
    analysis(300)  # the third: the least recently used (290) goes
    assert len(analytics._made) == 2
    assert analysis(280) is first
    assert [a.found.floor for a in analytics._made.values()] == [300, 280]


def test_the_chart_draws_a_thinned_frontier_and_the_caption_counts_all_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(analytics, "_made", OrderedDict())
    monkeypatch.setattr(analytics, "CHART_POINTS", 3)
    merchant = MerchantVault(Decimal(280), Decimal(400), terms=MERCHANT_TERMS).constraints()
    whole = trade_offs(DECLARED, BUYER, merchant)
    assert whole is not None
    assert len(whole.frontier.points) > 4
    found = analyse_terms(DECLARED, {"buyer": BUYER, "merchant": merchant}, None, {})
    assert found is not None
    assert found.found is not None
    assert found.frontier_size == len(whole.frontier.points)
    chart = json.loads(found.chart_json)["frontier"]
    assert len(chart) <= 4
    ends = whole.frontier.points[0], whole.frontier.points[-1]
    assert [chart[0], chart[-1]] == [{"x": float(o.buyer), "y": float(o.merchant)} for o in ends]
    html = render_to_string(
        "sessions_app/_session_analytics.html", {"trade_offs": found, "analysis": None}
    )
    assert f"The agreement against the frontier ({found.frontier_size} points)" in html


def test_the_replay_shows_each_sides_standing_terms(agreed: ClientNegotiation) -> None:
    browser = signed_in(member("rita", MemberRole.OPERATOR))
    log = agreed.log()
    last_offer = max(i for i, e in enumerate(log) if e["envelope"]["type"] == "offer.counter")
    step = last_offer + 1
    html = browser.get(f"/sessions/{SESSION}/replay/?step={step}").content.decode()
    counter = log[last_offer]["envelope"]["payload"]["terms"]
    merchant = html.split('id="standing-merchant-terms">', 1)[1].split("</dd>", 1)[0]
    assert merchant == f"delivery_days: {counter['delivery_days']}, support: {counter['support']}"
    frames = json.loads(
        html.split('id="replay-frames" type="application/json">', 1)[1].split("<")[0]
    )
    assert frames[step - 1]["terms"]["merchant"] == counter
    shown = html.split('id="issues-open">', 1)[1].split("</dd>", 1)[0]
    assert shown == str(frames[step - 1]["terms"]["issues_open"])
    assert '<th scope="col">Issues open</th>' in html


def test_the_list_says_the_agreed_terms_and_the_issues_open(
    client: Client, agreed: ClientNegotiation
) -> None:
    final = agreed.log()[-1]["envelope"]["payload"]["agreement"]["final_terms"]
    live = ClientNegotiation(
        client,
        agreed.buyer_key,
        agreed.merchant_key,
        "sess-terms-live",
        "l-",
        agents=terms_agents(),
    )
    live.open(issues=ISSUES)
    live.run_until("offer.counter")  # the buyer offered in round 1; the merchant not yet
    html = signed_in(member("lena", MemberRole.OPERATOR)).get("/sessions/").content.decode()
    outcomes = dict(
        re.findall(r'href="/sessions/([^/]+)/".*?<td class="outcome">([^<]*)</td>', html, re.S)
    )
    price = agreed.log()[-1]["envelope"]["payload"]["final_price"]
    assert outcomes[SESSION] == (
        f"agreed at {price} USD with delivery_days {final['delivery_days']}, "
        f"support {final['support']}"
    )
    # Until both sides have offered, every issue is open, as the verdicts count them.
    assert outcomes["sess-terms-live"] == "round 1, 2 issues open, merchant to move"


@pytest.mark.parametrize(
    ("query", "listed"),
    [("profile=terms/v0.1", True), ("profile=default/v0.1", False), ("", True)],
)
def test_the_list_filters_on_the_profile(
    agreed: ClientNegotiation, query: str, listed: bool
) -> None:
    response = signed_in(member("lena", MemberRole.OPERATOR)).get(f"/sessions/?{query}")
    assert response.status_code == 200
    html = response.content.decode()
    assert (SESSION in html) is listed
    if query:
        # The choice stays in the form, and the sort headers carry it on.
        value = query.split("=", 1)[1]
        assert f'<option value="{value}" selected>' in html
        assert f"profile={value.replace('/', '%2F')}" in html
