"""Signing keys rotate: agreements signed under every key stay verifiable from the key history,
while the JWKS lists only the active key and the retiring ones."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from arbiter_app import services, signing_keys
from arbiter_app.models import SigningKey
from arbiter_app.tasks import maintain_signing_keys
from oanp.audit import verify_log
from tests.conftest import Worker
from tests.support.factories.agents import Agent, ClientNegotiation
from tests.support.waiting import wait_for

HISTORY_MEMBERS = {"state", "activated_at", "retiring_at", "retired_at"}


def agreement(client: Any, buyer: Agent, merchant: Agent, session_id: str) -> list[dict[str, Any]]:
    """The SFO→JFK session run to its signed agreement; its log."""
    run = ClientNegotiation(client, buyer, merchant, session_id=session_id, tag=session_id)
    run.open()
    log = run.finish()
    assert log[-1]["envelope"]["type"] == "session.agree"
    return log


def signed_by(log: list[dict[str, Any]]) -> str:
    kid: str = log[-1]["envelope"]["payload"]["kid"]
    return kid


def published(client: Any) -> dict[str, Any]:
    jwks: dict[str, Any] = client.get("/.well-known/jwks.json").json()
    return jwks


def published_kids(client: Any) -> set[str]:
    return {key["kid"] for key in published(client)["keys"]}


def history(client: Any) -> dict[str, dict[str, Any]]:
    return {key["kid"]: key for key in client.get("/oanp/v0.1/keys").json()["keys"]}


def history_jwks(client: Any) -> dict[str, Any]:
    """A JWKS built from ``/oanp/v0.1/keys``: every key, less the validity window."""
    return {
        "keys": [
            {name: value for name, value in key.items() if name not in HISTORY_MEMBERS}
            for key in history(client).values()
        ]
    }


def agreement_verifies(log: list[dict[str, Any]], jwks: dict[str, Any]) -> bool:
    report = verify_log(log, jwks)
    return report.ok and report.agreements == (1, 1)


@pytest.mark.django_db
def test_agreements_from_before_during_and_after_a_rotation_all_verify(
    client: Any, buyer: Agent, merchant: Agent, settings: Any
) -> None:
    before = agreement(client, buyer, merchant, "sess-before")
    first = signed_by(before)
    assert published_kids(client) == {first}

    said = io.StringIO()
    call_command("rotate_signing_key", stdout=said)
    during = agreement(client, buyer, merchant, "sess-during")
    second = signed_by(during)
    assert second != first
    assert said.getvalue() == f"active signing key {second} ({settings.OANP_SIGNING_ALG})\n"
    assert published_kids(client) == {first, second}  # the old key is retiring
    assert history(client)[first]["state"] == "retiring"

    # The overlap ends: the first key retires, out of the JWKS, still in the history.
    later = timezone.now() + timedelta(days=settings.OANP_KEY_OVERLAP_DAYS, seconds=1)
    rotated, retired = services.maintain_signing_keys(now=later)
    assert (rotated, retired) == (None, 1)
    assert published_kids(client) == {second}
    assert history(client)[first]["state"] == "retired"
    assert history(client)[first]["retired_at"] is not None

    third = services.rotate_signing_key(alg="ES256").kid
    after = agreement(client, buyer, merchant, "sess-after")
    assert signed_by(after) == third
    assert published_kids(client) == {second, third}

    everything = history_jwks(client)
    for log in (before, during, after):
        assert agreement_verifies(log, everything)
    # What the history adds: the retired key is no longer published, yet its agreements check.
    assert not agreement_verifies(before, published(client))
    assert agreement_verifies(during, published(client))
    assert agreement_verifies(after, published(client))
    assert history(client)[first]["retired_at"] >= history(client)[first]["retiring_at"]
    assert set(history(client)) == {first, second, third}


@pytest.mark.django_db
def test_the_policy_rotates_when_the_active_key_is_old_enough_and_not_before(
    settings: Any,
) -> None:
    active = signing_keys.ensure_active_key()
    period = timedelta(days=settings.OANP_KEY_ROTATION_DAYS)

    assert services.maintain_signing_keys(
        now=active.activated_at + period - timedelta(seconds=1)
    ) == (None, 0)
    assert SigningKey.objects.get(state="active").kid == active.kid

    due = active.activated_at + period
    rotated, retired = services.maintain_signing_keys(now=due)
    assert rotated is not None
    assert retired == 0
    assert rotated.kid != active.kid
    assert rotated.activated_at == due
    active.refresh_from_db()
    assert (active.state, active.retiring_at) == ("retiring", due)
    # The same check again changes nothing: the new key is young.
    assert services.maintain_signing_keys(now=due) == (None, 0)
    assert SigningKey.objects.filter(state="active").get().kid == rotated.kid


@pytest.mark.django_db(transaction=True)
def test_the_worker_rotates_a_key_past_its_period(
    celery_worker_process: Worker, client: Any, settings: Any
) -> None:
    old = signing_keys.ensure_active_key()
    backdated = timezone.now() - timedelta(days=settings.OANP_KEY_ROTATION_DAYS, seconds=1)
    SigningKey.objects.filter(pk=old.pk).update(activated_at=backdated)

    maintain_signing_keys.delay()
    wait_for(lambda: SigningKey.objects.filter(state="active").exclude(pk=old.pk).exists(), 20)
    old.refresh_from_db()
    assert old.state == "retiring"
    new = SigningKey.objects.get(state="active")
    assert published_kids(client) == {old.kid, new.kid}
