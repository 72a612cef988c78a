"""The audit of party signatures (§17): a signed log verifies with its parties' keys; an offer
the arbiter rewrote and chained again, with its agreement signed again, verifies everywhere but
in its party's signature; keys out of force, unsigned entries where signatures are required and
malformed party keys each fail. Bundles carry the keys, read whole, streamed or by workers."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any, cast

import pytest

from oanp.audit import (
    SignatureRules,
    build_bundle,
    read_party_keys,
    verify_bundle,
    verify_bundle_stream,
    verify_log,
)
from oanp.audit.report import Report
from oanp.wire.canonical import JsonObject
from tests.support.factories.logs import (
    ARBITER_ID,
    BUNDLED_AT,
    START,
    arbiter_key,
    forge,
    jwks,
    party_keys,
    session_log,
    signed_log,
)


def rules(required: bool = False, **spans: Any) -> SignatureRules:
    return SignatureRules(read_party_keys(party_keys(**spans)), required)


def signature_check(report: Report) -> tuple[bool, str]:
    (found,) = [c for c in report.checks if c.name.endswith("party signatures")]
    return found.ok, found.detail


def party_entries(log: list[JsonObject]) -> int:
    return sum(
        cast(JsonObject, cast(JsonObject, e["envelope"])["sender"])["role"] != "arbiter"
        for e in log
    )


def test_a_signed_log_verifies_with_its_parties_keys() -> None:
    log = signed_log()
    parties = party_entries(log)
    report = verify_log(log, jwks(), signatures=rules())
    assert report.ok
    assert signature_check(report) == (
        True,
        f"{parties}/{parties} signed entries valid, 0 unsigned",
    )
    assert report.summary().endswith(f", signed entries: {parties}/{parties} valid")


def test_an_offer_the_arbiter_rewrote_is_caught_by_its_partys_signature() -> None:
    log = signed_log()
    counter = next(e for e in log if cast(JsonObject, e["envelope"])["type"] == "offer.counter")
    envelope = cast(JsonObject, counter["envelope"])
    payload = cast(JsonObject, envelope["payload"])
    counter["envelope"] = {**envelope, "payload": {**payload, "price": 371}}
    forged = forge(log)
    without_keys = verify_log(forged, jwks())
    failed = {c.name.split(": ")[-1] for c in without_keys.checks if not c.ok}
    assert "hash chain" not in failed  # chained again: only the signature can tell
    report = verify_log(forged, jwks(), signatures=rules())
    ok, detail = signature_check(report)
    assert not ok
    assert "does not verify" in detail
    assert not report.ok


@pytest.mark.parametrize(
    ("spans", "says"),
    [
        ({"merchant": START - timedelta(seconds=1)}, "was retired at"),
        ({"buyer": START}, "was retired at"),
    ],
    ids=["merchant-retired-before", "buyer-retired-at-the-open"],
)
def test_a_key_out_of_force_when_its_entry_was_received_fails(spans, says) -> None:
    report = verify_log(signed_log(), jwks(), signatures=rules(**spans))
    ok, detail = signature_check(report)
    assert not ok
    assert says in detail


def test_a_key_missing_from_the_party_keys_fails() -> None:
    keys = read_party_keys(party_keys())
    del keys["merchant-sfo"]
    report = verify_log(signed_log(), jwks(), signatures=SignatureRules(keys))
    assert "is not a key agent 'merchant-sfo' registered" in signature_check(report)[1]


def test_unsigned_entries_fail_only_where_signatures_are_required() -> None:
    partly = signed_log(unsigned=["merchant-sfo"])
    lenient = verify_log(partly, jwks(), signatures=rules())
    assert lenient.ok
    assert signature_check(lenient)[1].endswith(" unsigned")
    strict = verify_log(partly, jwks(), signatures=rules(required=True))
    ok, detail = signature_check(strict)
    assert not ok
    assert detail.endswith("signatures are required")
    # A log no party signed reads as it always did, unless signatures are required.
    plain = verify_log(session_log(), jwks(), signatures=rules())
    assert plain.ok
    assert not [c for c in plain.checks if c.name.endswith("party signatures")]
    assert "signed entries" not in plain.summary()
    assert not verify_log(session_log(), jwks(), signatures=rules(required=True)).ok


def bundle(**extra: Any) -> JsonObject:
    key = arbiter_key()
    return build_bundle(
        logs=[signed_log(), session_log()],
        jwks=jwks(key),
        key=key,
        arbiter_id=ARBITER_ID,
        created_at=BUNDLED_AT,
        **extra,
    )


def test_a_bundle_carries_the_party_keys_and_every_reading_checks_them() -> None:
    written = bundle(party_keys=party_keys())
    assert list(written)[:3] == ["format", "jwks", "party_keys"]
    whole = verify_bundle(written)
    assert whole.ok
    text = json.dumps(written)
    streamed = verify_bundle_stream(io.StringIO(text))
    by_workers = verify_bundle_stream(io.StringIO(text), lines_map=map)
    assert whole.summary() == streamed.summary() == by_workers.summary()
    assert "signed entries: " in whole.summary()
    assert not verify_bundle(written, require_signatures=True).ok  # the second log is unsigned


def test_a_bundle_without_its_party_keys_fails_its_signed_entries() -> None:
    report = verify_bundle(bundle())
    assert not report.ok
    assert "is not a key agent" in signature_check(report)[1]


@pytest.mark.parametrize(
    "broken",
    [[], {"buyer-001": "a key"}, {"buyer-001": [{"kty": "OKP"}]}],
    ids=["not-an-object", "not-a-list", "not-a-key"],
)
def test_malformed_party_keys_fail_the_bundle_structure(broken: Any) -> None:
    written = bundle(party_keys=party_keys())
    written["party_keys"] = broken
    report = verify_bundle(written)
    assert [c.name for c in report.checks if not c.ok] == ["bundle structure"]
