"""The admins' people pages: organisations (created, renamed, each with its people and
invitations), everyone's accounts (a role and organisation changed, deactivated,
reactivated), and invitations (sent, sent again, revoked).

Only admins see them: to anyone else each page and action is refused (403) before anything is
read, and the selectors return nothing outside an admin's scope besides. An invitation's link
crosses the redirect sealed in the admin's session, as a new API key does, and is shown once
to copy.
"""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from sessions_app import invitations, people, people_forms, selectors
from sessions_app.forms import sentence
from sessions_app.models import Invitation, MemberRole, Merchant, OrganisationKind
from sessions_app.tenancy import Scope, require_admin, scope_or_denied
from sessions_app.views import refusal, shown_once


def _admin(request: HttpRequest) -> Scope:
    scope = scope_or_denied(request)
    require_admin(scope)
    return scope


def _no_store(response: HttpResponse) -> HttpResponse:
    # A page that may show an invitation's link must not be kept by a browser or a proxy.
    response["Cache-Control"] = "no-store"
    return response


# Organisations ---------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def organisation_list(request: HttpRequest) -> HttpResponse:
    scope = _admin(request)
    form = people_forms.OrganisationForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            created = people.create_organisation(
                actor=request.user, scope=scope, **form.cleaned_data
            )
        except ValueError as refused:
            form.add_error("name", sentence(str(refused)))
        else:
            messages.success(request, f"Organisation {created.name} created.")
            return redirect("organisation", pk=created.pk)
    return render(
        request,
        "sessions_app/organisations.html",
        {"scope": scope, "form": form, "organisations": selectors.organisations(scope)},
        status=400 if form.errors else 200,
    )


def _organisation_page(
    request: HttpRequest,
    scope: Scope,
    organisation: Merchant,
    form: people_forms.RenameForm | None = None,
) -> HttpResponse:
    invite_form = people_forms.InviteForm(
        initial={"organisation": organisation, "role": _member_role(organisation)}
    )
    return _no_store(
        render(
            request,
            "sessions_app/organisation.html",
            {
                "scope": scope,
                "organisation": organisation,
                "form": form or people_forms.RenameForm(initial={"name": organisation.name}),
                "people": selectors.people(scope, organisation),
                "invitations": selectors.invitations(scope, organisation),
                "invite_form": invite_form,
                **_invitation_context(request),
            },
            status=400 if form is not None and form.errors else 200,
        )
    )


def _member_role(organisation: Merchant) -> str:
    """The role an invitation to ``organisation`` most likely gives: its kind's plainest."""
    if organisation.kind == OrganisationKind.BUYER_PLATFORM:
        return MemberRole.BUYER_MEMBER
    return MemberRole.MERCHANT_MEMBER


@login_required
@require_http_methods(["GET", "POST"])
def organisation_page(request: HttpRequest, pk: int) -> HttpResponse:
    scope = _admin(request)
    organisation = selectors.organisation(scope, pk)
    if request.method == "GET":
        return _organisation_page(request, scope, organisation)
    form = people_forms.RenameForm(request.POST)
    if form.is_valid():
        try:
            people.rename_organisation(
                actor=request.user, scope=scope, organisation=organisation, **form.cleaned_data
            )
        except ValueError as refused:
            form.add_error("name", sentence(str(refused)))
        else:
            messages.success(request, f"Organisation renamed {organisation.name}.")
            return redirect("organisation", pk=organisation.pk)
    return _organisation_page(request, scope, organisation, form)


# People ----------------------------------------------------------------------------------

# An invitation's link is shown once (:mod:`sessions_app.views.shown_once`).
INVITED_LINK = "sessions_app.invited_link"


def _invitation_context(request: HttpRequest) -> dict[str, object]:
    """What a page with the invitations table and the link of the last invitation needs."""
    link, about = shown_once.take(request, INVITED_LINK)
    return {
        "invited": {**about, "link": link} if link else None,
        "invitation_hours": f"{settings.OANP_INVITATION_HOURS:g}",
        "now": timezone.now(),
    }


def _show_link(request: HttpRequest, invitation: Invitation, mailed: invitations.Mailed) -> None:
    shown_once.keep(
        request,
        INVITED_LINK,
        invitations.link(invitation),
        email=invitation.email,
        mailed=mailed,
    )


