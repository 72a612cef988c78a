"""The session log of docs/protocol.md §12: entries and their hash chain, recomputed here by a
second route (sorted compact JSON through hashlib), every kind of break, and the digest an
agreement signs."""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oanp.wire.canonical import ZERO_HASH
from oanp.wire.log import (
    ENTRY_FIELDS,
    ChainBreak,
    Entry,
    Head,
    chain_breaks,
    entry_hash_of,
    make_entry,
    session_digest,
)
from tests.support.factories.logs import session_log

T0 = datetime(2026, 4, 28, 14, 0, tzinfo=UTC)
LINK = "prev_hash does not link to the entry before"
CONTENTS = "entry_hash does not match its contents"
SHAPE = "is not an entry object with exactly seq, received_at, envelope, prev_hash, entry_hash"


def by_hand(seq: int, received_at: str, envelope: dict, prev_hash: str) -> str:
    """The entry hash with no help from the code under test. Valid for ASCII text and
    integers only, where JCS is exactly Python's sorted, compact JSON."""
    hashed = {"seq": seq, "received_at": received_at, "envelope": envelope, "prev_hash": prev_hash}
    text = json.dumps(hashed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def chain(count: int) -> list[dict]:
    """``count`` small entries, correctly chained, as JSON."""
    entries: list[dict] = []
    prev = ZERO_HASH
    for seq in range(1, count + 1):
        envelope = {"type": "offer.propose", "payload": {"round": seq, "price": 300 + seq}}
        entry = make_entry(
            seq=seq, received_at=T0 + timedelta(seconds=seq), envelope=envelope, prev_hash=prev
        )
        entries.append(entry.as_json())
        prev = entry.entry_hash
    return entries


def breaks(entries) -> list[tuple[int | None, int, str]]:
    return [(b.seq, b.position, b.reason) for b in chain_breaks(entries)]


# Entries ------------------------------------------------------------------------------------


def test_the_first_prev_hash_is_sha256_and_64_zeros():
    assert ZERO_HASH == "sha256:" + "0" * 64
    assert Head() == Head(0, ZERO_HASH)


def test_an_entry_hash_is_sha256_of_the_jcs_of_the_entry_without_it():
    envelope = {"type": "session.ack", "payload": {"constraints_commit": "sha256:" + "c" * 64}}
    entry = make_entry(seq=1, received_at=T0, envelope=envelope, prev_hash=ZERO_HASH)
    assert entry.received_at == "2026-04-28T14:00:00Z"
    assert entry.entry_hash == by_hand(1, "2026-04-28T14:00:00Z", envelope, ZERO_HASH)
    assert entry.entry_hash == (
        "sha256:"
        + hashlib.sha256(
            b'{"envelope":{"payload":{"constraints_commit":"sha256:' + b"c" * 64 + b'"},'
            b'"type":"session.ack"},"prev_hash":"sha256:' + b"0" * 64 + b'",'
            b'"received_at":"2026-04-28T14:00:00Z","seq":1}'
        ).hexdigest()
    )


@pytest.mark.parametrize(
    ("moment", "stamp"),
    [
        (datetime(2026, 4, 28, 14, 0, 0, 250000, tzinfo=UTC), "2026-04-28T14:00:00.250000Z"),
        (datetime(2026, 4, 28, 16, 0, tzinfo=timezone(timedelta(hours=2))), "2026-04-28T14:00:00Z"),
    ],
)
def test_received_at_is_the_arbiters_utc_stamp(moment, stamp):
    entry = make_entry(seq=1, received_at=moment, envelope={"type": "x"}, prev_hash=ZERO_HASH)
    assert entry.received_at == stamp
    assert entry.entry_hash == by_hand(1, stamp, {"type": "x"}, ZERO_HASH)


def test_every_field_is_hashed():
    base = {"seq": 1, "received_at": "2026-04-28T14:00:00Z", "envelope": {"type": "x"}}
    hashes = {
        entry_hash_of({**base, "prev_hash": ZERO_HASH}),
        entry_hash_of({**base, "prev_hash": "sha256:" + "1" * 64}),
        entry_hash_of({**base, "seq": 2, "prev_hash": ZERO_HASH}),
        entry_hash_of({**base, "received_at": "2026-04-28T14:00:01Z", "prev_hash": ZERO_HASH}),
        entry_hash_of({**base, "envelope": {"type": "y"}, "prev_hash": ZERO_HASH}),
    }
    assert len(hashes) == 5


def test_entry_hash_of_ignores_the_hash_an_entry_claims():
    entry = chain(1)[0]
    forged = {**entry, "entry_hash": "sha256:" + "f" * 64}
    assert entry_hash_of(forged) == entry_hash_of(entry) == entry["entry_hash"]


def test_an_entry_as_json_has_exactly_the_five_fields():
    entry = make_entry(seq=3, received_at=T0, envelope={"type": "round.verdict"}, prev_hash="p")
    assert set(entry.as_json()) == ENTRY_FIELDS
    assert entry.as_json()["prev_hash"] == "p"
    assert entry.type == "round.verdict"
    assert Entry(**entry.as_json()) == entry


def test_the_head_moves_to_the_last_entry():
    first = make_entry(seq=1, received_at=T0, envelope={"type": "x"}, prev_hash=ZERO_HASH)
    assert Head().after(first) == Head(1, first.entry_hash)


# The chain ----------------------------------------------------------------------------------


def test_a_chain_links_each_entry_to_the_one_before():
    entries = chain(4)
    assert entries[0]["prev_hash"] == ZERO_HASH
    for before, after in itertools.pairwise(entries):
        assert after["prev_hash"] == before["entry_hash"]
        assert after["seq"] == before["seq"] + 1
    assert breaks(entries) == []


def test_a_real_session_log_recomputes():
    assert breaks(session_log()) == []


def test_an_empty_log_has_no_break():
    assert chain_breaks([]) == []


def test_an_edited_envelope_breaks_only_its_own_entry():
    # The claimed hash is unchanged, so the next entry still links to it.
    entries = chain(4)
    entries[1]["envelope"]["payload"]["price"] = 999
    assert breaks(entries) == [(2, 1, CONTENTS)]


def test_an_edited_entry_hash_breaks_it_and_the_next_link():
    entries = chain(4)
    entries[1]["entry_hash"] = "sha256:" + "e" * 64
    assert breaks(entries) == [(2, 1, CONTENTS), (3, 2, LINK)]


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda e: e.update(received_at="2026-04-28T14:00:09Z"), id="received_at"),
        pytest.param(lambda e: e["envelope"].update(type="offer.counter"), id="type"),
        pytest.param(lambda e: e["envelope"]["payload"].update(extra=None), id="added-null"),
    ],
)
def test_any_edit_of_the_hashed_part_is_caught(edit):
    entries = chain(3)
    edit(entries[2])
    assert breaks(entries) == [(3, 2, CONTENTS)]


