"""The overview: counts by state, agreements per hour, violation rates, strategies, and
the background work."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta

from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from oanp.machine import Phase
from sessions_app import machinery, selectors
from sessions_app.filters import STATES, VIOLATED
from sessions_app.views import scope_or_denied


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    scope = scope_or_denied(request)
    sessions = selectors.sessions(scope)
    by_state = dict(sessions.values_list("phase").annotate(n=Count("id")).order_by())
    now = timezone.now()
    hours = [
        now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=h)
        for h in range(23, -1, -1)
    ]
    agreed = Counter(
        ended.replace(minute=0, second=0, microsecond=0)
        for ended in sessions.filter(phase=Phase.AGREED, ended_at__gte=hours[0]).values_list(
            "ended_at", flat=True
        )
    )
    per_hour = [(hour, agreed.get(hour, 0)) for hour in hours]
    rates = (
        sessions.values("merchant_agent_id")
        .annotate(total=Count("id"), violations=Count("id", filter=VIOLATED))
        .order_by("-violations", "merchant_agent_id")[:20]
    )
    violation_rates = [
        (r["merchant_agent_id"], r["total"], r["violations"], r["violations"] / r["total"])
        for r in rates
    ]
    charts = {
        "hours": [hour.strftime("%H:00") for hour, _ in per_hour],
        "agreements": [n for _, n in per_hour],
        "agents": [agent for agent, *_ in violation_rates],
        "rates": [round(100 * rate, 1) for *_, rate in violation_rates],
    }
    return render(
        request,
        "sessions_app/overview.html",
        {
            "scope": scope,
            "by_state": [(state, by_state.get(state, 0)) for state in STATES],
            "total": sum(by_state.values()),
            "agreed_24h": sum(agreed.values()),
            "per_hour": per_hour,
            "violation_rates": violation_rates,
            "charts_json": json.dumps(charts),
            "recent": sessions.order_by("-opened_at")[:10],
            "by_strategy": selectors.by_strategy(scope),
            # Hostnames and every tenant's failures are the operators' business, not a merchant's.
            "machinery": machinery.health() if scope.is_staff_role else None,
        },
    )
