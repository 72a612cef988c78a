"""The page an invitation's link opens, to anyone holding it: the invited person sets a
password, checked by the password validators, and is signed in to the dashboard.

A link that opens nothing (tampered, replaced, revoked, used or expired) gets a plain page
that says which, never an error of the server's.
"""

from __future__ import annotations

from django.contrib.auth import login
from django.contrib.auth.forms import SetPasswordForm
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods

from sessions_app import invitations


def _refused(request: HttpRequest, refused: invitations.LinkRefused) -> HttpResponse:
    return render(
        request,
        "sessions_app/invitation_refused.html",
        {"reason": str(refused)},
        status=refused.status,
    )


@sensitive_post_parameters("new_password1", "new_password2")
@never_cache
@require_http_methods(["GET", "POST"])
def invitation_page(request: HttpRequest, token: str) -> HttpResponse:
    try:
        invitation = invitations.opened(token)
    except invitations.LinkRefused as refused:
        return _refused(request, refused)
    # Unsaved: the validators compare the password with the account it is for.
    account = User(username=invitation.email, email=invitation.email)
    form = SetPasswordForm(account, request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            user = invitations.accept(token=token, password=form.cleaned_data["new_password1"])
        except invitations.LinkRefused as refused:
            return _refused(request, refused)
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("overview")
    return render(
        request,
        "sessions_app/invitation.html",
        {"invitation": invitation, "form": form},
        status=400 if form.errors else 200,
    )
