"""The sessions pages: the filtered list, a session's page and its head, and what operators
may do to one (terminate it; its handoff is redelivered through the deliveries' confirmation).
Thin: the role checks live in :mod:`sessions_app.actions`."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import redirect, render
from django.template.defaultfilters import pluralize
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from arbiter_app import selectors as arbiter
from oanp.wire.envelope import IDENTIFIER_RULE, is_identifier
from sessions_app import actions, exports, saved_views, selectors
from sessions_app.analytics import analyse, analyse_terms
from sessions_app.filters import (
    CLOSE_REASONS,
    PROFILE_NAMES,
    RANGES,
    SETTLEMENTS,
    SORTS,
    STATES,
    VERDICTS,
)
from sessions_app.tenancy import Scope, require_admin, require_staff, scope_or_denied
from sessions_app.timeline import timeline
from sessions_app.views import refusal

PAGE_SIZE = 50


@login_required
def session_list(request: HttpRequest) -> HttpResponse:
    """The filtered, sorted list. Its rows alone for htmx (the next page); with ``since``, the
    live list's announcement of the sessions opened since; with ``ids``, the rows of those
    sessions as they stand now; a bad parameter is a 400 that lists nothing and says what to
    fix."""
    scope = scope_or_denied(request)
    if "ids" in request.GET:
        return _rows_by_id(request, scope)
    found = selectors.session_filter(scope, request.GET)
    valid = found.is_valid()
    params = request.GET.copy()
    for transient in ("cursor", "since"):
        params.pop(transient, None)
    context: dict[str, Any] = {
        "scope": scope,
        "form": found.form,
        "states": STATES,
        "verdicts": VERDICTS,
        "profiles": PROFILE_NAMES,
        "ranges": RANGES,
        "close_reasons": CLOSE_REASONS,
        "settlements": SETTLEMENTS,
        "merchants": selectors.merchants() if scope.is_staff_role else [],
        "filters": {k: request.GET.get(k, "") for k in found.form.fields},
        # A filter in force keeps the filters unfolded on a phone; none folds them away.
        "filtering": any(request.GET.get(k) for k in found.filters),
        "views": saved_views.visible_views(scope, request.user),
        "team": saved_views.team_label(scope),
        "selectable": scope.is_staff_role,
        # The first page as it is now: where "show" and the sort headers lead.
        "query": params.urlencode(),
    }
    if not valid:
        return render(request, "sessions_app/session_list.html", context, status=400)
    if (since := found.form.cleaned_data["since"]) is not None:
        return render(
            request,
            "sessions_app/_session_news.html",
            {**context, "arrived": selectors.opened_since(found, since)},
        )
    page = selectors.session_page(found, PAGE_SIZE)
    sort = found.form.cleaned_data["sort"]
    context |= {
        "page": page,
        "columns": _sort_headers(params, sort),
        "more_query": _with(params, cursor=page.next_cursor) if page.next_cursor else None,
    }
    template = (
        "sessions_app/_session_rows.html"
        if request.headers.get("HX-Request")
        else "sessions_app/session_list.html"
    )
    return render(request, template, context)


#: The most rows one ``?ids=`` asks for: a live list asks for the rows it shows in batches.
MAX_ROW_IDS = 100


class RowIdsForm(forms.Form):
    ids = forms.CharField(max_length=MAX_ROW_IDS * 65)

    def clean_ids(self) -> list[str]:
        ids = self.cleaned_data["ids"].split(",")
        if len(ids) > MAX_ROW_IDS:
            raise forms.ValidationError(f"At most {MAX_ROW_IDS} sessions at a time.")
        if not all(is_identifier(i) for i in ids):
            raise forms.ValidationError(f"A session id is {IDENTIFIER_RULE}.")
        return ids


def _rows_by_id(request: HttpRequest, scope: Scope) -> HttpResponse:
    """The live list's rows of the sessions ``ids`` names (comma-separated), as they stand
    now: those in scope, the others left out as unknown ones."""
    form = RowIdsForm(request.GET)
    if not form.is_valid():
        return HttpResponse(
            f"ids: {' '.join(form.errors['ids'])}", status=400, content_type="text/plain"
        )
    rows = selectors.session_rows(scope, form.cleaned_data["ids"])
    return render(
        request,
        "sessions_app/_session_rows.html",
        {"page": {"rows": rows}, "selectable": scope.is_staff_role},
    )


def _with(params: QueryDict, **changes: str) -> str:
    query = params.copy()
    for key, value in changes.items():
        query[key] = value
    return query.urlencode()


def _sort_headers(params: QueryDict, sort: str) -> dict[str, dict[str, str]]:
    """Per sortable column: the link that sorts by it (descending first, then flipping)
    and its ``aria-sort``."""
    headers = {}
    for key, (_, label) in SORTS.items():
        current = sort.lstrip("-") == key
        descending = sort.startswith("-")
        headers[key] = {
            "label": label,
            "query": _with(params, sort=key if current and descending else f"-{key}"),
            "aria_sort": ("descending" if descending else "ascending") if current else "none",
        }
    return headers


def _session_context(request: HttpRequest, session_id: str) -> dict[str, Any]:
    scope = scope_or_denied(request)
    found = selectors.session(scope, session_id)
    entries = selectors.entries(found)
    parties = [found.buyer_agent_id, found.merchant_agent_id]
    view = timeline(entries, arbiter.every_public_jwk(), arbiter.party_keys(parties))
    # The handoff goes to the merchant's own system: its requests are the merchant's business.
    handoff, attempts = (None, []) if scope.is_buyer_side else selectors.handoff(found)
    # A settlement's reveals are in the log; reveals after the end complete them.
    revealed = {
        **(view.settlement.constraints if view.settlement else {}),
        **selectors.revealed(found),
    }
    chart = {
        "rounds": [r.round for r in view.rounds],
        "buyer": [r.buyer_price for r in view.rounds],
        "merchant": [r.merchant_price for r in view.rounds],
    }
    return {
        "scope": scope,
        "session": found,
        "summary": selectors.summary(found),
        "termination": selectors.termination(scope, found),
        "declined": selectors.declined(found),
        "idle": None if found.is_terminal else view.idle(timezone.now()),
        "view": view,
        "chart_json": json.dumps(chart),
        "handoff": handoff,
        "attempts": attempts,
        "analysis": analyse(revealed, found.final_price),
        "trade_offs": analyse_terms(
            view.declared, revealed, found.final_price, dict(view.final_terms)
        ),
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
def session_log(request: HttpRequest, session_id: str) -> HttpResponse:
    """The session's log to keep, for ``oanp verify`` (docs/audit.md)."""
    found = selectors.session(scope_or_denied(request), session_id)
    response = HttpResponse(selectors.log_download(found), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{found.session_id}.log.json"'
    return response


@login_required
def session_head(request: HttpRequest, session_id: str) -> JsonResponse:
    """How far the session's log reaches: the live page's fallback when a wake-up is lost
    (the in-memory channel layer cannot carry the worker's to the server)."""
    found = selectors.session(scope_or_denied(request), session_id)
    return JsonResponse({"head_seq": found.head_seq, "state": found.phase})


# Terminating a session -------------------------------------------------------------------


class TerminateForm(forms.Form):
    detail = forms.CharField(
        label="Reason (the parties read it in the arbiter's close message)",
        required=False,
        max_length=1000,
        widget=forms.Textarea(attrs={"rows": 3}),
    )


@login_required
@require_http_methods(["GET", "POST"])
def terminate(request: HttpRequest, session_id: str) -> HttpResponse:
    """GET asks to confirm; POST terminates."""
    scope = scope_or_denied(request)
    require_staff(scope)
    found = selectors.session(scope, session_id)
    form = TerminateForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        closed = actions.terminate_session(
            actor=request.user,
            scope=scope,
            session_id=found.session_id,
            detail=form.cleaned_data["detail"],
        )
        if closed:
            messages.success(request, f"Session {found.session_id} terminated.")
            return redirect("session", session_id=found.session_id)
        form.add_error(None, "The session had already ended; nothing was changed.")
        # Ended meanwhile: the page must say so rather than offer the button again.
        found.refresh_from_db()
    return render(
        request,
        "sessions_app/terminate_confirm.html",
        {"scope": scope, "session": found, "form": form, "ended": found.is_terminal},
        status=400 if form.errors else 200,
    )


# Bulk actions on a selection of the list --------------------------------------------------


def _selected(request: HttpRequest) -> tuple[list[str], str]:
    """The session ids the list's checkboxes sent, and why they are refused ("" if not)."""
    ids = request.POST.getlist("session")
    if not all(is_identifier(i) for i in ids):
        return [], "the selection names no session of this list."
    return ids, ""


@login_required
@require_POST
def bulk_terminate(request: HttpRequest) -> HttpResponse:
    """Without ``confirm``, the page listing the selection to confirm; with it, the sessions
    end. Either way the selection is checked first: live sessions in scope only, or none."""
    scope = scope_or_denied(request)
    require_staff(scope)
    ids, error = _selected(request)
    selected = []
    form = TerminateForm(request.POST if request.POST.get("confirm") == "yes" else None)
    if not error:
        try:
            selected = actions.terminable(scope, ids)
        except ValueError as refused:
            error = f"{refused}."
    if error or not form.is_valid():
        return render(
            request,
            "sessions_app/terminate_bulk.html",
            {
                "scope": scope,
                "selected": selected,
                "form": form,
                "refused": refusal(error) if error else None,
            },
            status=400 if error or form.errors else 200,
        )
    ended = actions.terminate_sessions(
        actor=request.user,
        scope=scope,
        session_ids=[s.session_id for s in selected],
        detail=form.cleaned_data["detail"],
    )
    done = len(selected) - len(ended)
    if done:
        messages.success(request, f"{done} session{pluralize(done)} terminated.")
    for session_id in ended:
        messages.error(request, f"Session {session_id} had already ended; nothing was changed.")
    return redirect("sessions")


@login_required
@require_POST
def bulk_export(request: HttpRequest) -> HttpResponse:
    """Queue an export of the selected sessions (admins), then show it on the exports page."""
    scope = scope_or_denied(request)
    require_admin(scope)
    ids, error = _selected(request)
    if not error:
        try:
            export = exports.request_export(
                actor=request.user, scope=scope, kind="selection", session_ids=ids
            )
        except exports.ExportRefused as refused:
            error = str(refused)
    if error:
        return render(
            request,
            "sessions_app/export_refused.html",
            {"scope": scope, "form": refusal(error)},
            status=400,
        )
    count = len(export.scope["session_ids"])
    messages.success(request, f"Export {export.pk} of {count} session{pluralize(count)} queued.")
    return redirect("exports")
