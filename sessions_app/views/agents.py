"""The /agents/ pages: merchants configure their agents and API keys.

Who may do what: a merchant manager manages its own merchant's agents and nothing else (another
merchant's agent is a 404, as an unknown one), a merchant member only looks; an admin manages
every merchant's agents;
an operator may look (list and agent pages) but changes nothing, since its job is watching
sessions. Private limits are never shown: pages say only whether they are set. The edit form's
preview is the edit form's too: its prices tell a good deal about the limits.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST

from arbiter_app.services import HostNotFound
from oanp.agents.pricelist import MAX_PRICE_ROWS, PriceList
from sessions_app import forms, lifecycle_selectors, party_keys, selectors, services
from sessions_app.models import AgentProfile, Merchant, Mode, PlatformAgent
from sessions_app.party_key_forms import PartyKeyForm, SignaturesRequiredForm
from sessions_app.preview import Preview, preview_form, preview_saved
from sessions_app.strategy_forms import tactics_initial
from sessions_app.tenancy import Scope, require_agent_manager, scope_or_denied
from sessions_app.views import refusal, shown_once


def _manager(request: HttpRequest) -> Scope:
    scope = scope_or_denied(request)
    require_agent_manager(scope)
    return scope


@login_required
def agent_list(request: HttpRequest) -> HttpResponse:
    scope = scope_or_denied(request)
    archived = request.GET.get("archived") == "1"
    return render(
        request,
        "sessions_app/agents.html",
        {
            "scope": scope,
            "rows": selectors.agent_rows(scope, archived=archived),
            "archived": archived,
            "unclaimed": [] if archived else lifecycle_selectors.unclaimed_agents(scope),
            "can_manage": scope.may_manage_agents,
        },
    )


#: How many of its latest deliveries an agent's page lists; the deliveries page has the rest.
AGENT_PAGE_DELIVERIES = 10


def _agent_page(
    request: HttpRequest,
    scope: Scope,
    agent_id: str,
    *,
    issued: str | None = None,
    key_form: forms.KeyForm | None = None,
    acp_form: forms.AcpForm | None = None,
    acp_secret: str | None = None,
    listing_form: forms.ListingForm | None = None,
    party_key_form: PartyKeyForm | None = None,
    preview: Preview | None = None,
    status: int = 200,
) -> HttpResponse:
    profile = selectors.agent(scope, agent_id)
    can_manage = scope.may_manage_agents
    listing = selectors.listing(profile)
    acp_target = selectors.acp_target(profile)
    signing_keys = party_keys.key_rows(profile)
    response = render(
        request,
        "sessions_app/agents_detail.html",
        {
            "scope": scope,
            "agent": profile,
            "availability": lifecycle_selectors.availability_of(profile),
            "runner_keys": lifecycle_selectors.live_runner_keys(profile),
            "limit_rows": selectors.limit_rows(profile),
            "declines": selectors.declines(profile),
            "limit_issues": selectors.limit_issues(profile),
            "keys": selectors.api_keys_of(profile),
            "hosted_label": services.HOSTED_KEY_LABEL,
            "issued": issued,
            "key_form": key_form or forms.KeyForm(),
            "can_manage": can_manage,
            "acp_target": acp_target,
            "acp_form": acp_form or forms.AcpForm(target=acp_target),
            "acp_secret": acp_secret,
            "acp_test": selectors.last_acp_test(profile) if can_manage else None,
            "listing": listing,
            "listing_form": listing_form
            or forms.ListingForm(
                initial=forms.listing_initial(listing, profile.listing_currencies)
            ),
            "preview": preview,
            "signing_keys": signing_keys,
            "keys_in_force": party_keys.keys_in_force(signing_keys),
            "signatures_required": party_keys.signatures_required(profile),
            "party_key_form": party_key_form or PartyKeyForm(),
            "deliveries": selectors.deliveries(
                scope, agent=profile.agent_id, limit=AGENT_PAGE_DELIVERIES
            )[0],
        },
        status=status,
    )
    # A page that shows a new key once must not be kept by a browser or a proxy.
    response["Cache-Control"] = "no-store"
    return response


# A new key is shown once (:mod:`sessions_app.views.shown_once`), on its agent's page.
ISSUED_KEY = "sessions_app.issued_key"


@login_required
def agent_page(request: HttpRequest, agent_id: str) -> HttpResponse:
    api_key, _ = shown_once.take(request, ISSUED_KEY, agent_id=agent_id)
    acp_secret, _ = shown_once.take(request, ACP_SECRET, agent_id=agent_id)
    return _agent_page(
        request,
        scope_or_denied(request),
        agent_id,
        issued=api_key or None,
        acp_secret=acp_secret or None,
    )


def _edit(request: HttpRequest, scope: Scope, agent_id: str | None) -> HttpResponse:
    profile = None if agent_id is None else selectors.agent(scope, agent_id)
    merchants = selectors.merchants() if profile is None and scope.merchant_id is None else None
    options = {"creating": profile is None, "merchants": merchants}
    # Read here to merge the form's edits into; never handed to a template.
    stored = selectors.price_list(profile) if profile is not None else None
    initial = (
        {"mode": "hosted"}
        if profile is None
        else {
            "display_name": profile.display_name,
            "mode": profile.mode,
            "strategy": profile.strategy,
            "reveal_after_end": profile.reveal_after_end,
            "items_only": stored is not None and stored.items_only,
            "limits_version": services.vault_version(profile),
        }
    ) | tactics_initial(profile)
    played = None
    adding_row = request.method == "POST" and "add_row" in request.POST
    if adding_row:
        form = forms.AgentForm(
            initial=forms.as_typed(forms.AgentForm(request.POST, **options)), **options
        )
        rows = forms.one_more_row(request.POST, stored)
    elif request.method == "POST":
        form = forms.AgentForm(request.POST, **options)
        rows = forms.PriceRowFormSet(request.POST, prefix="limits", stored=stored)
        if form.is_valid() and rows.is_valid():
            limits = forms.limits_from(form, rows, stored)
            kept = limits if limits is not None else stored
            if form.cleaned_data["mode"] == Mode.HOSTED and (kept is None or not kept.limits):
                form.add_error(
                    None,
                    "A hosted agent needs its limits: add a row with a currency, floor and ideal.",
                )
            if not form.errors and "preview" not in request.POST:
                try:
                    return _save(request, scope, form, limits, profile)
                except services.LimitsChanged:
                    form.add_error(None, forms.LIMITS_CHANGED)
            if not form.errors:
                # The agent as the form stands, played without saving anything.
                try:
                    played = preview_form(form.cleaned_data, kept, typed=limits is not None)
                except services.NoLimits as missing:
                    form.add_error(None, str(missing))
    else:
        form = forms.AgentForm(initial=initial, **options)
        rows = forms.PriceRowFormSet(prefix="limits", stored=stored)
    return render(
        request,
        "sessions_app/agents_form.html",
        {
            "scope": scope,
            "agent": profile,
            "form": form,
            "rows": rows,
            "limit_issues": [] if profile is None else selectors.limit_issues(profile),
            "preview": played,
        },
        status=400 if request.method == "POST" and played is None and not adding_row else 200,
    )


def _save(
    request: HttpRequest,
    scope: Scope,
    form: forms.AgentForm,
    limits: PriceList | None,
    profile: AgentProfile | None,
) -> HttpResponse:
    data = form.cleaned_data
    fields = {
        "display_name": data["display_name"],
        "mode": data["mode"],
        "strategy": data["strategy"],
        "parameters": data["parameters"],
        "settle": data["settle"],
        "reveal_after_end": data["reveal_after_end"],
        "limits": limits,
    }
    if profile is None:
        merchant = data.get("merchant") or get_object_or_404(Merchant, pk=scope.merchant_id)
        profile = services.create_agent(
            actor=request.user, merchant=merchant, agent_id=data["agent_id"], **fields
        )
        messages.success(request, f"Agent {profile.agent_id} created.")
    else:
        services.update_agent(
            actor=request.user,
            profile=profile,
            limits_version=data["limits_version"] or None,
            **fields,
        )
        messages.success(request, f"Agent {profile.agent_id} saved.")
    return redirect("agent", agent_id=profile.agent_id)


#: What an error report (a 500's mail, Django's debug page) never shows of a posted agent form.
LIMIT_FIELDS = (
    "terms",
    "price_weight",
    *(f"limits-{n}-{kind}_price" for n in range(MAX_PRICE_ROWS) for kind in ("floor", "ideal")),
)


@login_required
@sensitive_post_parameters(*LIMIT_FIELDS)
def agent_new(request: HttpRequest) -> HttpResponse:
    return _edit(request, _manager(request), None)


@login_required
@sensitive_post_parameters(*LIMIT_FIELDS)
def agent_edit(request: HttpRequest, agent_id: str) -> HttpResponse:
    return _edit(request, _manager(request), agent_id)


@login_required
@require_POST
def api_key_issue(request: HttpRequest, agent_id: str) -> HttpResponse:
    scope = _manager(request)
    profile = selectors.agent(scope, agent_id)
    form = forms.KeyForm(request.POST)
    if not form.is_valid():
        return _agent_page(request, scope, agent_id, key_form=form, status=400)
    return issue_and_show(request, profile, form, agent_url="agent")


def issue_and_show(
    request: HttpRequest,
    profile: AgentProfile | PlatformAgent,
    form: forms.KeyForm,
    *,
    agent_url: str,
) -> HttpResponse:
    """Issue the key ``form`` describes, and show it once on the agent's page."""
    issued = services.issue_key(
        actor=request.user,
        profile=profile,
        label=form.cleaned_data["label"],
        lifetime=form.lifetime(),
    )
    shown_once.keep(request, ISSUED_KEY, issued.api_key, agent_id=profile.agent_id)
    messages.success(request, f"Key {issued.credential.prefix} issued.")
    return redirect(agent_url, agent_id=profile.agent_id)


