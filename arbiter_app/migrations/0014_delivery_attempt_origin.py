from django.db import migrations, models


class Migration(migrations.Migration):
    """Attempts record the origin they go to, so that those in flight to one target can be
    counted against OANP_DELIVERIES_PER_TARGET (arbiter_app.deliveries.bound). Earlier attempts
    have none and count nowhere: only those running during the upgrade matter, for one lease."""

    dependencies = [
        ("arbiter_app", "0013_heartbeat_queues"),
    ]

    operations = [
        migrations.AddField(
            model_name="deliveryattempt",
            name="origin",
            field=models.CharField(blank=True, max_length=2000),
        ),
        migrations.AddIndex(
            model_name="deliveryattempt",
            index=models.Index(
                condition=models.Q(("outcome", "")),
                fields=["origin", "started_at"],
                name="attempts_in_flight",
            ),
        ),
    ]
