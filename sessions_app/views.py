"""Dashboard pages. Thin: resolve the user's scope, call a selector, render."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone

from arbiter_app.keys import every_public_jwk
from oanp.machine import Phase
from oanp.profiles import VerdictStatus
from sessions_app import machinery, selectors
from sessions_app.analytics import analyse
from sessions_app.models import AgentProfile, Merchant
from sessions_app.timeline import timeline

PAGE_SIZE = 50
#: The phases a stored session can be in: EVALUATING lasts only within the step ending a round.
STATES = tuple(phase.value for phase in Phase if phase is not Phase.EVALUATING)
FILTERS = ("state", "merchant", "agent", "verdict", "violation", "range", "q")
RANGES = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7)}


def scope_or_denied(request: HttpRequest) -> selectors.Scope:
    scope = selectors.scope_of(request.user)
    if scope is None:
        raise PermissionDenied("this account has no role yet; ask an admin")
    return scope


#: The filter of the sessions with a round judged each way, from the row's verdict counts.
JUDGED = {
    VerdictStatus.FAIR.value: Q(fair_rounds__gt=0),
    VerdictStatus.FAIR_BUT_STUCK.value: Q(stuck_rounds__gt=0),
    VerdictStatus.VIOLATED.value: Q(violated_rounds__gt=0),
}
VERDICTS = tuple(JUDGED)
VIOLATED = JUDGED[VerdictStatus.VIOLATED.value]


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


@login_required
def session_list(request: HttpRequest) -> HttpResponse:
    scope = scope_or_denied(request)
    sessions = selectors.sessions(scope)
    params = request.GET
    if params.get("state") in STATES:
        sessions = sessions.filter(phase=params["state"])
    if agent := params.get("agent", "").strip():
        sessions = sessions.filter(Q(merchant_agent_id=agent) | Q(buyer_agent_id=agent))
    if params.get("violation") == "yes":
        sessions = sessions.filter(VIOLATED)
    if params.get("verdict") in JUDGED:
        sessions = sessions.filter(JUDGED[params["verdict"]])
    if scope.is_staff_role and (merchant := params.get("merchant", "")):
        agent_ids = AgentProfile.objects.filter(merchant__slug=merchant).values("agent_id")
        sessions = sessions.filter(merchant_agent_id__in=agent_ids)
    if params.get("range") in RANGES:
        sessions = sessions.filter(opened_at__gte=timezone.now() - RANGES[params["range"]])
    if query := params.get("q", "").strip():
        sessions = sessions.filter(session_id__icontains=query)
    # Cursor pagination on the primary key: stable while new sessions keep arriving.
    if (before := params.get("before", "")).isdigit():
        sessions = sessions.filter(pk__lt=int(before))
    page = list(sessions.order_by("-pk")[: PAGE_SIZE + 1])
    more = len(page) > PAGE_SIZE
    page = page[:PAGE_SIZE]
    template = (
        "sessions_app/_session_rows.html"
        if request.headers.get("HX-Request")
        else ("sessions_app/session_list.html")
    )
    return render(
        request,
        template,
        {
            "scope": scope,
            "sessions": page,
            "next_cursor": page[-1].pk if more else None,
            "states": STATES,
            "verdicts": VERDICTS,
            "ranges": RANGES,
            "merchants": Merchant.objects.all() if scope.is_staff_role else [],
            "filters": {k: params.get(k, "") for k in FILTERS},
        },
    )


def _session_context(request: HttpRequest, session_id: str) -> dict[str, Any]:
    scope = scope_or_denied(request)
    found = selectors.session(scope, session_id)
    entries = selectors.entries(found)
    view = timeline(entries, every_public_jwk())
    handoff, attempts = selectors.handoff(found)
    chart = {
        "rounds": [r.round for r in view.rounds],
        "buyer": [r.buyer_price for r in view.rounds],
        "merchant": [r.merchant_price for r in view.rounds],
    }
    return {
        "scope": scope,
        "session": found,
        "entries": [(e, json.dumps(e, indent=2)) for e in entries],
        "view": view,
        "chart_json": json.dumps(chart),
        "handoff": handoff,
        "attempts": attempts,
        "analysis": analyse(selectors.revealed(found), found.final_price),
    }


@login_required
def session_page(request: HttpRequest, session_id: str) -> HttpResponse:
    context = _session_context(request, session_id)
    template = (
        "sessions_app/_session_body.html"
        if request.headers.get("HX-Request")
        else ("sessions_app/session_page.html")
    )
    return render(request, template, context)


@login_required
def session_head(request: HttpRequest, session_id: str) -> JsonResponse:
    """How far the session's log reaches: the live page's fallback when a wake-up is lost
    (the in-memory channel layer cannot carry the worker's to the server)."""
    found = selectors.session(scope_or_denied(request), session_id)
    return JsonResponse({"head_seq": found.head_seq, "state": found.phase})
