"""The admins' pages: the signing keys, audit exports and the admin audit log. Thin: the
role checks live in :mod:`sessions_app.actions` and :mod:`sessions_app.exports`."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from arbiter_app import selectors as arbiter
from arbiter_app.models import KeyState
from sessions_app import actions, audit_log, exports, selectors
from sessions_app.models import Export
from sessions_app.tenancy import Scope, require_admin, scope_or_denied

# Signing keys ----------------------------------------------------------------------------


def _dated(key: dict[str, Any]) -> dict[str, Any]:
    """The key history's ISO times as datetimes, so the page shows them in its one zone."""
    return {
        **key,
        **{
            field: datetime.fromisoformat(key[field]) if key[field] else None
            for field in ("activated_at", "retiring_at", "retired_at")
        },
    }


class RotateForm(forms.Form):
    alg = forms.ChoiceField(
        label="Algorithm", choices=[(alg, alg) for alg in arbiter.SIGNING_ALGORITHMS]
    )


def _signing_keys_page(
    request: HttpRequest, scope: Scope, form: RotateForm, status: int = 200
) -> HttpResponse:
    return render(
        request,
        "sessions_app/signing_keys.html",
        {
            "scope": scope,
            "keys": [_dated(key) for key in reversed(arbiter.key_history())],
            "form": form,
            "jwks_json": json.dumps(arbiter.published_jwks(), indent=2),
        },
        status=status,
    )


@login_required
@require_GET
def signing_keys_page(request: HttpRequest) -> HttpResponse:
    scope = scope_or_denied(request)
    require_admin(scope)
    return _signing_keys_page(request, scope, RotateForm(auto_id="%s"))


@login_required
@require_http_methods(["GET", "POST"])
def rotate_signing_key(request: HttpRequest) -> HttpResponse:
    """A GET, or a POST without the confirmation page's answer, only asks: rotating moves
    every agent onto a new key, so it takes a second, deliberate click. An algorithm the
    arbiter cannot sign with is sent back to the signing keys page's form, where it was
    chosen."""
    scope = scope_or_denied(request)
    require_admin(scope)
    form = RotateForm(request.POST if request.method == "POST" else request.GET, auto_id="%s")
    if not form.is_valid():
        return _signing_keys_page(request, scope, form, status=400)
    alg = form.cleaned_data["alg"]
    if request.POST.get("confirmed") != "yes":
        active = [_dated(k) for k in arbiter.key_history() if k["state"] == KeyState.ACTIVE]
        context = {"scope": scope, "alg": alg, "active": active}
        return render(request, "sessions_app/rotate_confirm.html", context)
    fresh = actions.rotate_signing_key(actor=request.user, scope=scope, alg=alg)
    messages.success(request, f"Signing key rotated; the new {fresh.alg} key id is {fresh.kid}.")
    return redirect("signing-keys")


# Exports ---------------------------------------------------------------------------------


class ExportForm(forms.Form):
    kind = forms.ChoiceField(
        label="Export",
        choices=[
            ("session", "One session"),
            ("merchant", "A merchant's sessions"),
            ("range", "Sessions opened in a time range"),
            ("all", "All sessions"),
        ],
        widget=forms.RadioSelect,
        initial="range",
    )
    # Each field is for one kind only; the labels say which, for pages shown without script.
    session_id = forms.CharField(label="Session id (one session)", required=False, max_length=64)
    merchant = forms.ChoiceField(label="Merchant (a merchant's sessions)", required=False)
    preset = forms.ChoiceField(
        label="Time range (sessions opened in it)",
        required=False,
        choices=[
            *((key, label) for key, (label, _) in exports.PRESETS.items()),
            (exports.CUSTOM, "From the first day to the last day below"),
        ],
    )
    opened_from = forms.DateField(
        label="First day (UTC; empty: from the first session)",
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        error_messages={"invalid": "Enter the first day as a date, like 2026-04-28."},
    )
    opened_to = forms.DateField(
        label="Last day, counted whole (UTC; empty: up to now)",
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        error_messages={"invalid": "Enter the last day as a date, like 2026-04-28."},
    )

    def __init__(self, *args: Any, merchants: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["merchant"].choices = merchants


def _merchant_choices(scope: Scope) -> list[tuple[str, str]]:
    merchants = selectors.merchants()
    if scope.is_tenant:
        merchants = merchants.filter(pk=scope.merchant_id)
    return [(m.slug, m.name) for m in merchants]


@login_required
@require_http_methods(["GET", "POST"])
def exports_page(request: HttpRequest) -> HttpResponse:
    scope = scope_or_denied(request)
    listed = exports.exports_of(scope)  # refuses operators before anything is read
    form = ExportForm(
        request.POST if request.method == "POST" else None, merchants=_merchant_choices(scope)
    )
    if request.method == "POST" and form.is_valid():
        try:
            export = exports.request_export(actor=request.user, scope=scope, **form.cleaned_data)
        except exports.ExportRefused as refused:
            form.add_error(refused.field, str(refused))
        else:
            messages.success(request, f"Export #{export.pk} queued: it runs in the background.")
            return redirect("exports")
    return render(
        request,
        "sessions_app/exports.html",
        {"scope": scope, "form": form, "exports": listed[:50]},
        status=400 if form.errors else 200,
    )


@login_required
@require_POST
def export_retry(request: HttpRequest, export_id: int) -> HttpResponse:
    scope = scope_or_denied(request)
    try:
        exports.retry_export(actor=request.user, scope=scope, export_id=export_id)
    except exports.ExportRefused as refused:
        messages.error(request, str(refused))
    else:
        messages.success(request, f"Export #{export_id} queued again: it runs in the background.")
    return redirect("exports")


@login_required
@require_GET
def export_status(request: HttpRequest, export_id: int) -> HttpResponse:
    """The small fragment the exports page polls while an export runs."""
    found = exports.export_of(scope_or_denied(request), export_id)
    return render(request, "sessions_app/_export_status.html", {"export": found})


@login_required
@require_GET
def export_download(request: HttpRequest, export_id: int, part: str) -> FileResponse:
    found = exports.export_of(scope_or_denied(request), export_id)
    # Only a finished export has files; a failed one kept none.
    if found.state != Export.State.DONE:
        raise Http404("this export has no files")
    stored = {"bundle": found.bundle, "csv": found.summary_csv}.get(part)
    if stored is None or not stored:
        raise Http404("no such file")
    exports.record_download(actor=request.user, export=found, part=part)
    return FileResponse(stored.open("rb"), as_attachment=True, filename=Path(stored.name).name)


# The admin audit log ---------------------------------------------------------------------


@login_required
@require_GET
def audit_page(request: HttpRequest) -> HttpResponse:
    scope = scope_or_denied(request)
    form = audit_log.filter_form(scope, request.GET)
    valid = form.is_valid()
    return render(
        request,
        "sessions_app/audit.html",
        {
            "scope": scope,
            "form": form,
            "page": audit_log.audit_page(form) if valid else None,
            "filtered": valid and any(form.cleaned_data.values()),
        },
        status=200 if valid else 400,
    )
