from typing import Any

from django.core.management.commands import flush
from django.db import connections


class Command(flush.Command):
    """Django's flush, which also empties the log: on PostgreSQL a trigger refuses to truncate
    sessions and entries unless ``oanp.allow_truncate`` is on, and honours it only for their
    owner or a superuser (migration 0005). Test cases that use the database's transactions
    flush with this after each test."""

    def handle(self, **options: Any) -> None:
        connection = connections[options["database"]]
        if connection.vendor != "postgresql":
            super().handle(**options)
            return
        with connection.cursor() as cursor:
            cursor.execute("SET oanp.allow_truncate = on")
        try:
            super().handle(**options)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET oanp.allow_truncate")
