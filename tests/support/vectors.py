"""The published test vectors of ``docs/vectors/``: one function per file, returning its bytes.

Everything is built from the deterministic factories (seeded keys, fixed salts, stepping
clocks, counter ids), so every file but one comes out byte for byte the same on every run. The
exception is the ES256 signature of ``agreements.json``: ECDSA draws a fresh nonce, so
:func:`agreements_json` takes the signature to publish, and :func:`main` keeps the stored one
while it still verifies.

``python -m tests.support.vectors`` rewrites ``docs/vectors/`` (the README is written by hand).
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import rfc8785

from oanp.audit import extract, verify_bundle
from oanp.audit.invariants import audit_log
from oanp.audit.walk import Status
from oanp.wire.canonical import JsonObject, canonical_bytes, json_value, read_json, tagged_sha256
from oanp.wire.commitments import commit, encode_salt, reference_commit
from oanp.wire.envelope import check_sender, parse_envelope
from oanp.wire.errors import ProtocolError, SchemaInvalid, VerificationError
from oanp.wire.machine import Negotiation
from oanp.wire.signing import AGREEMENT_TYP, CHECKPOINT_TYP, SigningKey, verify_detached
from tests.support.factories.logs import (
    BUNDLED_AT,
    NO_DEAL,
    SFO_JFK,
    THREE_SESSIONS,
    arbiter_key,
    bundle_of,
    caught_renege_log,
    es256_key,
    forge,
    jwks,
    other_key,
    rechain,
    self_dealing_log,
    session_log,
)
from tests.support.factories.sessions import (
    ARBITER,
    BUYER_COMMIT,
    ITEM,
    MERCHANT,
    MERCHANT_COMMIT,
    T0,
    envelope_json,
)
from tests.support.tlog_vectors import TLOG_FILES

VECTORS_DIR = Path(__file__).resolve().parents[2] / "docs" / "vectors"
#: When the later export of ``bundle-extended.json`` was made: a day after ``bundle.json``.
EXTENDED_AT = BUNDLED_AT + timedelta(days=1)
#: The sessions of ``bundle.json``; ``bundle-extended.json`` adds the rest of THREE_SESSIONS.
BUNDLED = (SFO_JFK, NO_DEAL)


def dump(value: object) -> bytes:
    """A vector file: JSON, 2-space indent, ASCII only (``\\u`` escapes), a final newline."""
    return (json.dumps(value, indent=2, ensure_ascii=True) + "\n").encode("ascii")


def canonical_text(value: object) -> str:
    return canonical_bytes(json_value(value)).decode("utf-8")


# canonical.json ------------------------------------------------------------------------------

#: (name, JSON text) that this project reads and hashes: each ``canonical`` is what it writes.
CANONICAL_CASES: tuple[tuple[str, str], ...] = (
    ("keys-sorted", '{"b":2,"a":1,"c":{"z":0,"y":[3,2,1]}}'),
    ("keys-case-sensitive", '{"a":"\\u00e9","\\u00e9":"a","e":1,"f":2,"E":3}'),
    (
        "keys-utf16-order-rfc8785-3.2.3",
        '{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With '
        'Dagesh","1":"One","\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control",'
        '"\\u00f6":"Latin Small Letter O With Diaeresis"}',
    ),
    ("keys-astral-before-private-use", '{"\\uffff":2,"\\ue000":3,"\\ud800\\udc00":1}'),
    ("whitespace-dropped", ' { "b" : [ 1 , 2 ] ,\n\t"a" : { } }\r\n'),
    ("integers", "[0,1,-1,340,9007199254740991,-9007199254740991]"),
    ("integral-spellings", "[1e15,1E3,2.5e1,340.0,-9007199254740991.0,1.0000000000000000]"),
    ("negative-zero-integer", "-0"),
    ("negative-zero-double", "-0.0"),
    ("trailing-zeros", "[340.10,4.50,0.50,1.0e-1]"),
    ("price-339.99", "339.99"),
    ("prices-minor-units", "[0.01,19.99,1234.5,0.001,999999999999.99]"),
    ("small-doubles", "[0.000001,1e-7,0.0001,0.00009999,1e-27,-2e-3]"),
    ("smallest-subnormal", "5e-324"),
    ("shortest-round-trip", "[0.1,0.30000000000000004,333333333.3333333,12345678.9]"),
    (
        "control-characters",
        '"\\u0000\\u0001\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e\\u001f\\u007f"',
    ),
    ("quote-backslash-solidus", '"\\"\\\\\\/"'),
    ("unicode-unescaped", '"\\u00e9\\u4e2d\\u2028\\u2029\\ufeff"'),
    ("surrogate-pairs", '"\\ud83d\\ude00 \\uD834\\uDD1E"'),
    ("utf8-literal", '"Z\u00fcrich \u20ac \U0001f600"'),
    ("literals", "[null,true,false]"),
    ("empty-object", "{}"),
    ("empty-array", "[]"),
    ("empty-string", '""'),
    ("empty-containers", '{"c":"","b":[],"a":{}}'),
    ("nested", '{"z":{"b":[{"y":1,"x":2}],"a":null},"a":[true,false,null]}'),
    ("deeply-nested-empties", '[[[]],{"":{"":[{}]}}]'),
    ("sfo-jfk-item", '{"route": "SFO-JFK", "date": "2026-04-28"}'),
)

#: (name, JSON text) whose numbers this project refuses in anything it hashes (beyond
#: ±(2^53-1), or more significant digits than a double holds); ``canonical`` is RFC 8785's.
REFUSED_CASES: tuple[tuple[str, str], ...] = (
    ("exponent-1e20", "1e20"),
    ("fraction-100000000000000000000.0", "100000000000000000000.0"),
    ("exponent-1e21", "1E21"),
    ("large-doubles", "[1e16,1e23,123456789012345678901234567890.0]"),
    ("largest-double", "1.7976931348623157e308"),
    ("integer-2-53-as-double", "9007199254740992.0"),
    ("more-digits-than-a-double", "333333333.33333329"),
    (
        "rfc8785-3.2.2-example",
        '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],'
        '"string":"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        '"literals":[null,true,false]}',
    ),
)


def _reads(text: str) -> bool:
    try:
        json_value(read_json(text))
    except SchemaInvalid:
        return False
    return True


def canonical_json() -> bytes:
    cases = []
    for name, text in CANONICAL_CASES + REFUSED_CASES:
        accepted = _reads(text)
        assert accepted == ((name, text) in CANONICAL_CASES), name
        # Python's reader gives floats for fractions and exponents, as RFC 8785 reads them.
        canonical = canonical_bytes(json_value(read_json(text)) if accepted else json.loads(text))
        # What this project writes must be what the RFC 8785 package writes.
        assert canonical == rfc8785.dumps(json.loads(text)), name
        cases.append(
            {
                "name": name,
                "input": text,
                "canonical": canonical.decode("utf-8"),
                "sha256": tagged_sha256(canonical),
                "accepted": accepted,
            }
        )
    return dump(cases)


# commitments.json ----------------------------------------------------------------------------

GOLDEN_CONSTRAINTS: JsonObject = {"budget_cap": 400, "true_ceiling": 420, "urgency": "medium"}
GOLDEN_ITEM: JsonObject = {"date": "2026-04-28", "route": "SFO-JFK"}
ZURICH_ITEM: JsonObject = {"route": "ZRH-CDG", "date": "2026-06-01", "from": "Z\u00fcrich"}
JPY_ITEM: JsonObject = {"sku": "JR-PASS-7", "class": "green", "tags": ["rail", "7-day"]}

#: (name, role, constraints, item, max_rounds)
REFERENCE_CASES: tuple[tuple[str, str, JsonObject, JsonObject, int], ...] = (
    ("public-golden-buyer", "buyer", GOLDEN_CONSTRAINTS, GOLDEN_ITEM, 5),
    ("merchant-sfo-jfk", "merchant", {"floor_price": 280, "ideal_price": 400}, GOLDEN_ITEM, 5),
    (
        "buyer-non-ascii-item",
        "buyer",
        {"budget_cap": 399.99, "true_ceiling": 420.5, "urgency": "high"},
        ZURICH_ITEM,
        3,
    ),
)

#: (name, role, constraints, item, max_rounds, the 32 salt bytes)
SALTED_CASES: tuple[tuple[str, str, JsonObject, JsonObject, int, bytes], ...] = (
    ("buyer-golden-zero-salt", "buyer", GOLDEN_CONSTRAINTS, GOLDEN_ITEM, 5, bytes(32)),
    (
        "buyer-sfo-jfk",
        "buyer",
        SFO_JFK.buyer_vault.constraints(),
        SFO_JFK.item,
        SFO_JFK.max_rounds,
        b"\x01" * 32,
    ),
    (
        "merchant-sfo-jfk",
        "merchant",
        SFO_JFK.merchant_vault.constraints(),
        SFO_JFK.item,
        SFO_JFK.max_rounds,
        b"\x02" * 32,
    ),
    (
        "buyer-cents-non-ascii-item",
        "buyer",
        {"budget_cap": 399.99, "true_ceiling": 420.5, "urgency": "high"},
        ZURICH_ITEM,
        3,
        bytes(range(32)),
    ),
    (
        "merchant-jpy-nested-item",
        "merchant",
        {"floor_price": 28000, "ideal_price": 40000, "notes": {"season": "peak"}},
        JPY_ITEM,
        20,
        bytes(range(255, 223, -1)),
    ),
)


def commitments_json() -> bytes:
    reference = []
    for name, role, constraints, item, max_rounds in REFERENCE_CASES:
        committed = {"constraints": constraints, "item": item, "max_rounds": max_rounds}
        reference.append(
            {
                "name": name,
                "role": role,
                "constraints": constraints,
                "item": item,
                "max_rounds": max_rounds,
                "preimage": json.dumps(committed, sort_keys=True, separators=(",", ":")),
                "commitment": reference_commit(constraints, item, max_rounds),
            }
        )
    salted = []
    for name, role, constraints, item, max_rounds, raw in SALTED_CASES:
        salt = encode_salt(raw)
        committed = {
            "constraints": constraints,
            "item": item,
            "max_rounds": max_rounds,
            "salt": salt,
        }
        salted.append(
            {
                "name": name,
                "role": role,
                "constraints": constraints,
                "item": item,
                "max_rounds": max_rounds,
                "salt": salt,
                "preimage": canonical_text(committed),
                "commitment": commit(constraints, item, max_rounds, salt),
            }
        )
    return dump({"reference": reference, "salted": salted})


# session.json --------------------------------------------------------------------------------


def session_json() -> bytes:
    log = session_log(SFO_JFK)
    agree = cast(JsonObject, log[-1]["envelope"])
    payload = cast(JsonObject, agree["payload"])
    agreement = cast(JsonObject, payload["agreement"])
    return dump(
        {
            "session_id": SFO_JFK.session_id,
            "arbiter_id": agreement["arbiter_id"],
            "jwks": jwks(),
            "entries": log,
            "session_digest": payload["session_digest"],
            "log_length": agreement["log_length"],
            "final_price": payload["final_price"],
        }
    )


# agreements.json -----------------------------------------------------------------------------


def sfo_jfk_agreement() -> JsonObject:
    """The agreement the arbiter signed at the end of ``session.json``."""
    payload = cast(JsonObject, cast(JsonObject, session_log(SFO_JFK)[-1]["envelope"])["payload"])
    return cast(JsonObject, payload["agreement"])


def _signed(key: SigningKey, agreement: JsonObject, signature: str) -> JsonObject:
    return {
        "alg": key.alg,
        "agreement": agreement,
        "canonical": canonical_text(agreement),
        "signature": signature,
        "jwks": jwks(key),
    }


def agreements_json(es256_signature: str | None = None) -> bytes:
    """Both agreements; ``es256_signature`` is the ES256 JWS to publish (signed anew if None)."""
    agreement = sfo_jfk_agreement()
    payload = canonical_bytes(agreement)
    ed, es = arbiter_key(), es256_key()
    if es256_signature is None:
        es256_signature = es.sign_detached(payload, typ=AGREEMENT_TYP)
    verify_detached(es256_signature, payload, jwks(es), typ=AGREEMENT_TYP, algorithms=["ES256"])
    return dump(
        [
            _signed(ed, agreement, ed.sign_detached(payload, typ=AGREEMENT_TYP)),
            _signed(es, agreement, es256_signature),
        ]
    )


def stored_es256_signature(path: Path | None = None) -> str | None:
    """The ES256 JWS of the stored ``agreements.json``, if it still verifies over the
    agreement it would hold now; else None."""
    path = path or VECTORS_DIR / "agreements.json"
    if not path.exists():
        return None
    stored = [v for v in json.loads(path.read_text("utf-8")) if v.get("alg") == "ES256"]
    if len(stored) != 1:
        return None
    signature = stored[0].get("signature")
    try:
        agreements_json(signature)
    except (VerificationError, TypeError):
        return None
    return cast(str, signature)


# bundle.json, bundle-extended.json -----------------------------------------------------------


def earlier_bundle() -> JsonObject:
    """``bundle.json``: SFO→JFK and LAX→ORD, every entry with its inclusion proof."""
    whole = bundle_of(BUNDLED)
    return extract(whole, [s.session_id for s in BUNDLED])


def bundle_json() -> bytes:
    return dump(earlier_bundle())


def extended_bundle() -> JsonObject:
    """``bundle-extended.json``: a whole later export of all three sessions, with the
    consistency proof from ``bundle.json``'s checkpoint."""
    earlier = earlier_bundle()
    return bundle_of(THREE_SESSIONS, created_at=EXTENDED_AT, previous=[earlier["checkpoint"]])


