"""The sessions list's filters, sorts and cursor pages, as an operator uses them, and its
FilterSet on its own: what each filter lets through, which values it refuses, whose sessions
it sees."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.http import QueryDict
from django.test import Client
from django.utils import timezone

from arbiter_app.models import Session
from sessions_app import selectors, tenancy
from sessions_app.filters import SessionFilter, encode_cursor
from sessions_app.models import AgentProfile, MemberRole, Membership, Merchant
from sessions_app.templatetags.ago import when
from sessions_app.templatetags.prices import price
from sessions_app.views import sessions as views
from tests.support.factories.agents import ClientNegotiation, make_agent, post

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator() -> Client:
    user = User.objects.create_user("operator", password="pw")
    Membership.objects.create(user=user, role=MemberRole.OPERATOR)
    browser = Client(HTTP_HOST="localhost")
    browser.force_login(user)
    return browser


@pytest.fixture
def sessions(client: Client) -> None:
    """sess-agreed (fair, agreed), sess-reneged (violated), sess-open (no verdict yet)."""
    buyer = make_agent("buyer-001", "buyer")
    merchant = make_agent("merchant-sfo", "merchant")
    shop = Merchant.objects.create(name="Shop", slug="shop")
    AgentProfile.objects.create(merchant=shop, agent_id="merchant-sfo", mode="external")
    agreed = ClientNegotiation(client, buyer, merchant, session_id="sess-agreed", tag="a-")
    agreed.open()
    agreed.finish()
    reneged = ClientNegotiation(client, buyer, merchant, session_id="sess-reneged", tag="r-")
    reneged.open()
    reneged.run_until("offer.propose", 340)
    key, propose = reneged.peek()
    lowered = copy.deepcopy(propose)
    lowered["payload"]["price"] = 300
    assert post(client, key, lowered).status_code == 201
    ClientNegotiation(client, buyer, merchant, session_id="sess-open", tag="o-").open()


def listed(browser: Client, query: str) -> set[str]:
    page = browser.get(f"/sessions/?{query}").content.decode()
    return {name for name in ("sess-agreed", "sess-reneged", "sess-open") if name in page}


@pytest.mark.usefixtures("sessions")
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", {"sess-agreed", "sess-reneged", "sess-open"}),
        ("state=AGREED", {"sess-agreed"}),
        ("violation=yes", {"sess-reneged"}),
        ("verdict=violated", {"sess-reneged"}),
        ("verdict=fair", {"sess-agreed", "sess-reneged"}),
        ("q=open", {"sess-open"}),
        ("merchant=shop", {"sess-agreed", "sess-reneged", "sess-open"}),
        ("merchant=elsewhere", set()),
        ("agent=merchant-sfo&state=CLOSED", {"sess-reneged"}),
        ("range=1h", {"sess-agreed", "sess-reneged", "sess-open"}),
        ("profile=default/v0.1", {"sess-agreed", "sess-reneged", "sess-open"}),
        ("profile=strict/v0.1", set()),
        ("profile=terms/v0.1&state=AGREED", set()),
    ],
)
def test_filters(operator: Client, query: str, expected: set[str]) -> None:
    assert listed(operator, query) == expected


@pytest.mark.usefixtures("sessions")
@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("state=bogus", "State: Select a valid choice."),
        ("state=bogus&verdict=nonsense&range=forever", "Opened: Select a valid choice."),
        ("sort=price", "Sort: Select a valid choice."),
        ("opened_after=yesterday", "From: Enter a valid date/time."),
        (
            "opened_after=2026-05-02T00:00&opened_before=2026-05-01T00:00",
            "To: must be later than From.",
        ),
        # A digit str.isdigit accepts and int() refuses; a cursor of another sort; no cursor.
        ("cursor=²", "Page: is not a page of this list"),
        # A fixed moment: parameters are test ids, which parallel workers must agree on.
        (
            f"sort=state&cursor={encode_cursor(datetime(2026, 5, 1, tzinfo=UTC), 1)}",
            "Page: is not a page",
        ),
        ("cursor=WzEsMl0", "Page: is not a page of this list"),
        ("since=-1", "Since: Ensure this value is greater than or equal to 0."),
        ("profile=terms/v9", "Profile: Select a valid choice."),
        ("price_min=cheap", "Agreed price from: Enter a number."),
        ("price_min=NaN", "Agreed price from: Enter a number."),
        ("price_min=-1", "Agreed price from: Ensure this value is greater than or equal to 0."),
        ("price_min=1e30", "Agreed price from: Ensure that there are no more than 17 digits"),
        ("price_min=300&price_max=200", "Agreed price to: must be at least the lowest price."),
        ("currency=US", "Currency: is three letters"),
        ("currency=%E2%82%AC%E2%82%AC%E2%82%AC", "Currency: is three letters"),
        ("close_reason=bored", "Close reason: Select a valid choice."),
        ("settlement=maybe", "Settlement: Select a valid choice."),
        ("lasted_min=-5", "Lasted at least (minutes): Ensure this value is greater than"),
        ("lasted_min=99999", "Lasted at least (minutes): Ensure this value is less than"),
        ("lasted_min=1.5", "Lasted at least (minutes): Ensure that there are no more than 0"),
        ("lasted_min=30&lasted_max=10", "Lasted at most (minutes): must be at least the shortest"),
        ("item=" + "x" * 201, "Item or route: Ensure this value has at most 200 characters"),
        ("agent=" + "a" * 65, "Party: Ensure this value has at most 64 characters"),
    ],
)
def test_a_bad_parameter_is_a_400_that_says_so_and_lists_nothing(
    operator: Client, query: str, message: str
) -> None:
    answer = operator.get(f"/sessions/?{query}")
    assert answer.status_code == 400
    page = answer.content.decode()
    assert message in page
    assert 'role="alert"' in page
    assert not {name for name in ("sess-agreed", "sess-reneged", "sess-open") if name in page}


def walk(browser: Client, query: str) -> list[str]:
    """Every session the list shows in ``query``'s sort, following its cursors to the end."""
    seen: list[str] = []
    cursor = ""
    while True:
        answer = browser.get(f"/sessions/?{query}{cursor}")
        assert answer.status_code == 200
        seen += [row.session.session_id for row in answer.context["page"].rows]
        if answer.context["more_query"] is None:
            return seen
        cursor = f"&cursor={answer.context['page'].next_cursor}"


