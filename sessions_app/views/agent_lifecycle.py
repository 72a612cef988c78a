"""An agent's life on its page: pause, resume and archive it, rotate or revoke its hosted
runner's key (a merchant's managers and admins), and claim an agent issued outside the
dashboard into an organisation (admins).

Each act asks first: a GET, or a POST without the confirmation page's answer, changes nothing,
so a stray link or an old form does no harm. Another merchant's agent is a 404, as an unknown
one; a merchant member or an operator is refused (403).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from arbiter_app.models import Availability
from sessions_app import agent_lifecycle, lifecycle_selectors, selectors
from sessions_app.models import Mode, OrganisationKind
from sessions_app.tenancy import require_admin, require_agent_manager, scope_or_denied
from sessions_app.views import refusal

#: What each change of availability is, in the page's words: its title, what it does, and
#: the states it may be made from.
AVAILABILITY_ACTS = {
    Availability.PAUSED: (
        "Pause",
        "New sessions with this agent are refused at once: a buyer's agent that opens one "
        "gets 422 merchant_paused. Sessions already running go on to their end. Resume it "
        "to take sessions again.",
        (Availability.ACTIVE,),
    ),
    Availability.ACTIVE: (
        "Resume",
        "The agent takes new sessions again, and is listed in the directory again if its "
        "listing says so.",
        (Availability.PAUSED, Availability.ARCHIVED),
    ),
    Availability.ARCHIVED: (
        "Archive",
        "New sessions with this agent are refused (422 merchant_archived), and it leaves the "
        "agent lists and the directory. Its sessions and their logs stay readable, and it "
        "can be restored later.",
        (Availability.ACTIVE, Availability.PAUSED),
    ),
}

RUNNER_KEY_ACTS = {
    "rotate": (
        "Rotate the runner's key",
        "The hosted runner gets a new key and its old one is refused at once. Running "
        "sessions go on: the next answer goes in with the new key.",
    ),
    "revoke": (
        "Revoke the runner's key",
        "The hosted runner's key is refused at once and the agent is paused: it answers no "
        "more, so its running sessions close as their timers run out, on this merchant. "
        "Rotate the key or resume the agent to give it a new one.",
    ),
}


@login_required
@require_http_methods(["GET", "POST"])
def change_availability(request: HttpRequest, agent_id: str, state: str) -> HttpResponse:
    scope = scope_or_denied(request)
    require_agent_manager(scope)
    profile = selectors.agent(scope, agent_id)
    title, consequence, allowed_from = AVAILABILITY_ACTS[Availability(state)]
    current = lifecycle_selectors.availability_of(profile)
    context = {
        "scope": scope,
        "agent": profile,
        "title": title,
        "consequence": consequence,
        "action": request.path,
        "current": current,
    }
    if current not in allowed_from:
        context["form"] = refusal(f"Agent {profile.agent_id} is {current}: nothing to {title}.")
        return render(request, "sessions_app/agent_lifecycle_confirm.html", context, status=409)
    if request.POST.get("confirmed") != "yes":
        return render(request, "sessions_app/agent_lifecycle_confirm.html", context)
    agent_lifecycle.set_availability(actor=request.user, profile=profile, state=state)
    messages.success(request, f"Agent {profile.agent_id} is {Availability(state).label.lower()}.")
    return redirect("agent", agent_id=profile.agent_id)


@login_required
@require_http_methods(["GET", "POST"])
def runner_key(request: HttpRequest, agent_id: str, act: str) -> HttpResponse:
    scope = scope_or_denied(request)
    require_agent_manager(scope)
    profile = selectors.agent(scope, agent_id)
    if profile.mode != Mode.HOSTED:
        raise Http404("an external agent has no hosted runner")
    title, consequence = RUNNER_KEY_ACTS[act]
    context = {
        "scope": scope,
        "agent": profile,
        "title": title,
        "consequence": consequence,
        "action": request.path,
    }
    # Asked only of a revocation: a rotation issues a key whatever the runner holds.
    if act == "revoke" and not lifecycle_selectors.live_runner_keys(profile):
        context["form"] = refusal("The hosted runner holds no live key: nothing to revoke.")
        return render(request, "sessions_app/agent_lifecycle_confirm.html", context, status=409)
    if request.POST.get("confirmed") != "yes":
        return render(request, "sessions_app/agent_lifecycle_confirm.html", context)
    if act == "rotate":
        issued = agent_lifecycle.rotate_runner_key(actor=request.user, profile=profile)
        messages.success(request, f"The hosted runner's key is now {issued.prefix}.")
    else:
        agent_lifecycle.revoke_runner_key(actor=request.user, profile=profile)
        messages.success(request, "The hosted runner's key is revoked; the agent is paused.")
    return redirect("agent", agent_id=profile.agent_id)


@login_required
@require_http_methods(["GET", "POST"])
def claim(request: HttpRequest, agent_id: str) -> HttpResponse:
    scope = scope_or_denied(request)
    require_admin(scope)
    roles = [row.role for row in lifecycle_selectors.unclaimed_agent(scope, agent_id)]
    organisations = lifecycle_selectors.claimable_organisations(roles)
    context = {
        "scope": scope,
        "agent_id": agent_id,
        "roles": roles,
        "organisations": organisations,
        "merchant_kind": OrganisationKind.MERCHANT,
    }
    if request.method == "GET":
        return render(request, "sessions_app/agent_claim.html", context)
    chosen = request.POST.get("organisation", "")
    organisation = organisations.filter(pk=int(chosen)).first() if chosen.isdecimal() else None
    if organisation is None:
        context["form"] = refusal("Choose the organisation that runs this agent.")
        return render(request, "sessions_app/agent_claim.html", context, status=400)
    try:
        claimed = agent_lifecycle.claim_agent(
            actor=request.user, agent_id=agent_id, organisation=organisation
        )
    except agent_lifecycle.NotClaimable as refused:
        context["form"] = refusal(f"Agent {agent_id} was not claimed: {refused}.")
        return render(request, "sessions_app/agent_claim.html", context, status=409)
    messages.success(request, f"Agent {agent_id} is now {organisation.name}'s.")
    page = "buyer-agent" if organisation.kind == OrganisationKind.BUYER_PLATFORM else "agent"
    return redirect(page, agent_id=claimed.agent_id)