def bundle_extended_json() -> bytes:
    return dump(extended_bundle())


# bad.json ------------------------------------------------------------------------------------

#: Placeholder for a raw number literal in :func:`_raw_text`.
_RAW = "@raw@"


def _raw_text(envelope: JsonObject, raw: str | None = None) -> str:
    """Compact JSON text of ``envelope``; the string ``"@raw@"`` in it, if any, becomes the
    literal ``raw`` (a number spelling that a JSON encoder would not produce)."""
    text = json.dumps(envelope, separators=(",", ":"), ensure_ascii=False)
    if raw is not None:
        assert text.count(f'"{_RAW}"') == 1
        text = text.replace(f'"{_RAW}"', raw)
    return text


def _open(message_id: str = "v-open", **overrides: Any) -> JsonObject:
    payload = {
        "merchant_agent_id": MERCHANT,
        "item": ITEM,
        "currency": "USD",
        "max_rounds": 5,
        "constraints_commit": BUYER_COMMIT,
        **overrides,
    }
    return envelope_json("session.open", payload, message_id=message_id)


def _ack() -> JsonObject:
    return envelope_json("session.ack", {"constraints_commit": MERCHANT_COMMIT}, message_id="v-ack")


def _offer(
    kind: str, round_: int, price: object, *, role: str | None = None, **sender: Any
) -> JsonObject:
    """An offer envelope; ``sender`` may set message_id, agent and session_id."""
    role = role or ("merchant" if kind == "offer.counter" else "buyer")
    payload = {
        "round": round_,
        "price": price,
        "constraints_commit": BUYER_COMMIT if role == "buyer" else MERCHANT_COMMIT,
    }
    sender.setdefault("message_id", f"v-{kind.removeprefix('offer.')}-{round_}")
    return envelope_json(kind, payload, role=role, **sender)


