from datetime import datetime

from django import template
from django.utils import timezone

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
