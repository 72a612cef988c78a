from datetime import UTC, datetime

from django import template
from django.utils import timezone
from django.utils.html import format_html

register = template.Library()


@register.filter
def ago(moment: datetime | None) -> str:
    """How long ago, in the one unit an operator reads at a glance: "3 s ago", "12 min ago"."""
    if moment is None:
        return ""
    seconds = int((timezone.now() - moment).total_seconds())
    if seconds < 1:
        return "just now"  # or a clock a little ahead of ours
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago"


#: How much of a moment ``exact`` shows, as strftime writes it in UTC.
PRECISIONS = {"seconds": "%Y-%m-%d %H:%M:%S", "minutes": "%Y-%m-%d %H:%M", "time": "%H:%M:%S"}


@register.filter
def exact(moment: datetime | None, precision: str = "seconds") -> str:
    """A ``<time>`` at its exact moment (to the second, the minute, or the time of day alone),
    in UTC until static/js/times.js writes it in the viewer's own zone; UTC in its title."""
    if moment is None:
        return ""
    utc = moment.astimezone(UTC)
    return format_html(
        '<time datetime="{}" title="{} UTC" data-local="{}">{}</time>',
        utc.isoformat(timespec="seconds"),
        f"{utc:%Y-%m-%d %H:%M:%S}",
        precision,
        utc.strftime(PRECISIONS[precision]),
    )


@register.filter
def when(moment: datetime | str | None) -> str:
    """A ``<time>`` that static/js/times.js turns into "3 minutes ago" (or "in 3 days"), kept
    current; the exact UTC time is its text until then (and without script) and its title
    always. A protocol timestamp, as the session summary's timers, is the moment it names."""
    if not moment:
        return ""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    exact = moment.astimezone(UTC)
    return format_html(
        '<time datetime="{0}" title="{1} UTC" data-relative>{1}</time>',
        exact.isoformat(timespec="seconds"),
        f"{exact:%Y-%m-%d %H:%M:%S}",
    )
