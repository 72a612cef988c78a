from decimal import Decimal

import pytest

from sessions_app.templatetags.prices import price


@pytest.mark.parametrize(
    ("stored", "shown"),
    [("400.0000", "400"), ("339.9900", "339.99"), ("0.5000", "0.5"), ("1000000", "1000000")],
)
def test_prices_show_as_people_write_them(stored: str, shown: str) -> None:
    assert price(Decimal(stored)) == shown
