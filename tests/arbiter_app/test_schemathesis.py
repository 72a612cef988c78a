"""Schemathesis against a live arbiter: requests generated from the OpenAPI document, sent to
Daphne on the test database without a key, with forged keys and with a buyer's and a
merchant's real keys. Every answer must be one the document describes (status, content type,
schema); none may be a 5xx; every 4xx is problem+json with a stable ``code``; and a refused
request changes none of the arbiter's records.

Bounded for CI: a fixed number of examples per operation and identity, derandomized, with no
shrinking, so a run sends the same requests every time. /inbox never ends, so it is exercised
only where it is refused at once (no key, a forged key); a session's event stream ends after
the last entry of a finished session, so the keyed runs read it whole. The parties' finished
sessions are a price-only one and one of profile terms/v0.1, whose answers carry its members.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from arbiter_app import services
from arbiter_app.api.openapi import PATHS
from arbiter_app.models import AgentCallback, AgentCredential
from tests.arbiter_app import test_refusals
from tests.conftest import HEARTBEATS, LiveServer, serve, suite_database_url
from tests.support.factories.agents import Agent, HttpNegotiation, make_agent
from tests.support.factories.sessions import sfo_jfk_agents
from tests.support.factories.terms import ISSUES, terms_agents

pytestmark = pytest.mark.django_db(transaction=True)

DOCUMENT = "/oanp/v0.1/openapi.json"
INBOX = "/oanp/v0.1/inbox"
#: A finished session of the buyer and the merchant, so that reads by a party find something.
SESSION = "sess-sfo-jfk"
#: Another, of profile terms/v0.1, so that the answers about it carry the profile's members.
TERMS_SESSION = "sess-terms"
#: Requests per operation and identity.
EXAMPLES = 50
#: Statuses that say "refused": invalid data must get one of them.
REFUSED = [400, 401, 403, 404, 413, 422]
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
    ignored_auth,
]
BOUNDED = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    # No shrinking: the first failing request is reported as it was sent.
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
IDENTITIES = ["no key", "forged key", "buyer", "merchant"]
#: The security requirement of the operations that take an agent's key.
KEYED = {"apiKey": []}

#: Requests sent, by identity and status.
SENT: Counter[tuple[str, int]] = Counter()
#: Answers that carried terms/v0.1 members, by identity.
WITH_TERMS: Counter[str] = Counter()


def operations(identity: str) -> list[tuple[str, str]]:
    """What ``identity`` calls: everything without a key; with one, what takes a key (real
    keys leave out /inbox, which never ends)."""
    return [
        (path, method)
        for path, methods in PATHS.items()
        for method, operation in methods.items()
        if identity == "no key"
        or (KEYED in operation["security"] and (identity == "forged key" or path != INBOX))
    ]


@pytest.fixture(scope="module")
def arbiter(django_db_setup: None, django_db_blocker: Any) -> Iterator[LiveServer]:
    """Daphne on the test database, with limits no run of this size reaches: a 429 would
    hide how the request would otherwise have been answered."""
    with django_db_blocker.unblock():
        database_url = suite_database_url()
    env = {
        "DATABASE_URL": database_url,
        **HEARTBEATS,
        "OANP_RATE_LIMIT_PER_MINUTE": "1000000",
        "OANP_AUTH_FAILURES_PER_MINUTE": "1000000",
    }
    with serve(env) as server:
        yield server


@pytest.fixture
def parties(arbiter: LiveServer, settings: Any) -> dict[str, Agent]:
    """The buyer's and the merchant's keys, their finished sessions (one price-only, one of
    profile terms/v0.1), and the buyer's callback, so that GET /callback has one to describe."""
    keys = {
        "buyer": make_agent("buyer-001", "buyer"),
        "merchant": make_agent("merchant-sfo", "merchant"),
    }
    with arbiter.client() as client:
        HttpNegotiation(client, *sfo_jfk_agents(), keys["buyer"], keys["merchant"]).run(SESSION)
        terms = HttpNegotiation(client, *terms_agents(), keys["buyer"], keys["merchant"])
        terms.run(TERMS_SESSION, issues=ISSUES)
    # Registered after the session's last entry, so nothing is ever delivered to it; a
    # loopback port, which only this process is told to allow.
    settings.OANP_ALLOW_PRIVATE_TARGETS = True
    credential = AgentCredential.objects.get(agent_id=keys["buyer"].agent_id)
    services.register_callback(agent=credential, url="http://127.0.0.1:9/entries")
    return keys


