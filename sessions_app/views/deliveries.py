"""The deliveries page: the handoffs and callbacks in scope across sessions, filtered by what
became of them and paged; one delivery's outcome, attempts, requests and responses; and
"resend now" for any delivery not cleanly delivered, one or a selection, after a confirmation."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.template.defaultfilters import pluralize
from django.views.decorators.http import require_GET, require_POST

from arbiter_app import selectors as arbiter
from sessions_app import actions, selectors
from sessions_app.tenancy import Scope, require_staff, scope_or_denied
from sessions_app.views import refusal

PAGE_SIZE = 50


def _choices(values: tuple[str, ...], anything: str) -> list[tuple[str, str]]:
    return [("", anything), *((value, value) for value in values)]


class DeliveryFilterForm(forms.Form):
    agent = forms.ChoiceField(
        choices=[],
        required=False,
        error_messages={"invalid_choice": "%(value)s is not an agent in your scope."},
    )
    kind = forms.ChoiceField(choices=_choices(arbiter.DELIVERY_KINDS, "any kind"), required=False)
    # Named state in the URL still, so that links to ?state=failed keep working.
    state = forms.ChoiceField(
        label="Outcome",
        choices=_choices(arbiter.DELIVERY_OUTCOMES, "any outcome"),
        required=False,
    )
    target = forms.CharField(label="Target URL contains", max_length=200, required=False)
    after = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, data: QueryDict, *, scope: Scope) -> None:
        super().__init__(data)
        agent_ids = selectors.agents(scope).values_list("agent_id", flat=True)
        self.fields["agent"].choices = _choices(tuple(agent_ids), "any agent")

    def clean_target(self) -> str:
        target: str = self.cleaned_data["target"]
        if any(ord(c) < 32 or ord(c) == 127 for c in target):
            raise forms.ValidationError("A URL holds no control characters.")
        return target

    def clean_after(self) -> arbiter.Position | None:
        token: str = self.cleaned_data["after"]
        if not token:
            return None
        try:
            return arbiter.Position.parse(token)
        except arbiter.BadPosition as exc:
            raise forms.ValidationError(f"Not a page of this list: {exc}") from exc


@login_required
@require_GET
def delivery_list(request: HttpRequest) -> HttpResponse:
    scope = scope_or_denied(request)
    form = DeliveryFilterForm(request.GET, scope=scope)
    page, next_position, status = [], None, 200
    if form.is_valid():
        page, next_position = selectors.deliveries(scope, limit=PAGE_SIZE, **form.cleaned_data)
    else:
        # A filter the list cannot apply is reported, never quietly dropped.
        status = 400
    older = None
    if next_position is not None:
        query = request.GET.copy()
        query["after"] = next_position.token()
        older = f"?{query.urlencode()}"
    return render(
        request,
        "sessions_app/deliveries.html",
        {
            "scope": scope,
            "form": form,
            "deliveries": page,
            "older": older,
            "paged": bool(form.is_valid() and form.cleaned_data["after"]),
            "filters": request.GET.copy(),
        },
        status=status,
    )


@login_required
@require_GET
def delivery_page(request: HttpRequest, kind: str, pk: int) -> HttpResponse:
    scope = scope_or_denied(request)
    delivery, attempts = selectors.delivery(scope, kind, pk)
    return render(
        request,
        "sessions_app/delivery_detail.html",
        {"scope": scope, "delivery": delivery, "attempts": attempts},
    )


def _selection(request: HttpRequest) -> dict[str, list[int]] | None:
    """The deliveries a resend form names, ids by kind; ``None`` when one is not an id."""
    ids = {kind: request.POST.getlist(kind) for kind in arbiter.DELIVERY_KINDS}
    if not all(i.isascii() and i.isdigit() and len(i) <= 18 for v in ids.values() for i in v):
        return None
    return {kind: [int(i) for i in values] for kind, values in ids.items()}


@login_required
@require_POST
def resend(request: HttpRequest) -> HttpResponse:
    """Without ``confirm``, the page asking to confirm the selection; with it, the resend.
    Either way the selection is checked first: only deliveries in scope not yet delivered."""
    scope = scope_or_denied(request)
    require_staff(scope)
    selection = _selection(request)
    selected: list[arbiter.Delivery] = []
    error = ""
    if selection is None:
        error = "the selection names no delivery of this list."
    else:
        try:
            selected = actions.resendable(scope, selection)
        except ValueError as exc:
            error = f"{exc}."
    if error or request.POST.get("confirm") != "yes":
        return render(
            request,
            "sessions_app/deliveries_resend.html",
            {"scope": scope, "selected": selected, "form": refusal(error) if error else None},
            status=400 if error else 200,
        )
    assert selection is not None  # checked above: an error answers before this
    refused = actions.resend_deliveries(actor=request.user, scope=scope, selection=selection)
    taken = len(selected) - len(refused)
    if taken:
        messages.success(request, f"Resending {taken} deliver{pluralize(taken, 'y,ies')} now.")
    for which, why in refused.items():
        messages.error(request, f"Not resent, the {which}: {why}")
    if len(selected) == 1:
        return redirect("delivery", selected[0].kind, selected[0].pk)
    return redirect("deliveries")
