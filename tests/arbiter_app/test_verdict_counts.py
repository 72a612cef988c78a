"""Each session row counts its rounds judged fair, stuck and violated: as verdicts are appended,
and, for sessions logged before the columns existed, from their logs by the migration."""

from __future__ import annotations

from importlib import import_module

import pytest
from django.apps import apps
from django.db import connection

from arbiter_app.models import Session
from tests.support.factories.agents import ClientNegotiation

pytestmark = pytest.mark.django_db

backfill = import_module("arbiter_app.migrations.0007_session_verdict_counts")


def counts(session_id: str) -> tuple[int, int, int]:
    row = Session.objects.get(session_id=session_id)
    return row.fair_rounds, row.stuck_rounds, row.violated_rounds


def test_the_sfo_jfk_session_counts_two_fair_rounds(logged: ClientNegotiation) -> None:
    assert counts(logged.session_id) == (2, 0, 0)


def test_the_migration_counts_what_the_log_holds(logged: ClientNegotiation) -> None:
    Session.objects.filter(session_id=logged.session_id).update(
        fair_rounds=0, stuck_rounds=7, violated_rounds=7
    )
    backfill.count_logged_verdicts(apps, connection.schema_editor())
    assert counts(logged.session_id) == (2, 0, 0)