@login_required
@require_http_methods(["GET", "POST"])
def api_key_revoke(request: HttpRequest, agent_id: str, key_id: int) -> HttpResponse:
    scope = _manager(request)
    profile = selectors.agent(scope, agent_id)
    return revoke_after_confirming(request, scope, profile, key_id, agent_url="agent")


def revoke_after_confirming(
    request: HttpRequest,
    scope: Scope,
    profile: AgentProfile | PlatformAgent,
    key_id: int,
    *,
    agent_url: str,
) -> HttpResponse:
    """A GET, or a POST without the confirmation page's answer, only asks: a stray link or an
    old form revokes nothing. ``agent_url`` names the agent's page, whose key-revoking
    action is ``<agent_url>-key-revoke``."""
    credential = get_object_or_404(selectors.api_keys_of(profile), pk=key_id)
    context = {
        "scope": scope,
        "agent": profile,
        "key": credential,
        "hosted": credential.label == services.HOSTED_KEY_LABEL,
        "agent_url": agent_url,
        "revoke_url": f"{agent_url}-key-revoke",
    }
    if request.POST.get("confirmed") != "yes":
        return render(request, "sessions_app/api_key_revoke_confirm.html", context)
    try:
        services.revoke_key(actor=request.user, profile=profile, credential=credential)
    except services.HostedKey as refused:
        context["form"] = refusal(f"Key {credential.prefix} was not revoked: {refused}.")
        return render(request, "sessions_app/api_key_revoke_confirm.html", context, status=400)
    messages.success(request, f"Key {credential.prefix} revoked.")
    return redirect(agent_url, agent_id=profile.agent_id)


