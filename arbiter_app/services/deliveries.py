"""Where agreements and entries are delivered: merchants' ACP handoff targets and agents'
callbacks, their redelivery and test sends. The attempts themselves are written by
:mod:`arbiter_app.deliveries.handoff` and :mod:`arbiter_app.deliveries.callbacks`."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from django.db import transaction
from django.utils import timezone

from arbiter_app.deliveries import outbound
from arbiter_app.deliveries.callbacks import send as send_callback
from arbiter_app.deliveries.handoff import send as send_handoff
from arbiter_app.deliveries.handoff import send_test as send_test_request
from arbiter_app.models import (
    AgentCallback,
    AgentCredential,
    CallbackCursor,
    DeliveryAttempt,
    Handoff,
    HandoffState,
    HandoffTarget,
)
from oanp.wire.envelope import IDENTIFIER_RULE, is_identifier


@dataclass(frozen=True, slots=True)
class Configured:
    """A handoff target or a callback, with the secret its deliveries are signed with."""

    target: HandoffTarget | AgentCallback
    #: ``whsec_…``: shown this once, kept only encrypted.
    secret: str
    #: Whether the arbiter made ``secret`` up, so that it must be shown; not when it was
    #: entered or kept.
    generated: bool = True


def configure_handoff(
    *,
    merchant_agent_id: str,
    endpoint: str,
    api_key: str | None,
    webhook_secret: str | None = None,
    renew_secret: bool = True,
) -> Configured:
    """Where ``merchant_agent_id``'s agreements are handed off; replaces an earlier target and
    enables it again. ``ValueError`` for a bad id, key, secret or endpoint (SSRF included).

    ``api_key=None`` keeps the stored key. ``webhook_secret=None`` generates a new secret,
    unless ``renew_secret`` is false and one is stored: then that one is kept."""
    if not is_identifier(merchant_agent_id):
        raise ValueError(f"agent id {merchant_agent_id!r} is not {IDENTIFIER_RULE}")
    stored = HandoffTarget.objects.filter(merchant_agent_id=merchant_agent_id).first()
    if api_key is None:
        api_key = "" if stored is None else outbound.unseal(stored.api_key_encrypted)
    if not api_key.strip():
        raise ValueError("the merchant's ACP API key is required")
    _check_url(endpoint)
    generated = False
    if webhook_secret is None and stored is not None and not renew_secret:
        webhook_secret = outbound.unseal(stored.webhook_secret_encrypted)
    elif webhook_secret is None:
        webhook_secret, generated = outbound.new_webhook_secret(), True
    outbound.check_webhook_secret(webhook_secret)
    target, _ = HandoffTarget.objects.update_or_create(
        merchant_agent_id=merchant_agent_id,
        defaults={
            "endpoint": endpoint,
            "api_key_encrypted": outbound.seal(api_key.strip()),
            "webhook_secret_encrypted": outbound.seal(webhook_secret),
            "disabled_at": None,
            "disabled_reason": "",
        },
    )
    return Configured(target, webhook_secret, generated)


def _check_url(url: str) -> None:
    if len(url) > 2000:
        raise outbound.TargetNotAllowed("the URL is longer than 2000 characters")
    outbound.check_target(url)


def redeliver_handoff(*, handoff: Handoff) -> None:
    """Hand the agreement off again from a fresh retry budget: after a failure, a disabled
    target configured anew, or to read the merchant's checkout again (the Idempotency-Key is
    the same, so the merchant answers with the checkout it already made)."""
    with transaction.atomic():
        locked = Handoff.objects.select_for_update().select_related("target").get(pk=handoff.pk)
        if locked.target.disabled_at is not None:
            raise ValueError(
                f"the handoff target of {locked.target.merchant_agent_id!r} is disabled "
                f"({locked.target.disabled_reason}); configure it again first"
            )
        now = timezone.now()
        # An attempt past its lease lost its worker: closed as abandoned, it blocks nothing.
        outbound.abandon_dead(now, handoffs=[locked.pk])
        if DeliveryAttempt.objects.filter(handoff=locked, outcome="").exists():
            raise ValueError("an attempt is running; wait for its answer")
        locked.state, locked.attempts = HandoffState.PENDING, 0
        locked.next_attempt_at = now
        locked.flagged, locked.flag_reason = False, ""
        locked.delivered_at, locked.checkout_id = None, ""
        locked.save()
        transaction.on_commit(partial(send_handoff, locked.pk), robust=True)


def resend_callback(*, cursor_id: int) -> None:
    """Send what a callback has not had of one session now, from a fresh retry budget,
    instead of at its next retry. ``ValueError`` when the callback is disabled (its agent
    registers it again, which resumes every session it had not finished), when nothing is left
    to send, or when an attempt is running."""
    with transaction.atomic():
        cursor = (
            CallbackCursor.objects.select_for_update(of=("self",))
            .select_related("callback", "session")
            .get(pk=cursor_id)
        )
        if cursor.callback.disabled_at is not None:
            raise ValueError(
                f"the callback of {cursor.callback.agent_id!r} is disabled "
                f"({cursor.callback.disabled_reason}); its agent registers it again first"
            )
        if cursor.delivered_seq >= cursor.session.head_seq:
            raise ValueError("the callback has every entry of this session already")
        now = timezone.now()
        outbound.abandon_dead(now, cursors=[cursor.pk])
        if DeliveryAttempt.objects.filter(cursor=cursor, outcome="").exists():
            raise ValueError("an attempt is running; wait for its answer")
        cursor.attempts, cursor.next_attempt_at = 0, None
        cursor.save(update_fields=["attempts", "next_attempt_at"])
        transaction.on_commit(partial(send_callback, cursor.pk), robust=True)


def send_test_handoff(*, merchant_agent_id: str) -> outbound.Answer:
    """One signed test request to the merchant's handoff target, as its handoffs would go;
    ``ValueError`` when it has none. A disabled target is tried too: the test is how a
    merchant learns it answers again before configuring it anew."""
    target = HandoffTarget.objects.filter(merchant_agent_id=merchant_agent_id).first()
    if target is None:
        raise ValueError(f"{merchant_agent_id!r} has no handoff target")
    return send_test_request(target)


def register_callback(*, agent: AgentCredential, url: str) -> Configured:
    """Where ``agent`` receives its sessions' entries, under a fresh secret. Registering again
    replaces the URL and the secret and enables a disabled callback; entries already delivered
    are not sent again."""
    _check_url(url)
    secret = outbound.new_webhook_secret()
    with transaction.atomic():
        callback, created = AgentCallback.objects.update_or_create(
            agent_id=agent.agent_id,
            role=agent.role,
            defaults={
                "url": url,
                "secret_encrypted": outbound.seal(secret),
                "disabled_at": None,
                "disabled_reason": "",
            },
        )
        if not created:
            # A fresh retry budget for whatever was waiting; the sweep resumes it.
            callback.cursors.update(attempts=0)
    return Configured(callback, secret)


def remove_callback(*, agent: AgentCredential) -> None:
    AgentCallback.objects.filter(agent_id=agent.agent_id, role=agent.role).delete()
