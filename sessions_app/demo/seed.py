"""The demo's merchants, people, hosted agents and buyer agents (``manage.py seed_demo``).

Idempotent: a second run finds everything in place and changes nothing.

Passwords are never stored in clear, so they cannot be printed twice: each account gets a
strong random password when it is created, printed that once; later runs print "unchanged"
for it, and ``--reset-passwords`` sets (and prints) new ones. Buyer API keys are the same:
only their hashes are kept, so ``--buyer-keys`` issues fresh ones (revoking the previous demo
keys), which is what ``make demo`` does for the buyers it runs.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from django.contrib.auth.models import User
from django.core.management.base import CommandError
from django.db import transaction

from arbiter_app import selectors as arbiter
from arbiter_app import services as arbiter_services
from oanp.agents.pricelist import PriceLimits, PriceList
from oanp.agents.tradeoffs import IssueLimits, TermsVault
from oanp.wire import discovery
from sessions_app import services
from sessions_app.models import AgentProfile, MemberRole, Membership, Merchant, Mode

UNCHANGED = "(unchanged; --reset-passwords sets new ones)"
#: The label of the buyer keys a demo run uses; each run revokes the previous run's.
BUYER_KEY_LABEL = "demo buyer (make demo)"


@dataclass(frozen=True)
class Account:
    username: str
    role: str
    merchant_slug: str | None = None


@dataclass(frozen=True)
class HostedAgent:
    merchant_slug: str
    agent_id: str
    display_name: str
    strategy: str
    limits: PriceList
    #: Whether its sessions reveal its limits after the end, for the analytics panels.
    reveal_after_end: bool = False
    #: How the directory lists it: the currencies and catalog buyers' agents read.
    description: str = ""
    catalog: tuple[dict[str, str], ...] = ()


@dataclass(frozen=True)
class DemoBuyer:
    agent_id: str
    #: A name of :data:`oanp.agents.strategies.STRATEGIES`.
    strategy: str


MERCHANTS = {"skyfare": "SkyFare", "railco": "RailCo"}

ACCOUNTS = (
    Account("admin", MemberRole.ADMIN),
    Account("operator", MemberRole.OPERATOR),
    Account("skyfare", MemberRole.MERCHANT_MANAGER, "skyfare"),
    Account("railco", MemberRole.MERCHANT_MANAGER, "railco"),
)


def _row(currency: str, floor: int, ideal: int, item: str | None = None) -> PriceLimits:
    return PriceLimits(item, currency, Decimal(floor), Decimal(ideal))


#: SkyFare's view of the demo's flight terms (buyers.FLIGHT_ISSUES): the fare's class
#: matters more to it than the fare, bags less, so it trades bags for the class.
SKYFARE_TERMS = TermsVault(
    Decimal(1),
    (
        IssueLimits("checked_bags", Decimal("0.5"), Decimal(0), Decimal(2)),
        IssueLimits("fare_class", Decimal("1.5"), "basic", "standard"),
    ),
)


# The published SFO→JFK example's merchant (floor 280, ideal 400), plus two more routes.
HOSTED_AGENTS = (
    HostedAgent(
        "skyfare",
        "merchant-sfo",
        "SkyFare flights from SFO",
        "reference",
        PriceList(
            (
                _row("USD", 280, 400),
                _row("USD", 120, 190, "SFO-LAX"),
                _row("USD", 150, 240, "SFO-SEA"),
            ),
            terms=SKYFARE_TERMS,
        ),
        # SkyFare shows its limits once a session is over (the analytics and the frontier);
        # RailCo keeps its own.
        reveal_after_end=True,
        description="Nonstop flights out of SFO.",
        catalog=({"route": "SFO-JFK"}, {"route": "SFO-LAX"}, {"route": "SFO-SEA"}),
    ),
    HostedAgent(
        "railco",
        "merchant-rail",
        "RailCo on the Northeast corridor",
        "boulware",
        # RailCo sells in euros and dollars, each priced on its own.
        PriceList(
            (
                _row("EUR", 55, 100),
                _row("EUR", 75, 130, "NYC-WAS"),
                _row("USD", 60, 110),
                _row("USD", 80, 140, "NYC-WAS"),
            )
        ),
        description="Trains on the Northeast corridor.",
        catalog=({"route": "NYC-BOS"}, {"route": "NYC-WAS"}),
    ),
)

DEMO_BUYERS = (
    DemoBuyer("buyer-demo", "reference"),
    DemoBuyer("buyer-ana", "reference"),
    DemoBuyer("buyer-ben", "boulware"),
    DemoBuyer("buyer-cleo", "conceder"),
    DemoBuyer("buyer-dev", "linear"),
    DemoBuyer("buyer-eli", "tit-for-tat"),
)


@dataclass(frozen=True)
class Seeded:
    """What a run found or made: each account with the password to print, or UNCHANGED."""

    accounts: list[tuple[Account, str]]
    agents: list[str]


class Taken(CommandError):
    """A demo agent id already speaks through keys no dashboard agent owns."""


def _merchant(slug: str) -> Merchant:
    merchant, _ = Merchant.objects.get_or_create(slug=slug, defaults={"name": MERCHANTS[slug]})
    return merchant


def _account(account: Account, *, reset_password: bool) -> str:
    user = User.objects.filter(username=account.username).first()
    password = secrets.token_urlsafe(12)
    if user is None:
        # An address of its own, so the demo can show a password reset (printed in the log).
        user = User.objects.create_user(
            account.username, email=f"{account.username}@demo.invalid", password=password
        )
    elif reset_password:
        user.set_password(password)
        user.save(update_fields=["password"])
    else:
        password = UNCHANGED
    if account.role == MemberRole.ADMIN and not user.is_superuser:
        # The demo's admin also uses Django's admin site (/admin/).
        user.is_staff = user.is_superuser = True
        user.save(update_fields=["is_staff", "is_superuser"])
    merchant = _merchant(account.merchant_slug) if account.merchant_slug else None
    Membership.objects.update_or_create(
        user=user, defaults={"role": account.role, "merchant": merchant}
    )
    return password


def _hosted_agent(agent: HostedAgent, actor: User) -> None:
    if AgentProfile.objects.filter(agent_id=agent.agent_id).exists():
        return  # a merchant may have changed it since: its settings are its own now
    try:
        profile = services.create_agent(
            actor=actor,
            merchant=_merchant(agent.merchant_slug),
            agent_id=agent.agent_id,
            display_name=agent.display_name,
            mode=Mode.HOSTED,
            strategy=agent.strategy,
            limits=agent.limits,
            reveal_after_end=agent.reveal_after_end,
        )
    except services.AgentIdTaken as taken:
        raise Taken(
            f"{taken}: API keys no dashboard agent owns speak for it (a database from an "
            "earlier demo?). Seed a fresh database, e.g. after moving var/db.sqlite3 aside."
        ) from taken
    # Listed in the currencies it holds limits in, so the arbiter refuses an open in another.
    services.save_listing(
        actor=actor,
        profile=profile,
        listing=discovery.parse_listing(
            listed=True,
            description=agent.description,
            currencies=list(agent.limits.currencies),
            catalog=list(agent.catalog),
        ),
    )


@transaction.atomic
def seed(*, reset_passwords: bool = False) -> Seeded:
    """Create whatever of the demo is missing; touch nothing that exists."""
    accounts = [(a, _account(a, reset_password=reset_passwords)) for a in ACCOUNTS]
    actor = User.objects.get(username="admin")
    for agent in HOSTED_AGENTS:
        _hosted_agent(agent, actor)
    return Seeded(accounts, [agent.agent_id for agent in HOSTED_AGENTS])


@transaction.atomic
def issue_buyer_keys() -> dict[str, str]:
    """A fresh API key for each demo buyer, by agent id; the previous demo keys are revoked."""
    keys: dict[str, str] = {}
    for buyer in DEMO_BUYERS:
        if AgentProfile.objects.filter(agent_id=buyer.agent_id).exists():
            raise Taken(f"the demo buyer id {buyer.agent_id!r} names a merchant's agent")
        earlier = arbiter.credentials_of(agent_id=buyer.agent_id, role="buyer").filter(
            label=BUYER_KEY_LABEL, revoked_at__isnull=True
        )
        for credential in earlier:
            arbiter_services.revoke_credential(credential=credential)
        keys[buyer.agent_id] = arbiter_services.issue_credential(
            agent_id=buyer.agent_id, role="buyer", label=BUYER_KEY_LABEL
        ).api_key
    return keys


def accounts_table(seeded: Seeded) -> list[str]:
    """The accounts as lines of a table: user, role, merchant, password."""
    rows = [("user", "role", "merchant", "password")]
    for account, password in seeded.accounts:
        merchant = MERCHANTS[account.merchant_slug] if account.merchant_slug else "(all)"
        rows.append((account.username, account.role, merchant, password))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
        + "  "
        + row[3]
        for row in rows
    ]


def report(*, reset_passwords: bool, buyer_keys: bool, say: Callable[[str], None]) -> None:
    """``seed_demo``: seed, then say what there is (each password and key only when it is set)."""
    seeded = seed(reset_passwords=reset_passwords)
    say("Demo accounts (passwords are shown only when set):")
    for line in accounts_table(seeded):
        say(f"  {line}")
    say(f"Hosted merchant agents: {', '.join(seeded.agents)}")
    if buyer_keys:
        say("Demo buyer keys (shown once):")
        for agent_id, key in issue_buyer_keys().items():
            say(f"  {agent_id}  {key}")
    else:
        names = ", ".join(buyer.agent_id for buyer in DEMO_BUYERS)
        say(f"Demo buyers: {names} (keys: --buyer-keys)")
