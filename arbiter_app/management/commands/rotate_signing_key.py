from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from arbiter_app import keys


class Command(BaseCommand):
    help = "Make a new signing key active; the current one retires but stays published."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--alg", choices=keys.ALGORITHMS, help="default: OANP_SIGNING_ALG")

    def handle(self, *args: Any, alg: str | None, **options: Any) -> None:
        key = keys.rotate(alg=alg)
        self.stdout.write(f"active signing key {key.kid} ({key.alg})")
