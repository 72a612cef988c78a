"""``manage.py bootstrap_admin``: the first person who may do everything in the dashboard.

``createsuperuser`` makes an account Django's own admin site accepts, but the dashboard asks
for a role, which only an admin gives: without this, the first person signs in to a
dashboard that refuses them everything."""

from typing import Any

from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from sessions_app import people


class Command(BaseCommand):
    help = (
        "Create a superuser, as createsuperuser does (its prompts, or --no-input with "
        "--username, --email and DJANGO_SUPERUSER_PASSWORD), and give it the dashboard's "
        "admin role; with --existing USERNAME, give an existing account the role instead."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--existing", metavar="USERNAME", help="an account to make admin")
        parser.add_argument("--username")
        parser.add_argument("--email")
        parser.add_argument(
            "--no-input", action="store_false", dest="interactive", help="ask nothing"
        )

    def handle(
        self,
        *args: Any,
        existing: str | None,
        username: str | None,
        email: str | None,
        interactive: bool,
        **options: Any,
    ) -> None:
        if existing is not None:
            made = list(User.objects.filter(username=existing))
            if not made:
                raise CommandError(f"no account is named {existing!r}")
        else:
            before = set(User.objects.filter(is_superuser=True).values_list("pk", flat=True))
            call_command(
                "createsuperuser",
                username=username,
                email=email,
                interactive=interactive,
                stdout=self.stdout,
                stderr=self.stderr,
            )
            made = list(User.objects.filter(is_superuser=True).exclude(pk__in=before))
        for user in made:
            people.make_admin_from_shell(user)
            self.stdout.write(f"{user.get_username()} is an admin of the dashboard.")
