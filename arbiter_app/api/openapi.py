"""The OpenAPI 3 document of docs/protocol.md §14, served by drf-spectacular.

The endpoints read raw envelopes with the protocol's own strict parser rather than DRF
serializers, so the schemas are written here, once, from docs/protocol.md; :func:`add_streams`
(a spectacular post-processing hook) puts them into the generated document.
"""

from __future__ import annotations

from typing import Any

from oanp.discovery import MAX_CATALOG_ITEMS, MAX_DESCRIPTION_CHARS, MAX_QUERY_CHARS
from oanp.envelope import (
    DEFAULT_MAX_ROUNDS,
    DEFAULT_PROFILE,
    DEFAULT_RESPONSE_WINDOW_S,
    INVARIANTS,
    MAX_ROUNDS_LIMIT,
    OANP_VERSION,
    PARTY_CLOSE_REASON,
    RESPONSE_WINDOW_RANGE,
    SENDERS,
    SETTLEMENTS,
    MessageType,
    Role,
)
from oanp.machine import Phase
from oanp.money import MINOR_UNITS, PRICE_CEILING
from oanp.profiles import PROFILES, TERMS, Reason, VerdictStatus
from oanp.settlement import SETTLEMENT_RULE
from oanp.terms import (
    ISSUE_NAME_PATTERN,
    MAX_DECIMALS,
    MAX_ISSUES,
    MAX_OPTION_CHARS,
    MAX_OPTIONS,
)

Schema = dict[str, Any]

#: Where the envelope's JSON Schema is published on its own; also the identifier it carries.
ENVELOPE_SCHEMA_PATH = "/oanp/v0.1/envelope.schema.json"

ID: Schema = {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,64}$"}
TIMESTAMP: Schema = {"type": "string", "format": "date-time"}
#: What an envelope's timestamp may be (oanp.envelope.parse_timestamp): UTC, Z or +00:00.
UTC_TIMESTAMP: Schema = {
    **TIMESTAMP,
    "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}"
    "([.][0-9]{1,9})?([Zz]|[+]00:00)$",
}
# OpenAPI 3.0 (what drf-spectacular emits) takes exclusive bounds as booleans beside
# minimum/maximum; the numeric form is 3.1's and made the document invalid.
PRICE: Schema = {
    "type": "number",
    "minimum": 0,
    "exclusiveMinimum": True,
    "maximum": int(PRICE_CEILING),
    "exclusiveMaximum": True,
    "description": "Major currency units, exact decimal, no exponent; at most the currency's "
    "minor-unit decimals (USD 2, JPY 0, KWD 3).",
}
COMMITMENT: Schema = {
    "type": "string",
    "pattern": "^(sha256:[0-9a-f]{64}|0x[0-9a-f]{16})$",
    "description": "Salted commitment, or the weak reference-compatible 0x form.",
}
HASH: Schema = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
# The parser's limits, so that the document and the parser cannot disagree.
ROUND: Schema = {"type": "integer", "minimum": 1, "maximum": MAX_ROUNDS_LIMIT}
CURRENCY: Schema = {"type": "string", "enum": sorted(MINOR_UNITS), "description": "ISO 4217."}
#: An amount the arbiter computed (a verdict's prices and spread): absent where a side has
#: no price in the round, and a spread may be negative.
AMOUNT: Schema = {"type": "number", "nullable": True}


def _text(limit: int) -> Schema:
    return {"type": "string", "maxLength": limit}


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(
    properties: Schema,
    required: list[str] | None = None,
    *,
    optional: tuple[str, ...] = (),
    **extra: Any,
) -> Schema:
    """A closed object: every property required unless ``required`` names them, or
    ``optional`` names those that may be left out."""
    if required is None:
        required = [name for name in properties if name not in optional]
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
        **extra,
    }