@pytest.mark.usefixtures("elsewhere")
@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        # agreed and reneged opened at the same moment: the later row comes first descending.
        ("", ["sess-open", "sess-reneged", "sess-agreed", "sess-elsewhere"]),
        ("-opened", ["sess-open", "sess-reneged", "sess-agreed", "sess-elsewhere"]),
        ("opened", ["sess-elsewhere", "sess-agreed", "sess-reneged", "sess-open"]),
        # Last activity is the head entry's time: sess-elsewhere opened long ago, spoke last.
        ("-activity", ["sess-elsewhere", "sess-open", "sess-reneged", "sess-agreed"]),
        ("activity", ["sess-agreed", "sess-reneged", "sess-open", "sess-elsewhere"]),
        # States in the order a session lives them; two OPENING sessions tie, broken by id.
        ("state", ["sess-open", "sess-elsewhere", "sess-agreed", "sess-reneged"]),
        ("-state", ["sess-reneged", "sess-agreed", "sess-elsewhere", "sess-open"]),
    ],
)
def test_cursor_pages_follow_the_sort_and_show_each_session_once(
    operator: Client, monkeypatch: Any, sort: str, expected: list[str]
) -> None:
    Session.objects.filter(session_id="sess-reneged").update(
        opened_at=Session.objects.get(session_id="sess-agreed").opened_at
    )
    # One row a page: every boundary is a cursor, the ties' included.
    monkeypatch.setattr(views, "PAGE_SIZE", 1)
    assert walk(operator, f"sort={sort}") == expected
    assert walk(operator, f"sort={sort}&state=OPENING") == [
        name for name in expected if name in ("sess-open", "sess-elsewhere")
    ]


