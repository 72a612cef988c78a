"""The /buyer-agents/ pages: a buyer platform's people register its agents' ids and issue and
revoke their API keys, each shown once, as a merchant's people do on the agents' pages.

A buyer-platform member sees its own platform's agents only (another's is a 404, as an unknown
one); operators and admins see every platform's, and admins may issue and revoke their keys.
The sessions of these agents are on the sessions pages, read-only, scoped the same way.
"""

from __future__ import annotations

from django import forms as django_forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from sessions_app import forms, selectors, services
from sessions_app.models import Merchant
from sessions_app.tenancy import Scope, require_buyer_agent_manager, scope_or_denied
from sessions_app.views import shown_once
from sessions_app.views.agents import ISSUED_KEY, issue_and_show, revoke_after_confirming


class NewAgentForm(django_forms.Form):
    agent_id = django_forms.CharField(
        label="Agent id",
        max_length=64,
        help_text="The id the agent sends as its sender; it cannot change later.",
    )


def _manager(request: HttpRequest) -> Scope:
    scope = scope_or_denied(request)
    require_buyer_agent_manager(scope)
    return scope


@login_required
@require_http_methods(["GET", "POST"])
def buyer_agent_list(request: HttpRequest) -> HttpResponse:
    scope = scope_or_denied(request)
    form = NewAgentForm(request.POST if request.method == "POST" else None)
    if request.method == "POST":
        # Only a platform's own people add its agents: an admin has no platform of its own.
        if not scope.is_buyer_side:
            raise PermissionDenied("only a buyer platform's members add its agents")
        if form.is_valid():
            organisation = get_object_or_404(Merchant, pk=scope.merchant_id)
            try:
                created = services.create_platform_agent(
                    actor=request.user, organisation=organisation, **form.cleaned_data
                )
            except ValueError as refused:
                form.add_error("agent_id", forms.sentence(str(refused)))
            else:
                messages.success(request, f"Agent {created.agent_id} added: issue it a key.")
                return redirect("buyer-agent", agent_id=created.agent_id)
    return render(
        request,
        "sessions_app/buyer_agents.html",
        {"scope": scope, "agents": selectors.platform_agents(scope), "form": form},
        status=400 if form.errors else 200,
    )


def _agent_page(
    request: HttpRequest,
    scope: Scope,
    agent_id: str,
    key_form: forms.KeyForm | None = None,
) -> HttpResponse:
    agent = selectors.platform_agent(scope, agent_id)
    issued, _ = shown_once.take(request, ISSUED_KEY, agent_id=agent_id)
    response = render(
        request,
        "sessions_app/buyer_agent.html",
        {
            "scope": scope,
            "agent": agent,
            "keys": selectors.api_keys_of(agent),
            "issued": issued or None,
            "key_form": key_form or forms.KeyForm(),
            "can_manage": scope.may_manage_buyer_agents,
            "hosted_label": services.HOSTED_KEY_LABEL,
        },
        status=400 if key_form is not None else 200,
    )
    # A page that shows a new key once must not be kept by a browser or a proxy.
    response["Cache-Control"] = "no-store"
    return response


@login_required
def buyer_agent_page(request: HttpRequest, agent_id: str) -> HttpResponse:
    return _agent_page(request, scope_or_denied(request), agent_id)


@login_required
@require_POST
def buyer_key_issue(request: HttpRequest, agent_id: str) -> HttpResponse:
    scope = _manager(request)
    agent = selectors.platform_agent(scope, agent_id)
    form = forms.KeyForm(request.POST)
    if not form.is_valid():
        return _agent_page(request, scope, agent_id, key_form=form)
    return issue_and_show(request, agent, form, agent_url="buyer-agent")


@login_required
@require_http_methods(["GET", "POST"])
def buyer_key_revoke(request: HttpRequest, agent_id: str, key_id: int) -> HttpResponse:
    scope = _manager(request)
    agent = selectors.platform_agent(scope, agent_id)
    return revoke_after_confirming(request, scope, agent, key_id, agent_url="buyer-agent")