def _sender_of(agent: str, role: str = "buyer") -> JsonObject:
    return {"role": role, "agent_id": agent}


def _propose(price: object = 320, round_: int = 1, **fields: Any) -> JsonObject:
    return _offer("offer.propose", round_, price, **fields)


def _with(envelope: JsonObject, *path: str, value: Any = None, drop: bool = False) -> JsonObject:
    out = copy.deepcopy(envelope)
    target = out
    for key in path[:-1]:
        target = target[key]
    if drop:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return out


_VERDICT_PAYLOAD: JsonObject = {
    "round": 1,
    "status": "fair",
    "rationale": "opening_moves",
    "buyer_price": 320,
    "merchant_price": 370,
    "spread": 50,
    "checks": {"I1": "pass", "I2": "pass", "I3": "pass", "I4": "pass", "I5": "pass"},
}

#: (name, envelope text, the envelopes of the session it is fed to, or None)
EnvelopeCase = tuple[str, str, list[JsonObject] | None]


def _envelope_cases() -> list[EnvelopeCase]:
    opened = [_open(), _ack()]
    return [
        ("price-exponent", _raw_text(_propose(_RAW), "3.4e2"), None),
        ("price-exponent-integral", _raw_text(_propose(_RAW), "320E0"), None),
        ("price-zero", _raw_text(_propose(0)), None),
        ("price-negative", _raw_text(_propose(-320)), None),
        ("price-at-ceiling", _raw_text(_propose(10**12)), None),
        ("price-string", _raw_text(_propose("320")), None),
        ("price-beyond-a-double", _raw_text(_propose(_RAW), "320.0000000000000001"), None),
        ("price-nan", _raw_text(_propose(_RAW), "NaN"), None),
        ("duplicate-key", _raw_text(_propose(_RAW), '320,"price":300'), None),
        ("unknown-top-level-field", _raw_text({**_propose(), "note": "hi"}), None),
        (
            "unknown-payload-field",
            _raw_text(_with(_propose(), "payload", "discount", value=5)),
            None,
        ),
        ("message-id-bad-chars", _raw_text(_propose(message_id="msg 0001")), None),
        ("message-id-reserved-prefix", _raw_text(_propose(message_id="arbiter:7")), None),
        ("session-id-too-long", _raw_text(_propose(session_id="s" * 65)), None),
        ("agent-id-bad-chars", _raw_text(_propose(agent="buyer/001")), None),
        ("wrong-version", _raw_text(_with(_propose(), "oanp_version", value="0.2")), None),
        (
            "timestamp-not-utc",
            _raw_text(_with(_propose(), "timestamp", value="2026-04-28T16:00:00+02:00")),
            None,
        ),
        (
            "commitment-missing",
            _raw_text(_with(_propose(), "payload", "constraints_commit", drop=True)),
            None,
        ),
        (
            "commitment-malformed",
            _raw_text(_with(_propose(), "payload", "constraints_commit", value="sha256:abc")),
            None,
        ),
        ("max-rounds-out-of-range", _raw_text(_open(max_rounds=21)), None),
        (
            "integer-beyond-i-json-in-item",
            _raw_text(_open(item={**ITEM, "seats": 2**53})),
            None,
        ),
        (
            "party-close-reason",
            _raw_text(
                envelope_json(
                    "session.close",
                    {"reason": "stalled", "constraints_commit": BUYER_COMMIT},
                    message_id="v-close",
                )
            ),
            None,
        ),
        ("not-an-object", "[]", None),
        ("merchant-sends-propose", _raw_text(_propose(role="merchant")), None),
        (
            "buyer-sends-verdict",
            _raw_text(envelope_json("round.verdict", _VERDICT_PAYLOAD, message_id="v-verdict")),
            None,
        ),
        ("price-decimals-usd", _raw_text(_propose(339.999)), opened),
        (
            "price-decimals-jpy",
            _raw_text(_propose(34000.5)),
            [_open(currency="JPY"), _ack()],
        ),
        (
            "price-decimals-kwd",
            _raw_text(_propose(100.1234)),
            [_open(currency="KWD"), _ack()],
        ),
        ("wrong-round", _raw_text(_propose(round_=2)), opened),
        ("out-of-turn", _raw_text(_offer("offer.counter", 1, 370, role="merchant")), opened),
        (
            "accept-not-standing",
            _raw_text(_offer("offer.accept", 1, 330, role="merchant")),
            [*opened, _propose()],
        ),
        ("message-id-reused", _raw_text(_propose(message_id="v-open")), opened),
        ("not-a-party", _raw_text(_propose(agent="buyer-002")), opened),
        (
            "session-exists",
            _raw_text({**_open(message_id="v-open-2"), "sender": _sender_of("buyer-002")}),
            [_open()],
        ),
    ]


