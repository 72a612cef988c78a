"""A session's phases have one source, :class:`oanp.wire.state.Phase`: the session row takes its
choices and ``is_terminal`` from it, the migrations hold those choices, and the OpenAPI document
lists the same phases."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.management import call_command

from arbiter_app.models import Session
from oanp.wire.state import Phase


def test_the_migrations_hold_every_change_of_the_models(db: None) -> None:
    # makemigrations --check exits non-zero when a model changed with no migration to match.
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


def test_a_session_row_offers_exactly_the_machine_s_phases() -> None:
    choices = Session._meta.get_field("phase").choices
    assert choices == [(phase.value, phase.value) for phase in Phase]


@pytest.mark.parametrize("phase", list(Phase), ids=str)
def test_a_session_row_has_ended_exactly_when_its_phase_is_terminal(phase: Phase) -> None:
    assert Session(phase=phase.value).is_terminal is (phase in {Phase.AGREED, Phase.CLOSED})


def test_the_openapi_document_lists_the_machine_s_phases(client: Any) -> None:
    document = json.loads(client.get("/oanp/v0.1/openapi.json").content)
    state = document["components"]["schemas"]["SessionSummary"]["properties"]["state"]
    assert state["enum"] == [phase.value for phase in Phase]


def test_a_finished_session_is_terminal_on_its_row(logged: Any) -> None:
    session = Session.objects.get(session_id=logged.session_id)
    assert (session.phase, session.is_terminal) == ("AGREED", True)
