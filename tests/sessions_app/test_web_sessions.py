"""Dashboard sessions end after OANP_SESSION_IDLE_SECONDS without a request, each request
moving the end on; "sign out everywhere" on the account page ends every session of the person
and no one else's."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

from sessions_app.models import MemberRole
from tests.sessions_app.pages import messages_in
from tests.support.factories.accounts import member, signed_in

pytestmark = pytest.mark.django_db


def session_of(client: Client) -> Session:
    return Session.objects.get(session_key=client.session.session_key)


def test_a_session_ends_after_the_idle_time_and_each_request_moves_the_end_on() -> None:
    browser = signed_in(member("mia", MemberRole.OPERATOR))
    answer = browser.get("/")
    assert answer.status_code == 200
    assert answer.cookies["sessionid"]["max-age"] == 1800
    expires = session_of(browser).expire_date
    assert abs((expires - timezone.now()) - timedelta(minutes=30)) < timedelta(seconds=30)

    # Twenty minutes idle: the next request finds the session and gives it thirty more.
    Session.objects.filter(pk=session_of(browser).pk).update(
        expire_date=timezone.now() + timedelta(minutes=10)
    )
    assert browser.get("/sessions/").status_code == 200
    assert session_of(browser).expire_date - timezone.now() > timedelta(minutes=29)

    # Thirty-one minutes idle: signed out.
    Session.objects.filter(pk=session_of(browser).pk).update(
        expire_date=timezone.now() - timedelta(minutes=1)
    )
    assert browser.get("/").status_code == 302


def test_the_idle_time_is_a_setting(settings: Any) -> None:
    settings.SESSION_COOKIE_AGE = 300
    browser = signed_in(member("mia", MemberRole.OPERATOR))
    assert browser.get("/").cookies["sessionid"]["max-age"] == 300


def test_signing_out_everywhere_ends_every_session_of_the_person_only() -> None:
    mia = member("mia", MemberRole.OPERATOR)
    here, phone = signed_in(mia), signed_in(mia)
    other = signed_in(member("bob", MemberRole.OPERATOR))
    page = here.get("/account/").content.decode()
    assert 'href="/account/"' in page  # the header names the person and links here
    assert 'action="/account/sign-out-everywhere/"' in page

    answer = here.post("/account/sign-out-everywhere/")
    assert answer.status_code == 302
    assert answer["Location"] == "/login/"
    assert messages_in(here.get("/login/").content.decode()) == [
        "Signed out everywhere (2 session(s) ended)."
    ]
    assert here.get("/").status_code == 302
    assert phone.get("/").status_code == 302
    assert other.get("/").status_code == 200


def test_signing_out_everywhere_takes_a_post_from_a_signed_in_person() -> None:
    browser = signed_in(member("mia", MemberRole.OPERATOR))
    assert browser.get("/account/sign-out-everywhere/").status_code == 405
    assert browser.get("/").status_code == 200
    assert Client().post("/account/sign-out-everywhere/").status_code == 302
