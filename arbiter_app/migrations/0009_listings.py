"""The directory of merchant agents (docs/protocol.md §14.10): one listing per agent."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("arbiter_app", "0008_session_phase_settling"),
    ]

    operations = [
        migrations.CreateModel(
            name="Listing",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("merchant_agent_id", models.CharField(max_length=64, unique=True)),
                ("merchant", models.CharField(max_length=200)),
                ("listed", models.BooleanField(default=False)),
                ("description", models.TextField(blank=True)),
                ("currencies", models.JSONField(blank=True, default=list)),
                ("catalog", models.TextField(default="[]")),
                ("catalog_text", models.TextField(blank=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "ordering": ["merchant_agent_id"],
            },
        ),
    ]