# The ACP handoff target ------------------------------------------------------------------

# Like a new API key, a generated webhook secret crosses the redirect sealed in the user's
# session and is shown by the next agent page only.
ACP_SECRET = "sessions_app.acp_secret"  # noqa: S105 - a session key's name


@login_required
@require_POST
def acp_configure(request: HttpRequest, agent_id: str) -> HttpResponse:
    scope = _manager(request)
    profile = selectors.agent(scope, agent_id)
    form = forms.AcpForm(request.POST, target=selectors.acp_target(profile))
    if form.is_valid():
        try:
            secret = services.configure_acp(
                actor=request.user, profile=profile, **form.cleaned_data
            )
        except HostNotFound as missing:
            # Not a refusal: most likely a typo, so it goes next to the endpoint.
            form.add_error("endpoint", str(missing))
        except ValueError as refused:
            # The arbiter's refusal says why (a private address, a malformed secret): the
            # merchant needs exactly that to fix the field.
            form.add_error(None, f"The arbiter refused this target: {refused}")
        else:
            if secret is not None:
                shown_once.keep(request, ACP_SECRET, secret, agent_id=profile.agent_id)
            messages.success(request, "ACP handoff target saved.")
            return redirect(f"{reverse('agent', args=[profile.agent_id])}#acp-h")
    return _agent_page(request, scope, agent_id, acp_form=form, status=400)


@login_required
@require_POST
def acp_test(request: HttpRequest, agent_id: str) -> HttpResponse:
    scope = _manager(request)
    profile = selectors.agent(scope, agent_id)
    try:
        result = services.send_acp_test(actor=request.user, profile=profile)
    except ValueError as refused:
        messages.error(request, f"No test sent: {refused}.")
    else:
        answered = result["status"] or "no answer"
        messages.success(request, f"Test sent: {answered}; the result is below.")
    return redirect(f"{reverse('agent', args=[profile.agent_id])}#acp-h")