def test_a_first_entry_that_does_not_start_from_zero_is_caught():
    entries = chain(2)
    first = {**entries[0], "prev_hash": "sha256:" + "1" * 64}
    first["entry_hash"] = entry_hash_of(first)
    # Rehashed, so only its link is wrong; the second entry no longer links to it.
    assert breaks([first, entries[1]]) == [(1, 0, LINK), (2, 1, LINK)]


def test_a_dropped_entry_is_caught_by_seq_and_link():
    entries = chain(4)
    del entries[1]
    assert breaks(entries) == [
        (3, 1, "seq is 3, expected 2"),
        (3, 1, LINK),
        (4, 2, "seq is 4, expected 3"),
    ]


def test_swapped_entries_are_caught():
    entries = chain(4)
    entries[1], entries[2] = entries[2], entries[1]
    assert breaks(entries) == [
        (3, 1, "seq is 3, expected 2"),
        (3, 1, LINK),
        (2, 2, "seq is 2, expected 3"),
        (2, 2, LINK),
        (4, 3, LINK),
    ]


@pytest.mark.parametrize(
    ("edit", "seq", "reason"),
    [
        pytest.param(lambda e: e.pop("received_at"), 2, SHAPE, id="missing-field"),
        pytest.param(lambda e: e.update(note="x"), 2, SHAPE, id="extra-field"),
        pytest.param(lambda e: e.update(seq="2"), None, "seq is not an integer", id="seq-str"),
        pytest.param(lambda e: e.update(seq=True), None, "seq is not an integer", id="seq-bool"),
        pytest.param(
            lambda e: e.update(received_at=14),
            2,
            "received_at, prev_hash and entry_hash must be strings",
            id="received_at-int",
        ),
        pytest.param(
            lambda e: e.update(envelope=["x"]), 2, "envelope is not an object", id="envelope-list"
        ),
        pytest.param(
            lambda e: e["envelope"].update(price=float("nan")),
            2,
            "envelope cannot be canonicalized",
            id="envelope-nan",
        ),
        pytest.param(
            lambda e: e["envelope"].update(n=2**60),
            2,
            "envelope cannot be canonicalized",
            id="envelope-big-int",
        ),
    ],
)
def test_a_malformed_entry_is_a_break_not_an_exception(edit, seq, reason):
    entries = chain(3)
    edit(entries[1])
    # The chain goes on from the hash the bad entry claims: one bad entry, one break.
    assert breaks(entries) == [(seq, 1, reason)]


@pytest.mark.parametrize("junk", [None, "entry", 7, ["seq", 1]])
def test_an_entry_that_is_not_an_object_is_a_break(junk):
    entries = chain(2)
    entries.insert(1, junk)
    found = chain_breaks(entries)
    assert (found[0].seq, found[0].position, found[0].reason) == (None, 1, SHAPE)
    # The entries after it now sit one place later and link to nothing it claims.
    assert (2, 2, "seq is 2, expected 3") in breaks(entries)


def test_a_break_describes_itself_by_seq_or_by_position():
    assert ChainBreak(4, 3, CONTENTS).describe() == f"entry 4: {CONTENTS}"
    assert ChainBreak(None, 3, SHAPE).describe() == f"entry #4: {SHAPE}"


@given(data=st.data(), count=st.integers(min_value=1, max_value=8))
def test_any_tampered_entry_is_the_first_break(data, count):
    entries = chain(count)
    position = data.draw(st.integers(min_value=0, max_value=count - 1))
    price = data.draw(
        st.integers(min_value=0, max_value=10**6).filter(lambda p: p != 301 + position)
    )
    tampered = copy.deepcopy(entries)
    tampered[position]["envelope"]["payload"]["price"] = price
    assert breaks(tampered) == [(position + 1, position, CONTENTS)]


# The session digest -----------------------------------------------------------------------


def test_the_digest_of_no_entries_is_the_zero_hash():
    assert session_digest([]) == (ZERO_HASH, 0)


def test_the_digest_is_the_last_entry_hash_and_the_count():
    entries = [Entry(**e) for e in chain(5)]
    assert session_digest(entries) == (entries[-1].entry_hash, 5)


def test_the_signed_digest_covers_every_entry_before_the_agreement():
    log = session_log()
    agree = log[-1]["envelope"]["payload"]
    digest, length = session_digest(Entry(**e) for e in log[:-1])
    assert (agree["session_digest"], agree["agreement"]["log_length"]) == (digest, length)
    assert length == 8
