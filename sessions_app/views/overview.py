"""The overview: counts by state, agreements per hour, violation rates, strategies, and
the background work."""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from sessions_app import background, selectors
from sessions_app.tenancy import scope_or_denied


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    scope = scope_or_denied(request)
    by_state = selectors.counts_by_state(scope)
    per_hour = selectors.agreements_per_hour(scope, timezone.now())
    violation_rates = selectors.violation_rates(scope)
    charts = {
        # Instants, which overview.js labels in the viewer's zone, as the table beside it.
        "hours": [hour.isoformat() for hour, _ in per_hour],
        "agreements": [n for _, n in per_hour],
        "agents": [r.merchant_agent_id for r in violation_rates],
        "rates": [round(100 * r.rate, 1) for r in violation_rates],
    }
    return render(
        request,
        "sessions_app/overview.html",
        {
            "scope": scope,
            "by_state": list(by_state.items()),
            "total": sum(by_state.values()),
            "agreed_24h": sum(n for _, n in per_hour),
            "per_hour": per_hour,
            "violation_rates": violation_rates,
            "charts_json": json.dumps(charts),
            "recent": selectors.sessions(scope).order_by("-opened_at")[:10],
            "by_strategy": selectors.by_strategy(scope),
            # Hostnames and every tenant's failures are the operators' business, not a merchant's.
            "machinery": background.health() if scope.is_staff_role else None,
        },
    )
