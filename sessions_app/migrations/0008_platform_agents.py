"""Buyer platforms' agents: the ids their people hold API keys for."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0007_organisations"),
    ]

    operations = [
        migrations.CreateModel(
            name="PlatformAgent",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("agent_id", models.CharField(max_length=64, unique=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "organisation",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="buyer_agents",
                        to="sessions_app.merchant",
                    ),
                ),
            ],
            options={
                "ordering": ["agent_id"],
            },
        ),
    ]
