"""The session page's rounds, read from the log: the last round's final answer."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sessions_app.timeline import duration, timeline
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
    from tests.oanp.wire.test_settlement import Settling

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


def test_each_entry_carries_its_time_and_the_gap_since_the_one_before() -> None:
    session = negotiating()  # the factory's clock moves one second per envelope
    session.feed(propose(1, 300))
    session.feed(counter(1, 400))  # and the arbiter's verdict, in the same moment
    rows = timeline(session.log(), JWKS).log
    assert [(r.seq, r.type) for r in rows] == [
        (1, "session.open"),
        (2, "session.ack"),
        (3, "offer.propose"),
        (4, "offer.counter"),
        (5, "round.verdict"),
    ]
    assert [r.since_previous for r in rows] == [None, *[timedelta(seconds=1)] * 3, timedelta(0)]
    assert [r.gap for r in rows] == [None, "1.0 s", "1.0 s", "1.0 s", "0 ms"]
    assert rows[0].received_at.isoformat() == "2026-04-28T14:00:00+00:00"
    assert (rows[2].round, rows[2].price, rows[2].outcome) == (1, 300, None)
    assert (rows[4].round, rows[4].outcome) == (1, ("fair", "opening_moves"))
    assert '"type": "round.verdict"' in rows[4].text


def test_a_close_is_shown_with_its_reason_and_detail() -> None:
    session = negotiating()
    session.feed(withdraw("merchant"))
    close = timeline(session.log(), JWKS).log[-1]
    assert close.role == "arbiter"
    assert close.outcome is not None
    assert close.outcome[0] == "withdrawn_by_merchant"


def test_idle_is_the_time_since_the_last_entry() -> None:
    session = negotiating()
    view = timeline(session.log(), JWKS)
    assert view.idle(session.now + timedelta(minutes=3, seconds=5)) == "3 min 5 s"
    assert timeline([], JWKS).idle(session.now) is None


@pytest.mark.parametrize(
    ("span", "shown"),
    [
        (timedelta(milliseconds=850), "850 ms"),
        (timedelta(seconds=4.24), "4.2 s"),
        (timedelta(seconds=59.96), "1 min 0 s"),
        (timedelta(minutes=3, seconds=5), "3 min 5 s"),
        (timedelta(hours=2, minutes=10, seconds=9), "2 h 10 min"),
        (timedelta(days=1, hours=3), "1 d 3 h"),
        (timedelta(seconds=-2), "0 ms"),  # a clock that stepped back reads as no time at all
    ],
)
def test_durations_read_in_two_units(span: timedelta, shown: str) -> None:
    assert duration(span) == shown
