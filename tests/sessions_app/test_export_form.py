"""The exports page's form: each input says which kind it is for (the script then shows the
chosen kind's alone), a missing or unknown value is a clear error beside its input and in the
summary at the top, and a finished export shows its files' sizes and when it finished."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.core.files.storage import default_storage
from django.test import Client

from sessions_app.models import AuditEvent, Export, MemberRole, Merchant
from sessions_app.templatetags.ago import when
from tests.sessions_app.pages import messages_in
from tests.support.factories import exports
from tests.support.factories.accounts import member, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin() -> Client:
    Merchant.objects.create(name="Skyways", slug="skyways")
    return signed_in(member("ada", MemberRole.ADMIN))


def summary_of(page: str) -> str:
    start = page.index("data-error-summary")
    return page[start : page.index("</div>", start)]


def test_each_input_is_labelled_with_its_kind_and_the_script_is_loaded(admin: Client) -> None:
    page = admin.get("/exports/").content.decode()
    for kind, field, label in (
        ("session", "id_session_id", "Session id (one session)"),
        ("merchant", "id_merchant", "Merchant (a merchant&#x27;s sessions)"),
        ("range", "id_preset", "Time range (sessions opened in it)"),
    ):
        block = page.split(f'data-kind="{kind}"', 1)[1].split("</div>", 1)[0]
        assert f'<label for="{field}">{label}' in block
    assert "js/exports.js" in page
    assert "data-error-summary" not in page  # nothing to fix yet


@pytest.mark.parametrize(
    ("form", "field", "message"),
    [
        ({"kind": "session", "session_id": ""}, "id_session_id", "Enter a session id."),
        ({"kind": "session", "session_id": "   "}, "id_session_id", "Enter a session id."),
        (
            {"kind": "session", "session_id": "sess-x"},
            "id_session_id",
            "No session &#x27;sess-x&#x27; in your sessions.",
        ),
        ({"kind": "merchant", "merchant": ""}, "id_merchant", "Choose a merchant."),
        ({"kind": "range", "preset": ""}, "id_preset", "Choose a time range."),
        (
            {"kind": "everything"},
            "id_kind_0",
            "Select a valid choice. everything is not one of the available choices.",
        ),
    ],
)
def test_a_missing_or_unknown_value_is_a_clear_error_and_exports_nothing(
    admin: Client, form: dict[str, str], field: str, message: str
) -> None:
    answer = admin.post("/exports/", form)
    assert answer.status_code == 400
    page = answer.content.decode()
    assert f'<a href="#{field}">' in summary_of(page)
    assert message in summary_of(page)
    # The input names its error for screen readers (radios sit in their fieldset instead).
    assert f'id="{field.removesuffix("_0")}_error"' in page
    if field != "id_kind_0":
        assert f'aria-describedby="{field}_error"' in page
    assert "no session &#x27;&#x27;" not in page
    assert not Export.objects.exists()
    assert not AuditEvent.objects.exists()


def test_a_queued_export_says_so(admin: Client) -> None:
    answer = admin.post("/exports/", {"kind": "range", "preset": "24h"}, follow=True)
    assert answer.redirect_chain == [("/exports/", 302)]
    export = Export.objects.get()
    page = answer.content.decode()
    assert messages_in(page) == [f"Export #{export.pk} queued: it runs in the background."]
    assert f"<td>{when(export.created_at)}</td>" in page


@pytest.fixture
def finished_export() -> Iterator[Export]:
    export = exports.finished_export(User.objects.get(username="ada"))
    yield export
    exports.discard_files(export)


def test_a_finished_export_shows_its_sizes_and_finish_time(
    admin: Client, finished_export: Export
) -> None:
    for url in ("/exports/", f"/exports/{finished_export.pk}/status/"):
        page = admin.get(url).content.decode()
        assert "audit bundle (JSON, 2.0\xa0KB)" in page
        assert "summary (CSV, 300\xa0bytes)" in page
        assert f"finished {when(finished_export.finished_at)}" in page


def test_a_lost_file_leaves_the_size_out_and_the_page_up(
    admin: Client, finished_export: Export
) -> None:
    default_storage.delete(finished_export.bundle.name)
    answer = admin.get("/exports/")
    assert answer.status_code == 200
    assert "audit bundle (JSON)" in answer.content.decode()
