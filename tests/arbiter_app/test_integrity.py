"""The integrity check: session heads and hash chains against their entries. Quiet on a clean
log; a head moved, a link broken or an entry whose hash lies each raise an alarm that is logged,
counted in /metrics and shown to operators and admins, until a check finds the session sound."""

from __future__ import annotations

import json
import logging
import re

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client

from arbiter_app import integrity, selectors, tasks
from arbiter_app.models import Entry, IntegrityAlarm, IntegrityCheck, Session
from oanp.wire.canonical import ZERO_HASH
from oanp.wire.log import entry_hash_of
from sessions_app.models import MemberRole
from tests.support.factories.accounts import member, merchant, signed_in
from tests.support.factories.agents import ClientNegotiation

pytestmark = pytest.mark.django_db

NOTICE = r'<div class="outage" id="integrity-alarm" role="alert">(.*?)</div>'
ENTRIES = Entry._meta.db_table


@pytest.fixture(autouse=True)
def only_this_tests_checks() -> None:
    # A check run elsewhere in the suite must not decide where this test's recompute starts.
    IntegrityCheck.objects.all().delete()


def notice(browser: Client) -> str | None:
    found = re.search(NOTICE, browser.get("/").content.decode(), re.S)
    return None if found is None else " ".join(re.sub("<[^>]+>", "", found.group(1)).split())


def alarms_logged(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "arbiter_app.integrity"]


def gauge(client: Client) -> float:
    page = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    return float(re.search(r"^oanp_integrity_mismatches (\S+)$", page, re.M).group(1))


def as_owner(sql: str, params: list[object]) -> None:
    """Change an entry as its owner can: with the append-only trigger switched off (inside the
    test's transaction, so the switch rolls back with it)."""
    with connection.cursor() as cursor:
        # The foreign keys' deferred checks of this transaction's inserts run first: a table
        # with pending trigger events cannot be altered.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f"ALTER TABLE {ENTRIES} DISABLE TRIGGER arbiter_entry_append_only")
        cursor.execute(sql, params)
        cursor.execute(f"ALTER TABLE {ENTRIES} ENABLE ALWAYS TRIGGER arbiter_entry_append_only")


def test_the_check_is_on_beats_schedule() -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["check-integrity"]
    assert entry["task"] == tasks.check_integrity.name
    assert entry["schedule"] == settings.OANP_INTEGRITY_CHECK_SECONDS == 300


def test_a_clean_log_raises_nothing(
    logged: ClientNegotiation, caplog: pytest.LogCaptureFixture, client: Client
) -> None:
    # A finished session and a second, open one.
    ClientNegotiation(
        logged.client, logged.buyer_key, logged.merchant_key, session_id="sess-two", tag="two-"
    ).open()
    with caplog.at_level(logging.ERROR, logger="arbiter_app.integrity"):
        assert tasks.check_integrity() == 0
    assert alarms_logged(caplog) == []
    assert not IntegrityAlarm.objects.exists()
    check = IntegrityCheck.objects.get()
    assert (check.full, check.sessions, check.entries_rehashed, check.mismatches) == (
        True,
        2,
        Entry.objects.count(),
        0,
    )
    assert gauge(client) == 0
    assert notice(signed_in(member("op", MemberRole.OPERATOR))) is None


def test_a_moved_head_is_an_alarm_until_put_back(
    logged: ClientNegotiation, caplog: pytest.LogCaptureFixture, client: Client
) -> None:
    session = Session.objects.get()
    real = session.head_hash
    Session.objects.filter(pk=session.pk).update(head_seq=7, head_hash=ZERO_HASH)
    with caplog.at_level(logging.ERROR, logger="arbiter_app.integrity"):
        assert tasks.check_integrity() == 1
    alarm = IntegrityAlarm.objects.get()
    assert (alarm.session_id, alarm.kind, alarm.resolved_at) == (session.session_id, "head", None)
    assert alarm.detail == f"head is seq 7, {ZERO_HASH}; log ends seq 9, {real}"
    [line] = alarms_logged(caplog)
    assert line.levelname == "ERROR"
    assert f"{session.session_id} (head)" in line.getMessage()
    assert gauge(client) == 1
    # Operators and admins read it on every page; a merchant's member does not.
    text = notice(signed_in(member("op", MemberRole.OPERATOR)))
    assert text is not None
    assert f"{session.session_id} (head_seq or head_hash disagrees with the log)" in text
    admin = signed_in(member("root", MemberRole.ADMIN))
    audit = admin.get("/audit/").content.decode()
    assert 'id="integrity-alarms"' in audit
    assert alarm.detail in audit
    assert notice(signed_in(member("shop", MemberRole.MERCHANT_MANAGER, merchant("shop")))) is None

    Session.objects.filter(pk=session.pk).update(head_seq=9, head_hash=real)
    assert tasks.check_integrity() == 0
    alarm.refresh_from_db()
    assert alarm.resolved_at is not None
    assert gauge(client) == 0
    assert notice(admin) is None


