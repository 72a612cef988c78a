"""Two-step sign-in: a person sets up an authenticator app from the account page (QR code or
secret, confirmed with a code) and is shown recovery codes once; signing in then takes the
password and a code, a wrong or used one is refused 400 and counts against the address's budget
of failed sign-ins, past which the answer is 429 before the code is looked at; a recovery code
works once; removing the app takes a code; operators and admins can be made to have one."""

from __future__ import annotations

import re
import time
import uuid
from base64 import b32encode
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django_otp.oath import TOTP
from django_otp.plugins.otp_totp.models import TOTPDevice

from arbiter_app import limits
from sessions_app.models import MemberRole, Merchant
from sessions_app.views.accounts import PENDING
from tests.sessions_app.pages import error_summary_in, messages_in
from tests.support.factories.accounts import PASSWORD, member, signed_in

pytestmark = pytest.mark.django_db

CODES = re.compile(r'<ul class="recovery-codes" id="recovery-codes">(.*?)</ul>', re.S)
WRONG = "This code is wrong or was used already: each code works once."


def code_of(device: TOTPDevice, steps_ahead: int = 0) -> str:
    """What the person's app shows now, or ``steps_ahead`` periods of 30 s later."""
    totp = TOTP(device.bin_key, device.step, device.t0, device.digits)
    totp.time = time.time() + steps_ahead * device.step
    return f"{totp.token():06d}"


def enrol(browser: Client, user: User) -> tuple[TOTPDevice, list[str]]:
    """Sets up the app through the pages; the device and the recovery codes shown."""
    assert browser.get("/account/two-factor/").status_code == 200
    device = TOTPDevice.objects.get(user=user)
    answer = browser.post("/account/two-factor/", {"code": code_of(device)})
    assert answer.status_code == 200, answer.content
    device.refresh_from_db()
    return device, recovery_codes_in(answer.content.decode())


def recovery_codes_in(page: str) -> list[str]:
    found = CODES.search(page)
    assert found, page
    return re.findall(r"<code>(\w+)</code>", found.group(1))


def password_step(browser: Client, address: str = "127.0.0.1", next_: str = "") -> Any:
    target = f"/login/?next={next_}" if next_ else "/login/"
    return browser.post(target, {"username": "mia", "password": PASSWORD}, REMOTE_ADDR=address)


def code_step(browser: Client, code: str, address: str = "127.0.0.1") -> Any:
    return browser.post("/login/code/", {"code": code}, REMOTE_ADDR=address)


@pytest.fixture(autouse=True)
def _no_waits_between_codes(settings: Any) -> None:
    """Each code is checked however soon after a wrong one; the waits have a test of their own."""
    settings.OTP_TOTP_THROTTLE_FACTOR = settings.OTP_STATIC_THROTTLE_FACTOR = 0


@pytest.fixture
def mia() -> User:
    return member("mia", MemberRole.OPERATOR)


@pytest.fixture
def enrolled(mia: User) -> tuple[TOTPDevice, list[str]]:
    return enrol(signed_in(mia), mia)


@pytest.fixture
def address() -> str:
    # The counters live in the shared cache for a minute: an address of its own per test.
    return f"second-factor-{uuid.uuid4()}"


def test_setting_up_shows_a_qr_code_and_the_secret_and_a_code_confirms_it(mia: User) -> None:
    browser = signed_in(mia)
    assert "Off: your password alone signs you in." in browser.get("/account/").content.decode()
    page = browser.get("/account/two-factor/").content.decode()
    device = TOTPDevice.objects.get(user=mia, confirmed=False)
    assert 'src="data:image/svg+xml' in page
    secret = re.search(r'<code class="secret" id="secret">([A-Z2-7 ]+)</code>', page)
    assert secret
    assert TOTPDevice.objects.count() == 1
    assert secret.group(1).replace(" ", "") == b32encode(device.bin_key).decode()
    # A reload shows the same secret: a code scanned before it still works.
    assert secret.group(0) in browser.get("/account/two-factor/").content.decode()

    refused = browser.post("/account/two-factor/", {"code": "000000"})
    assert refused.status_code == 400
    assert WRONG in error_summary_in(refused.content.decode())
    assert not TOTPDevice.objects.get(pk=device.pk).confirmed

    shown = browser.post("/account/two-factor/", {"code": code_of(device)})
    assert shown.status_code == 200
    assert shown["Cache-Control"] == "no-store"
    codes = recovery_codes_in(shown.content.decode())
    assert len(codes) == 10
    assert len(set(codes)) == 10
    assert TOTPDevice.objects.get(pk=device.pk).confirmed
    # This session proved the app: it goes on, and the account page says so.
    account = browser.get("/account/")
    assert account.status_code == 200
    assert "On: signing in takes your password and a code" in account.content.decode()
    assert "10 recovery codes left." in account.content.decode()
    assert browser.get("/account/two-factor/").status_code == 302  # one app at a time


