"""The OpenAPI 3 document of docs/protocol.md §14, served by drf-spectacular.

The endpoints read raw envelopes with the protocol's own strict parser rather than DRF
serializers, so the schemas are written here, once, from docs/protocol.md; :func:`add_streams`
(a spectacular post-processing hook) puts them into the generated document.
"""

from __future__ import annotations

from typing import Any

from arbiter_app.api.payloads import ENVELOPE_SCHEMA_PATH, ID, Schema, object_schema, ref
from arbiter_app.api.schemas import SCHEMAS
from oanp.discovery import MAX_QUERY_CHARS
from oanp.envelope import (
    MessageType,
)

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
    return {"description": description, "content": {"application/json": {"schema": ref(name)}}}


def _problem(status: int, description: str) -> Schema:
    headers = PROBLEM_HEADERS.get(status)
    return {
        "description": description,
        "content": {"application/problem+json": {"schema": ref("Problem")}},
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
#: The event streams' 503s: the database, or the server process's cap on open streams.
STREAMS_503 = (
    "The arbiter's database is unavailable (`unavailable`), or this server process holds "
    "as many event streams as it may (`streams_full`); retry after `Retry-After` seconds."
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
                **_problems(400, 401, 403, 404, 409, 413, 422, 429, 503),
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
                **_problems(400, 401, 404, 429, 503, _503=STREAMS_503),
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
                **_problems(400, 401, 429, 503, _503=STREAMS_503),
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
                **_problems(400, 401, 404, 409, 413, 422, 429, 503),
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
                **_problems(400, 401, 413, 422, 429, 503),
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
                            "schema": {"type": "array", "items": ref("MerchantListing")}
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
                "under a 2 s deadline, and the database connections' budget",
                {
                    "200": _json("Readiness", "Every check passed (warnings aside)."),
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
                        "content": {"application/problem+json": {"schema": ref("Problem")}},
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
