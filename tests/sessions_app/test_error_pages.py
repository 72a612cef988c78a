"""403, 404 and 500 in the dashboard's layout, as Django serves them with DEBUG off (the
tests' setting): the navigation, a message that says what happened and a way back."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.test import Client, RequestFactory

from arbiter_app.problems import handler500
from sessions_app.models import MemberRole
from tests.support.factories.accounts import member, merchant, signed_in

pytestmark = pytest.mark.django_db


def nav_links(page: str) -> list[str]:
    nav = re.search(r'<nav aria-label="Main">(.*?)</nav>', page, re.S)
    assert nav is not None, "no main navigation"
    return re.findall(r">([^<>]+)</a>", nav.group(1))


def test_debug_is_off_so_the_pages_are_the_ones_people_see() -> None:
    assert settings.DEBUG is False


def test_a_merchant_refused_the_admins_signing_keys_page_gets_a_403_with_the_navigation() -> None:
    browser = signed_in(member("mia", MemberRole.MERCHANT_MANAGER, merchant("skyways")))
    response = browser.get("/keys/")
    page = response.content.decode()
    assert response.status_code == 403
    assert "<title>Not allowed · OANP arbiter</title>" in page
    assert "Your account may not open this page or do this: only admins may do this." in page
    assert nav_links(page) == ["Overview", "Sessions", "Agents", "Deliveries", "Exports"]
    assert '<a href="/">Go to the overview</a>' in page


def test_an_operator_asking_for_a_session_that_is_not_there_gets_a_404_in_the_layout() -> None:
    browser = signed_in(member("otto", MemberRole.OPERATOR))
    response = browser.get("/sessions/sess-nowhere/")
    page = response.content.decode()
    assert response.status_code == 404
    assert "<title>Not found · OANP arbiter</title>" in page
    assert "There is no page at <code>/sessions/sess-nowhere/</code>" in page
    assert nav_links(page) == ["Overview", "Sessions", "Agents", "Deliveries"]
    assert 'href="/sessions/" aria-current="page"' in page
    assert '<a href="/sessions/">See the sessions</a>' in page


def test_an_address_nothing_answers_is_a_404_page_for_people_and_problem_json_for_agents() -> None:
    browser = signed_in(member("ada", MemberRole.ADMIN))
    page = browser.get("/no-such-page/")
    assert page.status_code == 404
    assert nav_links(page.content.decode())[-5:] == [
        "Keys",
        "Exports",
        "Audit log",
        "Organisations",
        "People",
    ]
    api = browser.get("/oanp/v0.1/no-such-endpoint")
    assert api.status_code == 404
    assert api["Content-Type"] == "application/problem+json"


def test_someone_signed_out_is_offered_the_sign_in_page() -> None:
    response = Client(HTTP_HOST="localhost").get("/no-such-page/")
    page = response.content.decode()
    assert response.status_code == 404
    assert '<nav aria-label="Main">' not in page
    assert '<a href="/login/?next=/no-such-page/">Sign in</a>' in page


def test_a_500_is_the_layout_without_anything_that_needs_the_database() -> None:
    response = handler500(RequestFactory().get("/sessions/"))
    page = response.content.decode()
    assert response.status_code == 500
    assert "<title>Error · OANP arbiter</title>" in page
    assert '<link rel="stylesheet" href="/static/css/app.css">' in page
    assert "The arbiter failed to answer this request" in page
    assert '<a href="/">Go to the overview</a>' in page
