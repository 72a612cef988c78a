"""Resetting a forgotten password by mail (Django's token views, in the site's layout): the
sign-in page links to it; the answer is the same whether the address has an account; the
mailed link names the public address, works once, and signs out every other session; an
altered, used or expired link gets a plain 400 page; the requests spend the address's budget."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client

from arbiter_app import limits
from sessions_app.models import MemberRole
from tests.sessions_app.pages import error_summary_in
from tests.support.factories.accounts import PASSWORD, member, signed_in

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a brand new passphrase 9"
LINK = re.compile(r"https?://\S+/reset/\S+/")


@pytest.fixture
def mia() -> User:
    user = member("mia", MemberRole.OPERATOR)
    user.email = "mia@example.org"
    user.save()
    return user


def ask(client: Client, email: str, address: str = "127.0.0.1") -> Any:
    return client.post("/password-reset/", {"email": email}, REMOTE_ADDR=address)


def mailed_link() -> str:
    (message,) = mail.outbox
    found = LINK.search(message.body)
    assert found, message.body
    return found.group(0)


def set_password(client: Client, link: str, password: str = NEW_PASSWORD) -> Any:
    """Opens the link (Django moves the token into the session and redirects), then posts."""
    opened = client.get(link)
    assert opened.status_code == 302, opened.content
    form_url = opened["Location"]
    assert client.get(form_url).status_code == 200
    return client.post(form_url, {"new_password1": password, "new_password2": password})


def test_the_sign_in_page_links_to_the_reset() -> None:
    page = Client().get("/login/").content.decode()
    assert 'href="/password-reset/"' in page
    assert Client().get("/password-reset/").status_code == 200


def test_the_link_sets_a_new_password_once_and_signs_out_everywhere(
    mia: User, settings: Any
) -> None:
    settings.OANP_PUBLIC_URL = "https://arbiter.example.org"
    elsewhere = signed_in(mia)
    assert elsewhere.get("/").status_code == 200
    browser = Client()
    sent = ask(browser, "mia@example.org")
    assert sent.status_code == 302
    assert sent["Location"] == "/password-reset/sent/"
    (message,) = mail.outbox
    assert message.to == ["mia@example.org"]
    link = mailed_link()
    assert link.startswith("https://arbiter.example.org/reset/")
    path = link.removeprefix("https://arbiter.example.org")

    done = set_password(browser, path)
    assert done.status_code == 302
    assert done["Location"] == "/reset/done/"
    assert "signed out" in browser.get("/reset/done/").content.decode()
    assert elsewhere.get("/").status_code == 302  # the other session ended
    assert Client().login(username="mia", password=NEW_PASSWORD)

    again = Client().get(path, follow=True)
    assert again.status_code == 400
    assert "This link does not work" in again.content.decode()


def test_an_unknown_address_gets_the_same_answer_and_no_mail(mia: User) -> None:
    known, unknown = ask(Client(), "mia@example.org"), ask(Client(), "nobody@example.org")
    assert (unknown.status_code, unknown["Location"]) == (known.status_code, known["Location"])
    assert [m.to for m in mail.outbox] == [["mia@example.org"]]


@pytest.mark.parametrize("alter", [lambda link: link[:-3] + "xyz/", lambda link: link[:-8] + "/"])
def test_an_altered_link_gets_a_plain_400_page(mia: User, alter: Any) -> None:
    ask(Client(), "mia@example.org")
    answer = Client().get(alter(mailed_link()), follow=True)
    assert answer.status_code == 400
    page = answer.content.decode()
    assert "This link does not work" in page
    assert 'href="/password-reset/"' in page


def test_an_expired_link_gets_a_plain_400_page(mia: User, settings: Any) -> None:
    ask(Client(), "mia@example.org")
    # Every link is older than a timeout of -1 s: as if mailed over an hour ago.
    settings.PASSWORD_RESET_TIMEOUT = -1
    answer = Client().get(mailed_link(), follow=True)
    assert answer.status_code == 400
    assert "This link does not work" in answer.content.decode()
    assert User.objects.get(username="mia").check_password(PASSWORD)


def test_a_refused_new_password_answers_400_and_changes_nothing(mia: User) -> None:
    ask(Client(), "mia@example.org")
    refused = set_password(Client(), mailed_link(), password="12345")
    assert refused.status_code == 400
    assert "Your password is unchanged:" in error_summary_in(refused.content.decode())
    assert User.objects.get(username="mia").check_password(PASSWORD)


def test_a_malformed_address_answers_400() -> None:
    answer = ask(Client(), "not an address")
    assert answer.status_code == 400
    assert "Enter a valid email address." in error_summary_in(answer.content.decode())
    assert mail.outbox == []


def test_reset_requests_spend_the_sign_in_budget(
    mia: User, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "current_window", lambda: (0, 30.0))
    settings.OANP_AUTH_FAILURES_PER_MINUTE = 2
    address = f"reset-{uuid.uuid4()}"
    assert ask(Client(), "mia@example.org", address).status_code == 302
    assert ask(Client(), "nobody@example.org", address).status_code == 302
    refused = ask(Client(), "mia@example.org", address)
    assert refused.status_code == 429
    assert refused["Retry-After"] == "30"
    assert "try again in 30 s" in error_summary_in(refused.content.decode())
    assert len(mail.outbox) == 1
