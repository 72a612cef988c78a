"""A live page's socket closes as soon as its viewer's access ends: signed out, deactivated,
membership removed; or, when nothing announced it, at the next periodic re-check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session as SignIn
from django.test import Client, override_settings
from django_otp.plugins.otp_totp.models import TOTPDevice

from oanp_site.asgi import application
from sessions_app.consumers import ACCESS_ENDED
from sessions_app.models import Membership
from tests.sessions_app.test_tenancy import merchant_member, signed_in
from tests.support.factories import accounts
from tests.support.factories.agents import ClientNegotiation, make_agent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


async def open_socket(browser: Client, path: str) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(
        application,
        path,
        headers=[
            (b"host", b"localhost"),
            (b"origin", b"http://localhost"),
            (b"cookie", f"sessionid={browser.cookies['sessionid'].value}".encode()),
        ],
    )
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def closed_with(communicator: WebsocketCommunicator, timeout: float) -> int | None:
    message = await communicator.receive_output(timeout)
    assert message["type"] == "websocket.close", message
    return message.get("code")


@sync_to_async
def member_signed_in() -> tuple[Client, User]:
    user, _ = merchant_member("a")
    return signed_in("user-a"), user


def deactivate(browser: Client, user: User) -> None:
    user.is_active = False
    user.save()


def remove_membership(browser: Client, user: User) -> None:
    Membership.objects.filter(user=user).delete()


def sign_out(browser: Client, user: User) -> None:
    browser.post("/logout/")


@pytest.mark.parametrize("end_access", [deactivate, remove_membership, sign_out])
@pytest.mark.parametrize("path", ["/ws/sessions/", "/ws/sessions/sess-a/"])
async def test_the_socket_closes_when_access_ends(
    end_access: Callable[[Client, User], None], path: str, settings: Any
) -> None:
    browser, user = await member_signed_in()
    if path != "/ws/sessions/":
        await sync_to_async(_session_of_merchant_a)()
    communicator = await open_socket(browser, path)
    assert await communicator.receive_nothing(0.3)  # open, and stays open
    await sync_to_async(end_access)(browser, user)
    # Announced on commit: well before the periodic re-check (5 s by default).
    assert await closed_with(communicator, timeout=3) == ACCESS_ENDED


@override_settings(OANP_STREAM_RECHECK_SECONDS=0.5)
async def test_unannounced_the_periodic_recheck_closes_it() -> None:
    browser, _ = await member_signed_in()
    communicator = await open_socket(browser, "/ws/sessions/")
    # Behind the dashboard's back: the sign-in row is gone, no signal was sent.
    await sync_to_async(lambda: SignIn.objects.all().delete())()
    assert await closed_with(communicator, timeout=3) == ACCESS_ENDED


@override_settings(OANP_STREAM_RECHECK_SECONDS=0.3)
async def test_a_viewer_who_keeps_access_stays_connected() -> None:
    browser, user = await member_signed_in()
    communicator = await open_socket(browser, "/ws/sessions/")
    # Saving the user (as every sign-in does) announces; the re-check lets the socket be.
    await sync_to_async(user.save)()
    assert await communicator.receive_nothing(1.5)
    await communicator.disconnect()


@override_settings(OANP_STREAM_RECHECK_SECONDS=0.5)
async def test_a_sign_in_that_owes_a_second_factor_loses_its_socket() -> None:
    """As on every page: once the person has an authenticator app, a sign-in that took no code
    from it watches nothing more, and the socket closes at the next re-check."""
    browser, user = await member_signed_in()
    communicator = await open_socket(browser, "/ws/sessions/")
    assert await communicator.receive_nothing(0.8)  # re-checked, and left open
    await sync_to_async(
        lambda: TOTPDevice.objects.create(user=user, name="phone", confirmed=True)
    )()
    assert await closed_with(communicator, timeout=3) == ACCESS_ENDED


@override_settings(OANP_STREAM_RECHECK_SECONDS=0.5, OANP_REQUIRE_2FA=True)
async def test_a_sign_in_that_owes_an_enrolment_loses_its_socket() -> None:
    """An operator, who must have an app where the deployment requires it, watches nothing
    before setting one up."""
    browser = await sync_to_async(lambda: accounts.signed_in(accounts.member("op-1", "operator")))()
    communicator = await open_socket(browser, "/ws/sessions/")
    assert await closed_with(communicator, timeout=3) == ACCESS_ENDED


def _session_of_merchant_a() -> None:
    ClientNegotiation(
        Client(),
        make_agent("buyer-001", "buyer"),
        make_agent("agent-a", "merchant"),
        session_id="sess-a",
        tag="a-",
    ).open()