ISSUE_NAME: Schema = {
    "type": "string",
    "pattern": f"^{ISSUE_NAME_PATTERN}$",
    "not": {"enum": ["price"]},
    "description": "Unique within the session; never price, which stays the first issue.",
}
#: A number issue's bound: within the price's magnitude (oanp.terms reads it so).
ISSUE_BOUND: Schema = {
    "type": "number",
    "minimum": -int(PRICE_CEILING),
    "exclusiveMinimum": True,
    "maximum": int(PRICE_CEILING),
    "exclusiveMaximum": True,
    "description": "At most the issue's decimals; no exponent.",
}
#: A declared issue of profile terms/v0.1, as session.open carries it (docs/protocol.md §16).
ISSUE: Schema = {
    "oneOf": [
        _object(
            {
                "name": ISSUE_NAME,
                "kind": {"type": "string", "enum": ["number"]},
                "buyer_prefers": {
                    "type": "string",
                    "enum": ["low", "high"],
                    "description": "The merchant prefers the other end.",
                },
                "min": {
                    **ISSUE_BOUND,
                    "description": "Less than max; " + ISSUE_BOUND["description"],
                },
                "max": ISSUE_BOUND,
                "decimals": {"type": "integer", "minimum": 0, "maximum": MAX_DECIMALS},
            },
            description="A number from min to max with at most decimals decimals.",
        ),
        _object(
            {
                "name": ISSUE_NAME,
                "kind": {"type": "string", "enum": ["choice"]},
                "options": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1, "maxLength": MAX_OPTION_CHARS},
                    "minItems": 2,
                    "maxItems": MAX_OPTIONS,
                    "uniqueItems": True,
                    "description": "From the buyer's best to the merchant's best.",
                },
            },
            description="One of the options.",
        ),
    ]
}
ISSUES: Schema = {
    "type": "array",
    "items": ISSUE,
    "minItems": 1,
    "maxItems": MAX_ISSUES,
    "description": "The issues negotiated besides the price, in the order every later "
    "message uses; names unique.",
}
#: A value for every declared issue: a number, or a choice's option.
TERM_VALUES: Schema = {
    "type": "object",
    "additionalProperties": {"anyOf": [{"type": "number"}, {"type": "string"}]},
}
OFFER = _object(
    {
        "round": ROUND,
        "price": PRICE,
        "constraints_commit": COMMITMENT,
        "terms": {
            **TERM_VALUES,
            "nullable": True,
            "description": f"Required in a session of profile {TERMS.name}, refused in the "
            "others (422 `bad_terms`): a value for every declared issue, a number within its "
            "min and max with at most its decimals, or one of its options. An accept repeats "
            "the other side's standing terms exactly (422 `terms_not_standing`). Null is "
            "read as absent.",
        },
    },
    required=["round", "price", "constraints_commit"],
)
#: The signed object of a session.agree (docs/protocol.md §13).
AGREEMENT = _object(
    {
        "oanp_version": {"type": "string", "enum": [OANP_VERSION]},
        "session_id": ID,
        "arbiter_id": ID,
        "buyer_agent_id": ID,
        "merchant_agent_id": ID,
        "item": {"type": "object"},
        "currency": CURRENCY,
        "final_price": PRICE,
        "session_digest": HASH,
        "log_length": {"type": "integer", "minimum": 1},
        "invariants_satisfied": {
            "type": "array",
            "items": {"type": "string", "enum": list(INVARIANTS)},
        },
        "agreed_at": UTC_TIMESTAMP,
        "final_terms": {
            **TERM_VALUES,
            "description": f"Only in a session of profile {TERMS.name}: the accepted terms, "
            "numbers as JSON numbers, choices as their option.",
        },
        "settlement": {
            **_object(
                {
                    "rule": {"type": "string", "enum": [SETTLEMENT_RULE]},
                    "ceiling": {"type": "number"},
                    "floor": {"type": "number"},
                }
            ),
            "description": "Only for a session settled by reveal: the two revealed limits "
            "the price was computed from.",
        },
    },
    required=[
        "oanp_version",
        "session_id",
        "arbiter_id",
        "buyer_agent_id",
        "merchant_agent_id",
        "item",
        "currency",
        "final_price",
        "session_digest",
        "log_length",
        "invariants_satisfied",
        "agreed_at",
    ],
    description="The signed object; signature is over its RFC 8785 bytes.",
)
#: The payload of each type, by schema name (docs/protocol.md §4).
PAYLOADS: dict[str, Schema] = {
    "OpenPayload": _object(
        {
            "merchant_agent_id": ID,
            "item": {"type": "object", "description": "At most 4 KiB."},
            "currency": CURRENCY,
            "max_rounds": {**ROUND, "default": DEFAULT_MAX_ROUNDS},
            "profile": {"type": "string", "enum": list(PROFILES), "default": DEFAULT_PROFILE},
            "constraints_commit": COMMITMENT,
            "response_window_s": {
                "type": "integer",
                "minimum": RESPONSE_WINDOW_RANGE[0],
                "maximum": RESPONSE_WINDOW_RANGE[1],
                "default": DEFAULT_RESPONSE_WINDOW_S,
            },
            "deadline": {**UTC_TIMESTAMP, "nullable": True, "description": "At most 24 h ahead."},
            "settlement": {
                "type": "string",
                "enum": list(SETTLEMENTS),
                "nullable": True,
                "description": "Allow settlement by simultaneous reveal (needs salted "
                "commitments); the merchant agrees by acking.",
            },
            "issues": {
                **ISSUES,
                "nullable": True,
                "description": f"Required by profile {TERMS.name}, refused by the others (400 "
                "`schema_invalid`): " + ISSUES["description"] + " Null is read as absent.",
            },
        },
        required=["merchant_agent_id", "item", "currency", "constraints_commit"],
    ),
    "AckPayload": _object({"constraints_commit": COMMITMENT}),
    "OfferPayload": OFFER,
    "SettleRevealPayload": _object(
        {
            "round": ROUND,
            "constraints": {
                "type": "object",
                "description": "The sender's committed constraints, with its limit: the "
                "buyer's true_ceiling, the merchant's floor_price. At most 4 KiB.",
            },
            "salt": {**_text(128), "description": "The commitment's salt, base64url."},
            "constraints_commit": COMMITMENT,
        },
        description="A party opens its own commitment to settle at once.",
    ),
    "WithdrawPayload": _object(
        {
            "reason": {"type": "string", "enum": [PARTY_CLOSE_REASON]},
            "constraints_commit": COMMITMENT,
        },
        description="A party's session.close: it withdraws.",
    ),
    "VerdictPayload": _object(
        {
            "round": ROUND,
            "status": {"type": "string", "enum": [s.value for s in VerdictStatus]},
            "rationale": {"type": "string", "enum": [r.value for r in Reason]},
            "buyer_price": AMOUNT,
            "merchant_price": AMOUNT,
            "spread": AMOUNT,
            "checks": {
                "type": "object",
                "properties": {i: {"type": "string", "enum": ["pass", "fail"]} for i in INVARIANTS},
                "additionalProperties": False,
                "minProperties": 1,
            },
            "issues_open": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_ISSUES,
                "nullable": True,
                "description": f"Only in a session of profile {TERMS.name}: how many declared "
                "issues (the price not counted) the two sides' terms differ on; all of them "
                "before both have offered.",
            },
        },
        required=["round", "status", "rationale", "checks"],
    ),
    "AgreePayload": _object(
        {
            "final_price": PRICE,
            "currency": CURRENCY,
            "session_digest": HASH,
            "invariants_satisfied": {
                "type": "array",
                "items": {"type": "string", "enum": list(INVARIANTS)},
            },
            "agreement": AGREEMENT,
            "signature": {
                **_text(4096),
                "description": "Compact JWS with a detached payload (header..signature) over "
                "the RFC 8785 bytes of agreement.",
            },
            "signature_alg": {**_text(32), "enum": ["Ed25519", "ES256"]},
            "kid": {**_text(128), "description": "RFC 7638 thumbprint of the signing key."},
            "jwks_uri": _text(2048),
        }
    ),
    "ArbiterClosePayload": _object(
        {
            "reason": {"type": "string", "enum": [r.value for r in Reason]},
            "detail": _text(1000),
            "round": {"type": "integer", "minimum": 0, "maximum": MAX_ROUNDS_LIMIT},
        },
        description="The arbiter's session.close: the session ends without agreement.",
    ),
}
#: Which payload each type carries.
TYPE_PAYLOADS: dict[MessageType, str] = {
    MessageType.SESSION_OPEN: "OpenPayload",
    MessageType.SESSION_ACK: "AckPayload",
    MessageType.OFFER_PROPOSE: "OfferPayload",
    MessageType.OFFER_COUNTER: "OfferPayload",
    MessageType.OFFER_ACCEPT: "OfferPayload",
    MessageType.ROUND_VERDICT: "VerdictPayload",
    MessageType.SESSION_AGREE: "AgreePayload",
    MessageType.SETTLE_REVEAL: "SettleRevealPayload",
}


