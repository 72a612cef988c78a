"""``describe_entry``: one line per log entry, as the demos print a session while it runs:
seq, sender role and type in aligned columns, then what the payload says."""

from __future__ import annotations

import pytest

from oanp.wire.log import Entry
from oanp.wire.transcript import describe_entry, describe_entry_json
from tests.support.factories.logs import NO_DEAL, caught_renege_log, session_log
from tests.support.factories.sessions import (
    BUYER_COMMIT,
    MERCHANT_COMMIT,
    envelope,
    negotiating,
    propose,
    withdraw,
)

KID = "1IG2tMH7J2wbJZnOf8LJzQitKf7LMvoAElsuDMVM54Y"


def lines(log) -> list[str]:
    return [describe_entry(Entry(**entry)) for entry in log]


def test_the_published_sfo_jfk_session_reads_line_by_line():
    log = session_log()
    digest = log[-1]["envelope"]["payload"]["session_digest"]
    buyer_commit = log[0]["envelope"]["payload"]["constraints_commit"]
    merchant_commit = log[1]["envelope"]["payload"]["constraints_commit"]
    assert lines(log) == [
        f"#1   buyer    session.open   with merchant-sfo, USD, max 5 rounds, "
        f"commitment {buyer_commit}",
        f"#2   merchant session.ack    commitment {merchant_commit}",
        "#3   buyer    offer.propose  round 1: 320",
        "#4   merchant offer.counter  round 1: 370",
        "#5   arbiter  round.verdict  round 1: fair (opening_moves), "
        "buyer 320, merchant 370, spread 50",
        "#6   buyer    offer.propose  round 2: 340",
        "#7   merchant offer.accept   round 2: 340",
        "#8   arbiter  round.verdict  round 2: fair (agreement), buyer 340, merchant 340, spread 0",
        f"#9   arbiter  session.agree  340 USD, digest {digest}, Ed25519 kid {KID}",
    ]


def test_prices_read_as_the_decimals_on_the_wire_and_a_close_gives_its_reason():
    described = lines(session_log(NO_DEAL))
    assert described[5:8] == [
        "#6   buyer    offer.propose  round 2: 193.81",
        "#7   merchant offer.counter  round 2: 377.5",
        "#8   arbiter  round.verdict  round 2: fair (spread_narrowed), "
        "buyer 193.81, merchant 377.5, spread 183.69",
    ]
    # Two-digit seqs keep the columns aligned.
    assert described[11] == (
        "#12  arbiter  session.close  max_rounds_reached: the buyer gave no final answer within "
        "300 s"
    )


def test_a_caught_breach_reads_as_a_violated_verdict_and_its_close():
    assert lines(caught_renege_log())[5:] == [
        "#6   buyer    offer.propose  round 2: 300",
        "#7   arbiter  round.verdict  round 2: violated (buyer_reneged), "
        "buyer 300, merchant 370, spread 70",
        "#8   arbiter  session.close  buyer_reneged: the buyer lowered its price from 320 to 300",
    ]


def test_a_party_withdrawal_names_its_reason():
    session = negotiating()
    session.feed(withdraw("merchant"))
    party, arbiter = (describe_entry(e) for e in session.entries[2:])
    assert party.startswith("#3   merchant session.close  withdrawn:")
    assert arbiter == "#4   arbiter  session.close  withdrawn_by_merchant: the merchant withdrew"


def test_an_open_without_max_rounds_reads_as_the_default_five():
    opening = envelope(
        "session.open",
        {
            "merchant_agent_id": "merchant-sfo",
            "item": {},
            "currency": "JPY",
            "constraints_commit": BUYER_COMMIT,
        },
    )
    entry = Entry(1, "2026-04-28T14:00:00Z", opening.body, "p", "h")
    assert describe_entry(entry) == (
        f"#1   buyer    session.open   with merchant-sfo, JPY, max 5 rounds, "
        f"commitment {BUYER_COMMIT}"
    )


@pytest.mark.parametrize(
    ("seq", "prefix"),
    [(1, "#1   "), (42, "#42  "), (999, "#999 "), (1000, "#1000 ")],
)
def test_the_seq_column_is_padded_not_truncated(seq, prefix):
    ack = envelope("session.ack", {"constraints_commit": MERCHANT_COMMIT})
    line = describe_entry(Entry(seq, "2026-04-28T14:00:00Z", ack.body, "p", "h"))
    assert line == f"{prefix}merchant session.ack    commitment {MERCHANT_COMMIT}"


def test_a_line_reads_only_the_envelope():
    # The same envelope at another place in another chain reads the same, bar its seq.
    log = session_log()
    moved = Entry(3, "2030-01-01T00:00:00Z", log[2]["envelope"], "x", "y")
    assert describe_entry(moved) == lines(log)[2]


def test_a_verdict_of_a_round_the_merchant_never_answered():
    session = negotiating()
    session.feed(propose(1, 320, commit="sha256:" + "d" * 64))
    verdict, close = (describe_entry(e) for e in session.entries[3:])
    # How a missing price reads is left open: the line shows what the verdict judged.
    assert verdict.startswith(
        "#4   arbiter  round.verdict  round 1: violated (commitment_mismatch), buyer 320, "
    )
    assert close == (
        "#5   arbiter  session.close  commitment_mismatch: "
        "the buyer's constraints_commit differs from the one it committed"
    )


def test_an_entry_as_the_api_serves_it_reads_as_the_same_line():
    log = session_log()
    assert [describe_entry_json(entry) for entry in log] == lines(log)
