"""Number spellings for fuzzing every JSON reader, and what docs/protocol.md §2 says each means.

:func:`json_numbers` draws literals JSON's grammar admits, from the ordinary (``340``,
``3.4e2``) to the extreme: exponents past what a double holds (``1e400``), past what Python's
``Decimal`` holds (``1e1000000000000000000``), thousands of digits long, or padded with leading
zeros; digit strings thousands long; ``-0``. :data:`NOT_NUMBERS` are spellings outside the
grammar. :func:`reading` is the oracle: what the strict reader must make of a literal, worked
out from its digits and the order of its magnitude alone, so an exponent of any size costs
nothing to judge.
"""

from __future__ import annotations

import re
from decimal import Decimal

from hypothesis import strategies as st

MAX_SAFE_INTEGER = 2**53 - 1

#: The reasons the reader gives (``SchemaInvalid.detail``) for a number it refuses.
OUT_OF_RANGE = "number out of range"
TOO_SMALL = "number too small"
TOO_PRECISE = "number too precise"
#: What it says of the field, for each reason.
FIELD_MESSAGES = {
    OUT_OF_RANGE: "beyond ±(2^53-1)",
    TOO_SMALL: "is not 0, but a double rounds it to 0",
    TOO_PRECISE: "has more significant digits than a double holds",
}

#: Spellings a JSON reader must refuse as not JSON (400 ``malformed_json``).
NOT_NUMBERS = (
    "NaN",
    "-NaN",
    "Infinity",
    "-Infinity",
    "+Infinity",
    "nan",
    "inf",
    "-inf",
    "+1",
    ".5",
    "-.5",
    "1.",
    "01",
    "-01",
    "00",
    "1e",
    "1e+",
    "1E-",
    "1.e5",
    "0x10",
    "1_000",
    "--1",
    "- 1",
    "1ee5",
    "\u0661",  # ARABIC-INDIC DIGIT ONE: a digit to str.isdigit() and Decimal, not to JSON
    "\uff11",  # FULLWIDTH DIGIT ONE
)

#: Literals every fuzz run tries, whatever it draws: the issue's own and their neighbours.
LANDMARKS = (
    "1e1000000000000000000",
    "-1e1000000000000000000",
    "1e-1000000000000000000",
    "0e1000000000000000000",
    "-0.0e-99999999999999999999999",
    "1e999999999999999999",
    "1E400",
    "1e-400",
    "-0",
    "1" + "0" * 5000,
    "9007199254740991",
    "9007199254740992",
    "5e-324",
    "3.7e2",
    "37000e-2",
)

_SHORT = st.text(alphabet="0123456789", min_size=1, max_size=20)
#: Up to 4,000 characters, so a literal of three such parts still fits a 16 KiB reveal.
_LONG = st.builds(
    lambda unit, size: (unit * size)[:size],
    st.sampled_from(["0", "9", "142857", "1000"]),
    st.integers(300, 4000),
)
_DIGITS = st.one_of(_SHORT, _SHORT, _LONG)
_EXPONENT_DIGITS = st.one_of(
    st.integers(0, 400).map(str),  # within a double's reach
    st.integers(0, 10**30).map(str),  # past Decimal's ±10^18
    st.sampled_from(
        ["999999999999999999", "1000000000000000000", "1999999999999999997", "1999999999999999998"]
    ),
    st.builds(lambda zeros, n: "0" * zeros + str(n), st.integers(1, 60), st.integers(0, 400)),
    _LONG,
)


@st.composite
def json_numbers(draw: st.DrawFn) -> str:
    """A number literal as JSON's grammar (RFC 8259 §6) admits it."""
    sign = draw(st.sampled_from(["", "-"]))
    whole = draw(
        st.one_of(
            st.just("0"),
            st.builds(
                lambda first, rest: first + rest,
                st.sampled_from("123456789"),
                st.one_of(st.just(""), _DIGITS),
            ),
        )
    )
    fraction = draw(st.one_of(st.just(""), _DIGITS.map(lambda digits: "." + digits)))
    exponent = draw(
        st.one_of(
            st.just(""),
            st.builds(
                lambda e, exponent_sign, digits: e + exponent_sign + digits,
                st.sampled_from("eE"),
                st.sampled_from(["", "+", "-"]),
                _EXPONENT_DIGITS,
            ),
        )
    )
    return sign + whole + fraction + exponent


def number_spellings() -> st.SearchStrategy[str]:
    """Mostly numbers, now and then a spelling that is not one."""
    return st.one_of(json_numbers(), json_numbers(), json_numbers(), st.sampled_from(NOT_NUMBERS))


_GRAMMAR = re.compile(r"(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([-+]?)([0-9]+))?")


def is_json_number(literal: str) -> bool:
    return _GRAMMAR.fullmatch(literal) is not None


def reading(literal: str) -> int | float | str:
    """What the strict reader makes of ``literal``, a JSON number: the ``int`` or ``float`` it
    is hashed as, or the reason it is refused (:data:`OUT_OF_RANGE`, :data:`TOO_SMALL`,
    :data:`TOO_PRECISE`)."""
    match = _GRAMMAR.fullmatch(literal)
    assert match is not None, literal
    sign, whole, fraction, exponent_sign, exponent_digits = match.groups()
    fraction = fraction or ""
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return 0  # -0, 0.000, 0e99999999999999999999999
    exponent_digits = (exponent_digits or "0").lstrip("0") or "0"
    exponent = 10**31 if len(exponent_digits) > 31 else int(exponent_digits)
    if exponent_sign == "-":
        exponent = -exponent
    scale = exponent - len(fraction)  # the value is int(digits) * 10**scale
    magnitude = scale + len(digits) - 1  # 10**magnitude <= |value| < 10**(magnitude + 1)
    if magnitude >= 16:  # at least 10^16 > 2^53 - 1
        return OUT_OF_RANGE
    if magnitude <= -325:  # below 1e-324: rounds to 0.0, short of the least double 5e-324
        return TOO_SMALL
    value = Decimal(f"{sign}{digits}E{scale}")  # exact, its exponent now small
    if value.copy_abs() > MAX_SAFE_INTEGER:
        return OUT_OF_RANGE
    if value == value.to_integral_value():
        return int(value)
    as_float = float(value)
    if as_float == 0:
        return TOO_SMALL
    return as_float if Decimal(repr(as_float)) == value else TOO_PRECISE