def _typed_envelope(kind: MessageType, roles: list[Role], payload: str) -> Schema:
    """The envelope of one type, sent by ``roles``, with its payload."""
    return _object(
        {
            "oanp_version": {"type": "string", "enum": [OANP_VERSION]},
            "message_id": ID,
            "session_id": ID,
            "timestamp": UTC_TIMESTAMP,
            "sender": _object(
                {"role": {"type": "string", "enum": [r.value for r in roles]}, "agent_id": ID}
            ),
            "type": {"type": "string", "enum": [kind.value]},
            "payload": _ref(payload),
        }
    )


def envelope_schema_name(kind: MessageType) -> str:
    """``session.open`` → ``SessionOpenEnvelope``."""
    return "".join(part.capitalize() for part in kind.value.split(".")) + "Envelope"


_CLOSE = MessageType.SESSION_CLOSE
#: One schema per type, with only the roles that may send it; a session.close is either a
#: party's withdraw or the arbiter's close, each with its own payload.
ENVELOPES: dict[str, Schema] = {
    **{
        envelope_schema_name(kind): _typed_envelope(
            kind, [r for r in Role if r in SENDERS[kind]], payload
        )
        for kind, payload in TYPE_PAYLOADS.items()
    },
    "WithdrawEnvelope": _typed_envelope(_CLOSE, [Role.BUYER, Role.MERCHANT], "WithdrawPayload"),
    "ArbiterCloseEnvelope": _typed_envelope(_CLOSE, [Role.ARBITER], "ArbiterClosePayload"),
    envelope_schema_name(_CLOSE): {
        "oneOf": [_ref("WithdrawEnvelope"), _ref("ArbiterCloseEnvelope")],
    },
}


def _discriminated(names: dict[MessageType, str], description: str) -> Schema:
    """One of the envelope schemas ``names`` gives for each type, picked by ``type``."""
    return {
        "oneOf": [_ref(name) for name in names.values()],
        "discriminator": {
            "propertyName": "type",
            "mapping": {kind.value: f"#/components/schemas/{n}" for kind, n in names.items()},
        },
        "description": description,
    }


