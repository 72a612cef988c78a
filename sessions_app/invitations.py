"""Invitations: how a person gets an account. An admin invites an address with a role (and an
organisation for a tenant role); the link sent by mail, and shown to the admin to copy,
opens a page where the person sets their own password, once, before it expires.

A link is the invitation's id and nonce, signed with the site's secret: a tampered one fails
the signature, an old one (sent again since, or revoked) no longer matches the nonce, a used
or expired one is refused by the row. The page that opens it says which, plainly.
"""

from __future__ import annotations

import logging
import secrets
import smtplib
from datetime import timedelta
from typing import Literal

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, User
from django.core import signing
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone

from sessions_app.models import Invitation, Membership, Merchant
from sessions_app.people import check_placement
from sessions_app.services import audit
from sessions_app.tenancy import Scope, require_admin

logger = logging.getLogger(__name__)

_SIGNER = signing.Signer(salt="sessions_app.invitation")


class Refused(ValueError):
    """The invitation cannot be sent, or its link cannot be used; says why."""


class LinkRefused(Refused):
    """A link that opens nothing, with the status its page answers: 404 for a link this site
    never made, 410 for one it made that is spent."""

    def __init__(self, reason: str, status: int) -> None:
        super().__init__(reason)
        self.status = status


def lifetime() -> timedelta:
    return timedelta(hours=settings.OANP_INVITATION_HOURS)


def link(invitation: Invitation) -> str:
    token = _SIGNER.sign(f"{invitation.pk}.{invitation.nonce}")
    return settings.OANP_PUBLIC_URL + reverse("invitation", args=[token])


def _has_account(email: str) -> bool:
    return User.objects.filter(email__iexact=email).exists() or (
        User.objects.filter(username__iexact=email).exists()
    )


def _unanswered() -> QuerySet[Invitation]:
    """Neither accepted nor revoked: the database holds one per address at most."""
    return Invitation.objects.filter(accepted_at__isnull=True, revoked_at__isnull=True)


def _pending() -> QuerySet[Invitation]:
    return _unanswered().filter(expires_at__gt=timezone.now())


#: What became of an invitation's mail: sent to a mail server, only written to the log (no
#: server is configured), or refused by the server; in the last two the admin copies the link.
Mailed = Literal["mailed", "logged", "failed"]
CONSOLE_BACKEND = "django.core.mail.backends.console.EmailBackend"


def _send(invitation: Invitation) -> Mailed:
    role = invitation.get_role_display().lower()
    where = f" at {invitation.organisation.name}" if invitation.organisation else ""
    body = (
        f"You are invited to the OANP arbiter as {role}{where}.\n\n"
        f"Open this link to set your password and sign in:\n{link(invitation)}\n\n"
        f"It works once, until {invitation.expires_at:%Y-%m-%d %H:%M} UTC."
    )
    try:
        send_mail("Your invitation to the OANP arbiter", body, None, [invitation.email])
    except (OSError, smtplib.SMTPException):
        logger.warning("the invitation to %s was not mailed", invitation.email, exc_info=True)
        return "failed"
    return "logged" if settings.EMAIL_BACKEND == CONSOLE_BACKEND else "mailed"


def invite(
    *,
    actor: AbstractBaseUser,
    scope: Scope,
    email: str,
    role: str,
    organisation: Merchant | None,
) -> tuple[Invitation, Mailed]:
    """A new invitation, mailed; and what became of the mail. :class:`Refused` when the address
    already has an account or a pending invitation, or the role and organisation do not fit."""
    require_admin(scope)
    email = email.strip().lower()
    check_placement(role, organisation)
    pending = f"an invitation to {email} is pending: send it again or revoke it"
    with transaction.atomic():
        if _has_account(email):
            raise Refused(f"an account already uses {email}: change its role instead")
        if _pending().filter(email__iexact=email).exists():
            raise Refused(pending)
        now = timezone.now()
        # An expired invitation to the address is closed: the new one replaces it.
        _unanswered().filter(email__iexact=email, expires_at__lte=now).update(revoked_at=now)
        try:
            with transaction.atomic():
                invitation = Invitation.objects.create(
                    email=email,
                    role=role,
                    organisation=organisation,
                    invited_by=actor,
                    nonce=secrets.token_urlsafe(32),
                    sent_at=now,
                    expires_at=now + lifetime(),
                )
        except IntegrityError:
            # Another admin's invitation to the address went in since the check above.
            raise Refused(pending) from None
        audit(
            actor,
            "invitation.sent",
            email,
            role=role,
            organisation=organisation and organisation.slug,
        )
    return invitation, _send(invitation)


