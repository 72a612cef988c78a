"""``Session.phase`` takes its choices from ``oanp.wire.machine.Phase``; the column is unchanged."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("arbiter_app", "0005_append_only_hardening"),
    ]

    operations = [
        migrations.AlterField(
            model_name="session",
            name="phase",
            field=models.CharField(
                choices=[
                    ("OPENING", "OPENING"),
                    ("NEGOTIATING", "NEGOTIATING"),
                    ("EVALUATING", "EVALUATING"),
                    ("AGREED", "AGREED"),
                    ("CLOSED", "CLOSED"),
                ],
                db_index=True,
                max_length=16,
            ),
        ),
    ]