def refusal(text: str, session: Sequence[Mapping[str, Any]] | None) -> ProtocolError | None:
    """What this project answers to the envelope ``text``: parse it and check its sender's
    role; with ``session``, first open a session from those envelopes (one second apart)
    and feed ``text`` to it. The refusal, or None if it was accepted."""
    try:
        if session is None:
            check_sender(parse_envelope(text))
            return None
        first, *rest = [parse_envelope(json.dumps(e)) for e in session]
        negotiation, _ = Negotiation.open(first, received_at=T0, arbiter=ARBITER)
        for n, move in enumerate(rest, start=1):
            negotiation.feed(move, received_at=T0 + timedelta(seconds=n))
        negotiation.feed(parse_envelope(text), received_at=T0 + timedelta(seconds=len(session)))
    except ProtocolError as exc:
        return exc
    return None


def _envelope_vector(name: str, text: str, session: list[JsonObject] | None) -> JsonObject:
    refused = refusal(text, session)
    assert refused is not None, f"{name} was accepted"
    expect: JsonObject = {"code": refused.code, "status": refused.status}
    if isinstance(refused, SchemaInvalid):
        expect["fields"] = [e.field for e in refused.errors]
    vector: JsonObject = {"name": name, "kind": "envelope", "input": text}
    if session is not None:
        vector["session"] = list(session)
    vector["expect"] = expect
    return vector


