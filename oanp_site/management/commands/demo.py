"""``manage.py demo`` (``make demo``): the arbiter served with its worker and beat, the demo
seeded and played live (:mod:`oanp_site.demo.serve`)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from oanp_site.demo import serve


class Command(BaseCommand):
    help = "Serve the arbiter with demo accounts, hosted agents and buyers negotiating live."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--no-serve", action="store_true", help="stop the server after the negotiation"
        )
        parser.add_argument(
            "--buyers",
            type=int,
            default=3,
            help="background sessions at a time while serving (0: none)",
        )
        parser.add_argument(
            "--reset-passwords",
            action="store_true",
            help="give the demo accounts new passwords (they are printed only when set)",
        )

    def handle(
        self,
        *args: Any,
        host: str,
        port: int,
        no_serve: bool,
        buyers: int,
        reset_passwords: bool,
        **options: Any,
    ) -> None:
        serve.run(
            host=host,
            port=port,
            no_serve=no_serve,
            buyers=buyers,
            reset_passwords=reset_passwords,
            say=self.stdout.write,
        )
