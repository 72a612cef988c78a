"""What the dashboard's lists filter sessions by: state, merchant, agent, verdicts, time range
and session id. Verdicts are counted on the session row as they are appended, so no filter
reads entries.

A value that is not one of a filter's choices leaves that filter out rather than refusing
the page; :meth:`SessionFilter.is_valid` and ``errors`` say which values were left out."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

import django_filters
from django.db.models import Q, QuerySet
from django.utils import timezone

from arbiter_app.models import VERDICT_COUNTS, Session
from oanp.machine import Phase
from oanp.profiles import VerdictStatus
from sessions_app.models import AgentProfile

if TYPE_CHECKING:
    # Only for the annotation: the selectors apply this filter, so they import this module.
    from sessions_app.selectors import Scope

#: The phases a stored session can be in: EVALUATING lasts only within the step ending a round.
STATES = tuple(phase.value for phase in Phase if phase is not Phase.EVALUATING)
RANGES = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7)}

#: The filter of the sessions with a round judged each way, from the row's verdict counts.
JUDGED = {status: Q(**{f"{column}__gt": 0}) for status, column in VERDICT_COUNTS.items()}
VERDICTS = tuple(JUDGED)
VIOLATED = JUDGED[VerdictStatus.VIOLATED.value]


class SessionFilter(django_filters.FilterSet):
    """The sessions list's filters, by the names of its URL parameters.

    Bound to a scope: the merchant filter is for those who see every tenant, and a merchant
    member's ``merchant`` parameter is ignored, as for any parameter the list does not know."""

    state = django_filters.ChoiceFilter(
        field_name="phase", choices=[(state, state.lower()) for state in STATES]
    )
    # Not stripped: a slug of blanks names no merchant, so it matches no session.
    merchant = django_filters.CharFilter(method="by_merchant", strip=False)
    agent = django_filters.CharFilter(method="by_agent")
    verdict = django_filters.ChoiceFilter(
        choices=[(verdict, f"a round judged {verdict}") for verdict in VERDICTS],
        method="by_verdict",
    )
    violation = django_filters.ChoiceFilter(
        choices=[("yes", "has a violation")], method="by_violation"
    )
    range = django_filters.ChoiceFilter(
        choices=[(key, f"last {key}") for key in RANGES], method="by_range"
    )
    q = django_filters.CharFilter(field_name="session_id", lookup_expr="icontains")

    def __init__(self, data: Any, queryset: QuerySet[Session], *, scope: Scope) -> None:
        super().__init__(data, queryset)
        if not scope.is_staff_role:
            del self.filters["merchant"]

    def by_merchant(self, sessions: QuerySet[Session], name: str, slug: str) -> QuerySet[Session]:
        agent_ids = AgentProfile.objects.filter(merchant__slug=slug).values("agent_id")
        return sessions.filter(merchant_agent_id__in=agent_ids)

    def by_agent(self, sessions: QuerySet[Session], name: str, agent: str) -> QuerySet[Session]:
        return sessions.filter(Q(merchant_agent_id=agent) | Q(buyer_agent_id=agent))

    def by_verdict(self, sessions: QuerySet[Session], name: str, status: str) -> QuerySet[Session]:
        return sessions.filter(JUDGED[status])

    def by_violation(self, sessions: QuerySet[Session], name: str, _: str) -> QuerySet[Session]:
        return sessions.filter(VIOLATED)

    def by_range(self, sessions: QuerySet[Session], name: str, key: str) -> QuerySet[Session]:
        return sessions.filter(opened_at__gte=timezone.now() - RANGES[key])
