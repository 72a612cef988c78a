"""Setting up, renewing and turning off a person's second factor (sessions_app.second_factor):
an authenticator app confirmed with one of its codes, recovery codes shown once, and removal
only with a code. Every code checked here spends the address's budget of failed sign-ins when
wrong, as the sign-in's second step does."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST
from django.views.generic import FormView

from sessions_app import second_factor
from sessions_app.views.accounts import CodeForm, SpendsSignInBudget

RECOVERY_CODES_TEMPLATE = "sessions_app/recovery_codes.html"


def _next(request: HttpRequest) -> str:
    """Where the person was going before being sent to set up a second factor, if here."""
    target = request.POST.get("next") or request.GET.get("next") or "/"
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    return "/"


def _recovery_codes(request: HttpRequest, codes: list[str]) -> HttpResponse:
    # In the answer to the POST that made them, and nowhere after: only their use is kept.
    response = render(request, RECOVERY_CODES_TEMPLATE, {"codes": codes, "next": _next(request)})
    response["Cache-Control"] = "no-store"
    return response


class Enrol(LoginRequiredMixin, SpendsSignInBudget, FormView):
    """The app's secret as a QR code and as text, and a code of the app to confirm it."""

    template_name = "sessions_app/two_factor_enrol.html"
    form_class = CodeForm

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.user.is_authenticated and second_factor.has_device(request.user):
            return redirect("account")
        return super().dispatch(request, *args, **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        device = second_factor.enrolment(self.request.user)
        return super().get_context_data(
            qr_code=second_factor.qr_code(device),
            secret=second_factor.secret_text(device),
            required=second_factor.is_required(self.request.user),
            next=_next(self.request),
            **kwargs,
        )

    def form_valid(self, form: forms.Form) -> HttpResponse:
        device = second_factor.enrolment(self.request.user)
        if not second_factor.confirm(device, form.cleaned_data["code"]):
            return self.refuse_code(form, second_factor.WRONG.message)
        # This session proved the app too, so the pages it opens next do not ask again.
        second_factor.mark_verified(self.request, device)
        return _recovery_codes(self.request, second_factor.new_recovery_codes(self.request.user))


@login_required
@require_POST
def renew_recovery_codes(request: HttpRequest) -> HttpResponse:
    """New recovery codes in place of the old, for a session whose sign-in took a code (the
    middleware signs any other out before it gets here)."""
    if not second_factor.has_device(request.user):
        return redirect("account")
    return _recovery_codes(request, second_factor.new_recovery_codes(request.user))


class Remove(LoginRequiredMixin, SpendsSignInBudget, FormView):
    """Turning the second factor off takes a code, so a session left open is not enough."""

    template_name = "sessions_app/two_factor_remove.html"
    form_class = CodeForm

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.user.is_authenticated and not second_factor.has_device(request.user):
            return redirect("account")
        return super().dispatch(request, *args, **kwargs)

    def form_valid(self, form: forms.Form) -> HttpResponse:
        found = second_factor.check(self.request.user, form.cleaned_data["code"])
        if isinstance(found, second_factor.Refusal):
            return self.refuse_code(form, found.message)
        second_factor.remove(self.request.user)
        messages.success(self.request, "Two-step sign-in is off: your password alone signs in.")
        return redirect("account")
