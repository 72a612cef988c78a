"""The overview's aggregates, as selectors over the viewer's scope: sessions per state,
agreements per hour, violation rates per merchant agent, and the page that shows them."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils import timezone

from sessions_app import selectors, tenancy
from tests.sessions_app import test_session_list as listing

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sessions")]

# The list's three sessions and operator, so both pages are judged on the same data.
operator = listing.operator
sessions = listing.sessions


def scope_of(browser: Client) -> tenancy.Scope:
    found = tenancy.scope_of(browser.get("/").wsgi_request.user)
    assert found is not None
    return found


def test_every_stored_state_is_counted(operator: Client) -> None:
    assert selectors.counts_by_state(scope_of(operator)) == {
        "OPENING": 1,
        "NEGOTIATING": 0,
        "SETTLING": 0,
        "AGREED": 1,
        "CLOSED": 1,
    }


def test_agreements_fall_in_the_hour_they_ended(operator: Client) -> None:
    hours = selectors.agreements_per_hour(scope_of(operator), timezone.now())
    assert len(hours) == 24
    assert [hour for hour, _ in hours] == sorted(hour for hour, _ in hours)
    assert hours[-1][1] == 1
    assert sum(n for _, n in hours) == 1


def test_a_violation_rate_counts_sessions_with_a_violated_round(operator: Client) -> None:
    (rate,) = selectors.violation_rates(scope_of(operator))
    assert (rate.merchant_agent_id, rate.sessions, rate.violated) == ("merchant-sfo", 3, 1)
    assert rate.rate == pytest.approx(1 / 3)


def test_the_page_shows_the_rate(operator: Client) -> None:
    page = operator.get("/").content.decode()
    row = re.search(r'<table id="violation-rates">.*?<tbody>(.*?)</tbody>', page, re.S)
    assert row is not None
    cells = re.findall(r"<td>(.*?)</td>", row.group(1))
    assert cells == ["merchant-sfo", "3", "1", "33 %"]
