"""The OpenAPI 3 document's schemas (oanp.wire.schema's) judge envelopes, terms, agreements and
answers as the parser does, and the JSON Schemas served on their own judge as those do."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
from openapi_schema_validator import OAS30Validator

from arbiter_app.api.openapi import SCHEMA_DOCUMENTS
from oanp.wire.envelope import SENDERS, MessageType, Role, check_sender, parse_envelope
from oanp.wire.errors import ProtocolError, SchemaInvalid
from oanp.wire.settlement import SETTLEMENT_RULE
from oanp.wire.terms import (
    ISSUE_NAME_PATTERN,
    MAX_DECIMALS,
    MAX_ISSUES,
    MAX_OPTION_CHARS,
    MAX_OPTIONS,
)
from tests.support.factories.agents import Agent, ClientNegotiation, make_agent, read_log
from tests.support.factories.sessions import (
    BUYER_COMMIT,
    MERCHANT_COMMIT,
    accept,
    ack,
    counter,
    opening,
    propose,
    withdraw,
)
from tests.support.factories.sessions import envelope as build_envelope
from tests.support.factories.terms import ISSUES, terms_agents

TERMS_PROFILE = "terms/v0.1"
#: A value for each of the factory's ISSUES.
TERMS = {"delivery_days": 3, "support": "premium"}


def _offer(kind: str, role: str, round_: int, price: Any, commit: str) -> Any:
    payload = {"round": round_, "price": price, "constraints_commit": commit, "terms": TERMS}
    return build_envelope(kind, payload, role=role)


#: One envelope of every party type and role, as the parser accepts them, those of profile
#: terms/v0.1 included (a withdraw last).
PARTY_ENVELOPES = [
    json.loads(parsed.canonical())
    for parsed in (
        opening(),
        opening(profile="strict/v0.1", response_window_s=60, max_rounds=20),
        opening(profile=TERMS_PROFILE, issues=ISSUES),
        ack(),
        propose(1, 320),
        counter(1, 370.5),
        accept("buyer", 2, 370.5),
        accept("merchant", 1, 320),
        _offer("offer.propose", "buyer", 1, 320, BUYER_COMMIT),
        _offer("offer.counter", "merchant", 1, 370.5, MERCHANT_COMMIT),
        _offer("offer.accept", "buyer", 2, 370.5, BUYER_COMMIT),
        _offer("offer.accept", "merchant", 1, 320, MERCHANT_COMMIT),
        withdraw("merchant"),
        withdraw("buyer"),
    )
]


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
    from tests.oanp.wire.test_golden import golden_session

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
    from oanp.wire.envelope import MAX_ROUNDS_LIMIT, RESPONSE_WINDOW_RANGE
    from oanp.wire.profiles import PROFILES

    opening = document["components"]["schemas"]["OpenPayload"]["properties"]
    assert opening["max_rounds"]["maximum"] == MAX_ROUNDS_LIMIT
    assert opening["profile"]["enum"] == list(PROFILES)
    window = opening["response_window_s"]
    assert (window["minimum"], window["maximum"]) == RESPONSE_WINDOW_RANGE


# Profile terms/v0.1 on the wire (docs/protocol.md §16) -----------------------------------------


def _envelope_of(kind: str) -> dict[str, Any]:
    """A copy of the first party envelope of ``kind`` that carries terms/v0.1 members."""
    return copy.deepcopy(
        next(
            e
            for e in PARTY_ENVELOPES
            if e["type"] == kind and ("issues" in e["payload"] or "terms" in e["payload"])
        )
    )


def _golden(kind: str) -> dict[str, Any]:
    from tests.oanp.wire.test_golden import golden_session

    envelopes = [json.loads(json.dumps(e.envelope, default=str)) for e in golden_session()]
    return next(e for e in envelopes if e["type"] == kind)


def _issue(index: int, **changes: Any) -> Any:
    """A change to the open's issue ``index``: members set, or removed when ``None``."""

    def change(payload: dict[str, Any]) -> None:
        issue = payload["issues"][index]
        issue.update(changes)
        for name in [n for n, v in changes.items() if v is None]:
            del issue[name]

    return change


def _distinct(count: int) -> list[dict[str, Any]]:
    """``count`` issues, each named apart."""
    return [{**ISSUES[i % 2], "name": "issue_" + "abcdefghij"[i]} for i in range(count)]