@pytest.mark.usefixtures("sessions")
def test_sort_headers_are_links_that_say_how_the_list_is_sorted(operator: Client) -> None:
    page = operator.get("/sessions/?state=AGREED&sort=state").content.decode()
    assert (
        '<th scope="col" aria-sort="ascending">'
        '<a class="sort" href="?state=AGREED&amp;sort=-state">State</a>' in page
    )
    assert (
        '<th scope="col" aria-sort="none">'
        '<a class="sort" href="?state=AGREED&amp;sort=-opened">Opened</a>' in page
    )
    default = operator.get("/sessions/").content.decode()
    assert (
        '<th scope="col" aria-sort="descending"><a class="sort" href="?sort=opened">Opened</a>'
        in default
    )


@pytest.mark.usefixtures("elsewhere")
def test_a_custom_time_range_lists_the_sessions_opened_within_it(operator: Client) -> None:
    now = timezone.now()

    def at(minutes: int) -> str:
        return (now - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S")

    assert listed_every(operator, f"opened_after={at(120)}&opened_before={at(60)}") == {
        "sess-elsewhere"
    }
    assert listed_every(operator, f"opened_after={at(60)}") == {
        "sess-agreed",
        "sess-reneged",
        "sess-open",
    }
    assert listed_every(operator, f"opened_before={at(120)}") == set()
    # Beside a preset, both apply.
    assert listed_every(operator, f"range=1h&opened_before={at(60)}") == set()


def listed_every(browser: Client, query: str) -> set[str]:
    answer = browser.get(f"/sessions/?{query}")
    assert answer.status_code == 200
    return {row.session.session_id for row in answer.context["page"].rows}


def test_each_row_names_its_item_and_says_where_the_session_stands(
    operator: Client, client: Client
) -> None:
    buyer = make_agent("buyer-001", "buyer")
    merchant = make_agent("merchant-sfo", "merchant")
    agreed = ClientNegotiation(client, buyer, merchant, session_id="sess-agreed", tag="a-")
    agreed.open()
    agreed.finish()
    moving = ClientNegotiation(client, buyer, merchant, session_id="sess-moving", tag="m-")
    moving.open()
    moving.run_until("offer.counter")
    ClientNegotiation(client, buyer, merchant, session_id="sess-open", tag="o-").open(
        item={"sku": "B-1", "size": "L", "colour": "red"}
    )
    final = Session.objects.get(session_id="sess-agreed").final_price
    rows = {
        row.session.session_id: (row.item, row.outcome)
        for row in operator.get("/sessions/").context["page"].rows
    }
    assert rows == {
        "sess-agreed": ("SFO-JFK", f"agreed at {price(final)} USD"),
        "sess-moving": ("SFO-JFK", "round 1, merchant to move"),
        "sess-open": ("sku B-1, size L", "opened, merchant to acknowledge"),
    }
    page = operator.get("/sessions/").content.decode()
    assert "…" not in page[page.index("<tbody") :]
    assert '<td class="outcome">round 1, merchant to move</td>' in page
    # Last activity and opened: relative once times.js runs, the exact UTC time on hover.
    opened = Session.objects.get(session_id="sess-open")
    row = page.split(f'<tr id="row-{opened.pk}"', 1)[1].split("</tr>", 1)[0]
    assert f"<td>{when(opened.opened_at)}</td>" in row
    assert row.count("<time ") == 2
    assert row.count(" data-relative>") == 2


@pytest.mark.usefixtures("sessions")
def test_the_live_list_hears_how_many_sessions_opened_since_it_was_shown(
    operator: Client, client: Client
) -> None:
    newest = operator.get("/sessions/").context["page"].newest
    assert operator.get(f"/sessions/?since={newest}").content.decode().strip() == ""
    buyer, merchant = make_agent("buyer-003", "buyer"), make_agent("merchant-sfo-2", "merchant")
    ClientNegotiation(client, buyer, merchant, session_id="sess-later", tag="l-").open()
    news = operator.get(f"/sessions/?sort=state&since={newest}").content.decode()
    assert news.strip() == '1 new session, <a href="?sort=state">show</a>'
    # Only sessions the filters let through count.
    assert operator.get(f"/sessions/?state=AGREED&since={newest}").content.decode().strip() == ""


@pytest.mark.usefixtures("sessions")
def test_htmx_asks_for_rows_only(operator: Client) -> None:
    rows = operator.get("/sessions/", HTTP_HX_REQUEST="true").content.decode()
    assert "<tr id=" in rows
    assert "<form" not in rows


# The FilterSet on its own -------------------------------------------------------------------

EVERY = {"sess-agreed", "sess-reneged", "sess-open", "sess-elsewhere"}


@pytest.fixture
def elsewhere(client: Client, sessions: None) -> None:
    """Beside the three: sess-elsewhere, opened 90 minutes ago by buyer-002 with merchant-lax,
    the agent of another merchant ("elsewhere")."""
    other = Merchant.objects.create(name="Elsewhere", slug="elsewhere")
    AgentProfile.objects.create(merchant=other, agent_id="merchant-lax", mode="external")
    buyer = make_agent("buyer-002", "buyer")
    lax = make_agent("merchant-lax", "merchant")
    ClientNegotiation(client, buyer, lax, session_id="sess-elsewhere", tag="e-").open()
    Session.objects.filter(session_id="sess-elsewhere").update(
        opened_at=timezone.now() - timedelta(minutes=90)
    )


def scope_of(role: str, merchant: str | None = None) -> tenancy.Scope:
    user = User.objects.create_user(f"{role}-{merchant}", password="pw")
    Membership.objects.create(
        user=user,
        role=role,
        merchant=None if merchant is None else Merchant.objects.get(slug=merchant),
    )
    found = tenancy.scope_of(user)
    assert found is not None
    return found


def filtered(scope: tenancy.Scope, query: str) -> SessionFilter:
    return selectors.session_filter(scope, QueryDict(query))


def through(found: SessionFilter) -> set[str]:
    return set(found.qs.values_list("session_id", flat=True))


@pytest.mark.usefixtures("elsewhere")
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", EVERY),
        ("state=AGREED", {"sess-agreed"}),
        ("state=CLOSED", {"sess-reneged"}),
        ("state=OPENING", {"sess-open", "sess-elsewhere"}),
        ("merchant=shop", {"sess-agreed", "sess-reneged", "sess-open"}),
        ("merchant=elsewhere", {"sess-elsewhere"}),
        ("merchant=nobody", set()),
        # Slugs are matched as given: blanks around one name no merchant.
        ("merchant=%20shop", set()),
        ("agent=merchant-lax", {"sess-elsewhere"}),
        ("agent=buyer-002", {"sess-elsewhere"}),
        ("agent=%20merchant-sfo%20", {"sess-agreed", "sess-reneged", "sess-open"}),
        ("verdict=fair", {"sess-agreed", "sess-reneged"}),
        ("verdict=violated", {"sess-reneged"}),
        ("verdict=fair_but_stuck", set()),
        ("violation=yes", {"sess-reneged"}),
        ("range=1h", {"sess-agreed", "sess-reneged", "sess-open"}),
        ("range=24h", EVERY),
        ("q=OPEN", {"sess-open"}),
        ("q=%20else%20", {"sess-elsewhere"}),
        ("agent=merchant-sfo&verdict=fair&state=AGREED", {"sess-agreed"}),
        ("state=OPENING&range=1h", {"sess-open"}),
    ],
)
def test_each_filter_narrows_as_it_should(query: str, expected: set[str]) -> None:
    found = filtered(scope_of(MemberRole.OPERATOR), query)
    assert found.is_valid(), found.errors
    assert through(found) == expected