def _people_page(
    request: HttpRequest,
    scope: Scope,
    invite_form: people_forms.InviteForm | None = None,
) -> HttpResponse:
    return _no_store(
        render(
            request,
            "sessions_app/people.html",
            {
                "scope": scope,
                "people": selectors.people(scope),
                "invitations": selectors.invitations(scope),
                "invite_form": invite_form or people_forms.InviteForm(),
                **_invitation_context(request),
            },
            status=400 if invite_form is not None else 200,
        )
    )


@login_required
@require_GET
def people_list(request: HttpRequest) -> HttpResponse:
    return _people_page(request, _admin(request))


def _back(request: HttpRequest, invitation: Invitation) -> HttpResponse:
    """Back to the page the action was taken on: the organisation's, or everyone's."""
    if request.POST.get("from") == "organisation" and invitation.organisation_id is not None:
        return redirect("organisation", pk=invitation.organisation_id)
    return redirect("people")


@login_required
@require_POST
def invite(request: HttpRequest) -> HttpResponse:
    scope = _admin(request)
    form = people_forms.InviteForm(request.POST)
    if form.is_valid():
        try:
            invitation, mailed = invitations.invite(
                actor=request.user, scope=scope, **form.cleaned_data
            )
        except ValueError as refused:
            form.add_error("email", sentence(str(refused)))
        else:
            _show_link(request, invitation, mailed)
            messages.success(request, f"Invitation to {invitation.email} created.")
            return _back(request, invitation)
    return _people_page(request, scope, form)


@login_required
@require_POST
def invitation_send_again(request: HttpRequest, pk: int) -> HttpResponse:
    scope = _admin(request)
    invitation = selectors.invitation(scope, pk)
    invitation, mailed = invitations.send_again(
        actor=request.user, scope=scope, invitation=invitation
    )
    _show_link(request, invitation, mailed)
    messages.success(
        request, f"Invitation to {invitation.email} sent again; the old link no longer works."
    )
    return _back(request, invitation)


@login_required
@require_POST
def invitation_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    scope = _admin(request)
    invitation = selectors.invitation(scope, pk)
    invitations.revoke(actor=request.user, scope=scope, invitation=invitation)
    messages.success(request, f"Invitation to {invitation.email} revoked.")
    return _back(request, invitation)


def _person_page(
    request: HttpRequest,
    scope: Scope,
    user_id: int,
    form: people_forms.PlacementForm | None = None,
    refused: forms.Form | None = None,
) -> HttpResponse:
    person = selectors.person(scope, user_id)
    membership = getattr(person, "membership", None)
    initial = {"role": membership.role, "organisation": membership.merchant} if membership else {}
    failed = form is not None or refused is not None
    return render(
        request,
        "sessions_app/person.html",
        {
            "scope": scope,
            "person": person,
            "membership": membership,
            "form": form or people_forms.PlacementForm(initial=initial),
            "refused": refused,
        },
        status=400 if failed else 200,
    )


@login_required
@require_http_methods(["GET", "POST"])
def person_page(request: HttpRequest, user_id: int) -> HttpResponse:
    scope = _admin(request)
    if request.method == "GET":
        return _person_page(request, scope, user_id)
    person = selectors.person(scope, user_id)
    form = people_forms.PlacementForm(request.POST)
    if form.is_valid():
        try:
            people.change_membership(
                actor=request.user, scope=scope, user=person, **form.cleaned_data
            )
        except ValueError as refused:
            form.add_error("role", sentence(str(refused)))
        else:
            role = MemberRole(form.cleaned_data["role"]).label.lower()
            messages.success(request, f"{person.get_username()} is now {role}.")
            return redirect("person", user_id=person.pk)
    return _person_page(request, scope, user_id, form)


@login_required
@require_POST
def person_active(request: HttpRequest, user_id: int, active: bool) -> HttpResponse:
    scope = _admin(request)
    person = selectors.person(scope, user_id)
    change = people.reactivate if active else people.deactivate
    try:
        change(actor=request.user, scope=scope, user=person)
    except people.LastAdmin as refused:
        reason = f"{person.get_username()} was not deactivated: {refused}."
        return _person_page(request, scope, user_id, refused=refusal(reason))
    state = "reactivated" if active else "deactivated"
    messages.success(request, f"{person.get_username()} {state}.")
    return redirect("person", user_id=person.pk)
