"""What the dashboard's agent-page tests share: merchant a, its hosted agent, and alice, one
of its members, signed in. A module that needs another of these defines its own."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from sessions_app.models import AgentProfile, MemberRole, Merchant
from tests.support.factories.accounts import hosted_agent, member, merchant, signed_in


@pytest.fixture
def shop_a() -> Merchant:
    return merchant("a")


@pytest.fixture
def agent_a(shop_a: Merchant) -> AgentProfile:
    return hosted_agent(shop_a, "hosted-a")


@pytest.fixture
def alice(shop_a: Merchant) -> User:
    return member("alice", MemberRole.MERCHANT_MANAGER, shop_a)


@pytest.fixture
def browser(alice: User) -> Client:
    return signed_in(alice)