def failed_invariants(log: Sequence[Mapping[str, Any]], keys: Mapping[str, Any]) -> list[str]:
    audit = audit_log([cast(JsonObject, json_value(e)) for e in log], keys)
    return [i for i, r in audit.results.items() if r.status is Status.FAIL]


def _edit(log: Sequence[JsonObject], position: int, *path: str | int, value: Any) -> list[Any]:
    out: list[Any] = copy.deepcopy(list(log))
    target = out[position]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


def _renege_judged_fair() -> list[Any]:
    """SFO→JFK where the buyer drops to 300 in round 2, the merchant accepts it and the
    arbiter judges the round fair and signs: what only a faulty arbiter writes."""
    log: list[Any] = session_log()
    for position, fields in [
        (5, {"price": 300}),
        (6, {"price": 300}),
        (7, {"buyer_price": 300, "merchant_price": 300, "spread": 0}),
        (8, {"final_price": 300}),
    ]:
        for name, value in fields.items():
            log = _edit(log, position, "envelope", "payload", name, value=value)
    log = _edit(log, 8, "envelope", "payload", "agreement", "final_price", value=300)
    return forge(log)


def _flip_char(text: str, position: int) -> str:
    old = text[position]
    return text[:position] + ("B" if old != "B" else "C") + text[position + 1 :]


