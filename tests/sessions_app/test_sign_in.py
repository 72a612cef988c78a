"""Signing in: a failed attempt is refused 400 with its reason and counts against the address's
budget of failed authentications, shared with the API; past it, 429 even with the password."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client

from sessions_app.models import Role
from tests.support.factories.accounts import PASSWORD, member

pytestmark = pytest.mark.django_db


@pytest.fixture
def address() -> str:
    # The counters live in the shared cache for a minute: an address of its own per test.
    return f"sign-in-{uuid.uuid4()}"


def sign_in(client: Client, address: str, password: str) -> Any:
    return client.post("/login/", {"username": "rita", "password": password}, REMOTE_ADDR=address)


def test_a_wrong_password_is_refused_400_with_the_reason(address: str) -> None:
    member("rita", Role.OPERATOR)
    client = Client()
    response = sign_in(client, address, "not-the-password")
    assert response.status_code == 400
    page = response.content.decode()
    assert "You are not signed in:" in page
    assert "Please enter a correct username and password." in page
    assert "not-the-password" not in page
    assert client.get("/").status_code == 302  # still signed out
    assert sign_in(client, address, PASSWORD).status_code == 302
    assert client.get("/").status_code == 200


def test_an_address_past_its_failures_is_refused_429_even_with_the_password(
    address: str, settings: Any, client: Client
) -> None:
    settings.OANP_AUTH_FAILURES_PER_MINUTE = 3
    member("rita", Role.OPERATOR)
    for _ in range(3):
        assert sign_in(client, address, "guess").status_code == 400
    refused = sign_in(client, address, PASSWORD)
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1
    assert "Too many failed sign-ins from your address: try again in" in refused.content.decode()
    assert client.get("/").status_code == 302
    # Another address signs in; the API's budget is the same one.
    assert sign_in(client, f"{address}-other", PASSWORD).status_code == 302
    api = Client().get("/oanp/v0.1/sessions/x", REMOTE_ADDR=address)
    assert api.status_code == 429
