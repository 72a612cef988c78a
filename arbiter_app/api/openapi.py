"""The OpenAPI 3 document of docs/protocol.md §14, served by drf-spectacular.

The endpoints read raw envelopes with the protocol's own strict parser rather than DRF
serializers, so the paths and their refusals are written here, from docs/protocol.md, the
schemas taken from :mod:`oanp.wire.schema` and :mod:`arbiter_app.api.schemas`; :func:`add_streams`
(a spectacular post-processing hook) puts them into the generated document.
"""

from __future__ import annotations

from typing import Any

from arbiter_app.api.schemas import SCHEMAS
from arbiter_app.refusals import REFUSALS as SERVER_REFUSALS
from arbiter_app.refusals import WWW_AUTHENTICATE
from oanp.wire.discovery import MAX_QUERY_CHARS
from oanp.wire.envelope import (
    MessageType,
)
from oanp.wire.errors import REFUSALS as PROTOCOL_REFUSALS
from oanp.wire.errors import Refusal
from oanp.wire.schema.parts import ID, Schema, object_schema, ref

#: Every refusal an endpoint can answer, by code: the protocol's and the server's catalogues.
REFUSALS: dict[str, Refusal] = {r.code: r for r in (*PROTOCOL_REFUSALS, *SERVER_REFUSALS)}
#: The headers a refusal carries, by status.
RETRY_AFTER: Schema = {
    "description": "Seconds to wait before retrying.",
    "schema": {"type": "integer", "minimum": 1},
}
PROBLEM_HEADERS: dict[int, Schema] = {
    401: {
        "WWW-Authenticate": {
            "description": "The challenge: " + WWW_AUTHENTICATE,
            "schema": {"type": "string"},
        }
    },
    429: {"Retry-After": RETRY_AFTER},
    503: {"Retry-After": {**RETRY_AFTER, "required": True}},
}

#: What every request may meet before its endpoint reads it, and the database being away.
GUARDED = ("invalid_characters", "unavailable")
#: What every request with an API key may meet besides.
KEYED = (*GUARDED, "unauthorized", "rate_limited")


def _json(name: str, description: str) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": ref(name)}}}


def _problems(*codes: str) -> Schema:
    """The responses refusing with ``codes``, by status, each described from the catalogue."""
    by_status: dict[int, list[Refusal]] = {}
    for code in codes:
        refusal = REFUSALS[code]
        by_status.setdefault(refusal.status, []).append(refusal)
    responses: Schema = {}
    for status, refusals in sorted(by_status.items()):
        headers = PROBLEM_HEADERS.get(status)
        responses[str(status)] = {
            "description": "; ".join(f"`{r.code}`: {r.meaning}" for r in refusals) + ".",
            "content": {"application/problem+json": {"schema": ref("Problem")}},
            **({"headers": headers} if headers else {}),
        }
    return responses


#: The refusals of the envelopes endpoint besides the keyed ones: every code of the protocol a
#: move can meet, and the server's checks of an open.
ENVELOPE_REFUSALS = (
    *KEYED,
    "malformed_json",
    "schema_invalid",
    "envelope_too_large",
    "sender_mismatch",
    "bad_signature",
    "signature_required",
    "not_a_party",
    "unknown_session",
    "session_exists",
    "message_id_reused",
    "session_terminal",
    "timer_expired",
    "out_of_turn",
    "role_may_not_send",
    "deadline_out_of_range",
    "unknown_merchant",
    "self_dealing",
    "currency_not_offered",
    "merchant_paused",
    "merchant_archived",
    "wrong_round",
    "price_precision",
    "price_not_standing",
    "bad_terms",
    "terms_not_standing",
    "settlement_not_enabled",
    "weak_commitment",
    "not_settleable",
)
REVEAL_REFUSALS = (
    *KEYED,
    "unknown_session",
    "envelope_too_large",
    "malformed_json",
    "schema_invalid",
    "reveal_too_early",
    "nothing_committed",
    "already_revealed",
    "reveal_mismatch",
)
STREAM_REFUSALS = (*KEYED, "bad_cursor", "too_many_streams", "streams_full")


#: The protocol's JSON Schemas published on their own, by component name; each path is also
#: the ``$id`` its document carries.
SCHEMA_DOCUMENTS = {
    "Envelope": "/oanp/v0.1/envelope.schema.json",
    "SessionSummary": "/oanp/v0.1/summary.schema.json",
}

SESSION_ID = {"name": "session_id", "in": "path", "required": True, "schema": ID}
KID: Schema = {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}


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


