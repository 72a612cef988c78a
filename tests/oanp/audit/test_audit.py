"""Tampering with logs and audit bundles is caught, and the report names the check that caught it.

Every case starts from the deterministic logs and bundles of ``factories`` that verify as they
are, changes one thing, and asserts which check fails and what its detail says.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from oanp.audit import (
    Report,
    build_bundle,
    extract,
    leaf_hashes,
    sign_checkpoint,
    verify_bundle,
    verify_log,
)
from oanp.wire.canonical import JsonObject, json_value, read_json
from tests.support.factories.logs import (
    ARBITER_ID,
    BUNDLED_AT,
    LINEAR_DEAL,
    NO_DEAL,
    SFO_JFK,
    THREE_SESSIONS,
    arbiter_key,
    bundle_of,
    caught_renege_log,
    forge,
    jwks,
    other_key,
    rechain,
    session_log,
)

SFO = f"session {SFO_JFK.session_id}"
LAX = f"session {NO_DEAL.session_id}"
BOS = f"session {LINEAR_DEAL.session_id}"
Log = list[JsonObject]


def failures(report: Report) -> dict[str, str]:
    """Failing check name -> its detail."""
    return {c.name: c.detail for c in report.checks if not c.ok}


def check(report: Report, name: str) -> tuple[bool, str]:
    """(ok, detail) of the one check called ``name``."""
    found = [c for c in report.checks if c.name == name]
    assert len(found) == 1, f"no single check {name!r} in {[c.name for c in report.checks]}"
    return found[0].ok, found[0].detail


def reserialize(value: Any, old: str, new: str) -> Any:
    """``value`` written as compact JSON, ``old`` (which occurs once) replaced by ``new``, and
    read back the way ``oanp verify`` reads a file."""
    text = json.dumps(value, separators=(",", ":"))
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return json_value(read_json(text.replace(old, new)))


def flip_hex(digest: str) -> str:
    """``digest`` with its last hex character changed: one byte of the file."""
    return digest[:-1] + ("0" if digest[-1] != "0" else "1")


def edited(log: Log, position: int, *path: str | int, value: Any) -> Log:
    """A deep copy of ``log`` with ``log[position][path...]`` set to ``value``."""
    out = copy.deepcopy(log)
    target: Any = out[position]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


@pytest.fixture(scope="module")
def keys() -> dict[str, Any]:
    return jwks()


# The untouched material verifies: every failure below is the tampering's. --------------------


@pytest.mark.parametrize("scenario", THREE_SESSIONS, ids=lambda s: s.session_id)
def test_an_untouched_log_verifies(scenario, keys):
    report = verify_log(session_log(scenario), keys)
    assert report.ok, failures(report)


def test_an_untouched_bundle_verifies():
    report = verify_bundle(bundle_of())
    assert report.ok, failures(report)
    assert report.summary() == "30/30 entries valid, 2/2 agreements valid, 3/3 sessions pass I1-I7"


# One log, edited without fixing the chain: the hash chain names the entry. -----------------


def _price_digit(log: Log) -> Log:
    log = list(log)
    log[5] = reserialize(log[5], '"price":340', '"price":350')
    return log


def _entry_hash_char(log: Log) -> Log:
    return edited(log, 2, "entry_hash", value=flip_hex(str(log[2]["entry_hash"])))


def _prev_hash_char(log: Log) -> Log:
    return edited(log, 3, "prev_hash", value=flip_hex(str(log[3]["prev_hash"])))


def _drop(log: Log) -> Log:
    return log[:3] + log[4:]


def _reorder(log: Log) -> Log:
    return [*log[:2], log[3], log[2], *log[4:]]


def _duplicate(log: Log) -> Log:
    return [*log[:3], log[2], *log[3:]]


@pytest.mark.parametrize(
    ("tamper", "detail"),
    [
        pytest.param(_price_digit, "entry 6: entry_hash does not match", id="price-digit"),
        pytest.param(_entry_hash_char, "entry 3: entry_hash does not match", id="entry-hash-char"),
        pytest.param(_entry_hash_char, "entry 4: prev_hash does not link", id="next-link"),
        pytest.param(_prev_hash_char, "entry 4: prev_hash does not link", id="prev-hash-char"),
        pytest.param(_drop, "entry 5: seq is 5, expected 4", id="dropped-entry"),
        pytest.param(_reorder, "entry 4: seq is 4, expected 3", id="reordered"),
        pytest.param(_duplicate, "entry 3: seq is 3, expected 4", id="duplicated"),
    ],
)
def test_an_edited_log_fails_its_hash_chain_at_the_entry(tamper, detail, keys):
    report = verify_log(tamper(session_log()), keys)
    assert detail in failures(report)[f"{SFO}: hash chain"]


def test_a_broken_chain_also_fails_i7(keys):
    report = verify_log(_drop(session_log()), keys)
    assert "entry 5: seq is 5, expected 4" in failures(report)[f"{SFO}: I7"]


def test_a_broken_chain_counts_the_bad_entries(keys):
    report = verify_log(_price_digit(session_log()), keys)
    assert (report.entries_valid, report.entries_total) == (8, 9)


# Cut short: the chain of a prefix is intact, so the invariants must notice. -----------------


@pytest.mark.parametrize(
    ("make", "keep", "invariant", "detail"),
    [
        pytest.param(
            session_log,
            8,
            "I6",
            "the log ends after the accept of 340 without session.agree",
            id="no-agree",
        ),
        pytest.param(
            session_log,
            7,
            "I5",
            "round 2 completed with 0 verdicts",
            id="accept-without-verdict",
        ),
        pytest.param(
            caught_renege_log,
            7,
            "I4",
            "the log ends without the close its buyer_reneged owes",
            id="breach-without-close",
        ),
        pytest.param(
            caught_renege_log,
            6,
            "I4",
            "the log ends without the close its buyer_reneged owes",
            id="breach-without-verdict",
        ),
        pytest.param(
            lambda: session_log(NO_DEAL),
            11,
            "I1",
            "the log ends without the owed max_rounds_reached",
            id="last-round-without-close",
        ),
    ],
)
def test_a_truncated_log_fails_the_invariant_it_owes(make, keep, invariant, detail, keys):
    log = make()
    assert len(log) > keep
    report = verify_log(log[:keep], keys)
    sid = log[0]["envelope"]["session_id"]
    assert detail in failures(report)[f"session {sid}: {invariant}"]


def test_a_truncated_log_keeps_an_intact_chain(keys):
    report = verify_log(session_log()[:8], keys)
    assert check(report, f"{SFO}: hash chain") == (True, "8 entries")


# Re-serialization: hashes are over JCS, so only changes of value matter. ---------------------


@pytest.mark.parametrize(
    "rewrite",
    [
        pytest.param(lambda v: json.dumps(v, indent=4), id="re-indented"),
        pytest.param(lambda v: json.dumps(v, indent=2, sort_keys=True), id="keys-sorted"),
        pytest.param(lambda v: json.dumps(_reversed_keys(v)), id="keys-reversed"),
        pytest.param(
            lambda v: json.dumps(v).replace('"price": 340,', '"price": 340.0,'), id="340.0"
        ),
        pytest.param(
            lambda v: json.dumps(v).replace('"price": 340,', '"price": 3.4e2,'), id="3.4e2"
        ),
        pytest.param(lambda v: json.dumps(v).replace('"USD"', '"\\u0055SD"'), id="escaped-char"),
    ],
)
def test_a_rewrite_that_keeps_every_value_still_verifies(rewrite, keys):
    text = rewrite(session_log())
    assert text != json.dumps(session_log())
    report = verify_log(json_value(read_json(text)), keys)
    assert report.ok, failures(report)


def _reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed_keys(v) for v in value]
    return value


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param('"price":340', '"price":"340"', id="price-as-string"),
        pytest.param('"price":340', '"price":340.001', id="price-340.001"),
        pytest.param('"2026-04-28T09:00:10Z"', '"2026-04-28T09:00:10+00:00"', id="same-instant"),
        pytest.param('"2026-04-28T09:00:10Z"', '"2026-04-28T09:00:10.000Z"', id="millis"),
    ],
)
def test_a_rewrite_that_changes_a_hashed_value_fails(old, new, keys):
    log = session_log()
    log[5] = reserialize(log[5], old, new)
    report = verify_log(log, keys)
    # A price that is no longer a number also makes the envelope unreadable (I2), and then
    # the report cannot name the session: match the check by its own name.
    (detail,) = [d for name, d in failures(report).items() if name.endswith(": hash chain")]
    assert "entry 6: entry_hash does not match its contents" in detail


# Signatures by a key the auditor does not trust. ----------------------------------------------


def test_an_agreement_signed_by_an_unknown_key_fails_i6_naming_the_kid(keys):
    report = verify_log(forge(session_log(), key=other_key()), keys)
    assert f"no key with kid {other_key().kid!r}" in failures(report)[f"{SFO}: I6"]


def test_an_agreement_signed_by_an_unknown_key_is_not_counted_valid(keys):
    report = verify_log(forge(session_log(), key=other_key()), keys)
    assert report.agreements == (0, 1)


def test_a_log_verified_without_keys_fails_i6():
    report = verify_log(session_log(), None)
    assert "no key set" in failures(report)[f"{SFO}: I6"]


def test_a_bundle_signed_by_another_arbiter_fails_against_the_real_keys(keys):
    report = verify_bundle(bundle_of(key=other_key()), jwks=keys)
    assert other_key().kid in failures(report)["checkpoint signature"]


def test_a_bundle_signed_by_another_arbiter_passes_only_its_own_bundled_keys():
    # Why an auditor passes --jwks: a bundle's own key set proves nothing about who signed it.
    assert verify_bundle(bundle_of(key=other_key())).ok


def test_a_checkpoint_re_signed_by_an_unknown_key_fails_naming_the_kid():
    bundle = bundle_of()
    bundle["checkpoint"] = sign_checkpoint(
        key=other_key(),
        arbiter_id=ARBITER_ID,
        leaves=leaf_hashes(s["log"] for s in bundle["sessions"]),
        manifest=bundle["manifest"],
        issued_at=BUNDLED_AT,
    )
    report = verify_bundle(bundle)
    assert other_key().kid in failures(report)["checkpoint signature"]


# One audit bundle, one byte or one entry changed. --------------------------------------------


def _bundle_price_digit(b: JsonObject) -> None:
    b["sessions"][0]["log"][5] = reserialize(b["sessions"][0]["log"][5], ":340,", ":350,")


def _bundle_entry_hash_char(b: JsonObject) -> None:
    entry = b["sessions"][1]["log"][4]
    entry["entry_hash"] = flip_hex(entry["entry_hash"])


def _bundle_head_hash_char(b: JsonObject) -> None:
    listed = b["manifest"]["sessions"][2]
    listed["head_hash"] = flip_hex(listed["head_hash"])


def _bundle_root_hash_char(b: JsonObject) -> None:
    statement = b["checkpoint"]["statement"]
    statement["root_hash"] = flip_hex(statement["root_hash"])


def _bundle_signature_char(b: JsonObject) -> None:
    sig = b["checkpoint"]["signature"]
    b["checkpoint"]["signature"] = sig[:-2] + ("A" if sig[-2] != "A" else "B") + sig[-1]


def _bundle_jwk_char(b: JsonObject) -> None:
    key = b["jwks"]["keys"][0]
    key["x"] = key["x"][:-2] + ("A" if key["x"][-2] != "A" else "B") + key["x"][-1]


def _bundle_drop_entry(b: JsonObject) -> None:
    del b["sessions"][1]["log"][4]


def _bundle_duplicate_entry(b: JsonObject) -> None:
    log = b["sessions"][1]["log"]
    log.insert(4, log[4])


def _bundle_reorder_entries(b: JsonObject) -> None:
    log = b["sessions"][1]["log"]
    log[2], log[3] = log[3], log[2]


def _bundle_cut_tail(b: JsonObject) -> None:
    b["sessions"][0]["log"].pop()


def _bundle_rechained(b: JsonObject) -> None:
    # An intact chain, but not the entries the manifest and the signed root name.
    b["sessions"][0]["log"] = rechain(_price_digit(b["sessions"][0]["log"]))


def _bundle_reorder_sessions(b: JsonObject) -> None:
    b["sessions"].reverse()


def _bundle_drop_session(b: JsonObject) -> None:
    del b["sessions"][1]


def _bundle_manifest_tree_size(b: JsonObject) -> None:
    b["manifest"]["tree_size"] -= 1


@pytest.mark.parametrize(
    ("tamper", "name", "detail"),
    [
        pytest.param(_bundle_price_digit, f"{SFO}: hash chain", "entry 6", id="price-digit"),
        pytest.param(_bundle_price_digit, "merkle root", "30 leaves", id="price-digit-root"),
        pytest.param(_bundle_entry_hash_char, f"{LAX}: hash chain", "entry 5", id="entry-hash"),
        pytest.param(_bundle_head_hash_char, "manifest digest", "", id="head-hash"),
        pytest.param(_bundle_head_hash_char, f"{BOS}: complete", "head", id="head-hash-listed"),
        pytest.param(_bundle_manifest_tree_size, "manifest digest", "", id="manifest-size"),
        pytest.param(
            _bundle_root_hash_char, "checkpoint signature", "signature_invalid", id="root-hash"
        ),
        pytest.param(
            _bundle_signature_char, "checkpoint signature", "signature_invalid", id="signature"
        ),
        pytest.param(_bundle_jwk_char, "checkpoint signature", "thumbprint", id="jwk"),
        pytest.param(_bundle_drop_entry, f"{LAX}: complete", "11 of 12", id="dropped-entry"),
        pytest.param(_bundle_drop_entry, f"{LAX}: hash chain", "entry 6", id="dropped-chain"),
        pytest.param(_bundle_duplicate_entry, f"{LAX}: complete", "13 of 12", id="duplicated"),
        pytest.param(_bundle_reorder_entries, f"{LAX}: hash chain", "entry 4", id="reordered"),
        pytest.param(_bundle_reorder_entries, "merkle root", "30 leaves", id="reordered-root"),
        pytest.param(_bundle_cut_tail, f"{SFO}: complete", "8 of 9", id="cut-tail"),
        pytest.param(_bundle_rechained, f"{SFO}: complete", "head", id="rechained"),
        pytest.param(_bundle_rechained, "merkle root", "30 leaves", id="rechained-root"),
        pytest.param(_bundle_reorder_sessions, "merkle root", "30 leaves", id="sessions-reordered"),
        pytest.param(_bundle_drop_session, "merkle root", "18 leaves", id="session-dropped"),
    ],
)
def test_a_tampered_bundle_fails_the_check_that_covers_it(
    tamper: Callable[[JsonObject], None], name, detail
):
    bundle = bundle_of()
    tamper(bundle)
    report = verify_bundle(bundle)
    assert detail in failures(report)[name]


def test_a_bundle_of_another_format_fails_the_format_check():
    bundle = {**bundle_of([SFO_JFK]), "format": "oanp-audit-bundle/9"}
    assert failures(verify_bundle(bundle)) == {"format": "oanp-audit-bundle/9"}


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(lambda b: b.pop("manifest"), id="no-manifest"),
        pytest.param(lambda b: b.update(sessions=None), id="sessions-null"),
        pytest.param(lambda b: b["sessions"][0].update(log=[None]), id="entry-null"),
        pytest.param(lambda b: b["checkpoint"].update(statement=[]), id="statement-list"),
    ],
)
def test_a_malformed_bundle_is_reported_not_raised(broken):
    bundle = bundle_of([SFO_JFK])
    broken(bundle)
    assert not verify_bundle(bundle).ok


# Subsets: every entry proven against the original signed root. -------------------------------


def test_an_extracted_subset_verifies():
    report = verify_bundle(extract(bundle_of(), [NO_DEAL.session_id]))
    assert check(report, "inclusion proofs") == (
        True,
        "12/12 entries proven in the signed tree of 30",
    )
    assert report.ok, failures(report)


def _swap_within(sub: JsonObject) -> None:
    paths = sub["proofs"]["inclusion"][NO_DEAL.session_id]
    paths[3] = paths[4]


def _swap_across(sub: JsonObject) -> None:
    inclusion = sub["proofs"]["inclusion"]
    inclusion[NO_DEAL.session_id][0] = inclusion[LINEAR_DEAL.session_id][0]


def _exchange(sub: JsonObject) -> None:
    paths = sub["proofs"]["inclusion"][NO_DEAL.session_id]
    paths[0], paths[1] = paths[1], paths[0]


def _shorten(sub: JsonObject) -> None:
    sub["proofs"]["inclusion"][NO_DEAL.session_id][2].pop()


def _drop_paths(sub: JsonObject) -> None:
    del sub["proofs"]["inclusion"][NO_DEAL.session_id]


def _edit_entry(sub: JsonObject) -> None:
    log = sub["sessions"][0]["log"]
    log[2] = reserialize(log[2], '"price":', '"price":1')


@pytest.mark.parametrize(
    ("tamper", "proven"),
    [
        pytest.param(_swap_within, "20/21", id="proof-of-another-entry"),
        pytest.param(_swap_across, "20/21", id="proof-from-another-session"),
        pytest.param(_exchange, "19/21", id="two-proofs-exchanged"),
        pytest.param(_shorten, "20/21", id="proof-shortened"),
        pytest.param(_drop_paths, "9/21", id="no-proofs"),
        pytest.param(_edit_entry, "20/21", id="entry-edited"),
    ],
)
def test_a_subset_with_a_wrong_inclusion_proof_fails(tamper, proven):
    sub = extract(bundle_of(), [NO_DEAL.session_id, LINEAR_DEAL.session_id])
    tamper(sub)
    detail = failures(verify_bundle(sub))["inclusion proofs"]
    assert detail.startswith(f"{proven} entries proven")


def test_a_subset_whose_proofs_name_another_tree_size_fails():
    sub = extract(bundle_of(), [NO_DEAL.session_id])
    sub["proofs"]["tree_size"] = 21
    assert "inclusion proofs" in failures(verify_bundle(sub))


def test_a_subset_entry_that_is_not_an_object_fails_instead_of_raising():
    sub = extract(bundle_of(), [NO_DEAL.session_id])
    sub["sessions"][0]["log"][3] = "not an entry"
    assert failures(verify_bundle(sub))["inclusion proofs"].startswith("11/12")


def test_extract_refuses_a_session_not_in_the_bundle():
    with pytest.raises(KeyError, match="sess-nowhere"):
        extract(bundle_of(), ["sess-nowhere"])


# Checkpoints of other exports. ---------------------------------------------------------------


@pytest.fixture(scope="module")
def earlier() -> JsonObject:
    return bundle_of([SFO_JFK])


@pytest.fixture(scope="module")
def later(earlier) -> JsonObject:
    return bundle_of(THREE_SESSIONS, previous=[earlier["checkpoint"]])


@pytest.mark.parametrize("name", ["manifest digest", "merkle root"])
def test_an_old_checkpoint_swapped_into_a_later_bundle_fails(earlier, later, name):
    swapped = {**copy.deepcopy(later), "checkpoint": earlier["checkpoint"]}
    report = verify_bundle(swapped)
    assert check(report, "checkpoint signature")[0]  # a genuine signature, on the wrong tree
    assert name in failures(report)


def test_an_old_checkpoint_and_manifest_swapped_in_fail_on_the_unlisted_sessions(earlier, later):
    swapped = {**later, "checkpoint": earlier["checkpoint"], "manifest": earlier["manifest"]}
    report = verify_bundle(swapped)
    assert failures(report)[f"{LAX}: listed"] == "not in the manifest"


def test_a_later_bundle_proves_consistency_with_the_earlier_checkpoint(later):
    assert check(verify_bundle(later), "consistency #1") == (
        True,
        "tree of 9 is a prefix of this tree of 30",
    )


def test_a_consistency_proof_from_another_export_fails(later):
    stranger = bundle_of([NO_DEAL])
    bundle = copy.deepcopy(later)
    bundle["consistency"][0]["checkpoint"] = stranger["checkpoint"]
    assert "consistency #1" in failures(verify_bundle(bundle))


def test_a_consistency_proof_with_a_flipped_hash_fails(later):
    bundle = copy.deepcopy(later)
    proof = bundle["consistency"][0]["proof"]
    proof[0] = flip_hex(proof[0])
    assert "consistency #1" in failures(verify_bundle(bundle))


def test_building_on_a_checkpoint_that_is_not_a_prefix_is_refused(earlier):
    with pytest.raises(ValueError, match="not a prefix"):
        bundle_of([NO_DEAL, SFO_JFK], previous=[earlier["checkpoint"]])


# --since: the earlier export's signed tree is a prefix of this one. --------------------------


def test_a_later_bundle_that_extends_the_earlier_one_verifies_since(earlier, later):
    report = verify_bundle(later, since=earlier)
    assert check(report, "earlier export is a prefix") == (
        True,
        "its 9 entries are the first 9 of these 30",
    )
    assert report.ok, failures(report)


def test_a_later_bundle_without_consistency_proofs_still_verifies_since(earlier):
    assert verify_bundle(bundle_of(THREE_SESSIONS), since=earlier).ok


@pytest.mark.parametrize(
    "rewritten",
    [
        pytest.param(lambda: bundle_of([NO_DEAL, LINEAR_DEAL]), id="session-dropped"),
        pytest.param(lambda: bundle_of([NO_DEAL, SFO_JFK, LINEAR_DEAL]), id="reordered"),
        pytest.param(
            lambda: build_bundle(
                logs=[rechain(_price_digit(session_log())), session_log(NO_DEAL)],
                jwks=jwks(),
                key=arbiter_key(),
                arbiter_id=ARBITER_ID,
                created_at=BUNDLED_AT,
            ),
            id="entry-rewritten",
        ),
    ],
)
def test_a_later_bundle_that_rewrote_history_fails_since(earlier, rewritten):
    report = verify_bundle(rewritten(), since=earlier)
    assert "earlier export is a prefix" in failures(report)


def test_a_rewritten_bundle_is_caught_only_by_since():
    # On its own, a signed export of other sessions is perfectly valid.
    assert verify_bundle(bundle_of([NO_DEAL, LINEAR_DEAL])).ok


def test_since_against_a_subset_fails_saying_why(earlier, later):
    sub = extract(later, [SFO_JFK.session_id])
    detail = failures(verify_bundle(sub, since=earlier))["earlier export is a prefix"]
    assert "subset" in detail


def test_since_signed_by_an_unknown_key_fails_naming_the_kid(later):
    stranger = bundle_of([SFO_JFK], key=other_key())
    detail = failures(verify_bundle(later, since=stranger))["earlier export checkpoint signature"]
    assert other_key().kid in detail


# A faulty arbiter: chain and signature redone, an invariant broken. -------------------------


def _renege_judged_fair() -> Log:
    log = session_log()
    for position, fields in [
        (5, {"price": 300}),
        (6, {"price": 300}),
        (7, {"buyer_price": 300, "merchant_price": 300}),
        (8, {"final_price": 300}),
    ]:
        for name, value in fields.items():
            log = edited(log, position, "envelope", "payload", name, value=value)
    return edited(log, 8, "envelope", "payload", "agreement", "final_price", value=300)


def _status_changed() -> Log:
    return edited(session_log(), 4, "envelope", "payload", "status", value="fair_but_stuck")


def _verdict_removed() -> Log:
    log = session_log()
    return log[:4] + log[5:]


def _caught_breach_judged_fair() -> Log:
    return edited(caught_renege_log(), 6, "envelope", "payload", "status", value="fair")


def _caught_breach_closed_otherwise() -> Log:
    log = caught_renege_log()
    return edited(log, 7, "envelope", "payload", "reason", value="max_rounds_reached")


def _final_price_changed() -> Log:
    log = edited(session_log(), 8, "envelope", "payload", "final_price", value=330)
    return edited(log, 8, "envelope", "payload", "agreement", "final_price", value=330)


def _signed_price_changed() -> Log:
    return edited(session_log(), 8, "envelope", "payload", "agreement", "final_price", value=330)


def _agreement_names_another_buyer() -> Log:
    log = session_log()
    return edited(log, 8, "envelope", "payload", "agreement", "buyer_agent_id", value="buyer-666")


def _accept_of_a_price_never_offered() -> Log:
    log = edited(session_log(), 6, "envelope", "payload", "price", value=345)
    log = edited(log, 7, "envelope", "payload", "buyer_price", value=345)
    log = edited(log, 7, "envelope", "payload", "merchant_price", value=345)
    log = edited(log, 8, "envelope", "payload", "final_price", value=345)
    return edited(log, 8, "envelope", "payload", "agreement", "final_price", value=345)


@pytest.mark.parametrize(
    ("make", "invariant", "detail"),
    [
        pytest.param(
            _renege_judged_fair,
            "I4",
            "round 2's breach (buyer_reneged) was judged fair",
            id="renege-judged-fair",
        ),
        pytest.param(
            _renege_judged_fair,
            "I4",
            "an agreement after a breach (buyer_reneged)",
            id="renege-then-agreement",
        ),
        pytest.param(
            _status_changed,
            "I5",
            "round 1 judged fair_but_stuck/opening_moves, the profile says fair/opening_moves",
            id="verdict-status-changed",
        ),
        pytest.param(
            _verdict_removed,
            "I5",
            "round 1 completed with 0 verdicts, not exactly one",
            id="verdict-removed",
        ),
        pytest.param(
            _caught_breach_judged_fair,
            "I4",
            "round 2's breach (buyer_reneged) was judged fair",
            id="caught-breach-judged-fair",
        ),
        pytest.param(
            _caught_breach_closed_otherwise,
            "I4",
            "a breach closed as max_rounds_reached",
            id="breach-closed-otherwise",
        ),
        pytest.param(
            _final_price_changed, "I4", "final price 330 was never accepted", id="final-price"
        ),
        pytest.param(
            _signed_price_changed,
            "I6",
            "the signed agreement's final_price differs",
            id="signed-price",
        ),
        pytest.param(
            _agreement_names_another_buyer,
            "I6",
            "the signed agreement's buyer_agent_id is not the log's",
            id="signed-buyer",
        ),
        pytest.param(
            _accept_of_a_price_never_offered,
            "I4",
            "entry 7: accept of 345, standing price 340",
            id="accept-not-standing",
        ),
    ],
)
def test_a_forged_log_with_an_intact_chain_fails_the_invariant(make, invariant, detail, keys):
    report = verify_log(forge(make()), keys)
    assert check(report, f"{SFO}: hash chain")[0]
    assert detail in failures(report)[f"{SFO}: {invariant}"]


def test_a_rechained_log_that_was_not_re_signed_fails_i7(keys):
    # Without the arbiter's key the agreement still names the old head.
    log = rechain(_price_digit(session_log()))
    detail = failures(verify_log(log, keys))[f"{SFO}: I7"]
    assert "session_digest is not the entry_hash of entry 8" in detail


def test_a_forged_agreement_with_a_non_numeric_signed_price_fails_i6(keys):
    log = edited(session_log(), 8, "envelope", "payload", "agreement", "final_price", value=True)
    detail = failures(verify_log(forge(log), keys))[f"{SFO}: I6"]
    assert "final_price differs" in detail


# The arbiter catching a party's breach is the protocol working. ------------------------------


def test_a_caught_renege_passes_the_audit(keys):
    report = verify_log(caught_renege_log(), keys)
    assert report.ok, failures(report)


def test_a_caught_renege_ends_in_the_renege_close(keys):
    report = verify_log(caught_renege_log(), keys)
    assert report.audits[0].outcome == "buyer_reneged"


def test_a_caught_renege_is_noted_as_evidence_and_verdict(keys):
    _, detail = check(verify_log(caught_renege_log(), keys), f"{SFO}: I4")
    assert detail == (
        "pass (entry 6: the buyer lowered its price (evidence); "
        "entry 7: the arbiter judged round 2 violated)"
    )


def test_a_bundled_caught_renege_is_listed_with_its_outcome():
    bundle = build_bundle(
        logs=[caught_renege_log()],
        jwks=jwks(),
        key=arbiter_key(),
        arbiter_id=ARBITER_ID,
        created_at=BUNDLED_AT,
    )
    assert bundle["manifest"]["sessions"][0]["outcome"] == "buyer_reneged"
    assert verify_bundle(bundle).ok