@pytest.fixture
def varied(elsewhere: None) -> None:
    """sess-elsewhere flies LAX-ORD in EUR, judged stuck once, opened for settlement by reveal;
    sess-reneged ran 20 minutes (sess-agreed agreed at 340 USD in under a minute)."""
    Session.objects.filter(session_id="sess-elsewhere").update(
        item_text="route\nLAX-ORD", currency="EUR", stuck_rounds=1, settlement="offered"
    )
    Session.objects.filter(session_id="sess-reneged").update(lasted=timedelta(minutes=20))


@pytest.mark.usefixtures("varied")
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("item=jfk", {"sess-agreed", "sess-reneged", "sess-open"}),
        ("item=%20lax-O%20", {"sess-elsewhere"}),
        ("item=CDG", set()),
        ("price_min=340", {"sess-agreed"}),
        ("price_min=340.0001", set()),
        ("price_max=340", {"sess-agreed"}),
        ("price_min=100&price_max=339.99", set()),
        ("currency=eur", {"sess-elsewhere"}),
        ("currency=USD&state=OPENING", {"sess-open"}),
        ("close_reason=buyer_reneged", {"sess-reneged"}),
        ("close_reason=settled", set()),
        ("verdict=fair_but_stuck", {"sess-elsewhere"}),
        ("settlement=offered", {"sess-elsewhere"}),
        ("settlement=none", {"sess-agreed", "sess-reneged", "sess-open"}),
        ("settlement=settled", set()),
        ("lasted_min=10", {"sess-reneged"}),
        ("lasted_max=1", {"sess-agreed"}),
        # Only an ended session has lasted: the live ones are in neither bound.
        ("lasted_min=0", {"sess-agreed", "sess-reneged"}),
        ("item=sfo&currency=usd&close_reason=buyer_reneged&lasted_min=5", {"sess-reneged"}),
        ("agent=buyer-001&price_max=1000&profile=default/v0.1", {"sess-agreed"}),
    ],
)
def test_the_search_filters_narrow_and_combine(query: str, expected: set[str]) -> None:
    found = filtered(scope_of(MemberRole.OPERATOR), query)
    assert found.is_valid(), found.errors
    assert through(found) == expected


