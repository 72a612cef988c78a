"""The second factor of a dashboard sign-in: an authenticator app's TOTP device and a set of
single-use recovery codes, both django-otp's, and the rule that makes operators and admins
have one (``OANP_REQUIRE_2FA``).

A code of six digits is checked against the TOTP device, anything else against the recovery
codes, so that a typo in one never counts against the other's throttle. Each check locks the
device's row (django-otp's ``verify_token``): two requests with the same code cannot both pass,
a TOTP code is refused once it or a later one was used, and a recovery code is deleted on use.
A wrong code also makes the device wait before its next check, 1 s, then 2, 4, … (django-otp's
throttle), which slows a guesser spread over many addresses that the per-address budget alone
would not.
"""

from __future__ import annotations

import math
from base64 import b32encode
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

import django_otp
import segno
from django.conf import settings
from django.contrib.auth import logout
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.auth.views import redirect_to_login
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django_otp.models import Device
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

from sessions_app.tenancy import scope_of
from sessions_app.web_sessions import NOT_PAGES

RECOVERY_CODES = 10
TOTP_DIGITS = 6


@dataclass(frozen=True)
class Refusal:
    """Why a code was not taken, as the page says it."""

    message: str


WRONG = Refusal(
    "This code is wrong or was used already: each code works once. "
    "Wait for your app's next code, or use a recovery code."
)


