"""Vaults sealed before limits had a currency are read, once, as limits in the agent's first
listed currency (USD when it lists none), and the agent page says so until the owner saves
the form."""

from __future__ import annotations

import importlib
import json
from decimal import Decimal
from types import SimpleNamespace

import pytest
from cryptography.fernet import Fernet
from django.apps import apps
from django.db import connection
from django.test import Client

from arbiter_app.models import AgentCredential, Listing
from sessions_app.models import AgentProfile, Merchant
from sessions_app.vault import _fernet, unseal
from tests.sessions_app.test_agents import agent_form
from tests.support.factories.accounts import hosted_agent
from tests.support.factories.agents import make_agent

pytestmark = pytest.mark.django_db

migration = importlib.import_module("sessions_app.migrations.0006_currency_limits")
#: What RunPython hands the function: here, only its connection is read.
EDITOR = SimpleNamespace(connection=connection)
OLD = {"floor_price": "280", "ideal_price": "400", "per_item": {"SFO-LAX": ["120", "190.5"]}}


def sealed_before(profile: AgentProfile, document: dict[str, object]) -> None:
    """Seal ``document`` into the agent's vault as the vault sealed it before currencies."""
    profile.vault = _fernet().encrypt(json.dumps(document).encode())
    profile.save(update_fields=["vault"])


@pytest.mark.parametrize(
    ("listed", "document", "currency"),
    [
        (None, OLD, "USD"),
        (["EUR", "USD"], OLD, "EUR"),
        # The listing's first currency cannot carry 190.5: read in USD, not rounded.
        (["JPY"], OLD, "USD"),
        (["JPY"], {"floor_price": "280", "ideal_price": "400", "per_item": {}}, "JPY"),
    ],
)
def test_an_old_vault_is_read_in_the_first_listed_currency(
    shop_a: Merchant, listed: list[str] | None, document: dict[str, object], currency: str
) -> None:
    profile = hosted_agent(shop_a, "hosted-a")
    sealed_before(profile, document)
    if listed is not None:
        Listing.objects.create(merchant_agent_id="hosted-a", merchant="A", currencies=listed)
    migration.seal_with_currency(apps, EDITOR)
    profile.refresh_from_db()
    prices = unseal(profile.vault)
    assert profile.limits_read_as == currency
    assert prices.currencies == (currency,)
    assert prices.limits_for(currency, {"route": "SFO-JFK"}).floor_price == Decimal(280)
    # Once: a second run finds a price list and leaves it.
    before = bytes(profile.vault)
    migration.seal_with_currency(apps, EDITOR)
    profile.refresh_from_db()
    assert bytes(profile.vault) == before


def test_the_agent_page_says_so_until_the_owner_saves_the_form(
    browser: Client, shop_a: Merchant
) -> None:
    profile = hosted_agent(shop_a, "hosted-a")
    sealed_before(profile, OLD)
    migration.seal_with_currency(apps, EDITOR)
    for page in ("/agents/hosted-a/", "/agents/hosted-a/edit/"):
        assert "read as USD limits" in browser.get(page).content.decode()
    saved = browser.post("/agents/hosted-a/edit/", agent_form(floor_price="", ideal_price=""))
    assert saved.status_code == 302
    assert "read as USD limits" not in browser.get("/agents/hosted-a/").content.decode()
    # Saving kept every limit, the per-item one included.
    profile.refresh_from_db()
    assert unseal(profile.vault).limits_for("USD", {"route": "SFO-LAX"}).ideal_price == Decimal(
        "190.5"
    )


def test_listings_keep_the_owners_choice_and_show_what_is_held(shop_a: Merchant) -> None:
    profile = hosted_agent(shop_a, "hosted-a")
    sealed_before(profile, OLD)
    Listing.objects.create(
        merchant_agent_id="hosted-a", merchant="A", listed=True, currencies=["EUR", "USD"]
    )
    migration.seal_with_currency(apps, EDITOR)
    profile.refresh_from_db()
    assert profile.listing_currencies == ["EUR", "USD"]
    # Read as EUR limits, the first listed: the directory lists EUR alone now.
    assert Listing.objects.get().currencies == ["EUR"]


def test_merchant_keys_issued_before_owners_record_their_merchant(shop_a: Merchant) -> None:
    hosted_agent(shop_a, "hosted-a")
    make_agent("hosted-a", "merchant")  # issued with no owner, as before owners were kept
    make_agent("buyer-001", "buyer")
    migration.seal_with_currency(apps, EDITOR)
    owners = dict(AgentCredential.objects.values_list("agent_id", "owner").distinct())
    assert owners == {"hosted-a": shop_a.slug, "buyer-001": ""}


def test_a_vault_sealed_under_another_key_stops_the_migration_naming_the_agent(
    shop_a: Merchant,
) -> None:
    profile = hosted_agent(shop_a, "hosted-a")
    profile.vault = Fernet(Fernet.generate_key()).encrypt(json.dumps(OLD).encode())
    profile.save(update_fields=["vault"])
    with pytest.raises(
        RuntimeError, match="cannot open the vaults of hosted-a: set OANP_VAULT_KEY"
    ):
        migration.seal_with_currency(apps, EDITOR)