def _last_event_id(pattern: str, description: str) -> Schema:
    return {
        "name": "Last-Event-ID",
        "in": "header",
        "required": False,
        "schema": {"type": "string", "pattern": pattern},
        "description": description,
    }


SESSION_RESUME = (
    "Resume after this event id (also accepted as ?last_event_id=); without it the stream "
    "starts at entry 1."
)
INBOX_RESUME = (
    "Resume after this event id (also accepted as ?last_event_id=). Without it the inbox "
    "starts at the live head; `c0` reads the agent's whole history first, in bounded pages."
)


def _event_stream(event_id: str) -> Schema:
    # Before OpenAPI 3.2's itemSchema, the schema of text/event-stream describes one event.
    event = object_schema(
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
                **_problems(*ENVELOPE_REFUSALS),
            },
            requestBody={
                "required": True,
                "content": {"application/json": {"schema": ref("PartyEnvelope")}},
            },
        )
    },
    "/oanp/v0.1/sessions/{session_id}": {
        "get": _operation(
            "getSession",
            "Session summary",
            {
                "200": _json("SessionSummary", "The session."),
                **_problems(*KEYED, "unknown_session"),
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
                **_problems(*KEYED, "unknown_session"),
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
                **_problems(*STREAM_REFUSALS, "unknown_session"),
            },
            parameters=[SESSION_ID, _last_event_id("^[0-9]{1,9}$", SESSION_RESUME)],
        )
    },
    "/oanp/v0.1/inbox": {
        "get": _operation(
            "streamInbox",
            "Server-Sent Events of every session the caller is a party to",
            {
                "200": {
                    "description": "The stream; it does not end. Without Last-Event-ID it "
                    "starts at the live head: only entries committed after it opened.",
                    "content": _event_stream("An opaque cursor."),
                },
                **_problems(*STREAM_REFUSALS),
            },
            parameters=[_last_event_id("^c[0-9]{1,18}$", INBOX_RESUME)],
        )
    },
    "/oanp/v0.1/sessions/{session_id}/reveal": {
        "post": _operation(
            "revealConstraints",
            "Reveal constraints and salt after the session ended",
            {
                "200": _json("RevealAnswer", "The reveal opens the commitment."),
                **_problems(*REVEAL_REFUSALS),
            },
            parameters=[SESSION_ID],
            requestBody={
                "required": True,
                "content": {"application/json": {"schema": ref("Reveal")}},
            },
        )
    },
    "/oanp/v0.1/callback": {
        "put": _operation(
            "putCallback",
            "Register the URL every new entry of the caller's sessions is POSTed to",
            {
                "200": _json("Callback", "Registered, under a fresh signing secret."),
                **_problems(
                    *KEYED,
                    "envelope_too_large",
                    "malformed_json",
                    "schema_invalid",
                    "target_not_allowed",
                ),
            },
            description="Each entry is POSTed once, in seq order per session, its body the "
            "Entry JSON (as in the event streams). 408, 409, 429, 5xx and network errors are "
            "retried with exponential backoff for about a day; another 4xx skips the entry; "
            "410 disables the callback.",
            requestBody={
                "required": True,
                "content": {"application/json": {"schema": ref("CallbackRequest")}},
            },
        ),
        "get": _operation(
            "getCallback",
            "The caller's callback (without its secret)",
            {
                "200": _json("CallbackInfo", "The callback."),
                **_problems(*KEYED, "no_callback"),
            },
        ),
        "delete": _operation(
            "deleteCallback",
            "Stop the caller's callback",
            {
                "204": {"description": "Removed, or there was none."},
                **_problems(*KEYED),
            },
        ),
    },
    "/oanp/v0.1/agent-keys": {
        "post": _operation(
            "registerAgentKey",
            "Register a public key the caller signs its envelopes with (§12)",
            {
                "201": _json("KeyRegistered", "Registered."),
                "200": _json("PartyKey", "Registered before: the key as listed, retired or not."),
                **_problems(
                    *KEYED,
                    "envelope_too_large",
                    "malformed_json",
                    "private_key_sent",
                    "bad_party_key",
                ),
            },
            requestBody={
                "required": True,
                "content": {"application/json": {"schema": ref("PublicKey")}},
            },
        )
    },
    "/oanp/v0.1/agent-keys/{kid}/retire": {
        "post": _operation(
            "retireAgentKey",
            "Retire one of the caller's keys: it signs nothing received from now on",
            {
                "200": _json("PartyKey", "Retired (a key retired before keeps its moment)."),
                **_problems(*KEYED, "unknown_agent_key"),
            },
            parameters=[{"name": "kid", "in": "path", "required": True, "schema": KID}],
        )
    },
    "/oanp/v0.1/agents/{agent_id}/keys": {
        "get": _operation(
            "listAgentKeys",
            "Every key an agent registered, retired ones too",
            {
                "200": _json("PartyKeys", "The keys, oldest first (none: an empty list)."),
                **_problems(*KEYED, "schema_invalid"),
            },
            parameters=[{"name": "agent_id", "in": "path", "required": True, "schema": ID}],
        )
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
                            "schema": {"type": "array", "items": ref("MerchantListing")}
                        }
                    },
                },
                **_problems(*KEYED, "schema_invalid", "bad_cursor"),
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
                {"200": _json("Discovery", "The document."), **_problems("invalid_characters")},
            ),
            "security": [],
        }
    },
    **{
        path: {
            "get": {
                **_operation(
                    f"get{name}Schema",
                    f"The JSON Schema (draft 2020-12) of components.schemas.{name} on its own, "
                    "for validators that do not read OpenAPI",
                    {
                        "200": {
                            "description": "The schema, its $defs included.",
                            "content": {"application/schema+json": {"schema": {"type": "object"}}},
                        },
                        **_problems("invalid_characters"),
                    },
                ),
                "security": [],
            }
        }
        for name, path in SCHEMA_DOCUMENTS.items()
    },
    "/oanp/v0.1/sessions/{session_id}/proof": {
        "get": _operation(
            "getEntryProof",
            "An entry's place in the transparency log: its index, the checkpoint, the path",
            {
                "200": _json("EntryProof", "The entry's inclusion proof."),
                **_problems(*KEYED, "unknown_session", "schema_invalid", "not_integrated"),
            },
            parameters=[
                SESSION_ID,
                {
                    "name": "seq",
                    "in": "query",
                    "required": True,
                    "schema": {"type": "integer", "minimum": 1},
                },
            ],
        )
    },
    "/oanp/v0.1/log/checkpoint": {
        "get": {
            **_operation(
                "getLogCheckpoint",
                "The transparency log's checkpoint: a C2SP signed note, cosignatures included",
                {
                    "200": {
                        "description": "origin, tree size and base64 root, then the log's "
                        "signature line and its witnesses' cosignature lines.",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    },
                    **_problems(*GUARDED, "not_integrated"),
                },
            ),
            "security": [],
        }
    },
    "/oanp/v0.1/log/tile/{path}": {
        "get": {
            **_operation(
                "getLogTile",
                "A C2SP tile (<L>/<N>[.p/<W>]) or entry bundle (entries/<N>[.p/<W>])",
                {
                    "200": {
                        "description": "32-byte hashes, or length-prefixed leaf data.",
                        "content": {
                            "application/octet-stream": {
                                "schema": {"type": "string", "format": "binary"}
                            }
                        },
                    },
                    **_problems(*GUARDED, "tile_not_found"),
                },
                parameters=[
                    {"name": "path", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
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
                    **_problems(*GUARDED),
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
                {"200": _json("Liveness", "The process is up."), **_problems("invalid_characters")},
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
                "under a 2 s deadline, and the database connections' budget",
                {
                    "200": _json("Readiness", "Every check passed (warnings aside)."),
                    "503": _json("Readiness", "At least one check failed; see checks."),
                    **_problems("invalid_characters"),
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
                    **_problems("invalid_characters", "metrics_forbidden"),
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
                {"200": _json("Jwks", "JWKS."), **_problems(*GUARDED)},
            ),
            "security": [],
        }
    },
}


def _problem_schema() -> Schema:
    """The Problem component, its ``code`` described by the catalogues: every code a client
    may meet, with its status and meaning."""
    problem = SCHEMAS["Problem"]
    codes = "\n".join(
        f"- `{r.code}` ({r.status}): {r.meaning}."
        for r in sorted(REFUSALS.values(), key=lambda r: (r.status, r.code))
    )
    code = {**problem["properties"]["code"]}
    code["description"] = f"{code['description']} Every code, with its status:\n\n{codes}"
    return {**problem, "properties": {**problem["properties"], "code": code}}


def add_streams(result: Schema, generator: Any, request: Any, public: bool) -> Schema:
    """Spectacular post-processing hook: the protocol's paths, schemas and security."""
    result["paths"] = {**result.get("paths", {}), **PATHS}
    components = result.setdefault("components", {})
    components.setdefault("schemas", {}).update(SCHEMAS)
    components["schemas"]["Problem"] = _problem_schema()
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
