"""Limits carry a currency: each agent's vault, sealed before as one floor and ideal (and
per-item ones) without a currency, is sealed again as a price list in the agent's first
listed currency (USD when it lists none), and the agent remembers that currency so that its
page says so until the owner saves the form. Its listing keeps the owner's choice of
currencies and shows those the agent holds limits in; its merchant keys record their owner,
the merchant, as keys issued from now on do."""

from cryptography.fernet import InvalidToken
from django.db import migrations, models

from oanp.agents.pricelist import from_single_limits, read_price_list
from sessions_app.vault import seal, unseal_document

#: Where the listing names no currency, or its first cannot carry an old limit's decimals.
_FALLBACKS = ("USD", "KWD")


def _read_in_currency(document, listed):
    for currency in (*listed[:1], *_FALLBACKS):
        try:
            return currency, from_single_limits(document, currency)
        except ValueError:
            continue
    raise ValueError("an old vault's limits fit no currency")  # the old form allowed 3 decimals


def seal_with_currency(apps, schema_editor):
    # On the connection migrating (``migrate --database owner``): another would wait on the
    # locks this migration's own ALTER TABLEs hold.
    db = schema_editor.connection.alias
    profiles = apps.get_model("sessions_app", "AgentProfile").objects.using(db)
    listings = apps.get_model("arbiter_app", "Listing").objects.using(db)
    credentials = apps.get_model("arbiter_app", "AgentCredential").objects.using(db)
    unreadable = []
    for profile in profiles.select_related("merchant").iterator():
        credentials.filter(agent_id=profile.agent_id, role="merchant", owner="").update(
            owner=profile.merchant.slug
        )
        listing = listings.filter(merchant_agent_id=profile.agent_id).first()
        chosen = list(listing.currencies) if listing else []
        profile.listing_currencies = chosen
        if bytes(profile.vault):
            try:
                document = unseal_document(profile.vault)
            except InvalidToken:
                unreadable.append(profile.agent_id)
                continue
            if "limits" not in document:
                profile.limits_read_as, prices = _read_in_currency(document, chosen)
                profile.vault = seal(prices)
            held = read_price_list(unseal_document(profile.vault)).currencies
            if listing is not None and profile.mode == "hosted":
                listing.currencies = [c for c in chosen if c in held] or (held if chosen else [])
                listing.save(update_fields=["currencies"], using=db)
        profile.save(update_fields=["vault", "limits_read_as", "listing_currencies"], using=db)
    if unreadable:
        # Nothing is changed (the migration is one transaction): the vaults wait for the key.
        raise RuntimeError(
            f"cannot open the vaults of {', '.join(unreadable)}: set OANP_VAULT_KEY to the key "
            "they were sealed with, then migrate again"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0005_reveal_after_end"),
        ("arbiter_app", "0012_credential_owner"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentprofile",
            name="limits_read_as",
            field=models.CharField(blank=True, max_length=3),
        ),
        migrations.AddField(
            model_name="agentprofile",
            name="listing_currencies",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="hostedsession",
            name="declined",
            field=models.CharField(blank=True, max_length=300),
        ),
        migrations.RunPython(seal_with_currency, migrations.RunPython.noop),
    ]
