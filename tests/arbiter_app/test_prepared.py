"""Reads compiled once per database (arbiter_app.prepared): the same rows and annotations as
their queryset, the lock kept to a transaction, a build that misuses its value refused."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import F, QuerySet, Value
from django.db.models.functions import Concat
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext

from arbiter_app.models import Session
from arbiter_app.prepared import PreparedRead
from tests.support.factories.agents import ClientNegotiation, make_agent

pytestmark = pytest.mark.django_db


@pytest.fixture
def sessions(client: Any) -> list[str]:
    buyer, merchant = make_agent("prep-b", "buyer"), make_agent("prep-m", "merchant")
    ids = ["prep-1", "prep-2"]
    for session_id in ids:
        ClientNegotiation(client, buyer, merchant, session_id=session_id, tag=session_id).open()
    return ids


def labelled(session_id: str) -> QuerySet[Session]:
    return Session.objects.annotate(
        label=Concat(F("buyer_agent_id"), Value("/"), F("merchant_agent_id"))
    ).filter(session_id=session_id)


def test_it_reads_what_its_queryset_reads_and_compiles_once(sessions: list[str]) -> None:
    built: list[str] = []

    def build(session_id: str) -> QuerySet[Session]:
        built.append(session_id)
        return labelled(session_id)

    read = PreparedRead(Session, build)
    for session_id in sessions:
        found = read.first(session_id)
        expected = labelled(session_id).get()
        assert found is not None
        assert (found.pk, found.session_id, found.label) == (
            expected.pk,
            expected.session_id,
            "prep-b/prep-m",
        )
        # Fields come back through their converters, as the queryset's do.
        assert (found.opened_at, found.state) == (expected.opened_at, expected.state)
    assert read.first("prep-none") is None
    assert len(built) == 1  # compiled for the first read, then its SQL ran again


@pytest.mark.django_db(transaction=True)
def test_a_locking_read_runs_in_a_transaction_only(sessions: list[str]) -> None:
    read = PreparedRead(
        Session, lambda value: Session.objects.select_for_update().filter(session_id=value)
    )
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        found = read.first(sessions[0])
    assert found is not None
    assert found.session_id == sessions[0]
    assert "FOR UPDATE" in captured.captured_queries[-1]["sql"]
    with pytest.raises(TransactionManagementError):
        read.first(sessions[1])


@pytest.mark.parametrize(
    "build",
    [
        lambda value: Session.objects.filter(session_id="prep-1"),
        lambda value: Session.objects.filter(session_id=value, buyer_agent_id=value),
    ],
    ids=["unused", "twice"],
)
def test_a_build_must_use_its_value_once(build: Any) -> None:
    with pytest.raises(ValueError, match="uses its value"):
        PreparedRead(Session, build).first("prep-1")
