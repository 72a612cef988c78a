"""``new_ulid``: 26 Crockford base32 characters, 48 bits of milliseconds then 80 random bits,
so ids minted in different milliseconds sort by time. The clock and the random source are
replaced where a test needs exact values."""

from __future__ import annotations

import re
import time
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oanp.agents import ids
from tests.support.factories.sessions import MERCHANT_COMMIT, envelope

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
#: 128 bits in 26 characters: the first carries only 3 bits, so it is at most "7".
ULID = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
MAX_MS = 2**48 - 1
MAX_RANDOM = 2**80 - 1


def decode(ulid: str) -> int:
    value = 0
    for char in ulid:
        value = value * 32 + CROCKFORD.index(char)
    return value


def fixed(monkeypatch, *, seconds: float, random: int) -> None:
    """Make the next ``new_ulid`` read ``seconds`` and draw ``random``."""

    def randbits(bits: int) -> int:
        assert bits == 80
        return random

    monkeypatch.setattr(ids, "time", types.SimpleNamespace(time=lambda: seconds))
    monkeypatch.setattr(ids, "secrets", types.SimpleNamespace(randbits=randbits))


def test_the_alphabet_is_crockfords():
    # No I, L, O or U: nothing a person could misread or that spells words by accident.
    assert ids._CROCKFORD == CROCKFORD
    assert not set("ILOU") & set(CROCKFORD)


def test_the_ulid_spec_timestamp_vector(monkeypatch):
    # github.com/ulid/spec: 01ARYZ6S41TSV4RRFFQ69G5FAV was minted at 1469918176385 ms.
    fixed(monkeypatch, seconds=1469918176.385, random=0)
    assert ids.new_ulid() == "01ARYZ6S41" + "0" * 16


def test_the_random_part_fills_the_last_sixteen_characters(monkeypatch):
    fixed(monkeypatch, seconds=0.0, random=MAX_RANDOM)
    assert ids.new_ulid() == "0" * 10 + "Z" * 16


def test_the_largest_ulid(monkeypatch):
    fixed(monkeypatch, seconds=281474976710.655, random=MAX_RANDOM)
    assert ids.new_ulid() == "7" + "Z" * 25


@given(
    ms=st.integers(min_value=0, max_value=MAX_MS),
    random=st.integers(min_value=0, max_value=MAX_RANDOM),
)
def test_milliseconds_and_random_bits_are_encoded_exactly(ms, random):
    with pytest.MonkeyPatch.context() as monkeypatch:
        seconds = ms / 1000
        fixed(monkeypatch, seconds=seconds, random=random)
        ulid = ids.new_ulid()
    assert ULID.fullmatch(ulid)
    assert decode(ulid) == (int(seconds * 1000) << 80) | random


@given(
    ms=st.lists(st.integers(min_value=0, max_value=MAX_MS), min_size=2, max_size=2, unique=True),
    random=st.lists(st.integers(min_value=0, max_value=MAX_RANDOM), min_size=2, max_size=2),
)
def test_a_later_millisecond_sorts_later_whatever_the_random_bits(ms, random):
    minted = []
    with pytest.MonkeyPatch.context() as monkeypatch:
        for m, r in zip(ms, random, strict=True):
            fixed(monkeypatch, seconds=m / 1000, random=r)
            minted.append((int(m / 1000 * 1000), ids.new_ulid()))
    (t1, u1), (t2, u2) = sorted(minted)
    if t1 < t2:
        assert u1 < u2


def test_within_one_millisecond_order_is_the_random_bits_not_the_call_order(monkeypatch):
    # Not the spec's monotonic variant: ids only need to be unique, the log's seq gives order.
    fixed(monkeypatch, seconds=1777384800.0, random=2**79)
    first = ids.new_ulid()
    fixed(monkeypatch, seconds=1777384800.0, random=1)
    second = ids.new_ulid()
    assert first[:10] == second[:10]
    assert second < first


def test_a_real_ulid_carries_the_current_time():
    before = int(time.time() * 1000)
    ulid = ids.new_ulid()
    after = int(time.time() * 1000)
    assert ULID.fullmatch(ulid)
    assert before <= decode(ulid) >> 80 <= after


def test_real_ulids_are_distinct():
    minted = {ids.new_ulid() for _ in range(2000)}
    assert len(minted) == 2000


def test_a_ulid_is_a_valid_session_and_message_id():
    # docs/protocol.md §2 recommends ULIDs for message_id and session_id.
    message_id, session_id = ids.new_ulid(), ids.new_ulid()
    parsed = envelope(
        "session.ack",
        {"constraints_commit": MERCHANT_COMMIT},
        message_id=message_id,
        session_id=session_id,
    )
    assert (parsed.message_id, parsed.session_id) == (message_id, session_id)