def _member(name: str, value: Any) -> Any:
    return lambda payload: payload.update({name: value})


def _term(name: str, value: Any) -> Any:
    return lambda payload: payload["terms"].update({name: value})


#: Payload changes the parser refuses with schema_invalid: (type, change, why).
REFUSED_TERMS = [
    ("session.open", _member("issues", []), "no issue"),
    ("session.open", _member("issues", _distinct(MAX_ISSUES + 1)), "more than MAX_ISSUES"),
    ("session.open", _member("issues", {"delivery_days": 3}), "issues not a list"),
    ("session.open", _issue(0, name="price"), "the price as an issue"),
    ("session.open", _issue(0, name="Delivery"), "a name outside a-z and _"),
    ("session.open", _issue(0, name="d" * 33), "a name of 33 characters"),
    ("session.open", _issue(0, name=""), "an empty name"),
    ("session.open", _issue(0, kind="range"), "an unknown kind"),
    ("session.open", _issue(0, buyer_prefers="middle"), "buyer_prefers neither low nor high"),
    ("session.open", _issue(0, decimals=5), "more decimals than MAX_DECIMALS"),
    ("session.open", _issue(0, decimals=-1), "negative decimals"),
    ("session.open", _issue(0, decimals=1.5), "decimals not an integer"),
    ("session.open", _issue(0, decimals=None), "a number issue without decimals"),
    ("session.open", _issue(0, min="1"), "a bound that is not a number"),
    ("session.open", _issue(0, max=10**12), "a bound of 10^12"),
    ("session.open", _issue(0, min=-(10**12)), "a bound of -10^12"),
    ("session.open", _issue(0, unit="days"), "an unknown member"),
    ("session.open", _issue(0, options=["a", "b"]), "options on a number issue"),
    ("session.open", _issue(1, buyer_prefers="low"), "buyer_prefers on a choice issue"),
    ("session.open", _issue(1, options=["only"]), "a single option"),
    ("session.open", _issue(1, options=[str(i) for i in range(17)]), "more than MAX_OPTIONS"),
    ("session.open", _issue(1, options=["a", ""]), "an empty option"),
    ("session.open", _issue(1, options=["a", "o" * 65]), "an option longer than allowed"),
    ("session.open", _issue(1, options=["a", "a"]), "an option twice"),
    ("session.open", _issue(1, options=["a", 2]), "an option that is not a string"),
    ("session.open", _issue(1, options=None), "a choice issue without options"),
    ("offer.propose", _member("terms", [3, "premium"]), "terms not an object"),
    ("offer.propose", _term("support", True), "a term that is a boolean"),
    ("offer.counter", _term("support", {"level": 1}), "a term that is an object"),
    ("offer.counter", _term("delivery_days", [3]), "a term that is a list"),
    ("offer.accept", _term("delivery_days", None), "a term that is null"),
    ("round.verdict", _member("issues_open", MAX_ISSUES + 1), "issues_open above MAX_ISSUES"),
    ("round.verdict", _member("issues_open", -1), "issues_open below 0"),
    ("round.verdict", _member("issues_open", "2"), "issues_open not an integer"),
    ("round.verdict", _member("issues_open", True), "issues_open a boolean"),
]
#: Payload changes the parser accepts: the schema must too.
ACCEPTED_TERMS = [
    ("session.open", _member("issues", None), "issues null, as if absent"),
    ("session.open", _member("issues", _distinct(MAX_ISSUES)), "MAX_ISSUES issues"),
    (
        "session.open",
        _issue(0, name="lead_time", buyer_prefers="high", min=-2.5, max=999999999999.5, decimals=4),
        "a number issue at its limits",
    ),
    ("session.open", _issue(1, options=[str(i) for i in range(16)]), "MAX_OPTIONS options"),
    ("session.open", _issue(1, options=["a", "o" * 64]), "an option of MAX_OPTION_CHARS"),
    ("session.open", _issue(0, name="a" * 32), "a name of 32 characters"),
    ("offer.propose", _member("terms", None), "terms null, as if absent"),
    ("offer.counter", _member("terms", {}), "empty terms (the machine asks for every issue)"),
    ("offer.accept", _term("delivery_days", 2.75), "a number term with decimals"),
    ("offer.propose", _term("colour", "red"), "an undeclared name (the machine refuses it)"),
    ("round.verdict", _member("issues_open", 0), "no issue open"),
    ("round.verdict", _member("issues_open", MAX_ISSUES), "every issue open"),
    ("round.verdict", _member("issues_open", None), "issues_open null, as if absent"),
]


