"""Prices as exact decimals under the ISO 4217 minor-unit rule.

Prices travel as JSON numbers in major units and are compared as :class:`~decimal.Decimal`,
never as binary floats. On the wire and in hashed bytes a price is an ``int`` when whole and a
``float`` otherwise: below 10^12 with at most three decimals it has at most 15 significant
digits, so the float is exact to the decimal and RFC 8785 prints it back digit for digit.
"""

from __future__ import annotations

from decimal import Decimal

#: ISO 4217 active codes whose minor unit is not 2 (funds codes included, metals excluded).
_MINOR_UNITS_EXCEPTIONS: dict[str, int] = {
    **dict.fromkeys(
        "BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF".split(), 0
    ),
    **dict.fromkeys("BHD IQD JOD KWD LYD OMR TND".split(), 3),
    **dict.fromkeys("CLF UYW".split(), 4),
}

_TWO_DECIMAL_CODES = """
AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BOV BRL BSD BTN BWP BYN
BZD CAD CDF CHE CHF CHW CNY COP COU CRC CUP CVE CZK DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP
GEL GHS GIP GMD GTQ GYD HKD HNL HTG HUF IDR ILS INR IRR JMD KES KGS KHR KPW KYD KZT LAK LBP
LKR LRD LSL MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR
NZD PAB PEN PGK PHP PKR PLN QAR RON RSD RUB SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN
SVC SYP SZL THB TJS TMT TOP TRY TTD TWD TZS UAH USD USN UYU UZS VED VES WST XCD XCG YER ZAR
ZMW ZWG
"""

MINOR_UNITS: dict[str, int] = {
    **dict.fromkeys(_TWO_DECIMAL_CODES.split(), 2),
    **_MINOR_UNITS_EXCEPTIONS,
}

PRICE_CEILING = Decimal(10) ** 12


def minor_units(currency: str) -> int:
    """Number of decimals the currency allows; ``KeyError`` for a code we do not know."""
    return MINOR_UNITS[currency]


def decimals_of(price: Decimal) -> int:
    """How many decimals a price is written with, trailing zeros ignored (``340.10`` → 1)."""
    exponent = price.normalize().as_tuple().exponent
    assert isinstance(exponent, int)  # finite by construction
    return max(0, -exponent)


def fits_currency(price: Decimal, currency: str) -> bool:
    return decimals_of(price) <= minor_units(currency)


def price_to_json(price: Decimal) -> int | float:
    """The wire form of a validated price: ``int`` when whole, else the exact ``float``."""
    if price == price.to_integral_value():
        return int(price)
    return float(price)


def to_minor_units(price: Decimal, currency: str) -> int:
    """``339.99`` USD → ``33999``; the ACP handoff speaks minor units."""
    return int(price.scaleb(minor_units(currency)))