def has_device(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Whether signing in as ``user`` takes a code: an authenticator app was confirmed."""
    return TOTPDevice.objects.filter(user_id=user.pk, confirmed=True).exists()


def owed(user: AbstractBaseUser | AnonymousUser, *, verified: bool) -> str | None:
    """What the second factor still asks of a signed-in ``user`` whose sign-in took a code or
    not (``verified``): ``"code"`` when they have an app and this sign-in took none,
    ``"enrolment"`` when they must have one (:func:`is_required`) and have none, else ``None``.
    Pages and live sockets hold a sign-in to the same rule."""
    if verified:
        return None
    if has_device(user):
        return "code"
    return "enrolment" if is_required(user) else None


def session_verified(user: AbstractBaseUser, session: Mapping[str, object]) -> bool:
    """Whether the sign-in ``session`` holds took a code of one of ``user``'s devices, as
    django-otp's middleware reads it for a page."""
    persistent_id = session.get(django_otp.DEVICE_ID_SESSION_KEY)
    device = Device.from_persistent_id(persistent_id) if isinstance(persistent_id, str) else None
    return device is not None and device.user_id == user.pk


def is_required(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Whether ``user`` must have a second factor before using the dashboard: operators and
    admins, who see every merchant's sessions, when the deployment says so."""
    if not settings.OANP_REQUIRE_2FA:
        return False
    scope = scope_of(user)
    return scope is not None and scope.is_staff_role


def enrolment(user: AbstractBaseUser) -> TOTPDevice:
    """The app ``user`` is setting up: the same secret on every visit until a code confirms
    it, so a QR code scanned before a reload still works."""
    device = TOTPDevice.objects.filter(user_id=user.pk, confirmed=False).first()
    if device is None:
        device = TOTPDevice.objects.create(user=user, name="authenticator app", confirmed=False)
    return device


def secret_text(device: TOTPDevice) -> str:
    """The secret as an app takes it typed in: base32, in groups of four."""
    secret = b32encode(device.bin_key).decode()
    return " ".join(secret[i : i + 4] for i in range(0, len(secret), 4))


def qr_code(device: TOTPDevice) -> str:
    """The app's setup link as a QR code, an SVG ``data:`` URI (the pages' policy allows
    ``data:`` images and no inline markup with styles). Dark on white in both colour schemes,
    with the quiet zone scanners need."""
    return str(
        segno.make(device.config_url, error="m").svg_data_uri(
            scale=5, border=4, dark="#000", light="#fff"
        )
    )


def normalized(code: str) -> str:
    """A code as typed: apps show ``123 456``, and recovery codes are read aloud or copied
    with stray spaces and capitals."""
    return "".join(code.split()).lower()


def _verify(user: AbstractBaseUser, device: Device | None, code: str) -> Device | Refusal:
    if device is None:
        return WRONG
    # Asked before the check, which itself starts the next wait when the code is wrong.
    allowed, details = device.verify_is_allowed()
    if not allowed and details and "locked_until" in details:
        wait = max(1, math.ceil((details["locked_until"] - timezone.now()).total_seconds()))
        return Refusal(f"Too many wrong codes in a row for this account: try again in {wait} s.")
    return django_otp.verify_token(user, device.persistent_id, code) or WRONG


def check(user: AbstractBaseUser, code: str) -> Device | Refusal:
    """The device that took ``code`` (an app's code or a recovery code), or why none did."""
    code = normalized(code)
    if code.isdigit() and len(code) == TOTP_DIGITS:
        app = TOTPDevice.objects.filter(user_id=user.pk, confirmed=True).first()
        return _verify(user, app, code)
    return _verify(user, StaticDevice.objects.filter(user_id=user.pk).first(), code)


def confirm(device: TOTPDevice, code: str) -> bool:
    """Turns the app on once it shows a right ``code``: proof that it holds the secret."""
    code = normalized(code)
    if not device.verify_token(code):
        return False
    device.confirmed = True
    device.save(update_fields=["confirmed"])
    return True


@transaction.atomic
def new_recovery_codes(user: AbstractBaseUser) -> list[str]:
    """Replaces ``user``'s recovery codes with new ones, returned to be shown this once: only
    their use is kept."""
    device, _ = StaticDevice.objects.get_or_create(
        user=user, name="recovery codes", defaults={"confirmed": True}
    )
    device.token_set.all().delete()
    codes = [StaticToken.random_token() for _ in range(RECOVERY_CODES)]
    StaticToken.objects.bulk_create(StaticToken(device=device, token=code) for code in codes)
    return codes


def recovery_codes_left(user: AbstractBaseUser) -> int:
    return StaticToken.objects.filter(device__user_id=user.pk).count()


@transaction.atomic
def remove(user: AbstractBaseUser) -> None:
    """Turns the second factor off: the app and the recovery codes go."""
    TOTPDevice.objects.filter(user_id=user.pk).delete()
    StaticDevice.objects.filter(user_id=user.pk).delete()


#: What a person sent to set up a second factor may still open: that page, and signing out.
ENROLMENT_PATH = "/account/two-factor/"
SIGN_OUT_PATH = "/logout/"


class SecondFactorMiddleware:
    """Holds a signed-in person to the second factor on every page (after django-otp's
    ``OTPMiddleware``, which says whether this session's sign-in took a code).

    - A person with an app whose session took no code signed in by password alone (Django's
      admin login, say): signed out and sent to the sign-in page, whose second step asks.
    - A person who must have one (:func:`is_required`) and has none: sent to set it up before
      anything else.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # The path first: the probes must not read the session, nor the database behind it.
        if request.path.startswith(NOT_PAGES):
            return self.get_response(request)
        user = request.user
        if not user.is_authenticated:
            return self.get_response(request)
        due = owed(user, verified=user.is_verified())
        if due == "code":
            logout(request)
            return redirect_to_login(request.get_full_path())
        if due == "enrolment" and request.path not in (ENROLMENT_PATH, SIGN_OUT_PATH):
            return redirect(f"{ENROLMENT_PATH}?{urlencode({'next': request.get_full_path()})}")
        return self.get_response(request)


def mark_verified(request: HttpRequest, device: Device) -> None:
    """Records in ``request``'s session that its sign-in took a code of ``device``."""
    django_otp.login(request, device)


def is_recovery_code(device: Device) -> bool:
    return isinstance(device, StaticDevice)
