"""``Session.phase`` gains ``SETTLING`` (settlement by reveal); the column is unchanged."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("arbiter_app", "0007_session_verdict_counts"),
    ]

    operations = [
        migrations.AlterField(
            model_name="session",
            name="phase",
            field=models.CharField(
                choices=[
                    ("OPENING", "OPENING"),
                    ("NEGOTIATING", "NEGOTIATING"),
                    ("SETTLING", "SETTLING"),
                    ("EVALUATING", "EVALUATING"),
                    ("AGREED", "AGREED"),
                    ("CLOSED", "CLOSED"),
                ],
                db_index=True,
                max_length=16,
            ),
        ),
    ]
