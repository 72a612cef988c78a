"""Run as a script by test_sqlite_exports: on the embedded default's SQLite (a file named by
DATABASE_URL), exports of every session while threads keep writing, as the demo's web process,
worker and buyers do. Prints one line per export: its state and error."""

from __future__ import annotations

import contextlib
import os
import sys
import threading

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oanp_site.settings")
django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from arbiter_app import selectors as arbiter  # noqa: E402
from arbiter_app.models import Heartbeat  # noqa: E402
from sessions_app import exports  # noqa: E402
from sessions_app.models import AgentProfile, Export, MemberRole, Membership, Merchant  # noqa: E402
from tests.support.factories.agents import ClientNegotiation, make_agent  # noqa: E402

SESSIONS, EXPORTS, WRITERS = 12, 6, 4
SCOPE = {"kind": "merchant", "merchant": "sky", "tenant": None}


def seed() -> User:
    call_command("migrate", verbosity=0)
    shop = Merchant.objects.create(name="Skyways", slug="sky")
    AgentProfile.objects.create(merchant=shop, agent_id="merchant-sfo", mode="external")
    buyer, merchant = make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant")
    client = Client(HTTP_HOST="localhost")
    for n in range(SESSIONS):
        ClientNegotiation(client, buyer, merchant, f"sess-{n:03}", f"s{n}-").open()
    admin = User.objects.create_user("ada")
    Membership.objects.create(user=admin, role=MemberRole.ADMIN)
    return admin


def write_until(stop: threading.Event, name: str, failures: list[str]) -> None:
    """A writer as the demo's processes are: short transactions, a few milliseconds apart."""
    now = timezone.now()
    try:
        while not stop.wait(0.005):
            with transaction.atomic():
                Heartbeat.objects.update_or_create(
                    kind="worker", name=name, defaults={"seen_at": now, "started_at": now}
                )
    except Exception as exc:  # a writer refused is the failure this script looks for too
        failures.append(f"writer {name}: {type(exc).__name__}: {exc}")
    finally:
        connection.close()


def main() -> None:
    admin = seed()
    # An export larger than the cursors' chunks, as the demo's grow: its reads stay open
    # while it writes its progress, between every two sessions.
    arbiter.LOG_CURSOR_ROWS, exports.BATCH_SESSIONS = 10, 1
    stop, failures = threading.Event(), list[str]()
    writers = [
        threading.Thread(target=write_until, args=(stop, f"w{i}", failures)) for i in range(WRITERS)
    ]
    for writer in writers:
        writer.start()
    try:
        for _ in range(EXPORTS):
            export = Export.objects.create(requested_by=admin, scope=SCOPE)
            # A failed export records why, and that is what this script reports.
            with contextlib.suppress(Exception):
                exports.run(export_id=export.pk)
            export.refresh_from_db()
            print(export.state, export.error)
            for stored in (export.bundle, export.summary_csv):
                if stored:
                    stored.storage.delete(stored.name)
    finally:
        stop.set()
        for writer in writers:
            writer.join()
    for failure in failures:
        print(failure)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
