"""The server's own schemas for the OpenAPI document (:mod:`arbiter_app.api.openapi` puts them
in): its probes, key history, party keys and callbacks. The protocol's are
:mod:`oanp.wire.schema`'s.
"""

from __future__ import annotations

from oanp.wire.schema import SCHEMAS as PROTOCOL_SCHEMAS
from oanp.wire.schema.parts import TIMESTAMP, Schema, object_schema

SCHEMAS: dict[str, Schema] = {
    **PROTOCOL_SCHEMAS,
    "Jwks": object_schema({"keys": {"type": "array", "items": {"type": "object"}}}),
    "Readiness": object_schema(
        {
            "status": {
                "type": "string",
                "enum": ["ok", "degraded", "down"],
                "description": "ok: every check passed; down: the database failed, so nothing "
                "can be recorded; degraded: another check failed.",
            },
            "checks": object_schema(
                {
                    name: {"$ref": "#/components/schemas/Check"}
                    for name in (
                        "database",
                        "broker",
                        "channel_layer",
                        "worker",
                        "beat",
                        "connections",
                        "processes",
                        "log",
                    )
                }
            ),
            "warnings": {
                "type": "array",
                "items": {"type": "string"},
                "description": "What the checks found that needs an operator but leaves the "
                "status as it is, each prefixed by its check's name.",
            },
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
        "description": "One dependency. database: vendor; broker: transport (the URL's scheme), "
        "queue_depth (every queue's waiting tasks) and queues (each one's); "
        "channel_layer: backend; worker and beat: alive, last_seen, seconds_ago and processes "
        "(name, alive, last_seen, seconds_ago, last_answer, queue_wait_ms, stopped), and for "
        "worker queues_unserved, the queues no worker took beat's heartbeat from lately; "
        "processes, which never fails the status: supervised, and under make serve's "
        "supervisor its supervisor_pid and processes (pid, restarts, last_exit, last_exit_at) "
        "with a note naming those restarted; "
        "connections, which never fails the status: the deployment's budget (connections, "
        "web_processes, web_pool, task_connections, most), the server's max_connections and "
        "reserved slots, a warning when most exceeds what the server allows, or skipped.",
    },
    "Liveness": object_schema({"status": {"type": "string", "enum": ["ok"]}}),
    "KeyHistory": object_schema(
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
    "CallbackRequest": object_schema(
        {
            "url": {
                "type": "string",
                "format": "uri",
                "maxLength": 2000,
                "description": "http(s), on a public address.",
            }
        }
    ),
    "Callback": object_schema(
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
    "PublicKey": {
        "type": "object",
        "description": "One public JWK: OKP Ed25519 (kty, crv, x) or EC P-256 (kty, crv, x, y). "
        "kid, alg and use may be given and must then be the key's (kid: its RFC 7638 "
        "thumbprint); a private member (d, p, q, ...) is refused with private_key_sent.",
        "required": ["kty", "crv", "x"],
        "properties": {
            name: {"type": "string"} for name in ("kty", "crv", "x", "y", "kid", "alg", "use")
        },
    },
    "KeyRegistered": object_schema({"kid": {"type": "string"}, "registered_at": TIMESTAMP}),
    "PartyKey": {
        "type": "object",
        "description": "A registered public JWK (kty, crv, x, y for EC, kid, alg, use), "
        "with when it was registered and retired (null while in force).",
        "required": ["kty", "crv", "x", "kid", "alg", "use", "registered_at", "retired_at"],
        "properties": {
            **{name: {"type": "string"} for name in ("kty", "crv", "x", "y", "kid", "alg")},
            "use": {"type": "string", "enum": ["sig"]},
            "registered_at": TIMESTAMP,
            "retired_at": {**TIMESTAMP, "nullable": True},
        },
        "additionalProperties": False,
    },
    "EntryProof": object_schema(
        {
            "index": {"type": "integer", "minimum": 0},
            "checkpoint": {"type": "string", "description": "The served checkpoint's note."},
            "inclusion": {"type": "array", "items": {"type": "string", "format": "byte"}},
        }
    ),
    "PartyKeys": object_schema(
        {"keys": {"type": "array", "items": {"$ref": "#/components/schemas/PartyKey"}}}
    ),
    "CallbackInfo": object_schema(
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
}