def _log_cases() -> list[tuple[str, list[Any], JsonObject]]:
    """(name, log, extra expectations beyond the failing invariants)"""
    honest: list[Any] = session_log()
    signature = honest[-1]["envelope"]["payload"]["signature"]
    renege: list[Any] = caught_renege_log()
    evidence = next(e for e in renege if e["envelope"]["payload"].get("price") == 300)
    verdict = renege[evidence["seq"]]["envelope"]["payload"]
    close = renege[-1]["envelope"]["payload"]
    # The agreement names entry 7 instead of entry 8, and is signed again with the real key.
    wrong_digest = _edit(
        honest, 8, "envelope", "payload", "session_digest", value=honest[6]["entry_hash"]
    )
    agreement = {**wrong_digest[8]["envelope"]["payload"]["agreement"]}
    agreement["session_digest"] = honest[6]["entry_hash"]
    wrong_digest = _edit(wrong_digest, 8, "envelope", "payload", "agreement", value=agreement)
    wrong_digest = _edit(
        wrong_digest,
        8,
        "envelope",
        "payload",
        "signature",
        value=arbiter_key().sign_detached(canonical_bytes(agreement), typ=AGREEMENT_TYP),
    )
    return [
        (
            "entry-edited",
            _edit(honest, 2, "envelope", "timestamp", value="2026-04-28T09:00:05Z"),
            {"check": "I7"},
        ),
        ("entry-removed", honest[:4] + honest[5:], {"check": "I7"}),
        (
            "renege-caught",
            renege,
            {
                "check": "I4",
                "evidence": evidence["seq"],
                "verdict": {k: verdict[k] for k in ("round", "status", "rationale")},
                "close": close["reason"],
            },
        ),
        ("renege-judged-fair", _renege_judged_fair(), {"check": "I4"}),
        ("self-dealing", self_dealing_log(), {"check": "I2"}),
        (
            "agreement-signed-by-another-key",
            forge(honest, key=other_key()),
            {"check": "I6", "code": "unknown_kid"},
        ),
        (
            "agreement-signature-altered",
            rechain(
                _edit(
                    honest,
                    8,
                    "envelope",
                    "payload",
                    "signature",
                    value=_flip_char(cast(str, signature), -20),
                )
            ),
            {"check": "I6", "code": "signature_invalid"},
        ),
        (
            "session-digest-not-the-head",
            rechain(wrong_digest),
            {"check": "I7"},
        ),
    ]


