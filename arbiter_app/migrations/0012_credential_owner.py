from django.db import migrations, models


class Migration(migrations.Migration):
    """Keys record who they were issued to, so that two agents of one owner cannot be the two
    parties of a session (docs/protocol.md §14.5, check 12a)."""

    dependencies = [
        ("arbiter_app", "0011_delivery_attempt_requests"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentcredential",
            name="owner",
            field=models.CharField(blank=True, max_length=64),
        ),
    ]
