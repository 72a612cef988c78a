"""Sessions and their logs read through two cursors in step, as an export reads them."""

from __future__ import annotations

import pytest

from arbiter_app import selectors, services
from arbiter_app.models import Entry, Session
from tests.arbiter_app.test_timer_sweep import DUE, open_sessions


@pytest.mark.django_db
@pytest.mark.parametrize("order", [("opened_at", "session_id"), ("-session_id",)])
def test_every_session_comes_with_its_whole_log_in_order(
    order: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = open_sessions(7, prefix="logs")
    services.expire_due_sessions(now=DUE, limit=3)  # three logs of two entries, four of one
    monkeypatch.setattr(selectors, "LOG_CURSOR_ROWS", 2)  # many fetches per cursor
    sessions = Session.objects.filter(session_id__in=ids[1:]).order_by(*order)
    found = list(selectors.logs_of(sessions))
    assert [s.session_id for s, _ in found] == [s.session_id for s in sessions]
    assert [log for _, log in found] == [selectors.session_entries(s) for s in sessions]
    assert sum(len(log) for _, log in found) == Entry.objects.filter(session__in=sessions).count()
    assert {len(log) for _, log in found} == {1, 2}