def records() -> tuple[Any, ...]:
    """What a refusal must leave alone: sessions and entries (as the refusal tests see them),
    callbacks and keys."""
    callbacks = tuple(
        AgentCallback.objects.order_by("agent_id", "role").values_list(
            "agent_id", "role", "url", "updated_at", "disabled_at"
        )
    )
    keys = tuple(AgentCredential.objects.order_by("prefix").values_list("prefix", "revoked_at"))
    return test_refusals.records(), callbacks, keys


def load(server: LiveServer, *, forged: bool) -> Any:
    config = schemathesis.Config.from_dict(
        {
            "base-url": server.url,
            # Nothing documented takes this long; a stream that failed to end fails the run.
            "request-timeout": 10,
            "generation": {"with-security-parameters": forged},
            "checks": {"negative_data_rejection": {"expected-statuses": REFUSED}},
        }
    )
    return schemathesis.openapi.from_url(server.url + DOCUMENT, config=config)


def cases(operation: Any) -> st.SearchStrategy[Any]:
    """Valid and invalid requests; half the valid ones about a session ask about one of the
    parties' own, so that its summary, log, events and reveals are answered, not only
    refused."""
    valid = operation.as_strategy(GenerationMode.POSITIVE)
    if "{session_id}" in operation.path:

        def about(case: Any, ours: bool, terms: bool) -> Any:
            if ours:
                case.path_parameters["session_id"] = TERMS_SESSION if terms else SESSION
            return case

        valid = st.builds(about, valid, st.booleans(), st.booleans())
    return valid | operation.as_strategy(GenerationMode.NEGATIVE)


#: /readyz answers 503 while a dependency is missing, as documented (no worker runs here).
READINESS = "/readyz"


def exchange(case: Any, identity: str, headers: dict[str, str]) -> None:
    """Send ``case``; check the answer against the document and the house rules, and that a
    refusal or a read left every record as it was. Each request is answered before the next
    is sent, and no background work touches these records here (the one session is over, no
    entry follows the callback), so what changed between the two reads is the request's."""
    before = records()
    response = case.call(headers=headers)
    SENT[identity, response.status_code] += 1
    if response.status_code == 200 and '"issues_open"' in response.text:
        WITH_TERMS[identity] += 1
    excluded = [not_a_server_error] if case.operation.path == READINESS else []
    case.validate_response(response, checks=CHECKS, excluded_checks=excluded, headers=headers)
    if 400 <= response.status_code < 500:
        assert response.headers["content-type"] == ["application/problem+json"], response.text
        problem = response.json()
        assert problem["status"] == response.status_code, problem
        assert isinstance(problem["code"], str), problem
        assert problem["code"], problem
    if response.status_code >= 400 or case.method == "GET":
        assert records() == before, response.text


@pytest.mark.parametrize("identity", IDENTITIES)
def test_the_api_answers_as_documented(
    arbiter: LiveServer, parties: dict[str, Agent], identity: str, subtests: Any
) -> None:
    schema = load(arbiter, forged=identity == "forged key")
    headers = parties[identity].headers if identity in parties else {}
    for path, method in operations(identity):
        operation = schema[path][method.upper()]

        @BOUNDED
        @given(case=cases(operation))
        def run(case: Any) -> None:
            exchange(case, identity, headers)

        with subtests.test(msg=f"{method.upper()} {path}"):
            run()
    answered = sorted((status, n) for (who, status), n in SENT.items() if who == identity)
    print(identity, answered, "with terms:", WITH_TERMS[identity])
    # The parties' own reads were answered, not only refused: the run saw real bodies, those
    # of the terms/v0.1 session among them.
    assert identity not in parties or SENT[identity, 200] > 0, answered
    assert identity not in parties or WITH_TERMS[identity] > 0, answered