ENVELOPE = _discriminated(
    {kind: envelope_schema_name(kind) for kind in MessageType},
    "Any entry's envelope, one schema per type (the discriminator is `type`), each with its "
    "payload and the roles that may send it. At most 64 KiB.",
)
PARTY_ENVELOPE = _discriminated(
    {
        **{
            kind: envelope_schema_name(kind)
            for kind in TYPE_PAYLOADS
            if Role.ARBITER not in SENDERS[kind]
        },
        _CLOSE: "WithdrawEnvelope",
    },
    "An envelope a buyer or a merchant submits: the types their roles may send, a withdraw "
    "for a close. At most 64 KiB.",
)
ENTRY = _object(
    {
        "seq": {"type": "integer", "minimum": 1},
        "received_at": TIMESTAMP,
        "envelope": _ref("Envelope"),
        "prev_hash": HASH,
        "entry_hash": HASH,
    }
)
PARTY = _object(
    {
        "agent_id": ID,
        "constraints_commit": {**COMMITMENT, "nullable": True},
        "weak_commitment": {"type": "boolean"},
        "revealed": {"type": "boolean"},
    }
)
STANDING_TERMS: Schema = {
    **_object(
        {
            "issues": ISSUES,
            "buyer": {**TERM_VALUES, "nullable": True},
            "merchant": {**TERM_VALUES, "nullable": True},
            "issues_open": {"type": "integer", "minimum": 0, "maximum": MAX_ISSUES},
        }
    ),
    "description": f"Only in a session of profile {TERMS.name}: the declared issues, each "
    "side's standing terms (null until it has offered), and how many issues those differ on "
    "(all of them until both sides have offered).",
}
SUMMARY = _object(
    {
        "session_id": ID,
        "state": {"type": "string", "enum": [phase.value for phase in Phase]},
        "round": {"type": "integer", "minimum": 0},
        # OpenAPI 3.0 judges enum before nullable: null must be among the values.
        "turn": {"type": "string", "enum": ["buyer", "merchant", None], "nullable": True},
        "final_answer": {
            "type": "boolean",
            "description": "the merchant countered in the last round: the buyer's accept of "
            "that counter is its only move left (docs/protocol.md §5, the final answer)",
        },
        "buyer": PARTY,
        "merchant": PARTY,
        "item": {"type": "object"},
        "currency": {"type": "string"},
        "max_rounds": {"type": "integer"},
        "profile": {"type": "string"},
        "opened_at": TIMESTAMP,
        "timers": _object(
            {
                "response_window_s": {"type": "integer"},
                "turn_deadline": {**TIMESTAMP, "nullable": True},
                "deadline": {**TIMESTAMP, "nullable": True},
            }
        ),
        "head": _object({"seq": {"type": "integer"}, "entry_hash": HASH}),
        "outcome": {
            **_object(
                {
                    "result": {"type": "string", "enum": ["agreed", "closed"]},
                    "final_price": {**PRICE, "nullable": True},
                    "close_reason": {"type": "string", "nullable": True},
                    "final_terms": {
                        **TERM_VALUES,
                        "nullable": True,
                        "description": f"Only in a session of profile {TERMS.name}: the "
                        "agreed terms, as the signed agreement's final_terms.",
                    },
                },
                optional=("final_terms",),
            ),
            "nullable": True,
        },
        "terms": STANDING_TERMS,
    },
    # Beyond PROTOCOL.md's members: only a session with issues has it.
    optional=("terms",),
)
SCHEMAS: dict[str, Schema] = {
    **PAYLOADS,
    **ENVELOPES,
    "Envelope": ENVELOPE,
    "PartyEnvelope": PARTY_ENVELOPE,
    "Entry": ENTRY,
    "SessionSummary": SUMMARY,
    "SubmitAnswer": _object(
        {
            "entry": _ref("Entry"),
            "arbiter": {"type": "array", "items": _ref("Entry")},
            "session": _ref("SessionSummary"),
        }
    ),
    "SessionLog": _object({"session_id": ID, "entries": {"type": "array", "items": _ref("Entry")}}),
    "Reveal": _object(
        {
            "constraints": {"type": "object"},
            "salt": {
                "type": "string",
                "nullable": True,
                "description": "base64url of 32 bytes; null for a 0x commitment",
            },
        }
    ),
    "RevealAnswer": _object(
        {
            "session_id": ID,
            "role": {"type": "string", "enum": ["buyer", "merchant"]},
            "opens": {"type": "boolean"},
            "weak_commitment": {"type": "boolean"},
            "breaches": {"type": "array", "items": {"type": "string"}},
        }
    ),
    "Jwks": _object({"keys": {"type": "array", "items": {"type": "object"}}}),
    "Readiness": _object(
        {
            "status": {
                "type": "string",
                "enum": ["ok", "degraded", "down"],
                "description": "ok: every check passed; down: the database failed, so nothing "
                "can be recorded; degraded: another check failed.",
            },
            "checks": _object(
                {
                    name: {"$ref": "#/components/schemas/Check"}
                    for name in ("database", "broker", "channel_layer", "worker", "beat")
                }
            ),
        }
    ),
    "Check": {
        "type": "object",
        "required": ["ok"],
        "properties": {
            "ok": {"type": "boolean"},
            "error": {"type": "string", "description": "Why the check failed."},
        },
        "additionalProperties": True,
        "description": "One dependency. database: vendor; broker: transport, queue_depth; "
        "channel_layer: backend; worker and beat: alive, last_seen, seconds_ago and processes "
        "(name, alive, last_seen, seconds_ago, last_answer, queue_wait_ms, stopped).",
    },
    "Liveness": _object({"status": {"type": "string", "enum": ["ok"]}}),
    "KeyHistory": _object(
        {
            "keys": {
                "type": "array",
                "items": {
                    "type": "object",
                    "description": "A public JWK plus state (active, retiring, retired), "
                    "activated_at, retiring_at and retired_at.",
                },
            }
        }
    ),
    "CallbackRequest": _object(
        {
            "url": {
                "type": "string",
                "format": "uri",
                "maxLength": 2000,
                "description": "http(s), on a public address.",
            }
        }
    ),
    "Callback": _object(
        {
            "url": {"type": "string", "format": "uri"},
            "secret": {
                "type": "string",
                "pattern": "^whsec_[A-Za-z0-9+/=]+$",
                "description": "Shown this once. Each POST carries Standard Webhooks headers "
                "`webhook-id`, `webhook-timestamp` and `webhook-signature: v1,<base64 "
                "HMAC-SHA256 of id.timestamp.body>` keyed with the base64 after `whsec_`.",
            },
        }
    ),
    "CallbackInfo": _object(
        {
            "url": {"type": "string", "format": "uri"},
            "disabled_at": {**TIMESTAMP, "nullable": True},
            "disabled_reason": {
                "type": "string",
                "nullable": True,
                "description": "Why deliveries stopped (410, or a day without success); "
                "registering again enables the callback.",
            },
        }
    ),
    "Discovery": _object(
        {
            "arbiter_id": {"type": "string"},
            "oanp_versions": {"type": "array", "items": {"type": "string", "enum": [OANP_VERSION]}},
            "profiles": {"type": "array", "items": {"type": "string", "enum": list(PROFILES)}},
            "settlement": {
                "type": "array",
                "items": {"type": "string", "enum": list(SETTLEMENTS)},
            },
            "endpoints": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Absolute URLs by name (envelopes, session, session_log, "
                "session_events, reveal, inbox, callback, merchants, keys, openapi, "
                "envelope_schema); those of one session are URI templates over {session_id}.",
            },
            "jwks_uri": {"type": "string", "format": "uri"},
            "limits": _object(
                {
                    "max_rounds": {"type": "integer"},
                    "response_window_s": {
                        "type": "array",
                        "items": {"type": "integer"},
                        "minItems": 2,
                        "maxItems": 2,
                        "description": "The least and the most seconds a window may be.",
                    },
                    "deadline_max_s": {"type": "integer"},
                    "max_envelope_bytes": {"type": "integer"},
                    "max_issues": {"type": "integer"},
                }
            ),
        },
        description="Who the arbiter is and what it accepts, read before opening a session.",
    ),
    "MerchantListing": _object(
        {
            "agent_id": ID,
            "merchant": {"type": "string", "description": "The merchant's display name."},
            "description": _text(MAX_DESCRIPTION_CHARS),
            "currencies": {"type": "array", "items": CURRENCY},
            "profiles": {"type": "array", "items": {"type": "string", "enum": list(PROFILES)}},
            "settlement": {
                "type": "array",
                "items": {"type": "string", "enum": list(SETTLEMENTS)},
            },
            "catalog": {
                "type": "array",
                "maxItems": MAX_CATALOG_ITEMS,
                "items": {
                    "type": "object",
                    "description": "An item, as a session.open names one; at most 4 KiB.",
                },
            },
        },
        description="A merchant agent its owner listed; never its limits, strategy or keys.",
    ),
    "Problem": _object(
        {
            "type": {"type": "string", "format": "uri"},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "code": {"type": "string", "description": "Stable; clients branch on it."},
            "detail": {"type": "string"},
            "instance": {"type": "string"},
            "errors": {
                "type": "array",
                "items": _object({"field": {"type": "string"}, "message": {"type": "string"}}),
            },
        },
        required=["type", "title", "status", "code", "detail"],
    ),
}

