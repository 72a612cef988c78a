"""Organisations and people: every merchant becomes a merchant organisation (a buyer platform
is the other kind), people are invited by email, and the one merchant role splits in two.
Every merchant member managed its agents until now, so each becomes a merchant manager; an
operator or admin left tied to a merchant is untied, since staff roles span every tenant."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def split_merchant_role(apps, schema_editor):
    memberships = apps.get_model("sessions_app", "Membership").objects.using(
        schema_editor.connection.alias
    )
    memberships.filter(role="merchant").update(role="merchant_manager")
    memberships.filter(role__in=("operator", "admin")).update(merchant=None)


def join_merchant_role(apps, schema_editor):
    memberships = apps.get_model("sessions_app", "Membership").objects.using(
        schema_editor.connection.alias
    )
    # The old schema has one tenant role: whoever held a merchant's, or a buyer platform's,
    # goes back to it, read-only people included.
    memberships.filter(role__in=("merchant_manager", "merchant_member", "buyer_member")).update(
        role="merchant"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0006_currency_limits"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Invitation",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("email", models.EmailField(max_length=254)),
                (
                    "role",
                    models.CharField(
                        choices=[
                            ("merchant_manager", "Merchant manager"),
                            ("merchant_member", "Merchant member"),
                            ("buyer_member", "Buyer-platform member"),
                            ("operator", "Operator"),
                            ("admin", "Admin"),
                        ],
                        max_length=16,
                    ),
                ),
                ("nonce", models.CharField(max_length=43)),
                ("sent_at", models.DateTimeField()),
                ("expires_at", models.DateTimeField()),
                ("accepted_at", models.DateTimeField(blank=True, null=True)),
                ("revoked_at", models.DateTimeField(blank=True, null=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={
                "ordering": ["-sent_at"],
            },
        ),
        migrations.RemoveConstraint(
            model_name="membership",
            name="merchant_member_has_merchant",
        ),
        migrations.AddField(
            model_name="merchant",
            name="kind",
            field=models.CharField(
                choices=[("merchant", "Merchant"), ("buyer_platform", "Buyer platform")],
                default="merchant",
                max_length=16,
            ),
        ),
        migrations.AlterField(
            model_name="membership",
            name="role",
            field=models.CharField(
                choices=[
                    ("merchant_manager", "Merchant manager"),
                    ("merchant_member", "Merchant member"),
                    ("buyer_member", "Buyer-platform member"),
                    ("operator", "Operator"),
                    ("admin", "Admin"),
                ],
                max_length=16,
            ),
        ),
        migrations.RunPython(split_merchant_role, join_merchant_role),
        migrations.AddConstraint(
            model_name="membership",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("merchant__isnull", False),
                        ("role__in", ["buyer_member", "merchant_manager", "merchant_member"]),
                    ),
                    models.Q(
                        models.Q(
                            ("role__in", ["buyer_member", "merchant_manager", "merchant_member"]),
                            _negated=True,
                        ),
                        ("merchant__isnull", True),
                    ),
                    _connector="OR",
                ),
                name="tenant_member_has_organisation",
            ),
        ),
        migrations.AddField(
            model_name="invitation",
            name="invited_by",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="invitations_sent",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="invitation",
            name="organisation",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="invitations",
                to="sessions_app.merchant",
            ),
        ),
    ]
