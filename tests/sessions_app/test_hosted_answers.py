"""No hosted answer is lost to the broker, and a hosted agent's window running out is the
arbiter's failure, never its merchant's: the session ends ``operator_terminated``, not
``response_timeout``."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from arbiter_app import services as arbiter_services
from arbiter_app.models import Session
from oanp.wire.envelope import parse_timestamp
from sessions_app import agent_lifecycle, hosted_agents, selectors, services, tasks
from sessions_app.models import AgentProfile
from tests.sessions_app.test_hosted_agents import types
from tests.support.factories.accounts import HostedNegotiation, admin, hosted_agent, merchant
from tests.support.factories.agents import SFO_JFK_TRACE

pytestmark = pytest.mark.django_db

SESSION = "sess-hosted"


@pytest.fixture
def negotiation(client: Client) -> HostedNegotiation:
    hosted_agent(merchant("sfo"))
    return HostedNegotiation(client, "hosted-sfo")


def sent_and_lost(name: str, *, args: list[Any], about: str) -> bool:
    """A broker that took the task and forgot it (a Redis restarted without persistence)."""
    return True


def broker_away(name: str, *, args: list[Any], about: str) -> bool:
    return False


def asked_at(negotiation: HostedNegotiation) -> datetime:
    """When the buyer's latest move, the head of the log, was received."""
    return parse_timestamp(negotiation.log()[-1]["received_at"])


def closed(session_id: str = SESSION) -> tuple[str, str]:
    session = Session.objects.get(session_id=session_id)
    return session.phase, session.close_reason


