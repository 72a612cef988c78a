"""The admin shows every arbiter record, and lets no one edit a log entry."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from arbiter_app.models import Entry
from tests.support.factories.agents import ClientNegotiation

pytestmark = pytest.mark.django_db

MODELS = (
    "agentcredential",
    "session",
    "entry",
    "signingkey",
    "handofftarget",
    "handoff",
    "agentcallback",
    "callbackcursor",
    "deliveryattempt",
)


@pytest.mark.parametrize("model", MODELS)
def test_each_record_has_an_admin_list(
    admin_client: Any, logged: ClientNegotiation, model: str
) -> None:
    response = admin_client.get(reverse(f"admin:arbiter_app_{model}_changelist"))
    assert response.status_code == 200


def test_an_entry_can_be_read_but_not_changed(admin_client: Any, logged: ClientNegotiation) -> None:
    entry = Entry.objects.order_by("id").first()
    assert entry is not None
    page = admin_client.get(reverse("admin:arbiter_app_entry_change", args=[entry.pk]))
    assert page.status_code == 200
    assert b'type="submit"' not in page.content.split(b"<footer")[0].split(b'id="content"')[1]
    assert admin_client.get(reverse("admin:arbiter_app_entry_add")).status_code == 403
    deleted = admin_client.post(
        reverse("admin:arbiter_app_entry_delete", args=[entry.pk]), {"post": "yes"}
    )
    assert deleted.status_code == 403
    assert Entry.objects.filter(pk=entry.pk).exists()