def _changed(kind: str, change: Any) -> dict[str, Any]:
    changed = _golden(kind) if kind == "round.verdict" else _envelope_of(kind)
    change(changed["payload"])
    return changed


@pytest.mark.parametrize(
    ("kind", "change", "why"), REFUSED_TERMS, ids=[r[2] for r in REFUSED_TERMS]
)
def test_terms_the_parser_refuses_the_schema_refuses(
    document: dict[str, Any], standalone: dict[str, Any], kind: str, change: Any, why: str
) -> None:
    changed = _changed(kind, change)
    with pytest.raises(SchemaInvalid):
        parse_envelope(json.dumps(changed))
    assert not envelope_validator(document).is_valid(changed), why
    assert not jsonschema.Draft202012Validator(standalone).is_valid(changed), why
    if kind != "round.verdict":
        assert not envelope_validator(document, "PartyEnvelope").is_valid(changed), why


@pytest.mark.parametrize(
    ("kind", "change", "why"), ACCEPTED_TERMS, ids=[a[2] for a in ACCEPTED_TERMS]
)
def test_terms_the_parser_accepts_fit_the_schema(
    document: dict[str, Any], standalone: dict[str, Any], kind: str, change: Any, why: str
) -> None:
    changed = _changed(kind, change)
    parse_envelope(json.dumps(changed))
    envelope_validator(document).validate(changed)
    jsonschema.Draft202012Validator(standalone).validate(changed)
    if kind != "round.verdict":
        envelope_validator(document, "PartyEnvelope").validate(changed)


@pytest.mark.parametrize(
    ("final_terms", "fits"),
    [
        (TERMS, True),
        ({"delivery_days": 2.5, "support": "none"}, True),
        ([3, "premium"], False),
        ({"support": {"level": 1}}, False),
        ({"support": True}, False),
        ({"support": None}, False),
    ],
)
def test_the_agreement_s_final_terms_are_term_values(
    document: dict[str, Any], final_terms: Any, fits: bool
) -> None:
    agree = _golden("session.agree")
    agree["payload"]["agreement"]["final_terms"] = final_terms
    assert envelope_validator(document).is_valid(agree) is fits


def test_the_signed_agreement_is_described_member_by_member(document: dict[str, Any]) -> None:
    agree = _golden("session.agree")
    validator = envelope_validator(document)
    validator.validate(agree)
    agreement = agree["payload"]["agreement"]
    for name in agreement:
        missing = copy.deepcopy(agree)
        del missing["payload"]["agreement"][name]
        assert not validator.is_valid(missing), name
    extra = copy.deepcopy(agree)
    extra["payload"]["agreement"]["discount"] = 5
    assert not validator.is_valid(extra)
    settled = copy.deepcopy(agree)
    settled["payload"]["agreement"]["settlement"] = {
        "rule": SETTLEMENT_RULE,
        "ceiling": 420,
        "floor": 280.5,
    }
    validator.validate(settled)


