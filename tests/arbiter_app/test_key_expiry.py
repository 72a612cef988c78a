"""API keys that expire, and the "last used" every key carries: an expired key is refused
exactly like a revoked one, at once even by a process that found it live a moment ago; a
key's use is written at most once a minute, not once a request."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from arbiter_app import auth, credential_cache
from arbiter_app.models import AgentCredential
from arbiter_app.services.api_keys import issue_credential, revoke_credentials

pytestmark = pytest.mark.django_db(transaction=True)

PROBE = "/oanp/v0.1/sessions/none"


class Clocks:
    """Stands in for the cache's monotonic clock and for the wall clock keys expire by."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monotonic = 1000.0
        self.wall = timezone.now()
        monkeypatch.setattr(credential_cache.time, "monotonic", lambda: self.monotonic)
        monkeypatch.setattr(timezone, "now", lambda: self.wall)

    def advance(self, seconds: float) -> None:
        self.monotonic += seconds
        self.wall += timedelta(seconds=seconds)


@pytest.fixture(autouse=True)
def fresh_memory() -> None:
    credential_cache.forget_all()


def bearer(api_key: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {api_key}"}


def refusal(client: Client, api_key: str) -> tuple[int, str, dict[str, Any]]:
    answer = client.get(PROBE, **bearer(api_key))  # type: ignore[arg-type]
    return answer.status_code, answer["WWW-Authenticate"], answer.json()


def test_an_expired_key_is_refused_at_the_api_exactly_like_a_revoked_one(client: Client) -> None:
    expiring = issue_credential(
        agent_id="buyer-exp", role="buyer", expires_at=timezone.now() + timedelta(hours=1)
    )
    revoked = issue_credential(agent_id="buyer-rev", role="buyer")
    assert client.get(PROBE, **bearer(expiring.api_key)).status_code == 404  # type: ignore[arg-type]
    revoke_credentials(agent_id="buyer-rev")
    AgentCredential.objects.filter(pk=expiring.credential.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    credential_cache.forget_all()
    assert refusal(client, expiring.api_key) == refusal(client, revoked.api_key)
    status, challenge, problem = refusal(client, expiring.api_key)
    assert (status, challenge) == (401, 'Bearer realm="oanp"')
    assert "expired" in problem["detail"]


def test_a_key_remembered_as_live_is_refused_the_moment_it_expires(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clocks = Clocks(monkeypatch)
    issued = issue_credential(
        agent_id="buyer-exp", role="buyer", expires_at=clocks.wall + timedelta(seconds=0.5)
    )
    header = f"Bearer {issued.api_key}"
    assert auth.credential_for(header) is not None
    clocks.wall += timedelta(seconds=0.4)  # the cache's second is not over, the key's life is
    assert auth.credential_for(header) is not None
    clocks.wall += timedelta(seconds=0.1)
    assert credential_cache.recall(issued.credential.digest) is None
    assert auth.credential_for(header) is None


def test_a_key_never_expiring_or_expiring_later_still_opens_the_api(client: Client) -> None:
    for expires_at in (None, timezone.now() + timedelta(days=7)):
        issued = issue_credential(agent_id="buyer-ok", role="buyer", expires_at=expires_at)
        assert client.get(PROBE, **bearer(issued.api_key)).status_code == 404  # type: ignore[arg-type]


@pytest.mark.parametrize("ago", [timedelta(0), timedelta(days=1)])
def test_a_key_cannot_be_issued_already_expired(ago: timedelta) -> None:
    with pytest.raises(ValueError, match="in the future"):
        issue_credential(agent_id="buyer-exp", role="buyer", expires_at=timezone.now() - ago)
    assert not AgentCredential.objects.exists()


def last_used(issued: Any) -> datetime | None:
    value: datetime | None = AgentCredential.objects.values_list("last_used_at", flat=True).get(
        pk=issued.credential.pk
    )
    return value


def test_last_used_is_written_at_most_once_a_minute(
    monkeypatch: pytest.MonkeyPatch, django_assert_num_queries: Any
) -> None:
    clocks = Clocks(monkeypatch)
    issued = issue_credential(agent_id="buyer-use", role="buyer")
    header = f"Bearer {issued.api_key}"
    assert last_used(issued) is None
    with django_assert_num_queries(2):  # the lookup and the one write
        for _ in range(50):
            assert auth.credential_for(header) is not None
    first = last_used(issued)
    assert first == clocks.wall

    # Every second the key is looked up again, but its use is not written again.
    for _ in range(59):
        clocks.advance(1)
        with django_assert_num_queries(1):
            assert auth.credential_for(header) is not None
    assert last_used(issued) == first

    clocks.advance(1.5)
    with django_assert_num_queries(2):
        assert auth.credential_for(header) is not None
    assert last_used(issued) == clocks.wall > first


def test_a_refused_key_records_no_use(monkeypatch: pytest.MonkeyPatch) -> None:
    Clocks(monkeypatch)
    issued = issue_credential(agent_id="buyer-use", role="buyer")
    revoke_credentials(agent_id="buyer-use")
    assert auth.credential_for(f"Bearer {issued.api_key}") is None
    forged = issued.api_key[:-4] + ("AAAA" if not issued.api_key.endswith("AAAA") else "BBBB")
    AgentCredential.objects.filter(pk=issued.credential.pk).update(revoked_at=None)
    assert auth.credential_for(f"Bearer {forged}") is None
    assert last_used(issued) is None
