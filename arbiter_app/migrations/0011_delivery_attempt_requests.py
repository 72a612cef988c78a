import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    """Attempts keep the request they sent (secrets redacted) and the answer's headers;
    callback cursors their creation time, the order the deliveries page lists them in."""

    dependencies = [
        ("arbiter_app", "0010_credential_expiry_last_used"),
    ]

    operations = [
        migrations.AddField(
            model_name="callbackcursor",
            name="created_at",
            field=models.DateTimeField(
                auto_now_add=True, db_index=True, default=django.utils.timezone.now
            ),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="deliveryattempt",
            name="request_method",
            field=models.CharField(blank=True, max_length=8),
        ),
        migrations.AddField(
            model_name="deliveryattempt",
            name="request_url",
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name="deliveryattempt",
            name="request_headers",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="deliveryattempt",
            name="request_body",
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name="deliveryattempt",
            name="response_headers",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
