"""Signing in to the dashboard: Django's view, refusing as the rest of the site refuses.

A failed attempt answers 400 with the form's reasons, like every refused form here, and counts
against the client address's budget of failed authentications, the one the API keeps
(:mod:`arbiter_app.services.sign_ins`): past it, the address gets 429 until the minute is over,
even with the right password, so guessing passwords is no faster than guessing API keys.
"""

from __future__ import annotations

import math
from typing import Any

from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse

from arbiter_app.services import sign_ins


class RefusedSignIn(AuthenticationForm):
    """The sign-in form as sent, refused with ``refusal`` before any password is checked."""

    def __init__(self, request: HttpRequest, refusal: str, **kwargs: Any) -> None:
        super().__init__(request, **kwargs)
        self.refusal = refusal

    def clean(self) -> dict[str, Any]:
        raise ValidationError(self.refusal, code="rate_limited")


class SignIn(LoginView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            sign_ins.admit_sign_in(request.META)
        except sign_ins.RateLimited as refused:
            wait = max(1, math.ceil(refused.retry_after))
            form = RefusedSignIn(
                request,
                f"Too many failed sign-ins from your address: try again in {wait} s.",
                data=request.POST,
            )
            response = self.render_to_response(self.get_context_data(form=form), status=429)
            for name, value in refused.headers.items():
                response[name] = value
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        sign_ins.count_failed_sign_in(self.request.META)
        return self.render_to_response(self.get_context_data(form=form), status=400)
