"""Every write about organisations and the people in them: an organisation created or renamed,
a person's role and organisation changed, an account deactivated or reactivated. Admins only:
each checks the role itself, so no view or command skips the check, and records an
:class:`~sessions_app.models.AuditEvent` in the same transaction as its effect.

The arbiter needs an admin to stay reachable: no change leaves it without an active one.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, User
from django.db import transaction
from django.utils.text import slugify

from sessions_app.models import (
    TENANT_ROLES,
    MemberRole,
    Membership,
    Merchant,
    OrganisationKind,
)
from sessions_app.services import audit
from sessions_app.tenancy import Scope, require_admin

#: How long an organisation's name may be, as its column allows.
MAX_NAME_CHARS = Merchant._meta.get_field("name").max_length


class LastAdmin(ValueError):
    """The change would leave the arbiter without an active admin."""


def check_placement(role: str, organisation: Merchant | None) -> None:
    """Refuse a role without the organisation it needs, or with one it must not have:
    a merchant's people belong to a merchant, a buyer platform's to a buyer platform, and
    operators and admins to none, since they see every tenant."""
    if role not in MemberRole.values:
        raise ValueError(f"no role {role!r}")
    kind = TENANT_ROLES.get(MemberRole(role))
    label = MemberRole(role).label
    if kind is None:
        if organisation is not None:
            raise ValueError(f"an {label.lower()} sees every organisation and belongs to none")
        return
    if organisation is None:
        raise ValueError(f"a {label.lower()} belongs to an organisation: choose one")
    if organisation.kind != kind:
        raise ValueError(
            f"a {label.lower()} belongs to a {OrganisationKind(kind).label.lower()}, "
            f"and {organisation.name} is a {organisation.get_kind_display().lower()}"
        )


def _clean_name(name: str, *, other_than: Merchant | None = None) -> str:
    name = name.strip()
    if not name:
        raise ValueError("an organisation needs a name")
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"an organisation's name is at most {MAX_NAME_CHARS} characters")
    taken = Merchant.objects.filter(name__iexact=name)
    if other_than is not None:
        taken = taken.exclude(pk=other_than.pk)
    if taken.exists():
        raise ValueError(f"an organisation is already named {name!r}")
    return name


def _free_slug(name: str) -> str:
    # The slug is the owner the arbiter records on the organisation's keys: made once, from
    # the first name, and never changed by a rename, so keys issued before stay its own.
    base = slugify(name)[:56] or "organisation"
    slug, number = base, 1
    while Merchant.objects.filter(slug=slug).exists():
        number += 1
        slug = f"{base}-{number}"
    return slug


@transaction.atomic
def create_organisation(*, actor: AbstractBaseUser, scope: Scope, name: str, kind: str) -> Merchant:
    require_admin(scope)
    if kind not in OrganisationKind.values:
        raise ValueError(f"no kind of organisation {kind!r}")
    name = _clean_name(name)
    organisation = Merchant.objects.create(name=name, slug=_free_slug(name), kind=kind)
    audit(actor, "organisation.created", organisation.slug, name=name, kind=kind)
    return organisation


@transaction.atomic
def rename_organisation(
    *, actor: AbstractBaseUser, scope: Scope, organisation: Merchant, name: str
) -> Merchant:
    require_admin(scope)
    name = _clean_name(name, other_than=organisation)
    was = organisation.name
    if name == was:
        return organisation
    organisation.name = name
    organisation.save(update_fields=["name"])
    audit(actor, "organisation.renamed", organisation.slug, was=was, now=name)
    return organisation


def _keep_an_admin(user: User, *, demoted: bool) -> None:
    """Refuse when ``user`` is the last active admin and is about to stop being one. The
    admins' rows are locked first, so two admins demoting each other at once cannot both
    pass."""
    admins = list(
        Membership.objects.select_for_update()
        .filter(role=MemberRole.ADMIN, user__is_active=True)
        .values_list("user_id", flat=True)
    )
    if demoted and user.pk in admins and len(admins) == 1:
        raise LastAdmin(f"the last active admin is {user.get_username()}; make another admin first")


@transaction.atomic
def change_membership(
    *,
    actor: AbstractBaseUser,
    scope: Scope,
    user: User,
    role: str,
    organisation: Merchant | None,
) -> Membership:
    """Give ``user`` the ``role`` in ``organisation`` (none for operators and admins)."""
    require_admin(scope)
    check_placement(role, organisation)
    _keep_an_admin(user, demoted=role != MemberRole.ADMIN)
    existing = Membership.objects.filter(user=user).select_related("merchant").first()
    was = (
        {"role": existing.role, "organisation": existing.merchant and existing.merchant.slug}
        if existing
        else {"role": None, "organisation": None}
    )
    membership, _ = Membership.objects.update_or_create(
        user=user, defaults={"role": role, "merchant": organisation}
    )
    now = {"role": role, "organisation": organisation and organisation.slug}
    if now != was:
        audit(actor, "person.changed", user.get_username(), was=was, now=now)
    return membership


@transaction.atomic
def deactivate(*, actor: AbstractBaseUser, scope: Scope, user: User) -> None:
    """Stop ``user`` signing in; the dashboard's open pages close within seconds
    (:mod:`sessions_app.access`)."""
    require_admin(scope)
    _keep_an_admin(user, demoted=True)
    if not user.is_active:
        return
    user.is_active = False
    user.save(update_fields=["is_active"])
    audit(actor, "person.deactivated", user.get_username())


@transaction.atomic
def reactivate(*, actor: AbstractBaseUser, scope: Scope, user: User) -> None:
    require_admin(scope)
    if user.is_active:
        return
    user.is_active = True
    user.save(update_fields=["is_active"])
    audit(actor, "person.reactivated", user.get_username())


@transaction.atomic
def make_admin_from_shell(user: User) -> Membership:
    """Give ``user`` the admin role, from the server's shell (``manage.py bootstrap_admin``):
    whoever runs it owns the deployment already, so no admin's say is asked. Audited as the
    new admin's own act."""
    membership, _ = Membership.objects.update_or_create(
        user=user, defaults={"role": MemberRole.ADMIN, "merchant": None}
    )
    audit(user, "person.made_admin", user.get_username(), by="manage.py bootstrap_admin")
    return membership