#: What every endpoint refuses before it reads anything (:mod:`oanp_site.guards`).
INVALID_CHARACTERS = (
    "A control character or a lone surrogate in the path, a control character other than tab "
    "in a header, NUL in the query string or a cookie (`invalid_characters`)."
)
#: Why each status happens, with the codes it carries (docs/protocol.md §14).
PROBLEMS: dict[int, str] = {
    400: "Malformed or schema-invalid (`malformed_json`, `schema_invalid`, `bad_cursor`); "
    "`errors` names each bad field. " + INVALID_CHARACTERS,
    401: "No or bad API key (`unauthorized`).",
    403: "The key's agent is not the sender (`sender_mismatch`) or not a party (`not_a_party`).",
    404: "Unknown session, or one the caller is not a party to (`unknown_session`).",
    409: "Out of turn, terminal session, reused session_id or message_id, timer expired "
    "(`out_of_turn`, `session_terminal`, `session_exists`, `message_id_reused`, "
    "`timer_expired`, `reveal_too_early`, `already_revealed`, `nothing_committed`).",
    413: "Larger than 64 KiB (`envelope_too_large`).",
    422: "Wrong round, price precision, accept of a price that is not standing, a type the "
    "role may not send, unknown merchant, deadline out of range, reveal mismatch "
    "(`wrong_round`, `price_precision`, `price_not_standing`, `role_may_not_send`, "
    "`unknown_merchant`, `deadline_out_of_range`, `reveal_mismatch`); an open whose buyer "
    "and merchant are one agent or one owner's, or in a currency the merchant agent's "
    "listing does not offer (`self_dealing`, `currency_not_offered`); terms outside the "
    "declared issues or in a session that declares none, an accept of terms that are not "
    "standing (`bad_terms`, `terms_not_standing`; `errors` names every bad term); settlement "
    "by reveal the session was not opened for, an unsalted commitment where it needs a "
    "salted one, a reveal naming no positive limit or made while issues are still open "
    "(`settlement_not_enabled`, `weak_commitment`, `not_settleable`); a callback URL the "
    "arbiter will not send to: not http(s), or not a public address (`target_not_allowed`).",
    429: "Rate limited (`rate_limited`), by key or, for failed authentications, by client "
    "address; see `Retry-After`. On the event streams also too many streams open with the "
    "key (`too_many_streams`).",
    503: "The arbiter's database is unavailable (`unavailable`); nothing was changed; retry "
    "after `Retry-After` seconds.",
}
#: The headers a refusal carries, by status.
RETRY_AFTER: Schema = {
    "description": "Seconds to wait before retrying.",
    "schema": {"type": "integer", "minimum": 1},
}
PROBLEM_HEADERS: dict[int, Schema] = {
    429: {"Retry-After": RETRY_AFTER},
    503: {"Retry-After": {**RETRY_AFTER, "required": True}},
}


