"""Each filter of the sessions list, and each sort's keyset page, reads an index: PostgreSQL's
own EXPLAIN says so. Sequential scans are priced out for the statement, as on a table large
enough that one would cost more: on the few rows of a test the planner would otherwise read
the whole table whatever indexes there are, and a filter that no index serves is still
planned as a sequential scan, so the test fails for it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import QuerySet
from django.http import QueryDict

from arbiter_app.models import Session
from sessions_app import selectors, tenancy
from sessions_app.filters import SORTS
from sessions_app.models import AgentProfile, MemberRole, Membership, Merchant

pytestmark = pytest.mark.django_db


def scope(role: str, merchant: Merchant | None = None) -> tenancy.Scope:
    user = User.objects.create_user(f"{role}-reader", password="pw")
    Membership.objects.create(user=user, role=role, merchant=merchant)
    found = tenancy.scope_of(user)
    assert found is not None
    return found


def plan(found: QuerySet[Session]) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
    return found.explain()


@pytest.mark.parametrize(
    ("query", "index"),
    [
        ("agent=buyer-001", "arbiter_app_session_buyer_agent_id"),
        ("agent=buyer-001", "arbiter_app_session_merchant_agent_id"),
        ("item=JFK", "session_text_search"),
        ("q=01JDB", "session_text_search"),
        ("price_min=100", "session_final_price"),
        ("price_min=100&price_max=400", "session_final_price"),
        ("currency=EUR", "session_currency"),
        ("profile=terms/v0.1", "session_profile"),
        ("close_reason=buyer_reneged", "session_close_reason"),
        ("verdict=violated", "arbiter_app_session_violated_rounds"),
        ("violation=yes", "arbiter_app_session_violated_rounds"),
        ("verdict=fair_but_stuck", "session_stuck"),
        ("verdict=fair", "session_fair"),
        ("settlement=settled", "session_settlement"),
        ("lasted_min=5", "session_lasted"),
        ("lasted_max=5", "session_lasted"),
        ("state=NEGOTIATING", "arbiter_app_session_phase"),
        ("range=24h", "session_opened"),
        ("opened_after=2026-05-01T00:00:00Z", "session_opened"),
        ("merchant=shop", "arbiter_app_session_merchant_agent_id"),
    ],
)
def test_each_filter_reads_an_index(query: str, index: str) -> None:
    Merchant.objects.create(name="Shop", slug="shop")
    found = selectors.session_filter(scope(MemberRole.OPERATOR), QueryDict(query))
    assert found.is_valid(), found.errors
    # Unsorted: with the list's order, the planner may walk the sort's own index and filter
    # as it goes, when the statistics earlier tests left make the table look small; the
    # sort's index has its test below.
    explained = plan(found.qs.order_by())
    assert index in explained, explained
    assert "Seq Scan" not in explained, explained


@pytest.mark.parametrize("sort", ["-opened", "opened", "-activity", "activity"])
def test_a_page_of_each_time_sort_reads_its_keyset_index(sort: str) -> None:
    found = selectors.session_filter(scope(MemberRole.OPERATOR), QueryDict(f"sort={sort}"))
    assert found.is_valid(), found.errors
    column = SORTS[sort.lstrip("-")][0]
    sign = "-" if sort.startswith("-") else ""
    explained = plan(found.qs.order_by(f"{sign}{column}", f"{sign}pk")[:51])
    index = "session_opened_page" if column == "opened_at" else "session_activity_page"
    assert index in explained, explained


def test_a_tenants_filter_reads_an_index_within_its_scope() -> None:
    shop = Merchant.objects.create(name="Shop", slug="shop")
    AgentProfile.objects.create(merchant=shop, agent_id="merchant-sfo", mode="external")
    found = selectors.session_filter(
        scope(MemberRole.MERCHANT_MEMBER, shop), QueryDict("item=JFK&currency=USD")
    )
    assert found.is_valid(), found.errors
    explained = plan(found.qs)
    assert "Seq Scan" not in explained, explained
    assert "merchant-sfo" in explained, explained
