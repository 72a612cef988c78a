"""The integrity check's alarms on the dashboard (arbiter_app.integrity)."""

from typing import Any

from django import template

from arbiter_app import integrity

register = template.Library()

#: Sessions the banner names; the audit page lists every open alarm.
NAMED = 5


@register.inclusion_tag("sessions_app/_integrity_notice.html")
def integrity_notice(scope: Any) -> dict[str, Any]:
    """A banner for operators and admins while any alarm is open; one query, for them only."""
    if not (scope and scope.is_staff_role):
        return {}
    alarms = list(integrity.open_alarms().order_by("first_seen_at")[: NAMED + 1])
    return {"scope": scope, "alarms": alarms[:NAMED], "more": len(alarms) > NAMED}


@register.inclusion_tag("sessions_app/_integrity_panel.html")
def integrity_panel() -> dict[str, Any]:
    """The last check and every alarm, open ones first, for the admins' audit page."""
    return {
        "check": integrity.last_check(),
        "alarms": integrity.open_alarms().order_by("first_seen_at"),
        "resolved": integrity.resolved_alarms()[:50],
    }
