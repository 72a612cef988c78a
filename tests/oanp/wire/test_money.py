"""Prices under the ISO 4217 minor-unit rule (docs/protocol.md §2): minor units per currency,
decimals counted on the exact decimal, the wire form of a price, minor-unit amounts, and the
bounds and notation the parser and the machine enforce with them."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oanp.wire.canonical import canonical_bytes
from oanp.wire.envelope import parse_envelope
from oanp.wire.errors import ProtocolError
from oanp.wire.money import (
    MINOR_UNITS,
    PRICE_CEILING,
    decimals_of,
    fits_currency,
    minor_units,
    price_to_json,
    to_minor_units,
)
from tests.oanp.wire.test_envelope import body, refusal, wire
from tests.support.factories.sessions import negotiating, propose

D = Decimal

# Minor units ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("currency", "units"),
    [
        # The three docs/protocol.md §2 names.
        ("USD", 2),
        ("JPY", 0),
        ("KWD", 3),
        ("EUR", 2),
        ("GBP", 2),
        ("KRW", 0),
        ("ISK", 0),
        ("VND", 0),
        ("XOF", 0),
        ("CLP", 0),
        ("BHD", 3),
        ("TND", 3),
        ("OMR", 3),
        ("CLF", 4),
        ("UYW", 4),
        # Funds codes and recent replacements are active codes too.
        ("USN", 2),
        ("UYI", 0),
        ("VES", 2),
        ("ZWG", 2),
        ("SLE", 2),
        ("XCG", 2),
    ],
)
def test_minor_units_per_currency(currency, units):
    assert minor_units(currency) == units
    assert MINOR_UNITS[currency] == units


@pytest.mark.parametrize(
    "code",
    [
        "usd",  # codes are upper case, not normalized
        "XAU",  # gold: metals have no minor unit
        "XDR",  # special drawing right: no minor unit either
        "XXX",  # "no currency"
        "XTS",  # reserved for testing
        "HRK",  # withdrawn when Croatia joined the euro
        "",
    ],
)
def test_codes_without_a_minor_unit_are_unknown(code):
    with pytest.raises(KeyError):
        minor_units(code)


def test_every_known_code_is_three_capitals_with_a_listed_minor_unit():
    assert len(MINOR_UNITS) > 150
    assert all(re.fullmatch(r"[A-Z]{3}", code) for code in MINOR_UNITS)
    assert set(MINOR_UNITS.values()) == {0, 2, 3, 4}


# Decimals, on the exact decimal ------------------------------------------------------------


@pytest.mark.parametrize(
    ("price", "decimals"),
    [
        ("340", 0),
        ("340.00", 0),
        ("340.10", 1),
        ("339.99", 2),
        ("0.001", 3),
        ("3.4E+2", 0),
        ("1E+3", 0),
        ("1E-5", 5),
        ("-1.50", 1),
    ],
)
def test_decimals_ignore_trailing_zeros(price, decimals):
    assert decimals_of(D(price)) == decimals


@pytest.mark.parametrize(
    ("price", "currency", "fits"),
    [
        ("339.99", "USD", True),
        ("339.999", "USD", False),
        ("340.10", "USD", True),
        ("340", "JPY", True),
        ("340.0", "JPY", True),
        ("340.5", "JPY", False),
        ("1.234", "KWD", True),
        ("1.2345", "KWD", False),
        ("1.2345", "CLF", True),
        ("1.23456", "CLF", False),
    ],
)
def test_fits_currency(price, currency, fits):
    assert fits_currency(D(price), currency) is fits


def test_fits_currency_judges_the_decimal_not_a_binary_float():
    # 0.1 + 0.2 as decimals is 0.3; as doubles it is 0.3000000000000000444..., 52 decimals.
    assert fits_currency(D("0.1") + D("0.2"), "USD")
    assert not fits_currency(D(0.1 + 0.2), "USD")


def test_fits_currency_refuses_an_unknown_code():
    with pytest.raises(KeyError):
        fits_currency(D(1), "ABC")


# The wire form ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("price", "wire_form"),
    [
        ("340", 340),
        ("340.00", 340),
        ("3.4E+2", 340),
        ("339.99", 339.99),
        ("340.10", 340.1),
        ("0.001", 0.001),
        ("999999999999.999", 999999999999.999),
    ],
)
def test_price_to_json_is_an_int_when_whole(price, wire_form):
    value = price_to_json(D(price))
    assert value == wire_form
    assert type(value) is type(wire_form)


prices_of_up_to_three_decimals = st.decimals(
    min_value=D("0.001"), max_value=PRICE_CEILING - D("0.001"), places=3
)


@given(prices_of_up_to_three_decimals)
def test_the_wire_form_is_exact_and_hashes_as_the_decimal(price):
    value = price_to_json(price)
    assert D(repr(value)) == price
    # JCS prints the number back digit for digit: the bytes hashed are the decimal's own.
    assert canonical_bytes(value) == format(price.normalize(), "f").encode()


def test_the_ceiling_is_ten_to_the_twelfth():
    assert D(10**12) == PRICE_CEILING


# Minor-unit amounts (the ACP handoff) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("price", "currency", "amount"),
    [
        ("339.99", "USD", 33999),
        ("340.1", "USD", 34010),
        ("340", "USD", 34000),
        ("0.01", "USD", 1),
        ("340", "JPY", 340),
        ("1.234", "KWD", 1234),
        ("1.2345", "CLF", 12345),
        ("999999999999.99", "USD", 99999999999999),
    ],
)
def test_to_minor_units(price, currency, amount):
    result = to_minor_units(D(price), currency)
    assert result == amount
    assert type(result) is int


# The bounds and notation the parser enforces ---------------------------------------------------


def offered(price_literal: str) -> bytes:
    """A wire propose whose price is written exactly as ``price_literal``."""
    return wire(body()).replace(b'"price": 320', b'"price": ' + price_literal.encode())


@pytest.mark.parametrize(
    ("literal", "price"),
    [
        ("0.01", D("0.01")),
        ("339.99", D("339.99")),
        ("340.10", D("340.1")),
        ("999999999999.99", D("999999999999.99")),
        ("340.0", D(340)),
    ],
)
def test_prices_in_bounds_parse_to_the_exact_decimal(literal, price):
    assert parse_envelope(offered(literal)).payload.price == price


@pytest.mark.parametrize("literal", ["0", "0.0", "-1", "-0.01", "1000000000000", "1000000000000.5"])
def test_prices_out_of_bounds_are_refused(literal):
    err = refusal(offered(literal))
    assert (err.code, err.status) == ("schema_invalid", 400)
    assert [(e.field, e.message) for e in err.errors] == [
        ("$.payload.price", "must be greater than 0 and less than 10^12")
    ]


@pytest.mark.parametrize("literal", ["3.4e2", "3.4E2", "340e0", "3.4E+2", "34000e-2"])
def test_exponent_notation_is_refused_even_for_a_valid_amount(literal):
    err = refusal(offered(literal))
    assert [(e.field, e.message) for e in err.errors] == [
        ("$.payload.price", "must not use exponent notation")
    ]


@pytest.mark.parametrize("literal", ['"320"', "true", "null"])
def test_a_price_is_a_json_number(literal):
    err = refusal(offered(literal))
    assert [(e.field, e.message) for e in err.errors] == [
        ("$.payload.price", "must be a JSON number")
    ]


def test_a_price_a_double_cannot_hold_is_refused():
    # 16 significant digits: the logged double would read back as 99999999999.99998.
    err = refusal(offered("99999999999.99999"))
    assert err.errors[0].message == "has more significant digits than a price can carry exactly"


# The currency's precision, which the machine enforces per session ---------------------------


@pytest.mark.parametrize(
    ("currency", "price", "detail"),
    [
        ("USD", 320.001, "USD prices have at most 2 decimals"),
        ("JPY", 320.5, "JPY prices have at most 0 decimals"),
        ("KWD", 320.0001, "KWD prices have at most 3 decimals"),
    ],
)
def test_a_price_finer_than_the_session_currency_is_refused(currency, price, detail):
    session = negotiating(currency=currency)
    with pytest.raises(ProtocolError) as refused:
        session.feed(propose(1, price))
    assert (refused.value.code, refused.value.status) == ("price_precision", 422)
    assert refused.value.detail == detail
    assert session.types() == ["session.open", "session.ack"]


@pytest.mark.parametrize(("currency", "price"), [("USD", 320.01), ("JPY", 320), ("KWD", 320.125)])
def test_a_price_at_the_currency_precision_is_logged(currency, price):
    session = negotiating(currency=currency)
    session.feed(propose(1, price))
    assert session.entries[-1].envelope["payload"]["price"] == price
    assert session.negotiation.state.buyer_price == D(repr(price))
