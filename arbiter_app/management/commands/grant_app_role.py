import json
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from arbiter_app import db_privileges


class Command(BaseCommand):
    help = (
        "Grant a PostgreSQL role exactly what the application needs "
        "(arbiter_app.db_privileges), as the tables' owner; prints the grants as JSON. "
        "`migrate --database owner` does it for the role of DATABASE_URL."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--role", help="default: the user of DATABASE_URL")
        parser.add_argument(
            "--database",
            default=db_privileges.OWNER_ALIAS,
            help="the connection of the tables' owner (default: owner, from DATABASE_OWNER_URL)",
        )

    def handle(self, *args: Any, role: str | None, database: str, **options: Any) -> None:
        if database not in settings.DATABASES:
            raise CommandError(f"no database {database!r}: set DATABASE_OWNER_URL")
        if connections[database].vendor != "postgresql":
            raise CommandError("roles and grants need PostgreSQL")
        role = role or settings.DATABASES["default"].get("USER")
        if not role:
            raise CommandError("no role: pass --role or name a user in DATABASE_URL")
        self.stdout.write(json.dumps(db_privileges.grant(role, using=database), indent=2))
