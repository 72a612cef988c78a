from decimal import Decimal

from django import template

from sessions_app.analytics import plain

register = template.Library()


@register.filter
def price(value: Decimal | None) -> str:
    """A stored price as people write it: 340, 339.99, never 3.4E+2 or 340.0000."""
    return "" if value is None else str(plain(value))
