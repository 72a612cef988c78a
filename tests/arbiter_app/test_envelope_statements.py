"""What one envelope costs the database: its transaction, and nothing after it when neither
party has a callback nor a hosted agent (docs/BENCHMARKS.md, service)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from arbiter_app.deliveries import callbacks
from arbiter_app.models import AgentCallback, CallbackCursor
from tests.support.factories.agents import ClientNegotiation, make_agent, post

# Transactions of their own: what runs after a commit is what is counted.
pytestmark = pytest.mark.django_db(transaction=True)


def test_an_envelope_after_the_open_is_its_transaction_alone(client: Client) -> None:
    buyer, merchant = make_agent("stmt-b", "buyer"), make_agent("stmt-m", "merchant")
    run = ClientNegotiation(client, buyer, merchant, session_id="stmt-s", tag="stmt-")
    run.open()
    key, envelope = run.outbox.popleft()
    with CaptureQueriesContext(connection) as captured:
        assert post(run.client, key, envelope).status_code == 201
    # The merchant's first request: its key is looked up and its use recorded.
    queries = [q["sql"] for q in captured.captured_queries if "agentcredential" not in q["sql"]]
    kinds = [sql.split()[0].upper() for sql in queries]
    assert kinds == ["BEGIN", "SELECT", "UPDATE", "INSERT", "COMMIT"], queries
    # The locked read brings the parties' callbacks along, for the listener after the commit.
    assert "arbiter_app_agentcallback" in queries[1]
    assert "FOR UPDATE" in queries[1]


def test_a_party_with_a_callback_is_served_from_the_locked_read(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[int] = []
    monkeypatch.setattr(callbacks, "send", lambda cursor_id, countdown=None: sent.append(cursor_id))
    buyer, merchant = make_agent("cbk-b", "buyer"), make_agent("cbk-m", "merchant")
    run = ClientNegotiation(client, buyer, merchant, session_id="cbk-s", tag="cbk-")
    run.open()
    callback = AgentCallback.objects.create(
        agent_id="cbk-m", role="merchant", url="https://merchant.test/hook", secret_encrypted=b""
    )
    key, envelope = run.outbox.popleft()
    with CaptureQueriesContext(connection) as captured:
        assert post(run.client, key, envelope).status_code == 201
    looked_up = [q for q in captured.captured_queries if "arbiter_app_agentcallback" in q["sql"]]
    assert len(looked_up) == 1  # the locked read's, no query of the listener's own
    assert "FOR UPDATE" in looked_up[0]["sql"]
    cursor = CallbackCursor.objects.get(callback=callback)
    assert sent == [cursor.pk]