def test_the_sweep_makes_every_answer_whose_task_was_lost(
    negotiation: HostedNegotiation, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing runs the hooks after a commit here (the test's transaction never commits), so
    # no answer task is ever sent: the sweep is all the hosted agent has. No grace: the
    # buyer moves as soon as it sees an answer, so the sweep meets fresh turns.
    monkeypatch.setattr(hosted_agents, "ANSWER_GRACE", timedelta(0))
    log = negotiation.play(nudge=lambda: tasks.sweep_answers.apply().get(), timeout=5)
    assert types(log) == SFO_JFK_TRACE
    assert log[-1]["envelope"]["payload"]["final_price"] == 340


def test_the_sweep_leaves_a_fresh_turn_to_its_task_and_answers_a_turn_once(
    negotiation: HostedNegotiation, django_assert_num_queries: Any
) -> None:
    negotiation.open()
    asked = asked_at(negotiation)
    with django_assert_num_queries(1):
        assert selectors.hosted_turns_waiting(asked_before=asked, limit=10) == [SESSION]
    # Within the grace the turn is its own task's.
    assert hosted_agents.sweep_answers(asked + timedelta(seconds=1)) == 0
    assert types(negotiation.log()) == ["session.open"]
    later = asked + hosted_agents.ANSWER_GRACE
    assert hosted_agents.sweep_answers(later) == 1
    # Answered: neither the sweep nor the task that was only late takes a second move.
    assert hosted_agents.sweep_answers(later) == 0
    assert hosted_agents.answer(SESSION) == 0
    assert types(negotiation.log()) == ["session.open", "session.ack"]
    # Now it is the buyer's turn: nothing for the host to do.
    assert selectors.hosted_turns_waiting(asked_before=later, limit=10) == []


def test_only_hosted_agents_turns_are_swept(client: Client, negotiation: HostedNegotiation) -> None:
    AgentProfile.objects.create(merchant=merchant("ext"), agent_id="external-sfo", mode="external")
    services.hosted_credential("external-sfo")
    HostedNegotiation(client, "external-sfo", session_id="sess-external").open()
    negotiation.open()
    later = timezone.now() + timedelta(minutes=1)
    assert selectors.hosted_turns_waiting(asked_before=later, limit=10) == [SESSION]


def test_while_the_broker_is_away_the_answer_is_made_at_once(
    negotiation: HostedNegotiation, monkeypatch: pytest.MonkeyPatch
) -> None:
    negotiation.open()
    log = negotiation.log()
    # The hook as the arbiter calls it after the buyer's commit.
    monkeypatch.setattr(hosted_agents, "enqueue", sent_and_lost)
    hosted_agents.on_entries_committed(
        None, session_id=SESSION, merchant_agent_id="hosted-sfo", entries=log
    )
    assert types(negotiation.log()) == ["session.open"]
    monkeypatch.setattr(hosted_agents, "enqueue", broker_away)
    hosted_agents.on_entries_committed(
        None, session_id=SESSION, merchant_agent_id="hosted-sfo", entries=log
    )
    assert types(negotiation.log()) == ["session.open", "session.ack"]


def test_a_window_the_arbiter_let_run_out_ends_the_session_as_its_own_fault(
    negotiation: HostedNegotiation,
) -> None:
    negotiation.open()
    # The workers were away past the merchant's 300 s: the sweep is the first to run again.
    late = asked_at(negotiation) + timedelta(seconds=300)
    assert hosted_agents.sweep_answers(late) == 0
    assert closed() == ("CLOSED", "operator_terminated")
    close = negotiation.log()[-1]["envelope"]
    assert types(negotiation.log()) == ["session.open", "session.close"]
    assert "not the merchant's" in close["payload"]["detail"]
    assert "300 s window" in close["payload"]["detail"]
    # The arbiter's own timer finds nothing left to close.
    assert arbiter_services.expire_due_sessions(now=late) == 0


def test_an_answer_task_run_too_late_ends_the_session_as_the_arbiters_fault(
    negotiation: HostedNegotiation,
) -> None:
    negotiation.open()
    # Less than the margin left: an answer might reach the arbiter after the due moment.
    late = asked_at(negotiation) + timedelta(seconds=300) - hosted_agents.ANSWER_MARGIN / 2
    assert hosted_agents.answer(SESSION, now=late) == 0
    assert closed() == ("CLOSED", "operator_terminated")


def test_a_passed_deadline_is_nobodys_fault_and_the_timer_closes_it(client: Client) -> None:
    hosted_agent(merchant("sfo"))
    negotiation = HostedNegotiation(client, "hosted-sfo")
    opened = timezone.now()
    negotiation.post(
        negotiation.buyer.open(
            session_id=SESSION,
            merchant_agent_id="hosted-sfo",
            item=negotiation.item,
            currency="USD",
            now=opened,
            deadline=opened + timedelta(seconds=60),
        )
    )
    assert hosted_agents.answer(SESSION, now=opened + timedelta(seconds=61)) == 0
    assert closed() == ("CLOSED", "deadline_expired")


@pytest.mark.parametrize("closer", ["the timer's own task", "the sweep"])
def test_when_the_arbiters_timer_comes_first_the_hosted_agents_window_is_still_its_fault(
    negotiation: HostedNegotiation, closer: str
) -> None:
    """The timers worker ran while the hosted agents' did not (or before their sweep): the
    arbiter's timer itself ends the session as its own failure, not the merchant's."""
    negotiation.open()
    late = asked_at(negotiation) + timedelta(seconds=301)
    if closer == "the sweep":
        assert arbiter_services.expire_due_sessions(now=late) == 1
    else:
        assert arbiter_services.expire_session(session_id=SESSION, now=late)
    assert closed() == ("CLOSED", "operator_terminated")
    detail = negotiation.log()[-1]["envelope"]["payload"]["detail"]
    assert detail == (
        "the merchant's agent, run by this arbiter, could not move within its 300 s window: "
        "the fault is the arbiter's, not the merchant's"
    )


def test_an_external_agents_window_running_out_is_its_own(client: Client) -> None:
    AgentProfile.objects.create(merchant=merchant("ext"), agent_id="external-sfo", mode="external")
    services.hosted_credential("external-sfo")
    external = HostedNegotiation(client, "external-sfo", session_id="sess-external")
    external.open()
    late = asked_at(external) + timedelta(seconds=301)
    assert arbiter_services.expire_due_sessions(now=late) == 1
    assert closed("sess-external") == ("CLOSED", "response_timeout")


def test_a_hosted_agent_cut_off_by_its_merchant_answers_nothing_and_times_out_on_it(
    negotiation: HostedNegotiation,
) -> None:
    negotiation.open()
    profile = AgentProfile.objects.get(agent_id="hosted-sfo")
    agent_lifecycle.revoke_runner_key(actor=admin(), profile=profile)
    assert hosted_agents.answer(SESSION) == 0
    assert types(negotiation.log()) == ["session.open"]
    late = asked_at(negotiation) + timedelta(seconds=301)
    assert arbiter_services.expire_due_sessions(now=late) == 1
    assert closed() == ("CLOSED", "response_timeout")


def test_whether_a_merchant_is_hosted_is_read_once_a_second_and_forgotten_when_saved(
    django_assert_num_queries: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every buyer's move asks whether its merchant is hosted; the answer is read from the
    database once per agent and second, and a profile saved in this process is read again."""
    from sessions_app import hosted_directory

    clock = [1000.0]
    monkeypatch.setattr(hosted_directory.time, "monotonic", lambda: clock[0])
    profile = hosted_agent(merchant("skyfare-dir"), "skyfare-dir")
    with django_assert_num_queries(1):
        assert hosted_directory.hosting("skyfare-dir") == hosted_directory.Hosting(
            reveal_after_end=profile.reveal_after_end
        )
        assert hosted_directory.hosting("skyfare-dir") is not None
        assert hosted_directory.hosting("skyfare-dir") is not None
    profile.mode = "external"
    profile.save()
    with django_assert_num_queries(1):
        assert hosted_directory.hosting("skyfare-dir") is None
        assert hosted_directory.hosting("skyfare-dir") is None
    clock[0] += hosted_directory.REMEMBER_SECONDS
    with django_assert_num_queries(1):
        assert hosted_directory.hosting("skyfare-dir") is None
