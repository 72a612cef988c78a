"""People, hosted agents and a buyer that negotiates with them, for the merchant side's tests."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from itertools import count
from typing import Any

from django.contrib.auth.models import User
from django.test import Client

from oanp.agents.parties import BuyerAgent
from oanp.agents.pricelist import PriceLimits, PriceList
from oanp.agents.strategies import ReferenceBuyer
from oanp.agents.tradeoffs import TermsVault
from oanp.agents.vaults import BuyerVault
from oanp.wire.commitments import encode_salt
from oanp.wire.settlement import NEVER_SETTLE, SettlePolicy
from sessions_app import services
from sessions_app.models import AgentProfile, MemberRole, Membership, Merchant, Mode
from tests.support.factories.agents import Agent, make_agent

PASSWORD = "correct horse battery"
SFO_JFK_ITEM = {"route": "SFO-JFK", "date": "2026-04-28"}


def merchant(slug: str) -> Merchant:
    return Merchant.objects.get_or_create(slug=slug, defaults={"name": f"Merchant {slug}"})[0]


def member(username: str, role: str, of: Merchant | None = None) -> User:
    user = User.objects.create_user(username, password=PASSWORD)
    Membership.objects.create(user=user, role=role, merchant=of)
    return user


def signed_in(user: User, **options: Any) -> Client:
    browser = Client(HTTP_HOST="localhost", **options)
    assert browser.login(username=user.get_username(), password=PASSWORD)
    return browser


def admin() -> User:
    """The admin who creates the agents of factories."""
    return User.objects.filter(username="agent-factory").first() or member(
        "agent-factory", MemberRole.ADMIN
    )


def hosted_agent(
    of: Merchant,
    agent_id: str = "hosted-sfo",
    *,
    floor: str = "280",
    ideal: str = "400",
    currency: str = "USD",
    strategy: str = "reference",
    parameters: dict[str, str] | None = None,
    settle: SettlePolicy = NEVER_SETTLE,
    reveal_after_end: bool = False,
    terms: TermsVault | None = None,
) -> AgentProfile:
    return services.create_agent(
        actor=admin(),
        merchant=of,
        agent_id=agent_id,
        display_name="",
        mode=Mode.HOSTED,
        strategy=strategy,
        limits=PriceList(
            (PriceLimits(None, currency, Decimal(floor), Decimal(ideal)),), terms=terms
        ),
        parameters=parameters,
        settle=settle,
        reveal_after_end=reveal_after_end,
    )


def price_limits(profile: AgentProfile, prices: PriceList) -> AgentProfile:
    """The hosted agent with ``prices`` as its limits, saved as its owner's form would."""
    return services.update_agent(
        actor=admin(),
        profile=profile,
        display_name=profile.display_name,
        mode=profile.mode,
        strategy=profile.strategy,
        limits=prices,
    )


def now() -> datetime:
    return datetime.now(UTC)


@dataclass
class HostedNegotiation:
    """A reference buyer (ceiling 420) negotiating over the API with a hosted merchant agent;
    with a ``settle`` policy it opens the session for settlement by reveal; with ``issues`` it
    negotiates them too (profile terms/v0.1), weighing them by ``terms``.

    The buyer reads the log and posts its moves through Django's test client; the merchant's
    moves come from the hosted runner, a Celery worker's or one ``nudge`` calls in-process.
    """

    client: Client
    merchant_agent_id: str
    session_id: str = "sess-hosted"
    buyer_key: Agent = field(default_factory=lambda: make_agent("buyer-001", "buyer"))
    settle: SettlePolicy = NEVER_SETTLE
    issues: list[dict[str, Any]] | None = None
    terms: TermsVault | None = None
    currency: str = "USD"
    item: dict[str, Any] = field(default_factory=lambda: dict(SFO_JFK_ITEM))
    buyer: BuyerAgent = field(init=False)
    seen: int = 0
    #: Seconds the buyer waited for each merchant move.
    waits: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        numbers = count(1)
        self.buyer = BuyerAgent(
            agent_id=self.buyer_key.agent_id,
            vault=BuyerVault(true_ceiling=Decimal(420), budget_cap=Decimal(400), terms=self.terms),
            strategy=ReferenceBuyer(),
            salt=encode_salt(b"\x01" * 32),
            new_message_id=lambda: f"buyer-{next(numbers)}",
            settle=self.settle,
        )

    def post(self, envelope: dict[str, Any]) -> Any:
        response = self.client.post(
            "/oanp/v0.1/envelopes",
            data=json.dumps(envelope),
            content_type="application/json",
            headers=self.buyer_key.headers,
        )
        assert response.status_code == 201, response.content
        return response

    def open(self) -> None:
        self.post(
            self.buyer.open(
                session_id=self.session_id,
                merchant_agent_id=self.merchant_agent_id,
                item=self.item,
                currency=self.currency,
                max_rounds=5,
                now=now(),
                issues=self.issues,
            )
        )

    def log(self) -> list[dict[str, Any]]:
        response = self.client.get(
            f"/oanp/v0.1/sessions/{self.session_id}/log", headers=self.buyer_key.headers
        )
        assert response.status_code == 200, response.content
        entries: list[dict[str, Any]] = response.json()["entries"]
        return entries

    def wait_for_merchant(
        self, nudge: Callable[[], object], timeout: float
    ) -> list[dict[str, Any]]:
        """The log, once the buyer no longer has the last word; ``nudge`` runs between looks."""
        started = time.monotonic()
        while True:
            nudge()
            log = self.log()
            if log[-1]["envelope"]["sender"]["role"] != "buyer":
                self.waits.append(time.monotonic() - started)
                return log
            assert time.monotonic() - started < timeout, f"no merchant move within {timeout} s"
            time.sleep(0.01)

    def play(self, nudge: Callable[[], object] = lambda: None, timeout: float = 10) -> list[Any]:
        """Open (unless done already), then answer every merchant move until the session ends."""
        if self.buyer.commitment is None:
            self.open()
        log: list[dict[str, Any]] = []
        while not self.buyer.finished:
            log = self.wait_for_merchant(nudge, timeout)
            new, self.seen = log[self.seen :], len(log)
            for entry in new:
                for envelope in self.buyer.receive(entry["envelope"], now()):
                    self.post(envelope)
        return log
