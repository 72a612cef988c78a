"""The OpenAPI 3 document describes every endpoint of docs/protocol.md §14 and its refusals."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import validate

from arbiter_app.api.openapi import ENVELOPE_SCHEMA_PATH
from oanp.envelope import SENDERS, MessageType, Role, check_sender, parse_envelope
from oanp.errors import ProtocolError
from tests.support.factories.sessions import (
    accept,
    ack,
    counter,
    opening,
    propose,
    withdraw,
)

DOCUMENT = "/oanp/v0.1/openapi.json"

#: (path, method) → the problem statuses docs/protocol.md §14 documents for it. Every one
#: refuses invalid characters (400) and answers 503 while the database is away.
ENDPOINTS: dict[tuple[str, str], set[int]] = {
    ("/oanp/v0.1/envelopes", "post"): {400, 401, 403, 404, 409, 413, 422, 429, 503},
    ("/oanp/v0.1/sessions/{session_id}", "get"): {400, 401, 404, 429, 503},
    ("/oanp/v0.1/sessions/{session_id}/log", "get"): {400, 401, 404, 429, 503},
    ("/oanp/v0.1/sessions/{session_id}/events", "get"): {400, 401, 404, 429, 503},
    ("/oanp/v0.1/inbox", "get"): {400, 401, 429, 503},
    ("/oanp/v0.1/sessions/{session_id}/reveal", "post"): {400, 401, 404, 409, 422, 503},
    ("/oanp/v0.1/callback", "put"): {400, 401, 413, 422, 429, 503},
    ("/oanp/v0.1/callback", "get"): {400, 401, 404, 429, 503},
    ("/oanp/v0.1/callback", "delete"): {400, 401, 429, 503},
    ("/oanp/v0.1/merchants", "get"): {400, 401, 429, 503},
    ("/oanp/v0.1/keys", "get"): {400, 503},
    ("/.well-known/jwks.json", "get"): {400, 503},
}
STREAMS = [("/oanp/v0.1/sessions/{session_id}/events", "get"), ("/oanp/v0.1/inbox", "get")]
#: What operators' probes and scrapers read, outside the protocol; no API key.
OPERATIONS = [("/healthz", "get"), ("/readyz", "get"), ("/metrics", "get")]
#: Documents served as they are, touching nothing that could be away.
DOCUMENTS = [(ENVELOPE_SCHEMA_PATH, "get"), ("/.well-known/oanp.json", "get")]

#: One envelope of every party type and role, as the parser accepts them (a withdraw last).
PARTY_ENVELOPES = [
    json.loads(envelope.canonical())
    for envelope in (
        opening(),
        opening(profile="strict/v0.1", response_window_s=60, max_rounds=20),
        ack(),
        propose(1, 320),
        counter(1, 370.5),
        accept("buyer", 2, 370.5),
        accept("merchant", 1, 320),
        withdraw("merchant"),
        withdraw("buyer"),
    )
]


@pytest.fixture(scope="module")
def document(django_db_blocker: Any) -> dict[str, Any]:
    from django.test import Client

    # Served without a key: clients read it before they have one.
    with django_db_blocker.unblock():
        response = Client().get(DOCUMENT)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith(("application/json", "application/vnd.oai"))
    parsed: dict[str, Any] = json.loads(response.content)
    return parsed


def test_it_is_a_valid_openapi_3_document(document: dict[str, Any]) -> None:
    assert document["openapi"].startswith("3.")
    validate(document)


@pytest.mark.parametrize(("path", "method"), list(ENDPOINTS))
def test_every_endpoint_is_described_with_its_problems(
    document: dict[str, Any], path: str, method: str
) -> None:
    operation = document["paths"][path][method]
    responses = operation["responses"]
    documented = {int(s) for s in responses if s.startswith(("4", "5"))}
    assert documented >= ENDPOINTS[(path, method)]
    for status in documented:
        content = responses[str(status)]["content"]
        assert list(content) == ["application/problem+json"]
        assert content["application/problem+json"]["schema"] == {
            "$ref": "#/components/schemas/Problem"
        }
    assert any(s.startswith("2") for s in responses)


def test_no_endpoint_is_undocumented(document: dict[str, Any]) -> None:
    described = {(p, m) for p, ops in document["paths"].items() for m in ops}
    assert described == set(ENDPOINTS) | set(OPERATIONS) | set(DOCUMENTS)


@pytest.mark.django_db
def test_the_health_endpoints_answer_as_documented(document: dict[str, Any], client: Any) -> None:
    for path, method in OPERATIONS:
        assert document["paths"][path][method]["tags"] == ["operations"]
    assert document["paths"]["/healthz"]["get"]["security"] == []
    readiness = document["paths"]["/readyz"]["get"]["responses"]
    assert set(readiness) == {"200", "400", "503"}
    response = client.get("/readyz")
    schema = {"$ref": "#/components/schemas/Readiness", "components": document["components"]}
    jsonschema.validate(response.json(), schema)
    assert str(response.status_code) in readiness
    metrics = document["paths"]["/metrics"]["get"]["responses"]
    assert "text/plain" in metrics["200"]["content"]
    assert client.get("/metrics").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_the_health_endpoints_refuse_other_methods(method: str) -> None:
    from django.test import Client

    # As a prober sends it: no cookie, no CSRF token, so CSRF checks enforced as in production.
    client = Client(enforce_csrf_checks=True)
    for path, documented in OPERATIONS:
        response = getattr(client, method)(path)
        assert response.status_code == 405, (path, response.status_code)
        assert documented.upper() in response["Allow"]


def test_the_key_less_endpoints_are_marked_so(document: dict[str, Any]) -> None:
    assert document["paths"]["/.well-known/jwks.json"]["get"]["security"] == []
    assert document["paths"]["/oanp/v0.1/envelopes"]["post"]["security"] == [{"apiKey": []}]
    scheme = document["components"]["securitySchemes"]["apiKey"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")


def test_the_problem_schema_carries_a_stable_code(document: dict[str, Any]) -> None:
    problem = document["components"]["schemas"]["Problem"]
    assert {"type", "title", "status", "code", "detail"} <= set(problem["required"])
    assert "errors" in problem["properties"]


@pytest.mark.parametrize(
    "code",
    [
        "unauthorized",
        "sender_mismatch",
        "not_a_party",
        "unknown_session",
        "out_of_turn",
        "session_terminal",
        "session_exists",
        "message_id_reused",
        "envelope_too_large",
        "malformed_json",
        "schema_invalid",
        "wrong_round",
        "price_precision",
        "price_not_standing",
        "role_may_not_send",
        "unknown_merchant",
        "rate_limited",
    ],
)
def test_every_refusal_code_of_the_submit_endpoint_is_documented(
    document: dict[str, Any], code: str
) -> None:
    responses = document["paths"]["/oanp/v0.1/envelopes"]["post"]["responses"]
    assert any(f"`{code}`" in r["description"] for r in responses.values())


def _described(responses: dict[str, Any], status: int, code: str) -> bool:
    return str(status) in responses and f"`{code}`" in responses[str(status)]["description"]


@pytest.mark.parametrize(("path", "method"), list(ENDPOINTS) + OPERATIONS + DOCUMENTS)
def test_every_endpoint_refuses_invalid_characters(
    document: dict[str, Any], path: str, method: str
) -> None:
    responses = document["paths"][path][method]["responses"]
    assert _described(responses, 400, "invalid_characters")


@pytest.mark.parametrize(("path", "method"), list(ENDPOINTS))
def test_every_endpoint_of_the_api_may_be_unavailable(
    document: dict[str, Any], path: str, method: str
) -> None:
    response = document["paths"][path][method]["responses"]["503"]
    assert "`unavailable`" in response["description"]
    assert response["headers"]["Retry-After"]["required"] is True


@pytest.mark.parametrize(
    ("path", "method"), [endpoint for endpoint, statuses in ENDPOINTS.items() if 404 in statuses]
)
def test_a_404_names_only_what_its_endpoint_can_miss(
    document: dict[str, Any], path: str, method: str
) -> None:
    responses = document["paths"][path][method]["responses"]
    callback = path.endswith("/callback")
    assert _described(responses, 404, "no_callback") is callback
    assert _described(responses, 404, "unknown_session") is not callback


@pytest.mark.parametrize(("path", "method"), STREAMS)
def test_a_stream_is_described_event_by_event(
    document: dict[str, Any], path: str, method: str
) -> None:
    responses = document["paths"][path][method]["responses"]
    assert _described(responses, 429, "too_many_streams")
    assert _described(responses, 429, "rate_limited")
    # Before OpenAPI 3.2, a text/event-stream schema describes one event, as clients parse it.
    event = responses["200"]["content"]["text/event-stream"]["schema"]
    assert set(event["required"]) == {"id", "event", "data"}


def _branches(schemas: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The closed envelope schemas ``name`` stands for, through nested oneOfs."""
    schema = schemas[name]
    if "oneOf" not in schema:
        return [schema]
    return [b for ref in schema["oneOf"] for b in _branches(schemas, ref["$ref"].rsplit("/")[-1])]


