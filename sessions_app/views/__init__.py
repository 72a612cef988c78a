"""The dashboard's pages, one module per family: the overview, sessions (list, page, and the
operators' actions on one), agents (merchants' own agents and keys), buyer agents (buyer
platforms' agents and keys), the admins' pages (signing keys, exports, the audit log), people
(organisations, accounts, invitations), and the page an invitation's link opens."""

from __future__ import annotations

from django import forms


def refusal(reason: str) -> forms.Form:
    """The form of an action with nothing to fill in (a confirmation, a single button), refused
    for ``reason``: its page shows it in the error summary, as any other form's errors."""
    form = forms.Form(data={})
    form.add_error(None, reason)
    return form