def test_signing_in_takes_the_password_then_a_code(
    mia: User, enrolled: tuple[TOTPDevice, list[str]]
) -> None:
    device, _ = enrolled
    browser = Client()
    first = password_step(browser, next_="/sessions/")
    assert first.status_code == 302
    assert first["Location"] == "/login/code/"
    assert browser.get("/").status_code == 302  # not signed in yet
    assert "six-digit code" in browser.get("/login/code/").content.decode()
    second = code_step(browser, code_of(device, steps_ahead=1))
    assert second.status_code == 302
    assert second["Location"] == "/sessions/"
    assert browser.get("/").status_code == 200


def test_a_wrong_code_and_a_used_code_are_refused(
    mia: User, enrolled: tuple[TOTPDevice, list[str]], settings: Any
) -> None:
    device, _ = enrolled
    browser = Client()
    password_step(browser)
    wrong = code_step(browser, "123 456" if code_of(device) != "123456" else "654321")
    assert wrong.status_code == 400
    assert WRONG in error_summary_in(wrong.content.decode())
    assert browser.get("/").status_code == 302
    # The code the enrolment used is spent, as is every earlier one.
    used = code_step(browser, code_of(device))
    assert used.status_code == 400
    assert WRONG in error_summary_in(used.content.decode())
    assert code_step(browser, code_of(device, steps_ahead=1)).status_code == 302
    browser.post("/logout/")
    password_step(browser)
    again = code_step(browser, code_of(device, steps_ahead=1))
    assert again.status_code == 400
    assert browser.get("/").status_code == 302


