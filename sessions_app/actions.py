"""The audited actions of operators and admins: terminating a session, resending its
handoff or a callback, rotating the signing key. Each checks the role itself, so no view or
command can skip the check, and records an :class:`~sessions_app.models.AuditEvent` in the
same transaction as its effect.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from arbiter_app import selectors as arbiter
from arbiter_app import services
from arbiter_app.models import KeyState, Session, SigningKey
from sessions_app import selectors
from sessions_app.models import AuditEvent
from sessions_app.tenancy import Scope, require_admin, require_staff

# What the parties read in the arbiter's session.close when the operator gives no reason.
DEFAULT_TERMINATE_DETAIL = "terminated by the arbiter's operator"


def terminate_session(
    *, actor: AbstractBaseUser, scope: Scope, session_id: str, detail: str = ""
) -> bool:
    """End a live session as ``operator_terminated``; ``False`` when it had already ended.

    Only operators and admins may; the attempt is audited either way, since an operator
    pressing the button on a session that just agreed is worth knowing too.
    """
    require_staff(scope)
    found = selectors.session(scope, session_id)
    detail = detail.strip() or DEFAULT_TERMINATE_DETAIL
    with transaction.atomic():
        closed = services.terminate_session(session_id=found.session_id, detail=detail)
        AuditEvent.objects.create(
            actor=actor,
            action="session.terminate",
            target=found.session_id,
            detail={"detail": detail, "closed": closed},
        )
    return closed


#: The most sessions one bulk action takes: a few pages of the sessions list.
BULK_SESSIONS_MAX = 200


def terminable(scope: Scope, session_ids: list[str]) -> list[Session]:
    """The sessions ``session_ids``, when this user may terminate each: live and in scope, at
    most :data:`BULK_SESSIONS_MAX`. ``ValueError`` otherwise; operators and admins only."""
    require_staff(scope)
    wanted = set(session_ids)
    if not wanted:
        raise ValueError("select at least one live session")
    if len(wanted) > BULK_SESSIONS_MAX:
        raise ValueError(f"select at most {BULK_SESSIONS_MAX} sessions at once")
    live = selectors.live_sessions(scope, sorted(wanted))
    if len(live) != len(wanted):
        raise ValueError("a selected session has ended or is not in your list; reload the list")
    return live


def terminate_sessions(
    *, actor: AbstractBaseUser, scope: Scope, session_ids: list[str], detail: str = ""
) -> list[str]:
    """Terminate each of the live sessions ``session_ids``, each as one
    :func:`terminate_session` (audited one by one); those that had ended meanwhile. Checked
    first by :func:`terminable`, so a bad selection terminates nothing."""
    return [
        found.session_id
        for found in terminable(scope, session_ids)
        if not terminate_session(
            actor=actor, scope=scope, session_id=found.session_id, detail=detail
        )
    ]


def redeliver_handoff(*, actor: AbstractBaseUser, scope: Scope, session_id: str) -> None:
    """Hand a session's agreement off again from a fresh retry budget. Operators and admins
    only; ``ValueError`` when the arbiter refuses (no handoff, a disabled target, an attempt
    still running), and that refusal is audited too."""
    require_staff(scope)
    found = selectors.session(scope, session_id)
    handoff, _ = selectors.handoff(found)
    refused = ""
    with transaction.atomic():
        try:
            if handoff is None:
                raise ValueError("this session has no handoff")
            services.redeliver_handoff(handoff=handoff)
        except ValueError as exc:
            refused = str(exc)
        AuditEvent.objects.create(
            actor=actor,
            action="handoff.redeliver",
            target=found.session_id,
            detail={"redelivered": not refused, "refused": refused},
        )
    if refused:
        raise ValueError(refused)


def resend_callback(*, actor: AbstractBaseUser, scope: Scope, delivery: arbiter.Delivery) -> None:
    """Send a callback's undelivered entries of one session now, from a fresh retry budget.
    Operators and admins only; the arbiter's refusal (``ValueError``) is audited too."""
    require_staff(scope)
    refused = ""
    with transaction.atomic():
        try:
            services.resend_callback(cursor_id=delivery.pk)
        except ValueError as exc:
            refused = str(exc)
        AuditEvent.objects.create(
            actor=actor,
            action="callback.resend",
            target=delivery.session_id,
            detail={"url": delivery.target_url, "resent": not refused, "refused": refused},
        )
    if refused:
        raise ValueError(refused)


#: The most deliveries one resend takes: a page of the deliveries list.
BULK_RESEND_MAX = 50


def resendable(scope: Scope, selection: dict[str, list[int]]) -> list[arbiter.Delivery]:
    """The deliveries ``selection`` names (ids by kind), when each may be resent now by this
    user: in scope and not cleanly delivered, at most a page of them. ``ValueError``
    otherwise; operators and admins only."""
    require_staff(scope)
    wanted = {kind: set(pks) for kind, pks in selection.items() if pks}
    count = sum(len(pks) for pks in wanted.values())
    if not count:
        raise ValueError("select at least one delivery that is not delivered yet")
    if count > BULK_RESEND_MAX:
        raise ValueError(f"select at most {BULK_RESEND_MAX} deliveries at once")
    found = [
        delivery
        for kind, pks in wanted.items()
        for delivery in selectors.resendable_deliveries(scope, kind, sorted(pks))
    ]
    if len(found) != count:
        raise ValueError("a selected delivery is delivered already or not yours; reload the list")
    return found


def resend_deliveries(
    *, actor: AbstractBaseUser, scope: Scope, selection: dict[str, list[int]]
) -> dict[str, str]:
    """Resend each delivery ``selection`` names, each audited on its own; what the arbiter
    refused, by delivery ("handoff of …"). Checked first by :func:`resendable`, so a bad
    selection resends nothing."""
    refused = {}
    for delivery in resendable(scope, selection):
        try:
            if delivery.kind == arbiter.HANDOFF:
                redeliver_handoff(actor=actor, scope=scope, session_id=delivery.session_id)
            else:
                resend_callback(actor=actor, scope=scope, delivery=delivery)
        except ValueError as exc:
            refused[f"{delivery.kind} of {delivery.session_id}"] = str(exc)
    return refused


def rotate_signing_key(*, actor: AbstractBaseUser, scope: Scope, alg: str) -> SigningKey:
    """Make a fresh key active now; the one it replaces stays in the JWKS while it retires."""
    require_admin(scope)
    if alg not in arbiter.SIGNING_ALGORITHMS:
        raise ValueError(f"unsupported signing algorithm {alg!r}")
    with transaction.atomic():
        replaced = [k["kid"] for k in arbiter.key_history() if k["state"] == KeyState.ACTIVE]
        fresh = services.rotate_signing_key(alg=alg)
        AuditEvent.objects.create(
            actor=actor,
            action="key.rotate",
            target=fresh.kid,
            detail={"alg": fresh.alg, "replaced": replaced},
        )
    return fresh
