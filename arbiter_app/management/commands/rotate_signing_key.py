from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from arbiter_app import selectors, services


class Command(BaseCommand):
    help = "Make a new signing key active; the current one retires but stays published."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--alg", choices=selectors.SIGNING_ALGORITHMS, help="default: OANP_SIGNING_ALG"
        )

    def handle(self, *args: Any, alg: str | None, **options: Any) -> None:
        key = services.rotate_signing_key(alg=alg)
        self.stdout.write(f"active signing key {key.kid} ({key.alg})")