def test_an_entry_appended_past_the_head_is_an_alarm(logged: ClientNegotiation) -> None:
    # The application's role may insert entries; one the head does not account for is caught.
    last = Entry.objects.get(seq=9)
    Entry.objects.create(
        session=last.session,
        seq=10,
        message_id="forged",
        type=last.type,
        sender_role=last.sender_role,
        sender_agent_id=last.sender_agent_id,
        received_at=last.received_at,
        envelope=last.envelope,
        prev_hash=last.entry_hash,
        entry_hash=last.entry_hash,
    )
    findings = {(f.kind, f.detail) for f in integrity.check().findings}
    assert findings == {
        ("head", f"head is seq 9, {last.entry_hash}; log ends seq 10, {last.entry_hash}"),
        ("hash", "entry 10: entry_hash does not match its contents"),
    }


def test_a_broken_link_and_a_lying_hash_are_alarms(logged: ClientNegotiation) -> None:
    session_id = Session.objects.get().session_id
    as_owner(f"UPDATE {ENTRIES} SET prev_hash = %s WHERE seq = 5", [ZERO_HASH])
    findings = {(f.kind, f.detail) for f in integrity.check().findings}
    assert findings == {
        ("link", "entry 5: prev_hash does not link to the entry before"),
        ("hash", "entry 5: entry_hash does not match its contents"),
    }
    assert set(IntegrityAlarm.objects.values_list("session_id", "kind")) == {
        (session_id, "link"),
        (session_id, "hash"),
    }
    # Rewritten with a hash that matches its new contents, the entry breaks the next one's link.
    fourth, fifth = Entry.objects.filter(seq__in=(4, 5)).order_by("seq")
    stamp = "2000-01-01T00:00:00Z"
    rewritten = {
        "seq": 5,
        "received_at": stamp,
        "envelope": json.loads(fifth.envelope),
        "prev_hash": fourth.entry_hash,
    }
    as_owner(
        f"UPDATE {ENTRIES} SET prev_hash = %s, received_at = %s, entry_hash = %s WHERE seq = 5",
        [fourth.entry_hash, stamp, entry_hash_of(rewritten)],
    )
    findings = {(f.kind, f.detail) for f in integrity.check(full=True).findings}
    assert findings == {("link", "entry 6: prev_hash does not link to the entry before")}
    # The hash alarm is resolved (the contents match again); the link's stays open.
    assert set(selectors.open_integrity_alarms().values_list("kind", flat=True)) == {"link"}
    assert IntegrityAlarm.objects.filter(kind="hash", resolved_at__isnull=False).exists()


def test_only_entries_new_since_the_check_before_last_are_rehashed(
    logged: ClientNegotiation,
) -> None:
    assert integrity.check().full
    assert integrity.check().entries_rehashed == Entry.objects.count()  # no check before last
    # A changed hash the link check cannot see (the last entry's, with the head moved along)
    # is found by the next full pass, not by an incremental one.
    last = Entry.objects.get(seq=9)
    as_owner(f"UPDATE {ENTRIES} SET received_at = %s WHERE seq = 9", ["2000-01-01T00:00:00Z"])
    third = integrity.check()
    assert (third.full, third.entries_rehashed, third.findings) == (False, 0, [])
    ClientNegotiation(
        logged.client, logged.buyer_key, logged.merchant_key, session_id="sess-two", tag="two-"
    ).open()
    fourth = integrity.check()
    assert (fourth.entries_rehashed, fourth.findings) == (Entry.objects.count() - 9, [])
    assert [(f.kind, f.session_id) for f in integrity.check(full=True).findings] == [
        ("hash", last.session.session_id)
    ]
