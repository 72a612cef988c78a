"""Saved views of the sessions list: a name for a set of its filters, its owner's alone or
shared with the owner's team. Reads and writes both, each through the viewer's scope.

A team is everyone of the owner's organisation for a member of one, and every operator and
admin for an operator or an admin; it is read from the owner's membership as it is now, so a
person who moves to another organisation takes their shared views along. A view holds
filters, never sessions: whoever opens one sees the sessions of their own scope through it.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.http import Http404, QueryDict

from sessions_app import selectors
from sessions_app.models import MemberRole, SavedView
from sessions_app.tenancy import Scope

#: The parameters of the list a view keeps besides its filters'; a page's cursor and the live
#: list's ``since`` and ``ids`` are the moment's, not the view's.
KEPT_BESIDE_FILTERS = ("sort",)
STAFF_ROLES = (MemberRole.OPERATOR, MemberRole.ADMIN)


class ViewRefused(ValueError):
    """A view that cannot be saved or renamed as asked; the message is for the form, beside
    ``field`` (``None``: the form as a whole)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def team_label(scope: Scope) -> str:
    """Who a view shared by someone of ``scope`` reaches, in words."""
    return "your organisation" if scope.is_tenant else "every operator and admin"


def visible_views(scope: Scope, viewer: AbstractBaseUser) -> QuerySet[SavedView]:
    """The viewer's own views and those its team shares."""
    if scope.is_staff_role:
        team = Q(owner__membership__role__in=STAFF_ROLES)
    elif scope.merchant_id is not None:
        team = Q(owner__membership__merchant_id=scope.merchant_id)
    else:
        team = Q(pk__in=[])
    return SavedView.objects.filter(Q(owner_id=viewer.pk) | (Q(shared=True) & team)).select_related(
        "owner"
    )


def saved_view(scope: Scope, viewer: AbstractBaseUser, pk: int) -> SavedView:
    """One view the viewer may open; another team's reads as one that never was (404)."""
    found = visible_views(scope, viewer).filter(pk=pk).first()
    if found is None:
        raise Http404("no such view")
    return found


def own_view(scope: Scope, viewer: AbstractBaseUser, pk: int) -> SavedView:
    """One of the viewer's own views, to rename or delete: a teammate's is theirs (403)."""
    found = saved_view(scope, viewer, pk)
    if found.owner_id != viewer.pk:
        raise PermissionDenied("only its owner may change a saved view")
    return found


def filters_query(scope: Scope, query: str) -> str:
    """``query`` as a view keeps it: the list's filters and sort, blanks left out, in a fixed
    order. :class:`ViewRefused` when a filter's value is one the list refuses."""
    given = QueryDict(query)
    kept = QueryDict(mutable=True)
    for name in [*selectors.session_filter(scope, kept).filters, *KEPT_BESIDE_FILTERS]:
        if value := given.get(name, "").strip():
            kept[name] = value
    if not selectors.session_filter(scope, kept).is_valid():
        raise ViewRefused("These filters cannot be applied; correct them before saving.")
    return kept.urlencode()


def _clean_name(name: str) -> str:
    name = " ".join(name.split())
    if not name:
        raise ViewRefused("Give the view a name.", "name")
    return name


def save_view(
    *, actor: AbstractBaseUser, scope: Scope, name: str, query: str, shared: bool
) -> SavedView:
    """Save the list's filters as ``name``; shared with the actor's team when ``shared``."""
    name = _clean_name(name)
    kept = filters_query(scope, query)
    try:
        with transaction.atomic():
            return SavedView.objects.create(owner=actor, name=name, query=kept, shared=shared)
    except IntegrityError:
        raise ViewRefused(f"You already have a view named {name!r}.", "name") from None


def rename_view(*, actor: AbstractBaseUser, scope: Scope, pk: int, name: str) -> SavedView:
    found = own_view(scope, actor, pk)
    found.name = _clean_name(name)
    try:
        with transaction.atomic():
            found.save(update_fields=["name"])
    except IntegrityError:
        raise ViewRefused(f"You already have a view named {found.name!r}.", "name") from None
    return found


def delete_view(*, actor: AbstractBaseUser, scope: Scope, pk: int) -> None:
    own_view(scope, actor, pk).delete()
