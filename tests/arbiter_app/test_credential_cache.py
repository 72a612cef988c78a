"""API keys remembered by a process for a second: one query per burst, revocation honoured."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from arbiter_app import auth, credential_cache
from arbiter_app.models import AgentCredential
from arbiter_app.services.api_keys import revoke_credentials
from tests.support.factories.agents import make_agent

pytestmark = pytest.mark.django_db(transaction=True)


class Clock:
    """Stands in for the cache's monotonic clock."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1000.0
        monkeypatch.setattr(credential_cache.time, "monotonic", lambda: self.now)


def header(api_key: str) -> str:
    return f"Bearer {api_key}"


def test_a_burst_of_requests_looks_the_key_up_once(django_assert_num_queries: Any) -> None:
    agent = make_agent("cache-buyer", "buyer")
    # One lookup, and one write of the key's last use.
    with django_assert_num_queries(2):
        first = auth.credential_for(header(agent.api_key))
        again = [auth.credential_for(header(agent.api_key)) for _ in range(20)]
    assert first is not None
    assert {c.pk for c in again if c is not None} == {first.pk}
    assert len([c for c in again if c is not None]) == 20


def test_a_key_revoked_by_this_process_is_refused_at_once() -> None:
    agent = make_agent("cache-buyer", "buyer")
    assert auth.credential_for(header(agent.api_key)) is not None
    revoke_credentials(agent_id="cache-buyer")
    assert auth.credential_for(header(agent.api_key)) is None


def test_a_key_revoked_elsewhere_is_refused_once_the_second_is_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock(monkeypatch)
    agent = make_agent("cache-buyer", "buyer")
    assert auth.credential_for(header(agent.api_key)) is not None
    # Another process revokes it: this one hears nothing.
    AgentCredential.objects.filter(agent_id="cache-buyer").update(revoked_at=timezone.now())
    clock.now += credential_cache.ttl_seconds() / 2
    assert auth.credential_for(header(agent.api_key)) is not None
    clock.now += credential_cache.ttl_seconds() / 2
    assert auth.credential_for(header(agent.api_key)) is None


def test_the_right_prefix_with_a_wrong_secret_is_never_served_from_memory() -> None:
    agent = make_agent("cache-buyer", "buyer")
    assert auth.credential_for(header(agent.api_key)) is not None
    forged = agent.api_key[:-4] + ("AAAA" if not agent.api_key.endswith("AAAA") else "BBBB")
    assert auth.credential_for(header(forged)) is None


def test_memory_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(monkeypatch)
    monkeypatch.setattr(credential_cache, "MAX_KEYS", 3)
    agents = [make_agent(f"cache-buyer-{n}", "buyer") for n in range(5)]
    for agent in agents[:3]:
        assert auth.credential_for(header(agent.api_key)) is not None
    clock.now += credential_cache.ttl_seconds()  # the three expire
    for agent in agents[3:]:
        assert auth.credential_for(header(agent.api_key)) is not None
    assert len(credential_cache._found) == 2


def test_no_memory_at_all_when_the_setting_says_zero(
    settings: Any, django_assert_num_queries: Any
) -> None:
    settings.OANP_CREDENTIAL_CACHE_SECONDS = 0
    agent = make_agent("cache-buyer", "buyer")
    # Both requests look the key up; the first also records its use (once a minute).
    with django_assert_num_queries(3):
        assert auth.credential_for(header(agent.api_key)) is not None
        assert auth.credential_for(header(agent.api_key)) is not None