@login_required
@require_POST
def agent_preview(request: HttpRequest, agent_id: str) -> HttpResponse:
    """The saved agent, as new sessions will meet it, played against the preview buyers.
    Managers only, as the edit form's preview: the prices tell a good deal about the limits."""
    scope = _manager(request)
    profile = selectors.agent(scope, agent_id)
    try:
        played = preview_saved(profile)
    except services.NoLimits as missing:
        messages.error(request, str(missing))
        return redirect(reverse("agent", args=[profile.agent_id]))
    return _agent_page(request, scope, agent_id, preview=played)


# The directory listing -------------------------------------------------------------------


@login_required
@require_POST
def listing_save(request: HttpRequest, agent_id: str) -> HttpResponse:
    scope = _manager(request)
    profile = selectors.agent(scope, agent_id)
    form = forms.ListingForm(request.POST)
    if not form.is_valid():
        return _agent_page(request, scope, agent_id, listing_form=form, status=400)
    listing = form.cleaned_data["listing"]
    services.save_listing(actor=request.user, profile=profile, listing=listing)
    messages.success(
        request,
        "Listing saved; the agent is listed in the arbiter's directory."
        if listing.listed
        else "Listing saved, not listed.",
    )
    return redirect(f"{reverse('agent', args=[profile.agent_id])}#listing-h")


# The agent's signing keys (docs/protocol.md §17) -------------------------------------------


def _signing_section(profile: AgentProfile) -> str:
    return f"{reverse('agent', args=[profile.agent_id])}#signing-h"


@login_required
@require_POST
# What was pasted may be a private key: an error report must not carry it.
@sensitive_post_parameters("jwk")
def party_key_add(request: HttpRequest, agent_id: str) -> HttpResponse:
    scope = _manager(request)
    profile = selectors.agent(scope, agent_id)
    form = PartyKeyForm(request.POST, request.FILES)
    if not form.is_valid():
        return _agent_page(request, scope, agent_id, party_key_form=form, status=400)
    row, created = party_keys.register_key(
        actor=request.user, profile=profile, jwk=form.cleaned_data["key"]
    )
    if created:
        messages.success(request, f"Key {row.kid} added: the agent may sign with it now.")
    elif row.in_force:
        messages.success(request, f"Key {row.kid} is registered already: nothing changed.")
    else:
        # A kid once retired never signs again, or signatures refused before would turn valid.
        messages.error(
            request,
            f"Key {row.kid} was retired and stays retired: make a new key pair. Nothing was added.",
        )
    return redirect(_signing_section(profile))


@login_required
@require_http_methods(["GET", "POST"])
def party_key_retire(request: HttpRequest, agent_id: str, kid: str) -> HttpResponse:
    """A GET, or a POST without the confirmation page's answer, only asks, as revoking an API
    key does."""
    scope = _manager(request)
    profile = selectors.agent(scope, agent_id)
    row = party_keys.key_row(profile, kid)
    if row is None:
        raise Http404("this agent registered no such key")
    context = {
        "scope": scope,
        "agent": profile,
        "key": row,
        "last_in_force": row.in_force
        and party_keys.keys_in_force(party_keys.key_rows(profile)) == 1,
        "signatures_required": party_keys.signatures_required(profile),
    }
    if request.POST.get("confirmed") != "yes" or not row.in_force:
        return render(request, "sessions_app/party_key_retire_confirm.html", context)
    party_keys.retire_key(actor=request.user, profile=profile, kid=row.kid)
    messages.success(request, f"Key {row.kid} retired: envelopes signed with it are refused.")
    return redirect(_signing_section(profile))


@login_required
@require_POST
def signatures_required(request: HttpRequest, agent_id: str) -> HttpResponse:
    scope = _manager(request)
    profile = selectors.agent(scope, agent_id)
    form = SignaturesRequiredForm(request.POST)
    form.is_valid()  # a lone checkbox: any value reads as on or off
    required = form.cleaned_data["required"]
    party_keys.require_signatures(actor=request.user, profile=profile, required=required)
    said = (
        "Signatures required: this agent's unsigned envelopes are refused (signature_required)."
        if required
        else "Signatures no longer required: this agent's unsigned envelopes are accepted."
    )
    hosted = profile.mode == Mode.HOSTED
    if required and not hosted and not party_keys.keys_in_force(party_keys.key_rows(profile)):
        said += " It has no key in force: every envelope it sends is refused until a key is added."
    messages.success(request, said)
    return redirect(_signing_section(profile))