def _json(name: str, description: str) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": _ref(name)}}}


def _problem(status: int, description: str) -> Schema:
    headers = PROBLEM_HEADERS.get(status)
    return {
        "description": description,
        "content": {"application/problem+json": {"schema": _ref("Problem")}},
        **({"headers": headers} if headers else {}),
    }


def _problems(*statuses: int, **why: str) -> Schema:
    """The refusals of ``statuses``, each described as :data:`PROBLEMS` says unless ``why``
    names it (``_404="..."``) for an endpoint whose reason differs."""
    return {
        str(status): _problem(status, why.get(f"_{status}", PROBLEMS[status]))
        for status in statuses
    }


#: The one refusal of the endpoints that read no key and no body.
GUARDED = {"400": _problem(400, INVALID_CHARACTERS)}


SESSION_ID = {"name": "session_id", "in": "path", "required": True, "schema": ID}


MERCHANT_SEARCH = [
    {
        "name": "q",
        "in": "query",
        "required": False,
        "schema": {
            "type": "string",
            "maxLength": MAX_QUERY_CHARS,
            "pattern": "^[^\\u0000-\\u001f\\u007f]*$",
        },
        "description": "Only the merchant agents whose id, merchant name, description or "
        "catalog holds this text, case-insensitively; blanks around it are ignored.",
    },
    {
        "name": "after",
        "in": "query",
        "required": False,
        "schema": ID,
        "description": "The page after this agent id: follow the Link header, not build it.",
    },
]


def _last_event_id(pattern: str) -> Schema:
    return {
        "name": "Last-Event-ID",
        "in": "header",
        "required": False,
        "schema": {"type": "string", "pattern": pattern},
        "description": "Resume after this event id (also accepted as ?last_event_id=).",
    }


def _event_stream(event_id: str) -> Schema:
    # Before OpenAPI 3.2's itemSchema, the schema of text/event-stream describes one event.
    event = _object(
        {
            "id": {"type": "string", "description": event_id},
            "event": {
                "type": "string",
                "enum": [t.value for t in MessageType],
                "description": "The entry's envelope type.",
            },
            "data": {"type": "string", "description": "The Entry JSON, on one line."},
        },
        description="One event per entry; comment lines (`: …`) open the stream, keep it "
        "alive and say why it ended (a revoked key, the database away).",
    )
    return {"text/event-stream": {"schema": event}}


AUTHENTICATED = [{"apiKey": []}]


