"""The dashboard's pages, one module per family: the overview, sessions (list, page, and the
operators' actions on one), agents (merchants' own agents and keys), and the admins' pages
(signing keys, exports, the audit log)."""

from __future__ import annotations

from django import forms
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from sessions_app import selectors


def scope_or_denied(request: HttpRequest) -> selectors.Scope:
    scope = selectors.scope_of(request.user)
    if scope is None:
        raise PermissionDenied("this account has no role yet; ask an admin")
    return scope


def refusal(reason: str) -> forms.Form:
    """The form of an action with nothing to fill in (a confirmation, a single button), refused
    for ``reason``: its page shows it in the error summary, as any other form's errors."""
    form = forms.Form(data={})
    form.add_error(None, reason)
    return form
