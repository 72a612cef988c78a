"""The protocol's schemas by name: envelopes and payloads, entries, summaries and agreements,
the answers of the HTTP transport and its problems, each bound taken from the protocol's own
constants, so that a schema and the parser cannot disagree. Written in OpenAPI 3.0's dialect,
which an OpenAPI document takes as they are; :func:`oanp.wire.schema.dialect.json_schema` gives any
of them as a JSON Schema document of its own.
"""

from __future__ import annotations

from oanp.wire.discovery import MAX_CATALOG_ITEMS, MAX_DESCRIPTION_CHARS
from oanp.wire.envelope import (
    MAX_SIGNATURE_CHARS,
    OANP_VERSION,
    SENDERS,
    SETTLEMENTS,
    MessageType,
    Role,
)
from oanp.wire.profiles import PROFILES, TERMS
from oanp.wire.schema.parts import (
    COMMITMENT,
    CURRENCY,
    HASH,
    ID,
    ISSUES,
    PAYLOADS,
    PRICE,
    TERM_VALUES,
    TIMESTAMP,
    UTC_TIMESTAMP,
    Schema,
    object_schema,
    ref,
    text_schema,
)
from oanp.wire.state import Phase
from oanp.wire.terms import (
    MAX_ISSUES,
)

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
    """The envelope of one type, sent by ``roles``, with its payload; a party's may carry its
    signature (§12)."""
    signature: Schema = (
        {"signature": text_schema(MAX_SIGNATURE_CHARS)} if Role.ARBITER not in roles else {}
    )
    return object_schema(
        {
            "oanp_version": {"type": "string", "enum": [OANP_VERSION]},
            "message_id": ID,
            "session_id": ID,
            "timestamp": UTC_TIMESTAMP,
            "sender": object_schema(
                {"role": {"type": "string", "enum": [r.value for r in roles]}, "agent_id": ID}
            ),
            "type": {"type": "string", "enum": [kind.value]},
            "payload": ref(payload),
            **signature,
        },
        optional=("signature",),
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
        "oneOf": [ref("WithdrawEnvelope"), ref("ArbiterCloseEnvelope")],
    },
}


def _discriminated(names: dict[MessageType, str], description: str) -> Schema:
    """One of the envelope schemas ``names`` gives for each type, picked by ``type``."""
    return {
        "oneOf": [ref(name) for name in names.values()],
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
ENTRY = object_schema(
    {
        "seq": {"type": "integer", "minimum": 1},
        "received_at": TIMESTAMP,
        "envelope": ref("Envelope"),
        "prev_hash": HASH,
        "entry_hash": HASH,
    }
)
PARTY = object_schema(
    {
        "agent_id": ID,
        "constraints_commit": {**COMMITMENT, "nullable": True},
        "weak_commitment": {"type": "boolean"},
        "revealed": {"type": "boolean"},
    }
)
STANDING_TERMS: Schema = {
    **object_schema(
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
SUMMARY = object_schema(
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
        "timers": object_schema(
            {
                "response_window_s": {"type": "integer"},
                "turn_deadline": {**TIMESTAMP, "nullable": True},
                "deadline": {**TIMESTAMP, "nullable": True},
            }
        ),
        "head": object_schema({"seq": {"type": "integer"}, "entry_hash": HASH}),
        "outcome": {
            **object_schema(
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
#: Every schema of the protocol, by the name others refer to it by (``#/components/schemas/``).
SCHEMAS: dict[str, Schema] = {
    **PAYLOADS,
    **ENVELOPES,
    "Envelope": ENVELOPE,
    "PartyEnvelope": PARTY_ENVELOPE,
    "Entry": ENTRY,
    "SessionSummary": SUMMARY,
    "SubmitAnswer": object_schema(
        {
            "entry": ref("Entry"),
            "arbiter": {"type": "array", "items": ref("Entry")},
            "session": ref("SessionSummary"),
        }
    ),
    "SessionLog": object_schema(
        {"session_id": ID, "entries": {"type": "array", "items": ref("Entry")}}
    ),
    "Reveal": object_schema(
        {
            "constraints": {"type": "object"},
            "salt": {
                "type": "string",
                "nullable": True,
                "description": "base64url of 32 bytes; null for a 0x commitment",
            },
        }
    ),
    "RevealAnswer": object_schema(
        {
            "session_id": ID,
            "role": {"type": "string", "enum": ["buyer", "merchant"]},
            "opens": {"type": "boolean"},
            "weak_commitment": {"type": "boolean"},
            "breaches": {"type": "array", "items": {"type": "string"}},
        }
    ),
    "Discovery": object_schema(
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
                "envelope_schema, summary_schema); those of one session are URI templates over "
                "{session_id}.",
            },
            "jwks_uri": {"type": "string", "format": "uri"},
            "limits": object_schema(
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
            "log": object_schema(
                {
                    "origin": {"type": "string"},
                    "url": {"type": "string", "format": "uri"},
                    "verifier_key": {
                        "type": "string",
                        "description": "The C2SP verifier key its checkpoints are signed with: "
                        "<name>+<hex key ID>+<base64(0x01 || Ed25519 public key)>.",
                    },
                },
                description="The transparency log (docs/protocol.md §18).",
            ),
        },
        optional=("log",),
        description="Who the arbiter is and what it accepts, read before opening a session.",
    ),
    "MerchantListing": object_schema(
        {
            "agent_id": ID,
            "merchant": {"type": "string", "description": "The merchant's display name."},
            "description": text_schema(MAX_DESCRIPTION_CHARS),
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
    "Problem": object_schema(
        {
            "type": {"type": "string", "format": "uri"},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "code": {"type": "string", "description": "Stable; clients branch on it."},
            "detail": {"type": "string"},
            "instance": {"type": "string"},
            "errors": {
                "type": "array",
                "items": object_schema(
                    {"field": {"type": "string"}, "message": {"type": "string"}}
                ),
            },
        },
        required=["type", "title", "status", "code", "detail"],
    ),
}
