"""The building blocks of the protocol's schemas (:mod:`oanp.wire.schema.components`): identifiers,
timestamps, prices, commitments, issues and terms, and each message type's payload, every bound
and pattern taken from the parser's own constants.
"""

from __future__ import annotations

from typing import Any

from oanp.wire.commitments import SALTED_PATTERN, WEAK_PATTERN
from oanp.wire.envelope import (
    DEFAULT_MAX_ROUNDS,
    DEFAULT_PROFILE,
    DEFAULT_RESPONSE_WINDOW_S,
    ID_PATTERN,
    INVARIANTS,
    MAX_ROUNDS_LIMIT,
    OANP_VERSION,
    PARTY_CLOSE_REASON,
    RESPONSE_WINDOW_RANGE,
    SETTLEMENTS,
)
from oanp.wire.money import MINOR_UNITS, PRICE_CEILING
from oanp.wire.profiles import PROFILES, TERMS, Reason, VerdictStatus
from oanp.wire.settlement import SETTLEMENT_RULE
from oanp.wire.terms import (
    ISSUE_NAME_PATTERN,
    MAX_DECIMALS,
    MAX_ISSUES,
    MAX_OPTION_CHARS,
    MAX_OPTIONS,
)

Schema = dict[str, Any]

ID: Schema = {"type": "string", "pattern": f"^{ID_PATTERN}$"}
TIMESTAMP: Schema = {"type": "string", "format": "date-time"}
#: What an envelope's timestamp may be (oanp.wire.envelope.parse_timestamp): UTC, Z or +00:00.
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
    "pattern": f"^({SALTED_PATTERN.pattern}|{WEAK_PATTERN.pattern})$",
    "description": "Salted commitment, or the weak reference-compatible 0x form.",
}
HASH: Schema = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
# The parser's limits, so that the document and the parser cannot disagree.
ROUND: Schema = {"type": "integer", "minimum": 1, "maximum": MAX_ROUNDS_LIMIT}
CURRENCY: Schema = {"type": "string", "enum": sorted(MINOR_UNITS), "description": "ISO 4217."}
#: An amount the arbiter computed (a verdict's prices and spread): absent where a side has
#: no price in the round, and a spread may be negative.
AMOUNT: Schema = {"type": "number", "nullable": True}


def text_schema(limit: int) -> Schema:
    return {"type": "string", "maxLength": limit}


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def object_schema(
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
#: A number issue's bound: within the price's magnitude (oanp.wire.terms reads it so).
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
        object_schema(
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
        object_schema(
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
OFFER = object_schema(
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
AGREEMENT = object_schema(
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
            **object_schema(
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
    "OpenPayload": object_schema(
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
    "AckPayload": object_schema({"constraints_commit": COMMITMENT}),
    "OfferPayload": OFFER,
    "SettleRevealPayload": object_schema(
        {
            "round": ROUND,
            "constraints": {
                "type": "object",
                "description": "The sender's committed constraints, with its limit: the "
                "buyer's true_ceiling, the merchant's floor_price. At most 4 KiB.",
            },
            "salt": {**text_schema(128), "description": "The commitment's salt, base64url."},
            "constraints_commit": COMMITMENT,
        },
        description="A party opens its own commitment to settle at once.",
    ),
    "WithdrawPayload": object_schema(
        {
            "reason": {"type": "string", "enum": [PARTY_CLOSE_REASON]},
            "constraints_commit": COMMITMENT,
        },
        description="A party's session.close: it withdraws.",
    ),
    "VerdictPayload": object_schema(
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
    "AgreePayload": object_schema(
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
                **text_schema(4096),
                "description": "Compact JWS with a detached payload (header..signature) over "
                "the RFC 8785 bytes of agreement.",
            },
            "signature_alg": {**text_schema(32), "enum": ["Ed25519", "ES256"]},
            "kid": {**text_schema(128), "description": "RFC 7638 thumbprint of the signing key."},
            "jwks_uri": text_schema(2048),
        }
    ),
    "ArbiterClosePayload": object_schema(
        {
            "reason": {"type": "string", "enum": [r.value for r in Reason]},
            "detail": text_schema(1000),
            "round": {"type": "integer", "minimum": 0, "maximum": MAX_ROUNDS_LIMIT},
        },
        description="The arbiter's session.close: the session ends without agreement.",
    ),
}
#: Which payload each type carries.
