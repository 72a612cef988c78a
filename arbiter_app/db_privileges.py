"""What the application's database role may do, when it is not the tables' owner.

The owner (``DATABASE_OWNER_URL``) runs the migrations; the application connects with a role
that owns nothing, so it can neither drop the log's triggers nor truncate, and is granted:

- on the log's entries, SELECT and INSERT only: an entry is never changed or removed;
- on sessions, SELECT, INSERT and UPDATE (each move advances the head), never DELETE;
- on tables only ``migrate`` writes (content types, permissions, the migration record), SELECT;
- on integrity alarms, SELECT, INSERT and UPDATE: an alarm is resolved, never removed;
- on every other table of an installed app, SELECT, INSERT, UPDATE and DELETE: credentials are
  revoked and callbacks removed, heartbeats and task failures pruned, users and their admin log
  deleted from the dashboard, beat's schedule rewritten, web sessions expired;
- USAGE and SELECT on the sequences of the tables it inserts into.

TRUNCATE, REFERENCES and TRIGGER are granted nowhere. Every grant replaces what the role had on
that table, so running it again (``migrate --database owner`` does, after each migration) keeps
the role at exactly this.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.db import connections
from django.db.migrations.recorder import MigrationRecorder

OWNER_ALIAS = "owner"
WRITE = ("SELECT", "INSERT", "UPDATE", "DELETE")
#: Tables, by model label, where the application gets less than ``WRITE``.
LIMITED: dict[str, tuple[str, ...]] = {
    "arbiter_app.Entry": ("SELECT", "INSERT"),
    "arbiter_app.Session": ("SELECT", "INSERT", "UPDATE"),
    "contenttypes.ContentType": ("SELECT",),
    "auth.Permission": ("SELECT",),
    "arbiter_app.IntegrityAlarm": ("SELECT", "INSERT", "UPDATE"),
    "migrations.Migration": ("SELECT",),
}


def policy() -> dict[str, tuple[str, ...]]:
    """Privileges of the application's role by table, for every model of an installed app (the
    tables of many-to-many fields included) and Django's migration record."""
    models = [*apps.get_models(include_auto_created=True), MigrationRecorder.Migration]
    # A proxy shares its model's table, and must not widen what the model's entry says.
    return {
        model._meta.db_table: LIMITED.get(model._meta.label, WRITE)
        for model in models
        if not model._meta.proxy
    }


def grant(role: str, *, using: str = OWNER_ALIAS) -> dict[str, Any]:
    """Set ``role``'s privileges to :func:`policy` on the tables that exist, as ``using``
    (their owner). Returns what was granted, by table and sequence."""
    connection = connections[using]
    quote = connection.ops.quote_name
    granted: dict[str, Any] = {"role": role, "tables": {}, "sequences": []}
    grantee = quote(role)
    with connection.cursor() as cursor:
        existing = set(connection.introspection.table_names(cursor))
        for table, privileges in sorted(policy().items()):
            if table not in existing:
                continue
            cursor.execute(f"REVOKE ALL ON TABLE {quote(table)} FROM {grantee}")
            cursor.execute(f"GRANT {', '.join(privileges)} ON TABLE {quote(table)} TO {grantee}")
            granted["tables"][table] = list(privileges)
            for sequence in connection.introspection.get_sequences(cursor, table):
                name = quote(sequence["name"])
                cursor.execute(f"REVOKE ALL ON SEQUENCE {name} FROM {grantee}")
                if "INSERT" in privileges:
                    cursor.execute(f"GRANT USAGE, SELECT ON SEQUENCE {name} TO {grantee}")
                    granted["sequences"].append(sequence["name"])
        # Before PostgreSQL 15 every role may create tables in the public schema; say so
        # rather than change a database-wide default here.
        cursor.execute("SELECT has_schema_privilege(%s, 'public', 'CREATE')", [role])
        granted["can_create_in_public_schema"] = cursor.fetchone()[0]
    return granted


def after_migrate(using: str) -> dict[str, Any] | None:
    """Grant the application's role its privileges after ``migrate --database owner``; nothing
    when migrations ran as the application's own role (one role for everything)."""
    if using != OWNER_ALIAS or connections[using].vendor != "postgresql":
        return None
    role = settings.DATABASES["default"].get("USER") or ""
    if not role or role == settings.DATABASES[OWNER_ALIAS].get("USER"):
        return None
    return grant(role, using=using)
