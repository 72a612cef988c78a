""" "More sessions" never repeats or skips a row, for every sort the list offers: a property
test over random activity, sessions opening and moving at colliding moments, and new ones
opening while the user pages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.http import QueryDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arbiter_app.models import Session
from sessions_app import selectors, tenancy
from sessions_app.filters import SORTS
from sessions_app.models import MemberRole, Membership
from tests.support.factories.agents import ClientNegotiation, make_agent

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 5, 1, tzinfo=UTC)
#: Few distinct moments, so that many rows share a sort value and ties fall on page edges.
moments = st.integers(min_value=0, max_value=3).map(lambda s: T0 + timedelta(seconds=s))
phases = st.sampled_from(["OPENING", "NEGOTIATING", "AGREED", "CLOSED"])
rows = st.lists(st.tuples(moments, moments, phases), min_size=0, max_size=14)
SORT_NAMES = [f"{d}{key}" for key in SORTS for d in ("", "-")]


@pytest.fixture
def template(client: object) -> Session:
    """One real session, whose row the examples copy with their own ids and times."""
    buyer, seller = make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant")
    ClientNegotiation(client, buyer, seller, session_id="template").open()
    return Session.objects.get(session_id="template")


@pytest.fixture
def scope() -> tenancy.Scope:
    user = User.objects.create_user("op", password="pw")
    Membership.objects.create(user=user, role=MemberRole.OPERATOR)
    found = tenancy.scope_of(user)
    assert found is not None
    return found


def copy(template: Session, name: str, opened: datetime, active: datetime, phase: str) -> None:
    Session.objects.create(
        session_id=name,
        buyer_agent_id=template.buyer_agent_id,
        merchant_agent_id=template.merchant_agent_id,
        phase=phase,
        currency=template.currency,
        profile=template.profile,
        opened_at=opened,
        last_activity_at=active,
        head_hash=template.head_hash,
        state=template.state,
        final_price=Decimal(340) if phase == "AGREED" else None,
    )


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    existing=rows,
    arriving=rows,
    size=st.integers(min_value=1, max_value=4),
    sort=st.sampled_from(SORT_NAMES),
)
def test_more_sessions_shows_each_row_once_in_every_sort(
    template: Session,
    scope: tenancy.Scope,
    existing: list[tuple[datetime, datetime, str]],
    arriving: list[tuple[datetime, datetime, str]],
    size: int,
    sort: str,
) -> None:
    Session.objects.filter(session_id__startswith="row-").delete()
    for n, (opened, active, phase) in enumerate(existing):
        copy(template, f"row-{n}", opened, active, phase)
    before = set(Session.objects.values_list("session_id", flat=True))
    found = selectors.session_filter(scope, QueryDict(f"sort={sort}"))
    assert found.is_valid()
    everything = [r.session.session_id for r in selectors.session_page(found, 10_000).rows]
    seen: list[str] = []
    query = QueryDict(f"sort={sort}", mutable=True)
    pages = 0
    while True:
        found = selectors.session_filter(scope, query)
        assert found.is_valid(), found.errors
        page = selectors.session_page(found, size)
        seen += [r.session.session_id for r in page.rows]
        # Sessions open between two pages, at the same colliding moments.
        if pages < len(arriving):
            opened, active, phase = arriving[pages]
            copy(template, f"row-new-{pages}", opened, active, phase)
        pages += 1
        if page.next_cursor is None:
            break
        query["cursor"] = page.next_cursor
    assert len(seen) == len(set(seen)), seen
    assert [name for name in seen if name in before] == everything
