"""Timers fire on a real Celery worker: a session left waiting closes on time, exactly once."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from arbiter_app.models import Entry, Session
from tests.arbiter_app.conftest import Worker
from tests.arbiter_app.factories import Agent, ClientNegotiation

pytestmark = pytest.mark.django_db(transaction=True)


def wait_for(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout} s: {condition.__doc__ or condition}")
        time.sleep(0.05)


def closed(session_id: str) -> bool:
    return Session.objects.filter(session_id=session_id, phase="CLOSED").exists()


def closes(session_id: str) -> int:
    """How many times the arbiter closed the session."""
    return Entry.objects.filter(
        session__session_id=session_id, type="session.close", sender_role="arbiter"
    ).count()


def test_a_session_past_its_deadline_closes_on_time(
    celery_worker_process: Worker, client: Any, buyer: Agent, merchant: Agent
) -> None:
    deadline = datetime.now(UTC) + timedelta(seconds=2)
    run = ClientNegotiation(client, buyer, merchant, session_id="sess-deadline")
    run.open(deadline=deadline)
    wait_for(lambda: closed("sess-deadline"))
    session = Session.objects.get(session_id="sess-deadline")
    assert session.close_reason == "deadline_expired"
    assert session.ended_at is not None
    assert session.ended_at >= deadline
    assert closes("sess-deadline") == 1
