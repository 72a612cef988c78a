"""The sign-in page: a refused sign-in starts from the error summary, the user name kept and
the password not; the page has the site's one messages region, as every page."""

from __future__ import annotations

import pytest
from django.test import Client

from sessions_app.models import Role
from tests.sessions_app.pages import error_summary_in, messages_in
from tests.support.factories.accounts import PASSWORD, member

pytestmark = pytest.mark.django_db


def test_a_wrong_password_is_in_the_error_summary_and_signs_nobody_in() -> None:
    member("mia", Role.OPERATOR)
    browser = Client()
    answer = browser.post("/login/", {"username": "mia", "password": "not it"})
    page = answer.content.decode()
    summary = error_summary_in(page)
    assert "You are not signed in:" in summary
    assert "Please enter a correct username and password." in summary
    assert 'name="username" value="mia"' in page
    assert "not it" not in page
    assert browser.get("/").status_code == 302  # still signed out


def test_an_empty_form_links_each_missing_field() -> None:
    page = Client().post("/login/", {}).content.decode()
    summary = error_summary_in(page)
    assert '<a href="#id_username">' in summary
    assert '<a href="#id_password">' in summary
    assert 'id="id_password_error"' in page


def test_every_page_has_one_messages_region_and_an_empty_one_says_nothing() -> None:
    page = Client().get("/login/").content.decode()
    assert page.count('role="status"') == 1
    assert messages_in(page) == []
    member("mia", Role.OPERATOR)
    browser = Client()
    browser.post("/login/", {"username": "mia", "password": PASSWORD})
    assert browser.get("/").content.decode().count('class="messages"') == 1
