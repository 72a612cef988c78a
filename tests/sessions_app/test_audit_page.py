"""The admin audit log: filters by who, action and day, a search in targets and details,
pages by cursor links that keep the filters, and every odd parameter reported, never a 500."""

from __future__ import annotations

import html
from datetime import timedelta
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from sessions_app import audit_log
from sessions_app.models import AuditEvent, MemberRole, Merchant
from sessions_app.templatetags.ago import when
from tests.support.factories.accounts import member, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def ada() -> User:
    return member("ada", MemberRole.ADMIN)


@pytest.fixture
def admin(ada: User) -> Client:
    return signed_in(ada)


def record(actor: User, action: str, target: str, days_ago: int = 0, **detail: object) -> None:
    event = AuditEvent.objects.create(actor=actor, action=action, target=target, detail=detail)
    AuditEvent.objects.filter(pk=event.pk).update(at=event.at - timedelta(days=days_ago))


def targets(client: Client, **query: str) -> list[str]:
    answer = client.get("/audit/", query)
    assert answer.status_code == 200, answer.content.decode()
    rows = answer.content.decode().split("<tbody>", 1)[-1].split("</tbody>", 1)[0]
    return [cell.split("</code>", 1)[0] for cell in rows.split('<code class="hash">')[1:]]


def test_filters_by_actor_action_day_and_search(admin: Client, ada: User) -> None:
    bob = member("bob", MemberRole.ADMIN)
    record(ada, "key.rotate", "kid-new", alg="ES256")
    record(bob, "export.request", "export 7", days_ago=3, preset="24h")
    record(bob, "key.issued", "agent-x", days_ago=10, label="laptop")
    assert targets(admin) == ["kid-new", "export 7", "agent-x"]
    assert targets(admin, actor="bob") == ["export 7", "agent-x"]
    assert targets(admin, action="key.rotate") == ["kid-new"]
    today = timezone.localdate()
    assert targets(admin, since=str(today - timedelta(days=5))) == ["kid-new", "export 7"]
    assert targets(admin, until=str(today - timedelta(days=3))) == ["export 7", "agent-x"]
    assert targets(admin, q="LAPTOP") == ["agent-x"]  # in the detail, any case
    assert targets(admin, q="export") == ["export 7"]  # in the target
    assert targets(admin, actor="bob", q="kid") == []
    assert "No action matches these filters." in admin.get("/audit/", {"q": "zzz"}).content.decode()


def test_each_action_shows_when_relative_with_the_exact_utc_on_hover(
    admin: Client, ada: User
) -> None:
    record(ada, "key.rotate", "kid-new", days_ago=2)
    event = AuditEvent.objects.get()
    page = admin.get("/audit/").content.decode()
    assert f"<tr><td>{when(event.at)}</td>" in page


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"actor": "mallory"}, "Nobody named mallory has done anything recorded."),
        ({"action": "key.delete"}, "No action key.delete is recorded."),
        ({"since": "yesterday"}, "Enter a valid date."),
        ({"since": "2026-02-01", "until": "2026-01-01"}, "The end date is before the start date."),
        ({"after": "not-a-cursor"}, audit_log.BROKEN_CURSOR),
        ({"before": "bm90aGluZw"}, audit_log.BROKEN_CURSOR),
    ],
)
def test_an_invalid_filter_is_reported_and_shows_nothing(
    admin: Client, ada: User, query: dict[str, str], message: str
) -> None:
    record(ada, "key.rotate", "kid-new")
    answer = admin.get("/audit/", query)
    assert answer.status_code == 400
    page = answer.content.decode()
    summary = page.split("data-error-summary", 1)[1].split("</div>", 1)[0]
    assert "These filters cannot be applied:" in summary
    assert message in summary
    assert "kid-new" not in page


def query_of(link: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(html.unescape(link)).query))


def test_pages_follow_cursor_links_and_keep_the_filters(
    admin: Client, ada: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_log, "PAGE_SIZE", 2)
    for n in range(5):
        record(ada, "key.issued", f"agent-{n}", days_ago=5 - n)
    record(ada, "key.rotate", "kid-elsewhere")
    seen: list[str] = []
    query: dict[str, str] = {"action": "key.issued"}
    while True:
        page = admin.get("/audit/", query).content.decode()
        seen += targets(admin, **query)
        if 'rel="next"' not in page:
            break
        link = page.split('rel="next"', 1)[0].rsplit('href="', 1)[1].split('"', 1)[0]
        assert "action=key.issued" in link
        query = query_of(link)
    assert seen == ["agent-4", "agent-3", "agent-2", "agent-1", "agent-0"]
    # Back from the last page: the newer link shows the page before it.
    link = page.split('rel="prev"', 1)[0].rsplit('href="', 1)[1].split('"', 1)[0]
    back = query_of(link)
    assert targets(admin, **back) == ["agent-2", "agent-1"]
    # Events recorded meanwhile do not move a page.
    record(ada, "key.issued", "agent-new")
    assert targets(admin, **back) == ["agent-2", "agent-1"]


@pytest.mark.parametrize("role", [MemberRole.OPERATOR, MemberRole.MERCHANT_MANAGER])
def test_only_admins_read_the_log(role: str) -> None:
    merchant = Merchant.objects.create(name="Skyways", slug="skyways")
    browser = signed_in(
        member("someone", role, merchant if role == MemberRole.MERCHANT_MANAGER else None)
    )
    assert browser.get("/audit/").status_code == 403
    assert browser.get("/audit/", {"actor": "nobody"}).status_code == 403