@pytest.mark.parametrize(
    ("name", "roles"),
    [
        ("Envelope", {kind.value: SENDERS[kind] for kind in MessageType}),
        (
            "PartyEnvelope",
            {
                kind.value: SENDERS[kind] - {Role.ARBITER}
                for kind in MessageType
                if SENDERS[kind] - {Role.ARBITER}
            },
        ),
    ],
)
def test_envelopes_are_closed_schemas_one_per_type_and_its_roles(
    document: dict[str, Any], name: str, roles: dict[str, frozenset[Role]]
) -> None:
    schemas = document["components"]["schemas"]
    discriminator = schemas[name]["discriminator"]
    assert discriminator["propertyName"] == "type"
    assert set(discriminator["mapping"]) == set(roles)
    senders: dict[str, set[str]] = {}
    for branch in _branches(schemas, name):
        assert branch["additionalProperties"] is False
        assert set(branch["required"]) == {
            "oanp_version",
            "message_id",
            "session_id",
            "timestamp",
            "sender",
            "type",
            "payload",
        }
        (kind,) = branch["properties"]["type"]["enum"]
        senders.setdefault(kind, set()).update(
            branch["properties"]["sender"]["properties"]["role"]["enum"]
        )
    assert senders == {kind: {role.value for role in allowed} for kind, allowed in roles.items()}


