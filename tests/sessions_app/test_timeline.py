"""The session page's rounds, read from the log: the last round's final answer."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sessions_app.timeline import timeline
from tests.support.factories.sessions import (
    JWKS,
    Session,
    accept,
    counter,
    negotiating,
    propose,
    withdraw,
)


def at_final_answer() -> Session:
    session = negotiating(max_rounds=2)
    session.feed(propose(1, 300))
    session.feed(counter(1, 400))
    session.feed(propose(2, 310))
    session.feed(counter(2, 390))
    return session


def last_round(session: Session) -> tuple[str | None, str | None]:
    row = timeline(session.log(), JWKS).rounds[-1]
    return row.final_answer, row.verdict


def test_a_final_answer_due_then_accepted() -> None:
    session = at_final_answer()
    assert last_round(session) == ("due", None)
    assert timeline(session.log(), JWKS).rounds[0].final_answer is None
    session.feed(accept("buyer", 2, 390))
    assert last_round(session) == ("accepted", "fair")


@pytest.mark.parametrize("role", ["buyer", "merchant"])
def test_a_withdrawal_instead_of_a_final_answer(role: str) -> None:
    session = at_final_answer()
    session.feed(withdraw(role))
    assert last_round(session) == ("withdrawn", None)


def test_a_final_answer_that_never_came() -> None:
    session = at_final_answer()
    due = session.negotiation.next_deadline()
    assert due is not None
    session.entries.extend(session.negotiation.expire(due + timedelta(seconds=1)))
    assert last_round(session) == ("lapsed", "fair")


def test_a_settlement_shows_both_limits_the_midpoint_and_the_price() -> None:
    from tests.oanp.test_settlement import Settling

    s = Settling({"true_ceiling": 401}, {"floor_price": 280})
    s.propose(320)
    s.counter(370)
    s.reveal("buyer")
    waiting = timeline(s.session.log(), JWKS).settlement
    assert waiting is not None
    assert (waiting.ceiling, waiting.floor, waiting.outcome) == (401, None, None)
    s.reveal("merchant")
    view = timeline(s.session.log(), JWKS)
    assert view.settlement is not None
    settled = view.settlement
    assert (settled.ceiling, settled.floor, settled.outcome) == (401, 280, "settled")
    assert str(settled.midpoint) == "340.5"
    assert settled.price == 340.5  # half-even to the cent: 340.50
    assert view.rounds[-1].verdict == "fair"


def test_no_settlement_panel_without_a_reveal() -> None:
    assert timeline(at_final_answer().log(), JWKS).settlement is None