def test_the_terms_limits_are_the_parser_s(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    issues = schemas["OpenPayload"]["properties"]["issues"]
    assert issues["maxItems"] == MAX_ISSUES
    number, choice = issues["items"]["oneOf"]
    assert number["properties"]["name"]["pattern"] == f"^{ISSUE_NAME_PATTERN}$"
    assert number["properties"]["decimals"]["maximum"] == MAX_DECIMALS
    options = choice["properties"]["options"]
    assert options["maxItems"] == MAX_OPTIONS
    assert options["items"]["maxLength"] == MAX_OPTION_CHARS
    verdict = schemas["VerdictPayload"]["properties"]["issues_open"]
    assert verdict["maximum"] == MAX_ISSUES
    # The summary's declared issues are the open's, with the same schema.
    standing = schemas["SessionSummary"]["properties"]["terms"]["properties"]["issues"]
    assert standing["items"] == issues["items"]


@pytest.mark.django_db
@pytest.mark.parametrize("with_terms", [False, True], ids=["price-only", TERMS_PROFILE])
def test_every_answer_of_a_played_session_fits_the_document(
    document: dict[str, Any], client: Any, buyer: Agent, merchant: Agent, with_terms: bool
) -> None:
    """A session played to its agreement through the API: every answer of the submit
    endpoint, every entry of its log, the log and the summary fit their schemas, and a
    terms/v0.1 session's carry every member of the profile."""
    run = ClientNegotiation(
        client,
        buyer,
        merchant,
        "sess-terms-openapi" if with_terms else "sess-price-openapi",
        agents=terms_agents() if with_terms else None,
    )
    answers = [run.open(**({"issues": ISSUES} if with_terms else {}))]
    while run.outbox:
        answers.append(run.step())
    submitted = envelope_validator(document, "SubmitAnswer")
    for answer in answers:
        assert answer.status_code == 201
        submitted.validate(answer.json())
    path = f"/oanp/v0.1/sessions/{run.session_id}"
    log = client.get(f"{path}/log", headers=buyer.headers)
    envelope_validator(document, "SessionLog").validate(log.json())
    summary = client.get(path, headers=merchant.headers).json()
    envelope_validator(document, "SessionSummary").validate(summary)
    assert ("terms" in summary) is with_terms
    entries = read_log(client, buyer, run.session_id)
    everything, parties = (
        envelope_validator(document),
        envelope_validator(document, "PartyEnvelope"),
    )
    carried: set[str] = set()
    for entry in entries:
        sent = entry["envelope"]
        everything.validate(sent)
        if sent["sender"]["role"] != "arbiter":
            parties.validate(sent)
        payload = sent["payload"]
        members = {"issues", "terms", "issues_open"} & set(payload)
        members |= {"final_terms"} & set(payload.get("agreement", {}))
        carried |= {f"{sent['type']} {name}" for name in members}
    kinds = [entry["envelope"]["type"] for entry in entries]
    assert kinds[-1] == "session.agree"
    expected = {
        "session.open issues",
        "offer.propose terms",
        "offer.counter terms",
        "offer.accept terms",
        "round.verdict issues_open",
        "session.agree final_terms",
    }
    assert carried == (expected if with_terms else set()), kinds


# The envelope's JSON Schema on its own ---------------------------------------------------------


@pytest.fixture(scope="module")
def standalone(django_db_blocker: Any) -> dict[str, Any]:
    from django.test import Client

    with django_db_blocker.unblock():
        response = Client().get(SCHEMA_DOCUMENTS["Envelope"])
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/schema+json"
    schema: dict[str, Any] = json.loads(response.content)
    return schema


def test_the_standalone_schema_is_a_valid_draft_2020_12_schema(
    standalone: dict[str, Any],
) -> None:
    assert standalone["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert standalone["$id"] == f"http://testserver{SCHEMA_DOCUMENTS['Envelope']}"
    jsonschema.Draft202012Validator.check_schema(standalone)
    # Nothing of OpenAPI's own dialect is left in it.
    text = json.dumps(standalone)
    assert '"nullable"' not in text
    assert '"discriminator"' not in text
    assert "#/components/" not in text


def test_the_standalone_schema_judges_as_the_openapi_one(
    document: dict[str, Any], standalone: dict[str, Any]
) -> None:
    from tests.oanp.wire.test_golden import golden_session

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


@pytest.mark.django_db
def test_the_summary_schema_on_its_own_fits_every_summary_of_a_session(client: Any) -> None:
    """Served beside the envelope's, and built from the same constants: each summary the API
    answers along a negotiation fits it, and one with a state the machine has not does not."""
    response = client.get(SCHEMA_DOCUMENTS["SessionSummary"])
    assert response.status_code == 200
    schema = json.loads(response.content)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    buyer, merchant = make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant")
    run = ClientNegotiation(client, buyer, merchant)
    run.open()
    summaries = []
    while run.outbox:
        run.step()
        summary = client.get(f"/oanp/v0.1/sessions/{run.session_id}", headers=buyer.headers)
        summaries.append(summary.json())
    for summary in summaries:
        validator.validate(summary)
    assert {s["state"] for s in summaries} >= {"NEGOTIATING", "AGREED"}
    assert not validator.is_valid({**summaries[-1], "state": "haggling"})