def test_wrong_codes_spend_the_sign_in_budget_and_past_it_no_code_is_checked(
    mia: User,
    enrolled: tuple[TOTPDevice, list[str]],
    address: str,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One minute for the whole test: a new one starting midway would empty the count.
    monkeypatch.setattr(limits, "current_window", lambda: (0, 30.0))
    settings.OANP_AUTH_FAILURES_PER_MINUTE = 3
    device, _ = enrolled
    right = code_of(device, steps_ahead=1)
    browser = Client()
    assert password_step(browser, address).status_code == 302
    for _ in range(3):
        assert (
            code_step(browser, "000000" if right != "000000" else "111111", address).status_code
            == 400
        )
    refused = code_step(browser, right, address)
    assert refused.status_code == 429
    assert refused["Retry-After"] == "30"
    assert "Too many failed sign-ins from your address: try again in 30 s." in error_summary_in(
        refused.content.decode()
    )
    assert browser.get("/").status_code == 302
    # The password step is refused alike; the right code was never checked, so it still works
    # once the budget allows.
    assert password_step(Client(), address).status_code == 429
    settings.OANP_AUTH_FAILURES_PER_MINUTE = 4
    assert code_step(browser, right, address).status_code == 302
    assert browser.get("/").status_code == 200


def test_the_app_waits_longer_after_each_wrong_code(
    mia: User, enrolled: tuple[TOTPDevice, list[str]], settings: Any
) -> None:
    settings.OTP_TOTP_THROTTLE_FACTOR = 1000  # a wait no test outlasts
    device, _ = enrolled
    browser = Client()
    password_step(browser)
    right = code_of(device, steps_ahead=1)
    assert code_step(browser, "000000" if right != "000000" else "111111").status_code == 400
    held = code_step(browser, right)
    assert held.status_code == 400
    assert "Too many wrong codes in a row for this account: try again in" in error_summary_in(
        held.content.decode()
    )
    assert browser.get("/").status_code == 302


def test_a_recovery_code_signs_in_once(mia: User, enrolled: tuple[TOTPDevice, list[str]]) -> None:
    _, codes = enrolled
    browser = Client()
    password_step(browser)
    assert code_step(browser, f" {codes[0].upper()} ").status_code == 302
    assert messages_in(browser.get("/").content.decode()) == [
        "You signed in with a recovery code, which now no longer works; 9 left. "
        "Your account page makes new ones."
    ]
    browser.post("/logout/")
    password_step(browser)
    reused = code_step(browser, codes[0])
    assert reused.status_code == 400
    assert WRONG in error_summary_in(reused.content.decode())


def test_new_recovery_codes_replace_the_old(
    mia: User, enrolled: tuple[TOTPDevice, list[str]]
) -> None:
    device, old = enrolled
    browser = Client()
    password_step(browser)
    code_step(browser, code_of(device, steps_ahead=1))
    assert browser.get("/account/two-factor/recovery-codes/").status_code == 405
    answer = browser.post("/account/two-factor/recovery-codes/")
    new = recovery_codes_in(answer.content.decode())
    assert len(new) == 10
    assert not set(new) & set(old)
    browser.post("/logout/")
    password_step(browser)
    assert code_step(browser, old[1]).status_code == 400
    assert code_step(browser, new[1]).status_code == 302


def test_turning_it_off_takes_a_code(mia: User, enrolled: tuple[TOTPDevice, list[str]]) -> None:
    device, codes = enrolled
    browser = Client()
    password_step(browser)
    code_step(browser, code_of(device, steps_ahead=1))
    assert browser.get("/account/two-factor/remove/").status_code == 200
    refused = browser.post("/account/two-factor/remove/", {"code": "nope"})
    assert refused.status_code == 400
    assert TOTPDevice.objects.filter(user=mia).exists()
    done = browser.post("/account/two-factor/remove/", {"code": codes[2]})
    assert done.status_code == 302
    assert not TOTPDevice.objects.filter(user=mia).exists()
    assert browser.get("/account/").status_code == 200  # still signed in
    browser.post("/logout/")
    assert password_step(browser)["Location"] == "/"  # the password alone again


def test_a_session_signed_in_by_password_alone_is_signed_out(
    mia: User, enrolled: tuple[TOTPDevice, list[str]]
) -> None:
    # As Django's admin login or the test client's login would sign in: no code given.
    browser = signed_in(mia)
    answer = browser.get("/sessions/")
    assert answer.status_code == 302
    assert answer["Location"] == "/login/?next=/sessions/"
    assert browser.get("/account/two-factor/recovery-codes/").status_code == 302
    # Django's admin site signs in through the dashboard's two steps.
    admin = Client().get("/admin/login/?next=/admin/")
    assert (admin.status_code, admin["Location"]) == (302, "/login/?next=/admin/")


def test_the_code_step_needs_a_recent_right_password(
    mia: User, enrolled: tuple[TOTPDevice, list[str]]
) -> None:
    device, _ = enrolled
    assert Client().get("/login/code/")["Location"] == "/login/"
    browser = Client()
    password_step(browser)
    session = browser.session
    session[PENDING] = {**session[PENDING], "until": time.time() - 1}
    session.save()
    late = code_step(browser, code_of(device, steps_ahead=1))
    assert late["Location"] == "/login/"
    assert messages_in(browser.get("/login/").content.decode()) == [
        "The code was not given in time: sign in again."
    ]


def test_operators_and_admins_without_an_app_are_sent_to_set_it_up_first(
    mia: User, settings: Any
) -> None:
    settings.OANP_REQUIRE_2FA = True
    browser = Client()
    assert password_step(browser)["Location"] == "/"
    for page in ("/", "/sessions/", "/account/", "/admin/"):
        answer = browser.get(page)
        assert answer.status_code == 302, page
        assert answer["Location"].startswith("/account/two-factor/?next=")
    page = browser.get("/account/two-factor/?next=/sessions/").content.decode()
    assert "Operators and admins sign in with a code" in page
    device = TOTPDevice.objects.get(user=mia)
    shown = browser.post(
        "/account/two-factor/", {"code": code_of(device), "next": "/sessions/"}
    ).content.decode()
    assert 'href="/sessions/"' in shown
    assert browser.get("/sessions/").status_code == 200
    # A merchant's member is not held to it; nor is anyone when the setting is off.
    shop = Merchant.objects.create(name="Shop", slug="shop")
    assert signed_in(member("max", MemberRole.MERCHANT_MANAGER, shop)).get("/").status_code == 200
    settings.OANP_REQUIRE_2FA = False
    assert signed_in(member("ada", MemberRole.ADMIN)).get("/").status_code == 200
