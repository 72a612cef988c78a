"""The session columns the dashboard's list filters, sorts and pages on, each with its index, and
filled in for the sessions already stored; on PostgreSQL, a trigram index for the id and item
searches (``icontains`` reads ``UPPER(column::text)``, so the index is on that expression)."""

import json
from datetime import datetime

from django.db import migrations, models

from arbiter_app.models import settlement_of
from oanp.wire.discovery import catalog_text
from oanp.wire.snapshot import load_state

TRIGRAM_UP = """
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX session_text_search ON arbiter_app_session USING gin (
    (UPPER(session_id::text)) gin_trgm_ops, (UPPER(item_text::text)) gin_trgm_ops
);
"""
TRIGRAM_DOWN = "DROP INDEX session_text_search;"


def _on_postgresql(sql):  # type: ignore[no-untyped-def]
    def run(apps, schema_editor):  # type: ignore[no-untyped-def]
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


def fill_in(apps, schema_editor):  # type: ignore[no-untyped-def]
    # On the connection migrating (``migrate --database owner``): another would wait on it.
    db = schema_editor.connection.alias
    sessions = apps.get_model("arbiter_app", "Session").objects.using(db)
    entries = apps.get_model("arbiter_app", "Entry").objects.using(db)
    for session in sessions.filter(last_activity_at__isnull=True).iterator(chunk_size=500):
        state = load_state(json.loads(session.state))
        head = entries.filter(session=session, seq=session.head_seq).first()
        session.item_text = catalog_text([state.item])
        session.settlement = settlement_of(state)
        session.last_activity_at = (
            session.opened_at
            if head is None
            else datetime.fromisoformat(head.received_at.replace("Z", "+00:00"))
        )
        if session.ended_at is not None:
            session.lasted = session.ended_at - session.opened_at
        session.save(update_fields=["item_text", "settlement", "last_activity_at", "lasted"])


class Migration(migrations.Migration):
    dependencies = [
        ("arbiter_app", "0014_delivery_attempt_origin"),
    ]

    operations = [
        migrations.AddField(
            model_name="session",
            name="item_text",
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name="session",
            name="last_activity_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="session",
            name="lasted",
            field=models.DurationField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="session",
            name="settlement",
            field=models.CharField(
                blank=True,
                choices=[
                    ("", "not offered"),
                    ("offered", "offered, no reveal"),
                    ("revealed", "a limit revealed, not settled"),
                    ("settled", "settled at the midpoint"),
                ],
                max_length=8,
            ),
        ),
        migrations.AddIndex(
            model_name="session",
            index=models.Index(fields=["opened_at", "id"], name="session_opened_page"),
        ),
        migrations.AddIndex(
            model_name="session",
            index=models.Index(fields=["last_activity_at", "id"], name="session_activity_page"),
        ),
        migrations.AddIndex(
            model_name="session",
            index=models.Index(fields=["currency"], name="session_currency"),
        ),
        migrations.AddIndex(
            model_name="session",
            index=models.Index(fields=["profile"], name="session_profile"),
        ),
        migrations.AddIndex(
            model_name="session",
            index=models.Index(fields=["close_reason"], name="session_close_reason"),
        ),
        migrations.AddIndex(
            model_name="session",
            index=models.Index(fields=["final_price"], name="session_final_price"),
        ),
        migrations.AddIndex(
            model_name="session",
            index=models.Index(fields=["lasted"], name="session_lasted"),
        ),
        migrations.AddIndex(
            model_name="session",
            index=models.Index(fields=["settlement"], name="session_settlement"),
        ),
        migrations.AddIndex(
            model_name="session",
            index=models.Index(
                condition=models.Q(("stuck_rounds__gt", 0)),
                fields=["stuck_rounds"],
                name="session_stuck",
            ),
        ),
        migrations.AddIndex(
            model_name="session",
            index=models.Index(
                condition=models.Q(("fair_rounds__gt", 0)),
                fields=["fair_rounds"],
                name="session_fair",
            ),
        ),
        migrations.RunPython(fill_in, migrations.RunPython.noop),
        migrations.RunPython(_on_postgresql(TRIGRAM_UP), _on_postgresql(TRIGRAM_DOWN)),
    ]