def _open(invitation: Invitation) -> None:
    if invitation.accepted_at is not None:
        raise Refused("this invitation was accepted already")
    if invitation.revoked_at is not None:
        raise Refused("this invitation was revoked")


def send_again(
    *, actor: AbstractBaseUser, scope: Scope, invitation: Invitation
) -> tuple[Invitation, Mailed]:
    """A fresh link and expiry for an invitation not yet accepted or revoked; the old link
    stops working."""
    require_admin(scope)
    with transaction.atomic():
        invitation = Invitation.objects.select_for_update().get(pk=invitation.pk)
        _open(invitation)
        now = timezone.now()
        invitation.nonce = secrets.token_urlsafe(32)
        invitation.sent_at, invitation.expires_at = now, now + lifetime()
        invitation.save(update_fields=["nonce", "sent_at", "expires_at"])
        audit(actor, "invitation.resent", invitation.email)
    return invitation, _send(invitation)


@transaction.atomic
def revoke(*, actor: AbstractBaseUser, scope: Scope, invitation: Invitation) -> None:
    require_admin(scope)
    invitation = Invitation.objects.select_for_update().get(pk=invitation.pk)
    _open(invitation)
    invitation.revoked_at = timezone.now()
    invitation.save(update_fields=["revoked_at"])
    audit(actor, "invitation.revoked", invitation.email)


def opened(token: str, *, lock: bool = False) -> Invitation:
    """The invitation ``token`` opens; :class:`LinkRefused` says why none does."""
    try:
        pk, _, nonce = _SIGNER.unsign(token).partition(".")
        rows = Invitation.objects.select_for_update(of=("self",)) if lock else Invitation.objects
        invitation = rows.select_related("organisation").get(pk=int(pk))
    except (signing.BadSignature, ValueError, Invitation.DoesNotExist):
        raise LinkRefused(
            "This invitation link is not valid: check it was copied whole.", 404
        ) from None
    if invitation.accepted_at is not None:
        raise LinkRefused("This invitation was used already: sign in instead.", 410)
    if invitation.revoked_at is not None:
        raise LinkRefused("This invitation was revoked: ask an admin for a new one.", 410)
    if not secrets.compare_digest(nonce, invitation.nonce):
        raise LinkRefused("This link was replaced by a newer one: use the latest message.", 410)
    if invitation.expires_at <= timezone.now():
        raise LinkRefused("This invitation has expired: ask an admin to send it again.", 410)
    return invitation


@transaction.atomic
def accept(*, token: str, password: str) -> User:
    """The invited person's account, with ``password`` (checked by the caller's form against
    the password validators) and the invitation's role; the link is spent."""
    invitation = opened(token, lock=True)
    taken = LinkRefused(f"{invitation.email} has an account already: sign in instead.", 410)
    if _has_account(invitation.email):
        raise taken
    try:
        with transaction.atomic():
            user = User.objects.create_user(invitation.email, invitation.email, password)
    except IntegrityError:
        # An account of that name was made since the check above (by a shell, say).
        raise taken from None
    Membership.objects.create(user=user, role=invitation.role, merchant=invitation.organisation)
    invitation.accepted_at = timezone.now()
    invitation.save(update_fields=["accepted_at"])
    audit(
        user,
        "invitation.accepted",
        invitation.email,
        role=invitation.role,
        organisation=invitation.organisation and invitation.organisation.slug,
    )
    return user