def _operation(operation_id: str, summary: str, responses: Schema, **extra: Any) -> Schema:
    return {
        "operationId": operation_id,
        "summary": summary,
        "tags": ["oanp"],
        "security": AUTHENTICATED,
        "responses": responses,
        **extra,
    }


PATHS: dict[str, Schema] = {
    "/oanp/v0.1/envelopes": {
        "post": _operation(
            "submitEnvelope",
            "Submit one envelope",
            {
                "201": _json("SubmitAnswer", "Applied: its entry, the arbiter's, the session."),
                "200": _json("SubmitAnswer", "A replay of the same message_id and body."),
                **_problems(400, 401, 403, 404, 409, 413, 422, 429, 503),
            },
            requestBody={
                "required": True,
                "content": {"application/json": {"schema": _ref("PartyEnvelope")}},
            },
        )
    },
    "/oanp/v0.1/sessions/{session_id}": {
        "get": _operation(
            "getSession",
            "Session summary",
            {
                "200": _json("SessionSummary", "The session."),
                **_problems(400, 401, 404, 429, 503),
            },
            parameters=[SESSION_ID],
        )
    },
    "/oanp/v0.1/sessions/{session_id}/log": {
        "get": _operation(
            "getSessionLog",
            "Every entry, in order",
            {
                "200": _json("SessionLog", "The hash-chained log."),
                **_problems(400, 401, 404, 429, 503),
            },
            parameters=[SESSION_ID],
        )
    },
    "/oanp/v0.1/sessions/{session_id}/events": {
        "get": _operation(
            "streamSessionEvents",
            "Server-Sent Events of one session; `id` is the entry seq",
            {
                "200": {
                    "description": "The stream; ends after the last entry of a session that "
                    "is over.",
                    "content": _event_stream("The entry's seq."),
                },
                **_problems(400, 401, 404, 429, 503),
            },
            parameters=[SESSION_ID, _last_event_id("^[0-9]{1,9}$")],
        )
    },
    "/oanp/v0.1/inbox": {
        "get": _operation(
            "streamInbox",
            "Server-Sent Events of every session the caller is a party to",
            {
                "200": {
                    "description": "The stream; it does not end.",
                    "content": _event_stream("An opaque cursor."),
                },
                **_problems(400, 401, 429, 503),
            },
            parameters=[_last_event_id("^c[0-9]{1,18}$")],
        )
    },
    "/oanp/v0.1/sessions/{session_id}/reveal": {
        "post": _operation(
            "revealConstraints",
            "Reveal constraints and salt after the session ended",
            {
                "200": _json("RevealAnswer", "The reveal opens the commitment."),
                **_problems(400, 401, 404, 409, 413, 422, 429, 503),
            },
            parameters=[SESSION_ID],
            requestBody={
                "required": True,
                "content": {"application/json": {"schema": _ref("Reveal")}},
            },
        )
    },
    "/oanp/v0.1/callback": {
        "put": _operation(
            "putCallback",
            "Register the URL every new entry of the caller's sessions is POSTed to",
            {
                "200": _json("Callback", "Registered, under a fresh signing secret."),
                **_problems(400, 401, 413, 422, 429, 503),
            },
            description="Each entry is POSTed once, in seq order per session, its body the "
            "Entry JSON (as in the event streams). 408, 409, 429, 5xx and network errors are "
            "retried with exponential backoff for about a day; another 4xx skips the entry; "
            "410 disables the callback.",
            requestBody={
                "required": True,
                "content": {"application/json": {"schema": _ref("CallbackRequest")}},
            },
        ),
        "get": _operation(
            "getCallback",
            "The caller's callback (without its secret)",
            {
                "200": _json("CallbackInfo", "The callback."),
                **_problems(
                    400, 401, 404, 429, 503, _404="The caller has no callback (`no_callback`)."
                ),
            },
        ),
        "delete": _operation(
            "deleteCallback",
            "Stop the caller's callback",
            {
                "204": {"description": "Removed, or there was none."},
                **_problems(400, 401, 429, 503),
            },
        ),
    },
    "/oanp/v0.1/merchants": {
        "get": _operation(
            "listMerchants",
            "The merchant agents their owners listed, in agent id order, a page at a time",
            {
                "200": {
                    "description": "One page of listings (empty when none matches).",
                    "headers": {
                        "Link": {
                            "description": 'The next page, as `<URL>; rel="next"`; absent '
                            "on the last page.",
                            "schema": {"type": "string"},
                        }
                    },
                    "content": {
                        "application/json": {
                            "schema": {"type": "array", "items": _ref("MerchantListing")}
                        }
                    },
                },
                **_problems(
                    400,
                    401,
                    429,
                    503,
                    _400="A bad parameter: `q` too long or holding a control character, an "
                    "unknown or repeated parameter (`schema_invalid`, naming it), an `after` "
                    "that is not an agent id (`bad_cursor`). " + INVALID_CHARACTERS,
                ),
            },
            parameters=MERCHANT_SEARCH,
        )
    },
    "/.well-known/oanp.json": {
        "get": {
            **_operation(
                "getDiscovery",
                "The arbiter's discovery document: versions, profiles, settlement rules, "
                "endpoints and limits",
                {"200": _json("Discovery", "The document."), **GUARDED},
            ),
            "security": [],
        }
    },
    ENVELOPE_SCHEMA_PATH: {
        "get": {
            **_operation(
                "getEnvelopeSchema",
                "The envelope's JSON Schema (draft 2020-12) on its own: components.schemas."
                "Envelope for validators that do not read OpenAPI",
                {
                    "200": {
                        "description": "The schema, its $defs included.",
                        "content": {"application/schema+json": {"schema": {"type": "object"}}},
                    },
                    **GUARDED,
                },
            ),
            "security": [],
        }
    },
    "/oanp/v0.1/keys": {
        "get": {
            **_operation(
                "getKeyHistory",
                "Every signing key ever used, with its state and validity window",
                {
                    "200": _json("KeyHistory", "Active, retiring and retired public keys."),
                    **GUARDED,
                    **_problems(503),
                },
            ),
            "security": [],
        }
    },
    "/healthz": {
        "get": {
            **_operation(
                "getHealth",
                "Liveness: the process answers (touches no dependency)",
                {"200": _json("Liveness", "The process is up."), **GUARDED},
            ),
            "tags": ["operations"],
            "security": [],
        }
    },
    "/readyz": {
        "get": {
            **_operation(
                "getReadiness",
                "Readiness: database, broker, channel layer, worker and beat, each checked "
                "under a 2 s deadline",
                {
                    "200": _json("Readiness", "Every check passed."),
                    "503": _json("Readiness", "At least one check failed; see checks."),
                    **GUARDED,
                },
            ),
            "tags": ["operations"],
            "security": [],
        }
    },
    "/metrics": {
        "get": {
            **_operation(
                "getMetrics",
                "Prometheus metrics of every server, worker and beat process",
                {
                    "200": {
                        "description": "The Prometheus text format.",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    },
                    "403": {
                        "description": "Not from an allowed network, or without the metrics "
                        "token (`metrics_forbidden`).",
                        "content": {"application/problem+json": {"schema": _ref("Problem")}},
                    },
                    **GUARDED,
                },
            ),
            "tags": ["operations"],
            "security": [{"metricsToken": []}, {}],
        }
    },
    "/.well-known/jwks.json": {
        "get": {
            **_operation(
                "getJwks",
                "Public signing keys",
                {"200": _json("Jwks", "JWKS."), **GUARDED, **_problems(503)},
            ),
            "security": [],
        }
    },
}


