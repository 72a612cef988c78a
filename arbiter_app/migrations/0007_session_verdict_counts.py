"""Each session counts the rounds judged fair, stuck and violated, counted from the verdicts
already on the log here and as each verdict is appended from now on."""

import json
from collections import Counter
from typing import Any

from django.db import migrations, models

COLUMNS = {"fair": "fair_rounds", "fair_but_stuck": "stuck_rounds", "violated": "violated_rounds"}


def count_logged_verdicts(apps: Any, schema_editor: Any) -> None:
    # On the connection migrate runs on: the owner's, where the application role is another.
    database = schema_editor.connection.alias
    entry = apps.get_model("arbiter_app", "Entry")
    session = apps.get_model("arbiter_app", "Session")
    counts: dict[int, Counter[str]] = {}
    verdicts = (
        entry.objects.using(database)
        .filter(type="round.verdict")
        .values_list("session_id", "envelope")
    )
    for session_id, envelope in verdicts.iterator(chunk_size=2000):
        status = json.loads(envelope)["payload"]["status"]
        counts.setdefault(session_id, Counter())[COLUMNS[status]] += 1
    for session_id, counted in counts.items():
        columns = {column: counted[column] for column in COLUMNS.values()}
        session.objects.using(database).filter(pk=session_id).update(**columns)


class Migration(migrations.Migration):
    dependencies = [
        ("arbiter_app", "0006_session_phase_choices"),
    ]

    operations = [
        migrations.AddField(
            model_name="session",
            name="fair_rounds",
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="session",
            name="stuck_rounds",
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="session",
            name="violated_rounds",
            field=models.PositiveSmallIntegerField(db_index=True, default=0),
        ),
        migrations.RunPython(count_logged_verdicts, migrations.RunPython.noop),
    ]
