"""Saved views of the sessions list: save the filters in force under a name, open one, and
rename or delete one's own. Thin: who sees and changes which view is
:mod:`sessions_app.saved_views`'s business."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from sessions_app import saved_views
from sessions_app.saved_views import ViewRefused
from sessions_app.tenancy import Scope, scope_or_denied


class ViewNameForm(forms.Form):
    name = forms.CharField(label="Name", max_length=100)


class SaveViewForm(ViewNameForm):
    #: The list's query string as it stood when the user asked to save it.
    query = forms.CharField(required=False, max_length=4000, widget=forms.HiddenInput)
    shared = forms.BooleanField(required=False, label="Share with my team")


def _views_page(
    request: HttpRequest, scope: Scope, form: forms.Form | None = None, *, status: int = 200
) -> HttpResponse:
    context: dict[str, Any] = {
        "scope": scope,
        "views": saved_views.visible_views(scope, request.user),
        "team": saved_views.team_label(scope),
        "form": form,
    }
    return render(request, "sessions_app/saved_views.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def view_list(request: HttpRequest) -> HttpResponse:
    """GET lists the views the user may open; POST saves the list's filters as a new one."""
    scope = scope_or_denied(request)
    if request.method == "GET":
        return _views_page(request, scope)
    form = SaveViewForm(request.POST)
    if form.is_valid():
        try:
            view = saved_views.save_view(
                actor=request.user,
                scope=scope,
                name=form.cleaned_data["name"],
                query=form.cleaned_data["query"],
                shared=form.cleaned_data["shared"],
            )
        except ViewRefused as refused:
            form.add_error(refused.field, str(refused))
        else:
            messages.success(request, f"View {view.name!r} saved.")
            return redirect("saved-view", pk=view.pk)
    return _views_page(request, scope, form, status=400)


@login_required
@require_GET
def view_open(request: HttpRequest, pk: int) -> HttpResponse:
    """The sessions list through the view's filters: a link anyone of its team can share."""
    view = saved_views.saved_view(scope_or_denied(request), request.user, pk)
    return redirect(f"{reverse('sessions')}?{view.query}")


@login_required
@require_POST
def view_rename(request: HttpRequest, pk: int) -> HttpResponse:
    scope = scope_or_denied(request)
    saved_views.own_view(scope, request.user, pk)
    form = ViewNameForm(request.POST)
    if form.is_valid():
        try:
            view = saved_views.rename_view(
                actor=request.user, scope=scope, pk=pk, name=form.cleaned_data["name"]
            )
        except ViewRefused as refused:
            form.add_error(refused.field, str(refused))
        else:
            messages.success(request, f"View renamed {view.name!r}.")
            return redirect("saved-views")
    return _views_page(request, scope, form, status=400)


@login_required
@require_POST
def view_delete(request: HttpRequest, pk: int) -> HttpResponse:
    scope = scope_or_denied(request)
    saved_views.delete_view(actor=request.user, scope=scope, pk=pk)
    messages.success(request, "View deleted.")
    return redirect("saved-views")
