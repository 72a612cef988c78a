"""The OpenAPI 3 document describes every endpoint of docs/protocol.md §14 and its refusals."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from openapi_spec_validator import validate

from arbiter_app.api.openapi import SCHEMA_DOCUMENTS
from arbiter_app.refusals import REFUSALS as SERVER_REFUSALS
from oanp.wire.errors import REFUSALS as PROTOCOL_REFUSALS

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
    ("/oanp/v0.1/agent-keys", "post"): {400, 401, 413, 429, 503},
    ("/oanp/v0.1/agent-keys/{kid}/retire", "post"): {400, 401, 404, 429, 503},
    ("/oanp/v0.1/agents/{agent_id}/keys", "get"): {400, 401, 429, 503},
    ("/oanp/v0.1/merchants", "get"): {400, 401, 429, 503},
    ("/oanp/v0.1/keys", "get"): {400, 503},
    ("/oanp/v0.1/sessions/{session_id}/proof", "get"): {400, 401, 404, 429, 503},
    ("/oanp/v0.1/log/checkpoint", "get"): {400, 404, 503},
    ("/oanp/v0.1/log/tile/{path}", "get"): {400, 404, 503},
    ("/.well-known/jwks.json", "get"): {400, 503},
}
STREAMS = [("/oanp/v0.1/sessions/{session_id}/events", "get"), ("/oanp/v0.1/inbox", "get")]
#: What operators' probes and scrapers read, outside the protocol; no API key.
OPERATIONS = [("/healthz", "get"), ("/readyz", "get"), ("/metrics", "get")]
#: Documents served as they are, touching nothing that could be away.
DOCUMENTS = [
    *((path, "get") for path in SCHEMA_DOCUMENTS.values()),
    ("/.well-known/oanp.json", "get"),
]


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


#: Every code a client may meet, with the status it is raised with: both catalogues.
CATALOGUE = {r.code: r.status for r in (*PROTOCOL_REFUSALS, *SERVER_REFUSALS)}


@pytest.mark.parametrize(("code", "status"), sorted(CATALOGUE.items()))
def test_every_code_is_documented_with_the_status_it_is_raised_with(
    document: dict[str, Any], code: str, status: int
) -> None:
    described = document["components"]["schemas"]["Problem"]["properties"]["code"]
    assert f"- `{code}` ({status}): " in described["description"]
    # Wherever an operation names the code, it is under that status and no other.
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for answer, response in operation["responses"].items():
                if f"`{code}`" in response.get("description", ""):
                    assert answer == str(status), (path, method, answer)


def test_the_protocol_s_table_of_problems_is_the_catalogue() -> None:
    """docs/protocol.md §14.4 lists each code under its status, and nothing else."""
    text = (Path(__file__).parents[2] / "docs" / "protocol.md").read_text()
    table = text.split("### 14.4 Problems", 1)[1].split("###", 1)[0]
    listed: dict[str, int] = {}
    for status, codes in re.findall(r"^\| (\d{3}) \| (.*) \|$", table, flags=re.M):
        # A code's gloss is in parentheses, and may name a field in backticks.
        for code in re.findall(r"`([a-z_]+)`", re.sub(r"\([^)]*\)", "", codes)):
            listed[code] = int(status)
    assert listed == CATALOGUE


def test_the_submit_endpoint_documents_every_refusal_a_move_can_meet(
    document: dict[str, Any],
) -> None:
    responses = document["paths"]["/oanp/v0.1/envelopes"]["post"]["responses"]
    documented = set(
        re.findall(r"`([a-z_]+)`", " ".join(r["description"] for r in responses.values()))
    )
    moves = {r.code for r in PROTOCOL_REFUSALS} - {
        "reveal_too_early",
        "nothing_committed",
        "already_revealed",
        "reveal_mismatch",
        # A key's registration's, not a move's:
        "private_key_sent",
        "bad_party_key",
    }
    assert moves <= documented


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
    callback, key = path.endswith("/callback"), path.startswith("/oanp/v0.1/agent-keys/")
    log = path.startswith("/oanp/v0.1/log/")  # public: no session to miss, a tile or none yet
    assert _described(responses, 404, "no_callback") is callback
    assert _described(responses, 404, "unknown_agent_key") is key
    assert _described(responses, 404, "unknown_session") is not (callback or key or log)


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