def _log_vector(name: str, log: list[Any], extra: JsonObject) -> JsonObject:
    keys = jwks()
    expect: JsonObject = {"check": extra["check"], "failed": failed_invariants(log, keys)}
    expect.update({k: v for k, v in extra.items() if k != "check"})
    return {
        "name": name,
        "kind": "log",
        "input": {"entries": log, "jwks": keys},
        "expect": expect,
    }


def failed_checks(bundle: Mapping[str, Any], since: Mapping[str, Any] | None = None) -> list[str]:
    return [c.name for c in verify_bundle(bundle, since=since).checks if not c.ok]


def _bundle_cases() -> list[tuple[str, Any, Any, str]]:
    """(name, bundle, the earlier bundle it must extend or None, the failing check)"""
    subset: Any = extract(bundle_of(BUNDLED), [SFO_JFK.session_id])
    paths = subset["proofs"]["inclusion"][SFO_JFK.session_id]
    paths[3] = paths[4]
    root_edited: Any = bundle_of([SFO_JFK])
    statement = root_edited["checkpoint"]["statement"]
    statement["root_hash"] = _flip_char(statement["root_hash"], -1)
    manifest_edited: Any = bundle_of([SFO_JFK])
    listed = manifest_edited["manifest"]["sessions"][0]
    listed["outcome"] = "max_rounds_reached"
    first: Any = bundle_of([SFO_JFK])
    consistency: Any = bundle_of(BUNDLED, previous=[first["checkpoint"]])
    proof = consistency["consistency"][0]["proof"]
    proof[0] = _flip_char(proof[0], -1)
    return [
        ("inclusion-proof-of-another-entry", subset, None, "inclusion proofs"),
        ("checkpoint-root-edited", root_edited, None, "checkpoint signature"),
        ("manifest-edited", manifest_edited, None, "manifest digest"),
        ("consistency-proof-edited", consistency, None, "consistency #1"),
        (
            "history-rewritten-since",
            bundle_of([NO_DEAL], created_at=EXTENDED_AT),
            first,
            "earlier export is a prefix",
        ),
    ]


def _bundle_vector(
    name: str, bundle: JsonObject, since: JsonObject | None, check: str
) -> JsonObject:
    given: JsonObject = {"bundle": bundle}
    if since is not None:
        given["since"] = since
    return {
        "name": name,
        "kind": "bundle",
        "input": given,
        "expect": {"check": check, "failed": failed_checks(bundle, since)},
    }


