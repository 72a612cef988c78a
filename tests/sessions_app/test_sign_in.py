"""The sign-in page: a refused sign-in answers 400 and starts from the error summary, the user
name kept and the password not; each failure counts against the address's budget of failed
authentications, shared with the API, and past it the address gets 429 even with the right
password; the page has the site's one messages region, as every page."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client

from arbiter_app import limits
from sessions_app.models import MemberRole
from tests.sessions_app.pages import error_summary_in, messages_in
from tests.support.factories.accounts import PASSWORD, member

pytestmark = pytest.mark.django_db


@pytest.fixture
def address() -> str:
    # The counters live in the shared cache for a minute: an address of its own per test.
    return f"sign-in-{uuid.uuid4()}"


def sign_in(client: Client, address: str, password: str) -> Any:
    return client.post("/login/", {"username": "mia", "password": password}, REMOTE_ADDR=address)


def test_a_wrong_password_is_refused_400_in_the_error_summary_and_signs_nobody_in(
    address: str,
) -> None:
    member("mia", MemberRole.OPERATOR)
    browser = Client()
    answer = sign_in(browser, address, "not it")
    assert answer.status_code == 400
    page = answer.content.decode()
    summary = error_summary_in(page)
    assert "You are not signed in:" in summary
    assert "Please enter a correct username and password." in summary
    assert 'name="username" value="mia"' in page
    assert "not it" not in page
    assert browser.get("/").status_code == 302  # still signed out
    assert sign_in(browser, address, PASSWORD).status_code == 302
    assert browser.get("/").status_code == 200


def test_an_empty_form_links_each_missing_field() -> None:
    answer = Client().post("/login/", {})
    assert answer.status_code == 400
    page = answer.content.decode()
    summary = error_summary_in(page)
    assert '<a href="#id_username">' in summary
    assert '<a href="#id_password">' in summary
    assert 'id="id_password_error"' in page


def test_an_address_past_its_failures_is_refused_429_even_with_the_password(
    address: str, settings: Any, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One minute for the whole test: a new one starting midway would empty the count.
    monkeypatch.setattr(limits, "current_window", lambda: (0, 30.0))
    settings.OANP_AUTH_FAILURES_PER_MINUTE = 3
    member("mia", MemberRole.OPERATOR)
    for _ in range(3):
        assert sign_in(client, address, "guess").status_code == 400
    refused = sign_in(client, address, PASSWORD)
    assert refused.status_code == 429
    assert refused["Retry-After"] == "30"
    summary = error_summary_in(refused.content.decode())
    assert "Too many failed sign-ins from your address: try again in 30 s." in summary
    assert client.get("/").status_code == 302  # the right password, and still signed out
    # Another address signs in; the API's budget is the same one.
    assert sign_in(client, f"{address}-other", PASSWORD).status_code == 302
    assert Client().get("/oanp/v0.1/sessions/x", REMOTE_ADDR=address).status_code == 429


def test_every_page_has_one_messages_region_and_an_empty_one_says_nothing() -> None:
    page = Client().get("/login/").content.decode()
    assert page.count('role="status"') == 1
    assert messages_in(page) == []
    member("mia", MemberRole.OPERATOR)
    browser = Client()
    browser.post("/login/", {"username": "mia", "password": PASSWORD})
    assert browser.get("/").content.decode().count('class="messages"') == 1
