"""A finished session's replay: its log stepped through entry by entry, each step as
:mod:`oanp.audit.replay` computes it from the entries up to it.

Every step's frame is in the page (static/js/replay.js steps through them with no request),
and the server renders the one ``?step=`` names, so a step can be linked to and read without
script. A session still running has no replay: its log is not finished.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from sessions_app import selectors
from sessions_app.tenancy import scope_or_denied

TEMPLATE = "sessions_app/replay.html"


class StepForm(forms.Form):
    """``?step=k``, 1 to the number of entries; none is the first."""

    def __init__(self, data: Any, *, steps: int) -> None:
        super().__init__(data)
        self.fields["step"] = forms.IntegerField(
            label="Step", min_value=1, max_value=steps, required=False
        )


@login_required
@require_safe
def session_replay(request: HttpRequest, session_id: str) -> HttpResponse:
    """The replay at ``?step=``: 409 while the session runs, 400 naming a bad step."""
    scope = scope_or_denied(request)
    found = selectors.session(scope, session_id)
    context: dict[str, Any] = {"scope": scope, "session": found}
    if not found.is_terminal:
        return render(request, TEMPLATE, {**context, "live": True}, status=409)
    frames = [frame.as_json() for frame in selectors.replay(found)]
    form = StepForm(request.GET, steps=len(frames))
    context |= {"form": form, "steps": len(frames)}
    if not form.is_valid():
        return render(request, TEMPLATE, context, status=400)
    step = form.cleaned_data["step"] or 1
    return render(
        request, TEMPLATE, {**context, "step": step, "frame": frames[step - 1], "frames": frames}
    )