def test_submissions_are_documented_as_party_envelopes(document: dict[str, Any]) -> None:
    body = document["paths"]["/oanp/v0.1/envelopes"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/PartyEnvelope"
    }


def envelope_validator(document: dict[str, Any], name: str = "Envelope") -> jsonschema.Validator:
    schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    # OpenAPI 3.0's own dialect: draft 4 with nullable and boolean exclusive bounds.
    return OAS30Validator(schema)


def test_every_party_envelope_the_parser_accepts_fits_exactly_one_branch(
    document: dict[str, Any],
) -> None:
    """oneOf holds only when no party payload also matches another branch: a catch-all
    object branch once made every party envelope invalid."""
    for name in ("Envelope", "PartyEnvelope"):
        validator = envelope_validator(document, name)
        for envelope in PARTY_ENVELOPES:
            parse_envelope(json.dumps(envelope))
            validator.validate(envelope)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda e: e.update(payload={}), "session.close with an empty payload"),
        (
            lambda e: e["payload"].update(reason="stalled"),
            "a party closing with the arbiter's code",
        ),
        (lambda e: e.update(type="offer.counter"), "a withdraw's payload under another type"),
        (lambda e: e["sender"].update(role="arbiter"), "the arbiter sending a withdraw payload"),
        (lambda e: e.update(extra=1), "an unknown top-level field"),
    ],
)
def test_what_the_parser_refuses_the_schema_refuses(
    document: dict[str, Any], change: Any, why: str
) -> None:
    withdraw = copy.deepcopy(PARTY_ENVELOPES[-1])
    assert withdraw["type"] == "session.close"
    change(withdraw)
    with pytest.raises(ProtocolError):
        check_sender(parse_envelope(json.dumps(withdraw)))
    assert not envelope_validator(document).is_valid(withdraw), why
    assert not envelope_validator(document, "PartyEnvelope").is_valid(withdraw), why


