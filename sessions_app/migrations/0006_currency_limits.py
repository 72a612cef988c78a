"""Limits carry a currency: each agent's vault, sealed before as one floor and ideal (and
per-item ones) without a currency, is sealed again as a price list in the agent's first
listed currency (USD when it lists none), and the agent remembers that currency so that its
page says so until the owner saves the form."""

from django.db import migrations, models

from oanp.pricelist import from_single_limits
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
    for profile in profiles.exclude(vault=b"").iterator():
        if not bytes(profile.vault):
            continue
        document = unseal_document(profile.vault)
        if "limits" in document:
            continue  # sealed as a price list already
        listing = listings.filter(merchant_agent_id=profile.agent_id).first()
        currency, prices = _read_in_currency(document, listing.currencies if listing else [])
        profile.vault = seal(prices)
        profile.limits_read_as = currency
        profile.save(update_fields=["vault", "limits_read_as"], using=db)


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0005_reveal_after_end"),
        ("arbiter_app", "0009_listings"),
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
