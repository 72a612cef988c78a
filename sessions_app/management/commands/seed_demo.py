"""``manage.py seed_demo``: the demo's merchants, people, hosted agents and buyer agents
(:mod:`sessions_app.demo.seed`)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from sessions_app.demo import seed


class Command(BaseCommand):
    help = "Create the demo's merchants, accounts and hosted agents; print the accounts."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--reset-passwords",
            action="store_true",
            help="give every demo account a new random password and print it",
        )
        parser.add_argument(
            "--buyer-keys",
            action="store_true",
            help="issue fresh API keys for the demo buyers (revoking the previous ones)",
        )

    def handle(self, *args: Any, reset_passwords: bool, buyer_keys: bool, **options: Any) -> None:
        seed.report(reset_passwords=reset_passwords, buyer_keys=buyer_keys, say=self.stdout.write)
