"""Discovery over HTTP (docs/protocol.md §14.10): the arbiter's document, read without a key,
and the directory of listed merchant agents, searched and paged with an agent's key."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import Client
from django.urls import resolve
from openapi_schema_validator import OAS30Validator

from arbiter_app import services
from arbiter_app.api.views import MERCHANTS_PAGE_SIZE
from arbiter_app.models import AgentCredential, HandoffTarget, Listing
from arbiter_app.tlog.keys import log_signer
from oanp.wire.profiles import PROFILES
from tests.support.api import problem
from tests.support.factories.agents import Agent, list_merchant, make_agent

pytestmark = pytest.mark.django_db

WELL_KNOWN = "/.well-known/oanp.json"
MERCHANTS = "/oanp/v0.1/merchants"
ROUTE = {"route": "SFO-JFK", "cabin": "Economy", "fare_class": "Y"}


def merchants(client: Client, agent: Agent, **params: Any) -> Any:
    return client.get(MERCHANTS, params, headers=agent.headers)


def ids(response: Any) -> list[str]:
    assert response.status_code == 200, response.content
    return [entry["agent_id"] for entry in response.json()]


# /.well-known/oanp.json --------------------------------------------------------------------


def test_the_arbiters_document_is_read_without_a_key(client: Client) -> None:
    response = client.get(WELL_KNOWN)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "public, max-age=300"
    document = response.json()
    assert set(document) == {
        "arbiter_id",
        "oanp_versions",
        "profiles",
        "settlement",
        "endpoints",
        "jwks_uri",
        "limits",
        "log",
    }
    # The transparency log (§18): what an outsider needs to check its checkpoints.
    assert document["log"] == {
        "origin": settings.OANP_LOG_ORIGIN,
        "url": f"{settings.OANP_PUBLIC_URL}/oanp/v0.1/log",
        "verifier_key": log_signer().verifier_key,
    }
    assert document["log"]["verifier_key"].startswith(settings.OANP_LOG_ORIGIN + "+")
    assert document["arbiter_id"] == settings.OANP_ARBITER_ID
    assert document["oanp_versions"] == ["0.1"]
    assert document["profiles"] == list(PROFILES)
    assert "default/v0.1" in document["profiles"]
    assert document["settlement"] == ["reveal"]
    # The numbers of docs/protocol.md, as the parser and the machine enforce them.
    assert document["limits"] == {
        "max_rounds": 20,
        "response_window_s": [10, 3600],
        "deadline_max_s": 86400,
        "max_envelope_bytes": 65536,
        "max_issues": 8,
    }
    # The same jwks_uri as every signed agreement names.
    assert document["jwks_uri"] == services.arbiter().jwks_uri
    assert document["jwks_uri"] == f"{settings.OANP_PUBLIC_URL}/.well-known/jwks.json"


def test_every_endpoint_it_names_is_routed_here(client: Client) -> None:
    endpoints = client.get(WELL_KNOWN).json()["endpoints"]
    routes = {
        name: resolve(urlsplit(url).path.replace("{session_id}", "s-1")).view_name
        for name, url in endpoints.items()
        if url.startswith(settings.OANP_PUBLIC_URL + "/")
    }
    assert routes == {
        "envelopes": "oanp:envelopes",
        "session": "oanp:session",
        "session_log": "oanp:session-log",
        "session_events": "oanp:session-events",
        "reveal": "oanp:reveal",
        "inbox": "oanp:inbox",
        "callback": "oanp:callback",
        "merchants": "oanp:merchants",
        "keys": "oanp:keys",
        "openapi": "oanp:openapi",
        "envelope_schema": "oanp:envelope-schema",
        "summary_schema": "oanp:summary-schema",
    }
    # A session's endpoints are URI templates over its id.
    assert endpoints["session_log"] == (
        f"{settings.OANP_PUBLIC_URL}/oanp/v0.1/sessions/{{session_id}}/log"
    )


# /oanp/v0.1/merchants: who may read it ---------------------------------------------------------


def test_the_directory_needs_an_agents_key(client: Client) -> None:
    make_agent("skyways-sfo", "merchant")
    list_merchant("skyways-sfo")
    answer = client.get(MERCHANTS)
    problem(answer, 401, "unauthorized")
    assert answer["WWW-Authenticate"] == 'Bearer realm="oanp"'
    forged = client.get(MERCHANTS, headers={"Authorization": "Bearer oanp_abc_forged"})
    problem(forged, 401, "unauthorized")
    revoked = make_agent("buyer-gone", "buyer")
    services.revoke_credentials(agent_id="buyer-gone")
    problem(merchants(client, revoked), 401, "unauthorized")


def test_any_agent_key_reads_it_a_merchants_too(
    client: Client, buyer: Agent, merchant: Agent
) -> None:
    list_merchant(merchant.agent_id)
    assert ids(merchants(client, buyer)) == [merchant.agent_id]
    assert ids(merchants(client, merchant)) == [merchant.agent_id]


# What is listed ------------------------------------------------------------------------------


def test_a_listed_merchant_shows_what_its_owner_chose_and_nothing_private(
    client: Client, buyer: Agent, merchant: Agent, settings: Any
) -> None:
    settings.OANP_ALLOW_PRIVATE_TARGETS = True
    services.configure_handoff(
        merchant_agent_id=merchant.agent_id,
        endpoint="http://127.0.0.1:9/acp",
        api_key="acp_secret_key_never_listed",
    )
    list_merchant(
        merchant.agent_id,
        merchant="Skyways",
        description="Nonstop flights out of SFO.\nChanges free.",
        currencies=["USD", "EUR"],
        catalog=[ROUTE, {"route": "SFO-LAX", "price_from": 99.5}],
    )
    response = merchants(client, buyer)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert "Link" not in response
    [entry] = response.json()
    assert entry == {
        "agent_id": merchant.agent_id,
        "merchant": "Skyways",
        "description": "Nonstop flights out of SFO.\nChanges free.",
        "currencies": ["USD", "EUR"],
        "profiles": list(PROFILES),
        "settlement": ["reveal"],
        "catalog": [ROUTE, {"route": "SFO-LAX", "price_from": 99.5}],
    }
    text = response.content.decode()
    credential = AgentCredential.objects.get(agent_id=merchant.agent_id)
    for private in (
        merchant.api_key,
        credential.prefix,
        credential.digest,
        "acp_secret_key_never_listed",
        HandoffTarget.objects.get().endpoint,
    ):
        assert private not in text


def test_only_listed_merchants_a_session_could_be_opened_with_are_shown(
    client: Client, buyer: Agent
) -> None:
    make_agent("listed", "merchant")
    list_merchant("listed")
    make_agent("drafted", "merchant")
    list_merchant("drafted", listed=False)
    # No merchant key was ever issued for it: session.open would answer unknown_merchant.
    list_merchant("unregistered")
    # A buyer's id is no merchant.
    list_merchant(buyer.agent_id)
    assert ids(merchants(client, buyer)) == ["listed"]


def test_an_unlisted_agent_disappears_and_comes_back_as_it_was(
    client: Client, buyer: Agent, merchant: Agent
) -> None:
    list_merchant(merchant.agent_id, description="Flights", catalog=[ROUTE])
    assert ids(merchants(client, buyer)) == [merchant.agent_id]
    list_merchant(merchant.agent_id, description="Flights", catalog=[ROUTE], listed=False)
    assert ids(merchants(client, buyer)) == []
    assert ids(merchants(client, buyer, q="flights")) == []
    list_merchant(merchant.agent_id, description="Flights", catalog=[ROUTE])
    assert merchants(client, buyer).json()[0]["catalog"] == [ROUTE]
    assert Listing.objects.count() == 1


# ?q= ------------------------------------------------------------------------------------------


@pytest.fixture
def directory(db: None) -> None:
    for agent_id, merchant, description, catalog in (
        ("skyways-sfo", "Skyways", "Flights out of San Francisco", [ROUTE]),
        ("rail-eu", "EuroRail", "Day trains; night trains too", [{"route": "Paris-Berlin"}]),
        ("hotel-nyc", "Harbor Hotels", "Rooms in Manhattan", [{"room": "double", "nights": 3}]),
    ):
        make_agent(agent_id, "merchant")
        list_merchant(agent_id, merchant=merchant, description=description, catalog=catalog)


@pytest.mark.parametrize(
    ("q", "found"),
    [
        ("", ["hotel-nyc", "rail-eu", "skyways-sfo"]),
        ("RAIL-", ["rail-eu"]),  # the agent id
        ("harbor", ["hotel-nyc"]),  # the merchant's name
        ("NIGHT TRAINS", ["rail-eu"]),  # the description
        ("sfo-jfk", ["skyways-sfo"]),  # a catalog value
        ("paris", ["rail-eu"]),  # another
        ("fare_class", ["skyways-sfo"]),  # a catalog key
        ("3", ["hotel-nyc"]),  # a number in the catalog
        ("  economy ", ["skyways-sfo"]),  # blanks around a search are not part of it
        ("trains", ["rail-eu"]),
        ("o", ["hotel-nyc", "rail-eu", "skyways-sfo"]),
        ('"', []),  # the catalog's JSON punctuation is not its text
        ("SFO-JFK cabin", []),  # nor does a search run from one value into the next
        ("{", []),
        ("%", []),  # LIKE's wildcards are literal
        ("_", ["skyways-sfo"]),  # in "fare_class" only
        ("ferries", []),
    ],
)
def test_q_matches_id_merchant_description_and_catalog_case_insensitively(
    client: Client, buyer: Agent, directory: None, q: str, found: list[str]
) -> None:
    assert ids(merchants(client, buyer, q=q)) == found


# Paging --------------------------------------------------------------------------------------


def follow(client: Client, agent: Agent, path: str) -> tuple[list[list[str]], list[str]]:
    """Every page from ``path`` on, following Link: rel="next"; the pages and the links."""
    pages, links = [], []
    while True:
        response = client.get(path, headers=agent.headers)
        pages.append(ids(response))
        link = response.get("Link")
        if link is None:
            return pages, links
        links.append(link)
        target, relation = link.split(";")
        assert relation.strip() == 'rel="next"'
        url = urlsplit(target.strip().removeprefix("<").removesuffix(">"))
        # Absolute, on the host the request named, so a client follows it to this server.
        assert (url.scheme, url.netloc) == ("http", "testserver"), link
        path = f"{url.path}?{url.query}"


def test_a_long_directory_is_paged_with_link_next(client: Client, buyer: Agent) -> None:
    names = [f"merchant-{n:03d}" for n in range(2 * MERCHANTS_PAGE_SIZE + 3)]
    for name in names:
        make_agent(name, "merchant")
        list_merchant(name, description="odd" if int(name[-3:]) % 2 else "even")
    pages, links = follow(client, buyer, MERCHANTS)
    assert [len(page) for page in pages] == [MERCHANTS_PAGE_SIZE, MERCHANTS_PAGE_SIZE, 3]
    assert [name for page in pages for name in page] == names
    assert len(links) == 2
    # The search travels with the cursor.
    pages, links = follow(client, buyer, f"{MERCHANTS}?q=ODD")
    assert [name for page in pages for name in page] == names[1::2]
    assert [len(page) for page in pages] == [MERCHANTS_PAGE_SIZE, 1]
    assert "q=ODD" in links[0]


def test_a_page_that_ends_exactly_has_no_link(client: Client, buyer: Agent) -> None:
    for n in range(MERCHANTS_PAGE_SIZE):
        make_agent(f"m-{n:02d}", "merchant")
        list_merchant(f"m-{n:02d}")
    response = merchants(client, buyer)
    assert len(ids(response)) == MERCHANTS_PAGE_SIZE
    assert "Link" not in response
    assert ids(merchants(client, buyer, after=f"m-{MERCHANTS_PAGE_SIZE - 1:02d}")) == []
    # An agent id of no listing is still a place in the order.
    assert ids(merchants(client, buyer, after="m-47x")) == ["m-48", "m-49"]


# Refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "code", "field"),
    [
        ("q=" + "x" * 201, "schema_invalid", "q"),
        ("q=%01", "schema_invalid", "q"),
        ("q=a%0Ab", "schema_invalid", "q"),
        ("q=a&q=b", "schema_invalid", "q"),
        ("query=flights", "schema_invalid", "query"),
        ("after=", "bad_cursor", None),
        ("after=not%20an%20id", "bad_cursor", None),
        ("after=" + "a" * 65, "bad_cursor", None),
        ("after=a&after=b", "schema_invalid", "after"),
    ],
)
def test_bad_parameters_get_a_400_naming_them(
    client: Client, buyer: Agent, directory: None, query: str, code: str, field: str | None
) -> None:
    body = problem(client.get(f"{MERCHANTS}?{query}", headers=buyer.headers), 400, code)
    if field is not None:
        assert [error["field"] for error in body["errors"]] == [field]
    assert body["detail"]


def test_nul_in_q_is_refused_before_anything_reads_it(client: Client, buyer: Agent) -> None:
    problem(client.get(f"{MERCHANTS}?q=a%00b", headers=buyer.headers), 400, "invalid_characters")


def test_the_keys_rate_limit_applies_after_its_other_refusals(
    client: Client, buyer: Agent, merchant: Agent, settings: Any
) -> None:
    list_merchant(merchant.agent_id)
    cache.clear()
    settings.OANP_RATE_LIMIT_PER_MINUTE = 1
    assert ids(merchants(client, buyer)) == [merchant.agent_id]
    problem(merchants(client, buyer, after="not an id"), 400, "bad_cursor")
    answer = problem(merchants(client, buyer), 429, "rate_limited")
    assert answer["detail"]
    # Another key has its own allowance, and the discovery document needs none.
    assert ids(merchants(client, merchant)) == [merchant.agent_id]
    assert client.get(WELL_KNOWN).status_code == 200


def test_the_directory_is_read_only(client: Client, buyer: Agent) -> None:
    for method in (client.post, client.put, client.delete):
        problem(method(MERCHANTS, headers=buyer.headers), 405, "method_not_allowed")
    problem(client.post(WELL_KNOWN), 405, "method_not_allowed")


def test_entries_are_json_of_the_stored_catalog_exactly(client: Client, buyer: Agent) -> None:
    make_agent("unicode", "merchant")
    catalog = [{"name": "Café «Zürich» ☕", "nested": {"list": [1, 2.25, None, True]}}]
    list_merchant("unicode", catalog=catalog, currencies=["CHF", "JPY", "KWD"])
    [entry] = json.loads(merchants(client, buyer).content)
    assert entry["catalog"] == catalog
    assert entry["currencies"] == ["CHF", "JPY", "KWD"]


# As the OpenAPI document says --------------------------------------------------------------


def test_both_documents_fit_their_openapi_schemas(
    client: Client, buyer: Agent, directory: None
) -> None:
    document = client.get("/oanp/v0.1/openapi.json").json()

    def validator(schema: dict[str, Any]) -> OAS30Validator:
        return OAS30Validator({**schema, "components": document["components"]})

    discovery = client.get(WELL_KNOWN).json()
    validator({"$ref": "#/components/schemas/Discovery"}).validate(discovery)
    listing = document["paths"][MERCHANTS]["get"]["responses"]["200"]
    page = merchants(client, buyer).json()
    assert len(page) == 3
    validator(listing["content"]["application/json"]["schema"]).validate(page)
    assert "Link" in listing["headers"]
    assert document["paths"][WELL_KNOWN]["get"]["security"] == []
    assert document["paths"][MERCHANTS]["get"]["security"] == [{"apiKey": []}]
