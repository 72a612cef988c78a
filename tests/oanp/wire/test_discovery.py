"""The discovery documents' rules, without a server: what a listing may hold, what a search
may be, and the limits the arbiter's document states."""

from __future__ import annotations

from decimal import Decimal

import pytest

from oanp.wire import discovery
from oanp.wire.envelope import MAX_ENVELOPE_BYTES, MAX_ROUNDS_LIMIT, RESPONSE_WINDOW_RANGE
from oanp.wire.errors import SchemaInvalid
from oanp.wire.state import MAX_DEADLINE_AHEAD
from oanp.wire.terms import MAX_ISSUES


def listing(**fields: object) -> discovery.Listing:
    values: dict[str, object] = {
        "listed": True,
        "description": "Flights",
        "currencies": ["USD"],
        "catalog": [{"route": "SFO-JFK"}],
    }
    values.update(fields)
    return discovery.parse_listing(**values)  # type: ignore[arg-type]


def refusals(**fields: object) -> list[tuple[str, str]]:
    with pytest.raises(SchemaInvalid) as refused:
        listing(**fields)
    assert refused.value.code == "schema_invalid"
    return [(error.field, error.message) for error in refused.value.errors]


def test_a_listing_comes_back_normalized() -> None:
    parsed = listing(catalog=[{"price_from": Decimal("99.50"), "stops": Decimal("0")}])
    assert parsed.catalog == ({"price_from": 99.5, "stops": 0},)
    assert parsed.currencies == ("USD",)


def test_every_bad_field_is_named_at_once() -> None:
    assert refusals(
        description="x" * 1001,
        currencies=["USD", "usd", "USD", 7],
        catalog=[{"ok": 1}, "not an object", {"n": 2**60}],
    ) == [
        ("description", "must be at most 1000 characters"),
        ("currencies[1]", "'usd' is not an ISO 4217 code"),
        ("currencies[2]", "USD is given twice"),
        ("currencies[3]", "this is not an ISO 4217 code"),
        ("catalog[1]", "must be a JSON object"),
        ("catalog[2].n", "beyond ±(2^53-1)"),
    ]


@pytest.mark.parametrize(
    ("fields", "refused"),
    [
        ({"description": 5}, ("description", "must be a string")),
        ({"description": "a\x00b"}, ("description", "must not hold the control character U+0000")),
        ({"description": "\ud800"}, ("description", "must not hold a lone surrogate")),
        ({"currencies": "USD"}, ("currencies", "must be a list of ISO 4217 codes")),
        ({"currencies": []}, ("currencies", "a listed agent names at least one currency")),
        ({"catalog": {"route": "x"}}, ("catalog", "must be a list of item objects")),
        ({"catalog": [{}] * 51}, ("catalog", "must hold at most 50 items")),
        ({"catalog": [{"a": "x" * 4096}]}, ("catalog[0]", "must be at most 4096 bytes")),
        (
            {"catalog": [{"a": "x" * 1500, "n": n} for n in range(50)]},
            ("catalog", f"must be at most {MAX_ENVELOPE_BYTES} bytes in all"),
        ),
        ({"catalog": [{"a": [[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}]}, ("catalog[0].a", "nests")),
    ],
)
def test_what_a_listing_may_not_hold(fields: dict[str, object], refused: tuple[str, str]) -> None:
    [(field, message)] = refusals(**fields)
    assert field.startswith(refused[0])
    assert message.startswith(refused[1])


def test_lines_and_tabs_are_text_and_an_unlisted_draft_needs_no_currency() -> None:
    assert listing(description="Line one\r\nLine\ttwo").description == "Line one\r\nLine\ttwo"
    assert listing(listed=False, currencies=[], catalog=[]).currencies == ()


def test_catalog_text_holds_words_not_json() -> None:
    text = discovery.catalog_text(
        [{"route": "SFO-JFK", "legs": [{"stop": "ORD"}], "price": 99.5, "hot": True, "x": None}]
    )
    assert text.split("\n") == [
        "route",
        "SFO-JFK",
        "legs",
        "stop",
        "ORD",
        "price",
        "99.5",
        "hot",
        "x",
    ]
    assert "{" not in text
    assert discovery.catalog_text([{"a\x00": "b\x1bc"}]) == "a \nb c"


@pytest.mark.parametrize(
    ("q", "found"), [("", ""), ("  Flights \u00a0", "Flights"), ("x" * 200, "x" * 200)]
)
def test_a_search_is_trimmed(q: str, found: str) -> None:
    assert discovery.parse_query(q) == found


@pytest.mark.parametrize(
    ("q", "message"),
    [
        ("x" * 201, "must be at most 200 characters"),
        ("a\tb", "must not hold the control character U+0009"),
        ("\x7f", "must not hold the control character U+007F"),
        ("\udc00", "must not hold a lone surrogate"),
        (None, "must be a string"),
    ],
)
def test_a_search_that_no_listing_could_match_is_refused(q: object, message: str) -> None:
    with pytest.raises(SchemaInvalid) as refused:
        discovery.parse_query(q)
    assert [(e.field, e.message) for e in refused.value.errors] == [("q", message)]


def test_the_documents_limits_are_the_protocols() -> None:
    document = discovery.arbiter_document(
        arbiter_id="arbiter.test",
        profiles=["default/v0.1"],
        settlement=["reveal"],
        endpoints={"envelopes": "https://a.test/oanp/v0.1/envelopes"},
        jwks_uri="https://a.test/.well-known/jwks.json",
    )
    assert document["oanp_versions"] == ["0.1"]
    assert document["limits"] == {
        "max_rounds": MAX_ROUNDS_LIMIT,
        "response_window_s": list(RESPONSE_WINDOW_RANGE),
        "deadline_max_s": MAX_DEADLINE_AHEAD.total_seconds(),
        "max_envelope_bytes": MAX_ENVELOPE_BYTES,
        "max_issues": MAX_ISSUES,
    }
