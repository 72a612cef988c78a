"""Exports of every session and of any first and last day, with the form's refusals in words;
a failed export says why in words and is retried, audited, by whoever may see it."""

from __future__ import annotations

import pytest
from django.db import OperationalError
from django.test import Client

from sessions_app import exports
from sessions_app.models import AuditEvent, Export, MemberRole
from tests.sessions_app.pages import messages_in
from tests.support.factories.accounts import member, merchant, signed_in

pytestmark = pytest.mark.django_db


def test_all_sessions_and_any_days_are_exported_ranges() -> None:
    ada = member("ada", MemberRole.ADMIN)
    client = signed_in(ada)
    assert client.post("/exports/", {"kind": "all"}).status_code == 302
    assert Export.objects.get().scope == {"kind": "all", "tenant": None}
    Export.objects.all().delete()
    asked = {"kind": "range", "preset": "custom", "opened_from": "2020-01-01"}
    assert client.post("/exports/", asked).status_code == 302
    scope = Export.objects.get().scope
    assert (scope["from"], scope["to"]) == ("2020-01-01T00:00:00+00:00", None)
    page = client.get("/exports/").content.decode()
    assert "opened 2020-01-01 until now" in page


@pytest.mark.parametrize(
    ("days", "says"),
    [
        ({}, "Enter a first day, a last day, or both."),
        ({"opened_from": "2026-05-02", "opened_to": "2026-05-01"}, "The first day comes after"),
        ({"opened_from": "yesterday"}, "Enter the first day as a date, like 2026-04-28."),
    ],
)
def test_a_bad_range_is_refused_in_words(days: dict[str, str], says: str) -> None:
    client = signed_in(member("ada", MemberRole.ADMIN))
    page = client.post("/exports/", {"kind": "range", "preset": "custom", **days})
    assert page.status_code == 400
    assert says in page.content.decode()
    assert not Export.objects.exists()


def test_a_failed_export_says_why_and_is_retried() -> None:
    ada = member("ada", MemberRole.ADMIN)
    export = Export.objects.create(requested_by=ada, scope={"kind": "all", "tenant": None})
    Export.objects.filter(pk=export.pk).update(
        state=Export.State.FAILED,
        error=exports.failure_in_words(OperationalError("database is locked")),
    )
    client = signed_in(ada)
    page = client.get("/exports/").content.decode()
    assert "The database was busy or unreachable while the export ran; retry it." in page
    assert "OperationalError" not in page
    assert f'id="export-{export.pk}-retry"' in page
    done = client.post(f"/exports/{export.pk}/retry/", follow=True)
    assert messages_in(done.content.decode()) == [
        f"Export #{export.pk} queued again: it runs in the background."
    ]
    export.refresh_from_db()
    assert (export.state, export.error) == (Export.State.QUEUED, "")
    assert AuditEvent.objects.get(action="export.retry").target == f"export {export.pk}"
    again = client.post(f"/exports/{export.pk}/retry/", follow=True)
    assert messages_in(again.content.decode()) == [
        f"Export #{export.pk} has not failed: there is nothing to retry."
    ]
    assert AuditEvent.objects.filter(action="export.retry").count() == 1


def test_another_merchants_member_cannot_retry_an_export() -> None:
    alice = member("alice", MemberRole.MERCHANT_MANAGER, merchant("a"))
    export = Export.objects.create(requested_by=alice, scope={"kind": "all", "tenant": "a"})
    Export.objects.filter(pk=export.pk).update(state=Export.State.FAILED, error="x")
    bob: Client = signed_in(member("bob", MemberRole.MERCHANT_MANAGER, merchant("b")))
    assert bob.post(f"/exports/{export.pk}/retry/").status_code == 404
    olga = signed_in(member("olga", MemberRole.OPERATOR))
    assert olga.post(f"/exports/{export.pk}/retry/").status_code == 403
    export.refresh_from_db()
    assert export.state == Export.State.FAILED
    assert not AuditEvent.objects.filter(action="export.retry").exists()
