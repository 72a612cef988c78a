"""The database itself refuses to change or delete a log entry, whoever asks."""

from django.db import migrations

MESSAGE = "oanp log entries are append-only"

POSTGRES_UP = f"""
CREATE FUNCTION arbiter_entry_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '{MESSAGE}' USING ERRCODE = 'integrity_constraint_violation';
END $$;
CREATE TRIGGER arbiter_entry_append_only
    BEFORE UPDATE OR DELETE ON arbiter_app_entry
    FOR EACH ROW EXECUTE FUNCTION arbiter_entry_append_only();
"""
POSTGRES_DOWN = """
DROP TRIGGER arbiter_entry_append_only ON arbiter_app_entry;
DROP FUNCTION arbiter_entry_append_only();
"""
SQLITE_UP = [
    f"""CREATE TRIGGER arbiter_entry_no_{verb.lower()} BEFORE {verb} ON arbiter_app_entry
    BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END;"""
    for verb in ("UPDATE", "DELETE")
]
SQLITE_DOWN = [f"DROP TRIGGER arbiter_entry_no_{verb};" for verb in ("update", "delete")]


def _run(statements: dict[str, list[str]]):  # type: ignore[no-untyped-def]
    def run(apps, schema_editor):  # type: ignore[no-untyped-def]
        for sql in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("arbiter_app", "0001_initial")]

    operations = [
        migrations.RunPython(
            _run({"postgresql": [POSTGRES_UP], "sqlite": SQLITE_UP}),
            _run({"postgresql": [POSTGRES_DOWN], "sqlite": SQLITE_DOWN}),
        )
    ]
