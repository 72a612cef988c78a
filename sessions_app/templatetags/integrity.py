"""The integrity check's alarms (arbiter_app.integrity) on the dashboard."""

from typing import Any

from django import template

from arbiter_app import selectors as arbiter

register = template.Library()

#: Sessions the banner names; the audit page lists every open alarm.
NAMED = 5


@register.inclusion_tag("sessions_app/_integrity_notice.html")
def integrity_notice(scope: Any) -> dict[str, Any]:
    """A banner for operators and admins while any alarm is open; one query, for them only."""
    if not (scope and scope.is_staff_role):
        return {}
    alarms = list(arbiter.open_integrity_alarms().order_by("first_seen_at")[: NAMED + 1])
    return {"scope": scope, "alarms": alarms[:NAMED], "more": len(alarms) > NAMED}


@register.inclusion_tag("sessions_app/_integrity_panel.html")
def integrity_panel() -> dict[str, Any]:
    """The last check and every alarm, open ones first, for the admins' audit page."""
    return {
        "check": arbiter.last_integrity_check(),
        "alarms": arbiter.open_integrity_alarms().order_by("first_seen_at"),
        "resolved": arbiter.resolved_integrity_alarms()[:50],
    }
