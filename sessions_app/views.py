"""Dashboard pages. Thin: resolve the user's scope, call a selector, render."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Exists, OuterRef, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from arbiter_app.keys import every_public_jwk
from arbiter_app.models import Entry
from sessions_app import selectors
from sessions_app.timeline import timeline

PAGE_SIZE = 50
STATES = ("OPENING", "NEGOTIATING", "AGREED", "CLOSED")
RANGES = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7)}


def _scope(request: HttpRequest) -> selectors.Scope:
    scope = selectors.scope_of(request.user)
    if scope is None:
        raise PermissionDenied("this account has no role yet; ask an admin")
    return scope


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    scope = _scope(request)
    sessions = selectors.sessions(scope)
    by_state = dict(sessions.values_list("phase").annotate(n=Count("id")).order_by())
    since = timezone.now() - timedelta(hours=24)
    return render(
        request,
        "sessions_app/overview.html",
        {
            "scope": scope,
            "by_state": [(state, by_state.get(state, 0)) for state in STATES],
            "total": sum(by_state.values()),
            "agreed_24h": sessions.filter(phase="AGREED", ended_at__gte=since).count(),
            "recent": sessions.order_by("-opened_at")[:10],
        },
    )


def _violated() -> Exists:
    return Exists(
        Entry.objects.filter(
            session=OuterRef("pk"), type="round.verdict", envelope__contains='"status":"violated"'
        )
    )


@login_required
def session_list(request: HttpRequest) -> HttpResponse:
    scope = _scope(request)
    sessions = selectors.sessions(scope).annotate(violated=_violated())
    params = request.GET
    if params.get("state") in STATES:
        sessions = sessions.filter(phase=params["state"])
    if agent := params.get("agent", "").strip():
        sessions = sessions.filter(Q(merchant_agent_id=agent) | Q(buyer_agent_id=agent))
    if params.get("violation") == "yes":
        sessions = sessions.filter(violated=True)
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
            "ranges": RANGES,
            "filters": {
                k: params.get(k, "") for k in ("state", "agent", "violation", "range", "q")
            },
        },
    )


def _session_context(request: HttpRequest, session_id: str) -> dict[str, Any]:
    scope = _scope(request)
    found = selectors.session(scope, session_id)
    entries = selectors.entries(found)
    view = timeline(entries, every_public_jwk())
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