_COMPONENT = "#/components/schemas/"


def json_schema(name: str, schema_id: str) -> Schema:
    """Component ``name`` as a JSON Schema (draft 2020-12) document of its own, for validators
    that do not read OpenAPI: ``nullable`` and 3.0's boolean exclusive bounds become the
    standard keywords, the OpenAPI-only ``discriminator`` goes, and every schema it refers to
    comes along under ``$defs``."""
    needed: dict[str, Schema] = {}
    pending = [name]
    while pending:
        current = pending.pop()
        if current not in needed:
            needed[current] = _standard(SCHEMAS[current], pending)
    root = needed.pop(name)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id,
        **root,
        "$defs": dict(sorted(needed.items())),
    }


def _standard(node: Any, refs: list[str]) -> Any:
    """One OpenAPI 3.0 schema node in JSON Schema's own keywords; names it refers to are
    added to ``refs``."""
    if isinstance(node, list):
        return [_standard(item, refs) for item in node]
    if not isinstance(node, dict):
        return node
    out: Schema = {}
    for key, value in node.items():
        if key == "properties":  # names of fields, not keywords
            out[key] = {field: _standard(schema, refs) for field, schema in value.items()}
        elif key != "discriminator":
            out[key] = _standard(value, refs)
    if "$ref" in out:
        target = out["$ref"].removeprefix(_COMPONENT)
        refs.append(target)
        out["$ref"] = f"#/$defs/{target}"
    if out.pop("nullable", False):
        out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    for bound, exclusive in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if out.get(exclusive) is True:
            out[exclusive] = out.pop(bound)
    return out


def add_streams(result: Schema, generator: Any, request: Any, public: bool) -> Schema:
    """Spectacular post-processing hook: the protocol's paths, schemas and security."""
    result["paths"] = {**result.get("paths", {}), **PATHS}
    components = result.setdefault("components", {})
    components.setdefault("schemas", {}).update(SCHEMAS)
    components.setdefault("securitySchemes", {})["apiKey"] = {
        "type": "http",
        "scheme": "bearer",
        "description": "An agent's API key: `oanp_<prefix>_<secret>`.",
    }
    components["securitySchemes"]["metricsToken"] = {
        "type": "http",
        "scheme": "bearer",
        "description": "OANP_METRICS_TOKEN, when set; otherwise /metrics answers only the "
        "networks in OANP_METRICS_ALLOW (loopback by default).",
    }
    return result