def _segment(value: JsonObject) -> str:
    return base64.urlsafe_b64encode(canonical_bytes(value)).rstrip(b"=").decode("ascii")


def _signature_cases() -> list[tuple[str, str, str, JsonObject, str]]:
    """(name, payload text, JWS, JWKS, typ)"""
    key = arbiter_key()
    payload = canonical_bytes(sfo_jfk_agreement())
    text = payload.decode("utf-8")
    good = key.sign_detached(payload, typ=AGREEMENT_TYP)
    header = {"alg": key.alg, "kid": key.kid, "typ": AGREEMENT_TYP}
    signature_part = good.split(".")[2]
    stranger = other_key().public_jwk()
    impostor = {**stranger, "kid": key.kid}
    own = jwks()
    assert '"final_price":340' in text
    return [
        (
            "payload-altered",
            text.replace('"final_price":340', '"final_price":339'),
            good,
            own,
            AGREEMENT_TYP,
        ),
        (
            "signed-by-another-key",
            text,
            other_key().sign_detached(payload, typ=AGREEMENT_TYP),
            own,
            AGREEMENT_TYP,
        ),
        (
            "checkpoint-typ",
            text,
            key.sign_detached(payload, typ=CHECKPOINT_TYP),
            own,
            AGREEMENT_TYP,
        ),
        (
            "payload-attached",
            text,
            good.replace("..", "." + _segment(sfo_jfk_agreement()) + "."),
            own,
            AGREEMENT_TYP,
        ),
        (
            "alg-eddsa",
            text,
            f"{_segment({**header, 'alg': 'EdDSA'})}..{signature_part}",
            own,
            AGREEMENT_TYP,
        ),
        (
            "alg-es256-on-ed25519-key",
            text,
            f"{_segment({**header, 'alg': 'ES256'})}..{signature_part}",
            own,
            AGREEMENT_TYP,
        ),
        (
            "header-extra-member",
            text,
            f"{_segment({**header, 'b64': False})}..{signature_part}",
            own,
            AGREEMENT_TYP,
        ),
        ("kid-not-the-thumbprint", text, good, {"keys": [impostor]}, AGREEMENT_TYP),
    ]


def signature_refusal(
    payload: str, signature: str, keys: Mapping[str, Any], typ: str
) -> VerificationError | None:
    try:
        verify_detached(signature, payload.encode("utf-8"), keys, typ=typ)
    except VerificationError as exc:
        return exc
    return None


def _signature_vector(
    name: str, payload: str, signature: str, keys: JsonObject, typ: str
) -> JsonObject:
    refused = signature_refusal(payload, signature, keys, typ)
    assert refused is not None, f"{name} verified"
    return {
        "name": name,
        "kind": "signature",
        "input": {"payload": payload, "signature": signature, "jwks": keys, "typ": typ},
        "expect": {"code": refused.code, "status": refused.status},
    }


def bad_json() -> bytes:
    cases = [_envelope_vector(*case) for case in _envelope_cases()]
    cases += [_log_vector(*case) for case in _log_cases()]
    cases += [_signature_vector(*case) for case in _signature_cases()]
    cases += [_bundle_vector(*case) for case in _bundle_cases()]
    return dump(cases)


# The files -----------------------------------------------------------------------------------

FILES: dict[str, Callable[[], bytes]] = {
    "canonical.json": canonical_json,
    "commitments.json": commitments_json,
    "session.json": session_json,
    "agreements.json": lambda: agreements_json(stored_es256_signature()),
    "bundle.json": bundle_json,
    "bundle-extended.json": bundle_extended_json,
    "bad.json": bad_json,
    **TLOG_FILES,
}


def main() -> None:
    VECTORS_DIR.mkdir(parents=True, exist_ok=True)
    for name, build in FILES.items():
        path = VECTORS_DIR / name
        data = build()
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