def test_the_golden_trace_fits_the_envelope_schema(document: dict[str, Any]) -> None:
    from tests.oanp.test_golden import golden_session

    validator = envelope_validator(document)
    entries = golden_session()
    assert len(entries) == 9
    for entry in entries:
        validator.validate(json.loads(json.dumps(entry.envelope, default=str)))


@pytest.mark.django_db
def test_every_envelope_of_a_rehearsed_session_fits_the_envelope_schema(
    document: dict[str, Any], logged: Any
) -> None:
    validator = envelope_validator(document)
    log = logged.log()
    assert [e["envelope"]["type"] for e in log][-1] == "session.agree"
    for entry in log:
        validator.validate(entry["envelope"])


def test_the_documented_limits_are_the_parser_s(document: dict[str, Any]) -> None:
    from oanp.envelope import MAX_ROUNDS_LIMIT, RESPONSE_WINDOW_RANGE
    from oanp.profiles import PROFILES

    opening = document["components"]["schemas"]["OpenPayload"]["properties"]
    assert opening["max_rounds"]["maximum"] == MAX_ROUNDS_LIMIT
    assert opening["profile"]["enum"] == list(PROFILES)
    window = opening["response_window_s"]
    assert (window["minimum"], window["maximum"]) == RESPONSE_WINDOW_RANGE


# The envelope's JSON Schema on its own ---------------------------------------------------------


@pytest.fixture(scope="module")
def standalone(django_db_blocker: Any) -> dict[str, Any]:
    from django.test import Client

    with django_db_blocker.unblock():
        response = Client().get(ENVELOPE_SCHEMA_PATH)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/schema+json"
    schema: dict[str, Any] = json.loads(response.content)
    return schema


def test_the_standalone_schema_is_a_valid_draft_2020_12_schema(
    standalone: dict[str, Any],
) -> None:
    assert standalone["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert standalone["$id"] == f"http://testserver{ENVELOPE_SCHEMA_PATH}"
    jsonschema.Draft202012Validator.check_schema(standalone)
    # Nothing of OpenAPI's own dialect is left in it.
    text = json.dumps(standalone)
    assert '"nullable"' not in text
    assert '"discriminator"' not in text
    assert "#/components/" not in text


def test_the_standalone_schema_judges_as_the_openapi_one(
    document: dict[str, Any], standalone: dict[str, Any]
) -> None:
    from tests.oanp.test_golden import golden_session

    standard = jsonschema.Draft202012Validator(standalone)
    openapi = envelope_validator(document)
    golden = [json.loads(json.dumps(e.envelope, default=str)) for e in golden_session()]
    for envelope in golden + PARTY_ENVELOPES:
        standard.validate(envelope)
    for envelope in [*golden, *PARTY_ENVELOPES]:
        for field, bad in (("type", "offer.withdraw"), ("oanp_version", "0.2"), ("extra", 1)):
            changed = {**envelope, field: bad}
            assert not standard.is_valid(changed)
            assert not openapi.is_valid(changed)
    verdict = next(e for e in golden if e["type"] == "round.verdict")
    nulled = {**verdict, "payload": {**verdict["payload"], "buyer_price": None}}
    assert standard.is_valid(nulled)
    assert openapi.is_valid(nulled)
    negative = {**verdict, "payload": {**verdict["payload"], "round": 0}}
    assert not standard.is_valid(negative)
    assert not openapi.is_valid(negative)
