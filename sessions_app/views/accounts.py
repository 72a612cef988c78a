"""Signing in to the dashboard and resetting a forgotten password: Django's views, refusing as
the rest of the site refuses.

A failed attempt answers 400 with the form's reasons, like every refused form here, and counts
against the client address's budget of failed authentications, the one the API keeps
(:mod:`arbiter_app.services.sign_ins`): past it, the address gets 429 until the minute is over,
even with the right password, so guessing passwords is no faster than guessing API keys.
"""

from __future__ import annotations

import math
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView, PasswordResetConfirmView, PasswordResetView
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from arbiter_app.services import sign_ins
from sessions_app import web_sessions


class RefusedSignIn(AuthenticationForm):
    """The sign-in form as sent, refused with ``refusal`` before any password is checked."""

    def __init__(self, request: HttpRequest, refusal: str, **kwargs: Any) -> None:
        super().__init__(request, **kwargs)
        self.refusal = refusal

    def clean(self) -> dict[str, Any]:
        raise ValidationError(self.refusal, code="rate_limited")


class SpendsSignInBudget:
    """A form view whose posts the address's budget admits first: past it, the form comes back
    429 with the refusal and Retry-After, and nothing it holds is checked. A refused form
    answers 400."""

    request: HttpRequest

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            sign_ins.admit_sign_in(request.META)
        except sign_ins.RateLimited as refused:
            wait = max(1, math.ceil(refused.retry_after))
            form = self.refused_form(
                f"Too many failed sign-ins from your address: try again in {wait} s."
            )
            response = self.render_to_response(
                self.get_context_data(form=form),
                status=429,
            )
            for name, value in refused.headers.items():
                response[name] = value
            return response
        return super().post(request, *args, **kwargs)

    def refused_form(self, refusal: str) -> forms.Form:
        """The form as sent, carrying ``refusal``; its clean() checks no secret."""
        form: forms.Form = self.get_form()
        form.add_error(None, ValidationError(refusal, code="rate_limited"))
        return form

    def form_invalid(self, form: forms.Form) -> HttpResponse:
        return self.render_to_response(
            self.get_context_data(form=form),
            status=400,
        )


class SignIn(SpendsSignInBudget, LoginView):
    def refused_form(self, refusal: str) -> forms.Form:
        # AuthenticationForm's clean() is the password check itself: refused before it.
        return RefusedSignIn(self.request, refusal, data=self.request.POST)

    def form_invalid(self, form: forms.Form) -> HttpResponse:
        sign_ins.count_failed_sign_in(self.request.META)
        return super().form_invalid(form)


class PasswordReset(SpendsSignInBudget, PasswordResetView):
    """Mails a link to choose a new password to each active account with the address given.

    The answer is the same whether any account has it (Django's view), so the form tells
    nobody who has an account here. Every request is counted against the address's budget, so
    that it cannot mail a person more often than it could guess a password.
    """

    def form_valid(self, form: forms.Form) -> HttpResponse:
        sign_ins.count_failed_sign_in(self.request.META)
        # The link names the public address, whatever Host the request came with.
        self.extra_email_context = {"public_url": settings.OANP_PUBLIC_URL}
        return super().form_valid(form)


class PasswordResetConfirm(PasswordResetConfirmView):
    """The mailed link's page: a new password twice, or, for a link that was used, expired,
    was altered or cut short, a page saying so with 400."""

    def render_to_response(self, context: dict[str, Any], **kwargs: Any) -> HttpResponse:
        if not self.validlink:
            kwargs["status"] = 400
        return super().render_to_response(context, **kwargs)

    def form_invalid(self, form: forms.Form) -> HttpResponse:
        return self.render_to_response(self.get_context_data(form=form), status=400)


@login_required
@require_GET
def account_page(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "sessions_app/account.html",
        {"idle_minutes": settings.OANP_SESSION_IDLE_SECONDS // 60},
    )


@login_required
@require_POST
def sign_out_everywhere(request: HttpRequest) -> HttpResponse:
    """Ends every session of the person, this one last: logging out announces it to their
    dashboard sockets (sessions_app.access), which then find their sessions gone."""
    ended = web_sessions.end_all(request.user)
    logout(request)
    messages.success(request, f"Signed out everywhere ({ended} session(s) ended).")
    return redirect(settings.LOGIN_URL)