@pytest.mark.usefixtures("elsewhere")
@pytest.mark.parametrize(
    ("query", "refused", "expected"),
    [
        ("state=bogus", {"state"}, EVERY),
        # Stored sessions are never EVALUATING, so it is no choice.
        ("state=EVALUATING", {"state"}, EVERY),
        ("state=agreed", {"state"}, EVERY),
        ("verdict=nonsense", {"verdict"}, EVERY),
        ("violation=no", {"violation"}, EVERY),
        ("range=forever", {"range"}, EVERY),
        # A bad value leaves its own filter out; the others still apply.
        ("state=bogus&verdict=violated", {"state"}, {"sess-reneged"}),
        ("range=1y&verdict=nonsense&q=elsewhere", {"range", "verdict"}, {"sess-elsewhere"}),
    ],
)
def test_a_bad_value_is_reported_and_left_out(
    query: str, refused: set[str], expected: set[str]
) -> None:
    found = filtered(scope_of(MemberRole.OPERATOR), query)
    assert not found.is_valid()
    assert set(found.errors) == refused
    assert through(found) == expected


@pytest.mark.usefixtures("elsewhere")
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", {"sess-agreed", "sess-reneged", "sess-open"}),
        # The merchant filter is not a merchant member's: another tenant's slug is ignored.
        ("merchant=elsewhere", {"sess-agreed", "sess-reneged", "sess-open"}),
        ("agent=merchant-lax", set()),
        ("q=elsewhere", set()),
        ("state=OPENING", {"sess-open"}),
        # Another tenant's sessions match none of the new filters either.
        ("item=lax", set()),
        ("currency=EUR", set()),
        ("verdict=fair_but_stuck", set()),
    ],
)
@pytest.mark.usefixtures("varied")
def test_a_merchant_member_filters_only_its_own_sessions(query: str, expected: set[str]) -> None:
    found = filtered(scope_of(MemberRole.MERCHANT_MANAGER, "shop"), query)
    assert "merchant" not in found.form.fields
    assert found.is_valid(), found.errors
    assert through(found) == expected
