"""Signing in to the dashboard, in two steps for a person with an authenticator app
(:mod:`sessions_app.second_factor`), resetting a forgotten password, and the account page:
Django's views, refusing as the rest of the site refuses.

A failed attempt answers 400 with the form's reasons, like every refused form here, and counts
against the client address's budget of failed authentications, the one the API keeps
(:mod:`arbiter_app.services.sign_ins`): past it, the address gets 429 until the minute is over,
even with the right password, so guessing passwords is no faster than guessing API keys.
"""

from __future__ import annotations

import math
import time
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model, login, logout
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView, PasswordResetConfirmView, PasswordResetView
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django.views.generic import FormView

from arbiter_app.services import sign_ins
from sessions_app import second_factor, web_sessions

#: Where the session keeps a sign-in whose password was right and whose code is awaited.
PENDING = "oanp_sign_in_awaiting_code"
#: How long the code may take after the password, before the password is asked for again.
PENDING_SECONDS = 300


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

    def refuse_code(self, form: forms.Form, message: str) -> HttpResponse:
        """A wrong or used one-time code: counted against the budget, refused with 400."""
        sign_ins.count_failed_sign_in(self.request.META)
        form.add_error("code", message)
        return self.form_invalid(form)


class SignIn(SpendsSignInBudget, LoginView):
    """The first step: the password. A person with an authenticator app is not signed in yet:
    the session remembers the password was right, for :class:`SignInCode` to finish."""

    def refused_form(self, refusal: str) -> forms.Form:
        # AuthenticationForm's clean() is the password check itself: refused before it.
        return RefusedSignIn(self.request, refusal, data=self.request.POST)

    def form_valid(self, form: AuthenticationForm) -> HttpResponse:
        user = form.get_user()
        if not second_factor.has_device(user):
            return super().form_valid(form)
        self.request.session[PENDING] = {
            "user": user.pk,
            "backend": user.backend,
            "next": self.get_success_url(),
            "until": time.time() + PENDING_SECONDS,
        }
        return redirect("sign-in-code")

    def form_invalid(self, form: forms.Form) -> HttpResponse:
        sign_ins.count_failed_sign_in(self.request.META)
        return super().form_invalid(form)


class CodeForm(forms.Form):
    code = forms.CharField(
        label="Code",
        max_length=32,
        widget=forms.TextInput(
            attrs={"autocomplete": "one-time-code", "autocapitalize": "off", "spellcheck": "false"}
        ),
    )


class SignInCode(SpendsSignInBudget, FormView):
    """The second step: a code of the person's app, or one of their recovery codes. A wrong or
    used one counts against the same budget as a wrong password, and past it the answer is 429
    before the code is looked at."""

    template_name = "registration/login_code.html"
    form_class = CodeForm

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        pending = request.session.get(PENDING)
        user = None
        if pending and pending["until"] > time.time():
            user = get_user_model().objects.filter(pk=pending["user"], is_active=True).first()
        if user is None:
            if request.session.pop(PENDING, None):
                messages.error(request, "The code was not given in time: sign in again.")
            return redirect(settings.LOGIN_URL)
        self.user, self.pending = user, pending
        return super().dispatch(request, *args, **kwargs)

    def form_valid(self, form: forms.Form) -> HttpResponse:
        found = second_factor.check(self.user, form.cleaned_data["code"])
        if isinstance(found, second_factor.Refusal):
            return self.refuse_code(form, found.message)
        del self.request.session[PENDING]
        login(self.request, self.user, backend=self.pending["backend"])
        second_factor.mark_verified(self.request, found)
        if second_factor.is_recovery_code(found):
            left = second_factor.recovery_codes_left(self.user)
            messages.warning(
                self.request,
                f"You signed in with a recovery code, which now no longer works; {left} left. "
                "Your account page makes new ones.",
            )
        return redirect(self.pending["next"])


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
    user = request.user
    return render(
        request,
        "sessions_app/account.html",
        {
            "idle_minutes": settings.OANP_SESSION_IDLE_SECONDS // 60,
            "has_device": second_factor.has_device(user),
            "required": second_factor.is_required(user),
            "codes_left": second_factor.recovery_codes_left(user),
        },
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
