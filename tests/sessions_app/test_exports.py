"""Audit exports: run by the real Celery worker, the bundle passes ``oanp verify`` and one
flipped byte fails it; the CSV has a row per session; a merchant's export holds its own
sessions only; progress reaches the total; a failed export keeps and serves no file."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.files.storage import default_storage
from django.test import Client

from sessions_app import exports
from sessions_app.models import AgentProfile, AuditEvent, Export, MemberRole, Membership, Merchant
from tests.conftest import ROOT, Worker
from tests.support.factories.agents import ClientNegotiation, make_agent
from tests.support.waiting import wait_for

PASSWORD = "correct horse battery"


def member(username: str, role: str, merchant: Merchant | None = None) -> Client:
    user = User.objects.create_user(username, password=PASSWORD)
    Membership.objects.create(user=user, role=role, merchant=merchant)
    browser = Client(HTTP_HOST="localhost")
    assert browser.login(username=username, password=PASSWORD)
    return browser


SESSIONS = {"a": ["sess-a-agreed", "sess-a-live"], "b": ["sess-b-agreed"]}


@pytest.fixture
def sessions(client: Client) -> dict[str, ClientNegotiation]:
    """Merchant a: one agreed session and one still negotiating; merchant b: one agreed. The
    live one's negotiation is returned, its merchant's counter next."""
    buyer = make_agent("buyer-001", "buyer")
    for slug, agent_ids in (("a", ["agent-a", "agent-a2"]), ("b", ["agent-b"])):
        merchant = Merchant.objects.create(name=f"Merchant {slug}", slug=slug)
        for agent_id in agent_ids:
            AgentProfile.objects.create(merchant=merchant, agent_id=agent_id, mode="external")

    def run(session_id: str, agent_id: str) -> ClientNegotiation:
        merchant = make_agent(agent_id, "merchant")
        negotiation = ClientNegotiation(client, buyer, merchant, session_id, f"{session_id}-")
        negotiation.open()
        return negotiation

    run("sess-a-agreed", "agent-a").finish()
    live = run("sess-a-live", "agent-a2")
    live.run_until("offer.counter")
    run("sess-b-agreed", "agent-b").finish()
    return {"sess-a-live": live}


@pytest.fixture
def cleanup() -> Iterator[None]:
    """Export files the worker writes under MEDIA_ROOT go once the test is done."""
    yield
    for export in Export.objects.all():
        for stored in (export.bundle, export.summary_csv):
            if stored:
                default_storage.delete(stored.name)


def verify(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oanp.net.cli", "verify", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def download(browser: Client, export: Export, part: str) -> bytes:
    answer = browser.get(f"/exports/{export.pk}/{part}/")
    assert answer.status_code == 200, answer
    assert answer["Content-Disposition"].startswith("attachment")
    return b"".join(answer.streaming_content)


def finished(export_id: int) -> Export:
    wait_for(lambda: Export.objects.get(pk=export_id).state in ("done", "failed"), 30)
    return Export.objects.get(pk=export_id)


def request(browser: Client, **form: str) -> Export:
    answer = browser.post("/exports/", form)
    assert answer.status_code == 302, answer.content.decode()
    return Export.objects.latest("created_at")


@pytest.mark.django_db(transaction=True)
def test_the_worker_exports_a_bundle_that_verifies_and_a_csv_row_per_session(
    celery_worker_process: Worker, sessions: None, cleanup: None, tmp_path: Path
) -> None:
    admin = member("admin", MemberRole.ADMIN)
    export = finished(request(admin, kind="range", preset="24h").pk)
    assert export.state == "done", export.error
    assert export.progress == export.total == 3
    assert export.finished_at is not None

    status = admin.get(f"/exports/{export.pk}/status/").content.decode()
    assert "hx-trigger" not in status  # finished: the page stops polling
    assert f"/exports/{export.pk}/bundle/" in status
    assert f"/exports/{export.pk}/csv/" in status

    bundle = download(admin, export, "bundle")
    path = tmp_path / "bundle.json"
    path.write_bytes(bundle)
    checked = verify(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "VERIFIED" in checked.stdout

    # One byte: the buyer's first price, 320 → 330, in the first session's log.
    at = bundle.index(b'"price":320') + len(b'"price":3')
    flipped = bytearray(bundle)
    flipped[at : at + 1] = b"3"
    path.write_bytes(bytes(flipped))
    tampered = verify(path)
    assert tampered.returncode == 1, tampered.stdout + tampered.stderr
    assert "FAILED" in tampered.stdout

    rows = list(csv.DictReader(io.StringIO(download(admin, export, "csv").decode())))
    assert sorted(r["session_id"] for r in rows) == sorted(
        s for ids in SESSIONS.values() for s in ids
    )
    by_id = {r["session_id"]: r for r in rows}
    agreed = by_id["sess-a-agreed"]
    assert (agreed["state"], agreed["outcome"], agreed["final_price"]) == (
        "agreed",
        "agreed",
        "340",
    )
    assert (agreed["buyer_agent_id"], agreed["merchant_agent_id"]) == ("buyer-001", "agent-a")
    assert (agreed["rounds"], agreed["violations"], agreed["currency"]) == ("2", "0", "USD")
    assert agreed["opened_at"] < agreed["ended_at"]
    live = by_id["sess-a-live"]
    assert (live["state"], live["outcome"], live["final_price"]) == (
        "negotiating",
        "in progress",
        "",
    )
    assert live["ended_at"] == ""

    events = [(e.action, e.target) for e in AuditEvent.objects.order_by("at")]
    assert events == [
        ("export.request", f"export {export.pk}"),
        ("export.download", f"export {export.pk}"),
        ("export.download", f"export {export.pk}"),
    ]
    assert f"export {export.pk}" in admin.get("/audit/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_merchants_export_holds_only_its_own_sessions(
    celery_worker_process: Worker, sessions: None, cleanup: None, tmp_path: Path
) -> None:
    a = member("user-a", MemberRole.MERCHANT_MANAGER, Merchant.objects.get(slug="a"))
    # Merchant b is not among merchant a's choices, like a merchant that does not exist.
    for slug in ("b", "nowhere"):
        answer = a.post("/exports/", {"kind": "merchant", "merchant": slug})
        assert answer.status_code == 400
        assert f"Select a valid choice. {slug} is not one of the available choices." in (
            answer.content.decode()
        )
    export = finished(request(a, kind="merchant", merchant="a").pk)
    assert export.state == "done", export.error
    assert export.scope["tenant"] == "a"
    assert export.progress == export.total == 2

    path = tmp_path / "a.json"
    path.write_bytes(download(a, export, "bundle"))
    assert verify(path).returncode == 0
    text = path.read_text()
    assert "sess-b-agreed" not in text
    assert "agent-b" not in text
    rows = list(csv.DictReader(io.StringIO(download(a, export, "csv").decode())))
    assert sorted(r["session_id"] for r in rows) == SESSIONS["a"]

    # Merchant b's session, by id, is as unknown to merchant a as a session that never was.
    for session_id in ("sess-b-agreed", "sess-nowhere"):
        answer = a.post("/exports/", {"kind": "session", "session_id": session_id})
        assert answer.status_code == 400
        assert f"No session &#x27;{session_id}&#x27; in your sessions." in answer.content.decode()
    assert Export.objects.count() == 1

    # Another merchant's member neither lists nor downloads it.
    b = member("user-b", MemberRole.MERCHANT_MANAGER, Merchant.objects.get(slug="b"))
    assert f"/exports/{export.pk}/" not in b.get("/exports/").content.decode()
    assert b.get(f"/exports/{export.pk}/bundle/").status_code == 404
    assert b.get(f"/exports/{export.pk}/status/").status_code == 404


@pytest.mark.django_db
def test_operators_do_not_export(sessions: None) -> None:
    operator = member("operator", MemberRole.OPERATOR)
    assert operator.get("/exports/").status_code == 403
    assert operator.post("/exports/", {"kind": "range", "preset": "24h"}).status_code == 403
    assert not Export.objects.exists()


@pytest.fixture
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.mark.django_db
def test_progress_moves_batch_by_batch_and_the_page_polls_until_done(
    sessions: None, media: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = member("admin", MemberRole.ADMIN)
    export = request(admin, kind="merchant", merchant="a")  # queued: no worker in this test
    status = admin.get(f"/exports/{export.pk}/status/").content.decode()
    assert 'hx-trigger="every 1s"' in status
    assert admin.get(f"/exports/{export.pk}/bundle/").status_code == 404

    seen: list[tuple[int, int]] = []
    row = exports.summary_row

    def summary_row(session: Any, log: Any) -> list[str]:
        now = Export.objects.get(pk=export.pk)
        seen.append((now.progress, now.total))
        return row(session, log)

    monkeypatch.setattr(exports, "BATCH_SESSIONS", 1)
    monkeypatch.setattr(exports, "summary_row", summary_row)
    exports.run(export_id=export.pk)
    assert seen == [(0, 2), (1, 2)]
    export.refresh_from_db()
    assert (export.state, export.progress, export.total) == ("done", 2, 2)
    assert "hx-trigger" not in admin.get(f"/exports/{export.pk}/status/").content.decode()


@pytest.mark.django_db
def test_a_failed_export_says_why_and_keeps_no_file(
    sessions: None, media: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = member("admin", MemberRole.ADMIN)
    export = request(admin, kind="range", preset="7d")

    storage = Export._meta.get_field("bundle").storage
    save = storage.save

    def broken(name: str, content: Any, *args: Any, **kwargs: Any) -> str:
        if name.endswith(".csv"):
            raise OSError(28, "No space left on device")
        return save(name, content, *args, **kwargs)

    # The CSV fails after the bundle was stored: the bundle must go too.
    monkeypatch.setattr(storage, "save", broken)
    with pytest.raises(OSError, match="No space left"):
        exports.run(export_id=export.pk)
    export.refresh_from_db()
    assert export.state == "failed"
    said = "The export&#x27;s files could not be stored (the disk may be full); retry it."
    assert export.error == said.replace("&#x27;", "'")
    assert not export.bundle
    assert not list((media / "exports").iterdir())
    assert admin.get(f"/exports/{export.pk}/bundle/").status_code == 404
    assert said in admin.get(f"/exports/{export.pk}/status/").content.decode()


def exported(browser: Client, tmp_path: Path, **form: str) -> tuple[Export, Path]:
    """Request an export on the page, run it here as the worker would, and download its
    bundle."""
    export = request(browser, **form)
    exports.run(export_id=export.pk)
    export.refresh_from_db()
    assert export.state == "done", export.error
    path = tmp_path / f"export-{export.pk}.json"
    path.write_bytes(download(browser, export, "bundle"))
    return export, path


def verify_since(path: Path, earlier: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oanp.net.cli", "verify", str(path), "--since", str(earlier)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.django_db
def test_a_later_export_of_the_same_scope_proves_it_extends_the_earlier_one(
    client: Client, sessions: None, cleanup: None, tmp_path: Path
) -> None:
    b = member("user-b", MemberRole.MERCHANT_MANAGER, Merchant.objects.get(slug="b"))
    first, first_path = exported(b, tmp_path, kind="merchant", merchant="b")
    assert first.extends is None
    assert json.loads(first_path.read_text())["consistency"] == []

    buyer, merchant = make_agent("buyer-002", "buyer"), make_agent("agent-b", "merchant")
    later = ClientNegotiation(client, buyer, merchant, "sess-b-later", "sess-b-later-")
    later.open()
    later.finish()
    second, second_path = exported(b, tmp_path, kind="merchant", merchant="b")
    assert second.extends == first
    bundle = json.loads(second_path.read_text())
    [consistency] = bundle["consistency"]
    assert consistency["checkpoint"] == first.checkpoint
    assert bundle["checkpoint"] == second.checkpoint

    checked = verify_since(second_path, first_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "ok   earlier export is a prefix" in checked.stdout
    assert "ok   consistency #1: tree of 9 is a prefix of this tree of 18" in checked.stdout
    # The other way round the earlier one extends nothing.
    backwards = verify_since(first_path, second_path)
    assert backwards.returncode == 1
    assert "FAIL earlier export is a prefix" in backwards.stdout

    page = b.get(f"/exports/{second.pk}/status/").content.decode()
    assert f"extends export #{first.pk}" in page
    assert "extends export" not in b.get(f"/exports/{first.pk}/status/").content.decode()


@pytest.mark.django_db
def test_an_export_whose_sessions_changed_since_extends_nothing(
    client: Client, sessions: dict[str, ClientNegotiation], cleanup: None, tmp_path: Path
) -> None:
    a = member("user-a", MemberRole.MERCHANT_MANAGER, Merchant.objects.get(slug="a"))
    buyer, merchant = make_agent("buyer-002", "buyer"), make_agent("agent-a", "merchant")
    after = ClientNegotiation(client, buyer, merchant, "sess-a-after", "sess-a-after-")
    after.open()
    after.finish()
    _, first_path = exported(a, tmp_path, kind="merchant", merchant="a")
    # sess-a-live, no longer the last session, moves on: the earlier tree is no longer a
    # prefix of the new one (while the last session of an export grows, it still is).
    sessions["sess-a-live"].step()
    second, second_path = exported(a, tmp_path, kind="merchant", merchant="a")
    assert second.extends is None
    assert json.loads(second_path.read_text())["consistency"] == []
    checked = verify_since(second_path, first_path)
    assert checked.returncode == 1
    assert "FAIL earlier export is a prefix" in checked.stdout
