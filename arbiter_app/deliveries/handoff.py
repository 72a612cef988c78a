"""The ACP handoff of docs/protocol.md §15: an agreed session becomes a checkout at the merchant.

The handoff row is an outbox: :func:`open_handoff` writes it in the very transaction that
appends ``session.agree``, so an agreement that rolls back is never handed off and one that
commits always is. The POSTs happen afterwards, in :func:`deliver`, one attempt at a time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from arbiter_app.deliveries import bound, outbound
from arbiter_app.deliveries.outbound import Answer, AttemptOutcome
from arbiter_app.models import (
    DeliveryAttempt,
    Handoff,
    HandoffState,
    HandoffTarget,
    Session,
)
from arbiter_app.queue import DELIVER_HANDOFF, enqueue
from oanp.wire.canonical import JsonObject, canonical_bytes
from oanp.wire.envelope import format_timestamp
from oanp.wire.log import Entry as LogEntry
from oanp.wire.money import to_minor_units

ACP_API_VERSION = "2026-04-17"


def open_handoff(session: Session, entries: Sequence[LogEntry]) -> None:
    """Within the transaction that appends ``entries``: when they hold the agreement and the
    merchant has a handoff target, the handoff to deliver once the transaction commits."""
    agree = next((e for e in entries if e.type == "session.agree"), None)
    if agree is None:
        return
    target = HandoffTarget.objects.filter(
        merchant_agent_id=session.merchant_agent_id, disabled_at__isnull=True
    ).first()
    if target is None:
        return
    handoff = Handoff.objects.create(
        session=session,
        target=target,
        body=checkout_body(session.session_id, agree.envelope),
        next_attempt_at=timezone.now(),
    )
    transaction.on_commit(partial(send, handoff.pk), robust=True)


def send(handoff_id: int, countdown: float | None = None) -> bool:
    """Ask the worker for the next attempt; whether it was asked. When the broker is away,
    the handoff stays due, and the sweep asks again."""
    return enqueue(
        DELIVER_HANDOFF,
        args=[handoff_id],
        countdown=countdown,
        about=f"handoff {handoff_id}; the sweep will deliver it",
    )


def line_item_id(item: JsonObject) -> str:
    """The merchant's own id for the item when the buyer named one (``sku``, else ``id``);
    else one derived from the item itself, the same for the same item in every session."""
    for key in ("sku", "id"):
        value = item.get(key)
        if (isinstance(value, str) and value) or (
            isinstance(value, int) and not isinstance(value, bool)
        ):
            return str(value)
    return "oanp-item-" + hashlib.sha256(canonical_bytes(item)).hexdigest()[:32]


def checkout_body(session_id: str, agree: JsonObject) -> str:
    """The ``POST /checkout_sessions`` body, from the signed ``session.agree`` envelope."""
    payload = agree["payload"]
    assert isinstance(payload, dict)
    agreement = payload["agreement"]
    assert isinstance(agreement, dict)
    assert isinstance(agreement["item"], dict)
    currency = str(payload["currency"])
    price = Decimal(str(payload["final_price"]))
    body = {
        "line_items": [
            {
                "id": line_item_id(agreement["item"]),
                "unit_amount": to_minor_units(price, currency),
            }
        ],
        # ACP writes ISO 4217 codes in lower case; OANP in upper.
        "currency": currency.lower(),
        "capabilities": {},
        "quote_id": session_id,
        "metadata": {
            "oanp_session_id": session_id,
            "oanp_session_digest": payload["session_digest"],
            "oanp_agreement_jws": payload["signature"],
            "oanp_kid": payload["kid"],
            "oanp_jwks_uri": payload["jwks_uri"],
        },
    }
    final_terms = agreement.get("final_terms")
    if final_terms is not None:
        # Metadata values are strings in ACP: the terms travel as their JCS text, the very
        # bytes the signed agreement holds them as.
        body["metadata"]["oanp_terms"] = canonical_bytes(final_terms).decode()
    # RFC 8785: ACP signs requests "over canonical JSON"; these are the very bytes sent.
    return canonical_bytes(body).decode()


def acp_signature_headers(*, secret: str, body: bytes, now: datetime) -> dict[str, str]:
    """ACP's own request signature, beside Standard Webhooks': ``Timestamp`` (RFC 3339, UTC)
    and ``Signature``, the unpadded base64url HMAC-SHA256 of ``{Timestamp}.{body}`` under the
    same per-merchant secret (the bytes that follow ``whsec_``, base64-decoded)."""
    timestamp = format_timestamp(now)
    key = base64.b64decode(secret.removeprefix(outbound.SECRET_PREFIX))
    digest = hmac.new(key, timestamp.encode() + b"." + body, hashlib.sha256).digest()
    return {
        "Timestamp": timestamp,
        "Signature": base64.urlsafe_b64encode(digest).rstrip(b"=").decode(),
    }


def checkout_url(target: HandoffTarget) -> str:
    return target.endpoint.rstrip("/") + "/checkout_sessions"


def _post(target: HandoffTarget, *, body: bytes, key: str, **headers: str) -> Answer:
    """POST ``body`` to the target's ``/checkout_sessions`` as ACP asks: its key, the
    Idempotency-Key, the API version, and both signatures."""
    secret = outbound.unseal(target.webhook_secret_encrypted)
    return outbound.deliver(
        url=checkout_url(target),
        body=body,
        secret=secret,
        message_id=key,
        headers={
            "Authorization": f"Bearer {outbound.unseal(target.api_key_encrypted)}",
            "Idempotency-Key": key,
            "API-Version": ACP_API_VERSION,
            **acp_signature_headers(secret=secret, body=body, now=timezone.now()),
            **headers,
        },
    )


# Delivery ------------------------------------------------------------------------------------


def deliver(handoff_id: int) -> bool:
    """Make the handoff's next attempt if one is due; ``True`` when a POST was made.

    The row is claimed under a lock that others skip, and the claim pushes
    ``next_attempt_at`` past the attempt's longest run: the task and the sweep can both
    call this at once, and still only one of them POSTs each attempt. When the target already
    has as many attempts in flight as it may (:mod:`~arbiter_app.deliveries.bound`), the
    attempt is deferred instead, its retry budget untouched.
    """
    now = timezone.now()
    with transaction.atomic():
        handoff = (
            Handoff.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("target", "session")
            .filter(pk=handoff_id, state=HandoffState.PENDING, next_attempt_at__lte=now)
            .first()
        )
        if handoff is None:
            return False
        # Its lease is over: an attempt still unanswered lost its worker, and says so.
        outbound.abandon_dead(now, handoffs=[handoff.pk])
        target = handoff.target
        if target.disabled_at is not None:
            handoff.state, handoff.next_attempt_at = HandoffState.DISABLED, None
            handoff.save(update_fields=["state", "next_attempt_at"])
            return False
        origin = bound.origin_of(checkout_url(target))
        if not bound.has_room(origin, now):
            bound.defer(handoff, now=now, send=send)
            return False
        handoff.attempts += 1
        handoff.next_attempt_at = outbound.lease_until(now)
        handoff.save(update_fields=["attempts", "next_attempt_at"])
        attempt = DeliveryAttempt.objects.create(
            handoff=handoff,
            number=outbound.next_number(handoff.attempt_log),
            started_at=now,
            origin=origin,
        )
    body = handoff.body.encode()
    answer = _post(target, body=body, key=f"oanp-{handoff.session.session_id}")
    outbound.record(attempt, answer, url=checkout_url(target), body=body)
    _settle(handoff.pk, attempt.number, answer)
    return True


def _settle(handoff_id: int, number: int, answer: Answer) -> None:
    now = timezone.now()
    with transaction.atomic():
        handoff = Handoff.objects.select_for_update().get(pk=handoff_id)
        if handoff.state != HandoffState.PENDING or not outbound.is_latest(
            handoff.attempts, handoff.attempt_log, number
        ):
            return  # an operator redelivered meanwhile; this answer stays on record only
        handoff.next_attempt_at = None
        if answer.outcome is AttemptOutcome.DELIVERED:
            handoff.state, handoff.delivered_at = HandoffState.DELIVERED, now
            handoff.checkout_id, handoff.flag_reason = read_checkout(handoff.body, answer.body)
            handoff.flagged = bool(handoff.flag_reason)
        elif answer.outcome is AttemptOutcome.RETRY:
            wait = outbound.retry_wait(handoff.attempts, answer.retry_after)
            if wait is None:
                handoff.state = HandoffState.FAILED
            else:
                handoff.next_attempt_at = now + timedelta(seconds=wait)
                transaction.on_commit(partial(send, handoff.pk, countdown=wait), robust=True)
        elif answer.outcome is AttemptOutcome.GONE:
            handoff.state = HandoffState.DISABLED
            reason = answer.error or f"the endpoint answered {answer.status_code}"
            HandoffTarget.objects.filter(pk=handoff.target_id, disabled_at__isnull=True).update(
                disabled_at=now, disabled_reason=reason[:300]
            )
        else:
            handoff.state = HandoffState.FAILED
        handoff.save()


def read_checkout(sent: str, received: bytes) -> tuple[str, str]:
    """The checkout id the merchant returned, and why its price is not the agreed one ("" when
    it is).

    The unit amount is read from ``line_items[0].unit_amount``; a response without one (ACP's
    own line items carry ``base_amount``, the price times the quantity) is read from
    ``base_amount`` when the quantity is one or unstated. Anything else is flagged.
    """
    request = json.loads(sent)
    agreed, currency = request["line_items"][0]["unit_amount"], request["currency"]
    try:
        checkout: Any = json.loads(received)
    except ValueError:
        return "", "the checkout response is not JSON"
    if not isinstance(checkout, dict):
        return "", "the checkout response is not a JSON object"
    checkout_id = checkout.get("id")
    checkout_id = checkout_id[:200] if isinstance(checkout_id, str) else ""
    lines = checkout.get("line_items")
    line = lines[0] if isinstance(lines, list) and lines else None
    if not isinstance(line, dict):
        return checkout_id, "the checkout has no line item"
    amount = line.get("unit_amount")
    if amount is None:
        item = line.get("item")
        quantity = item.get("quantity", 1) if isinstance(item, dict) else 1
        amount = line.get("base_amount") if quantity == 1 else None
    if not isinstance(amount, int) or isinstance(amount, bool):
        return checkout_id, "the checkout names no unit amount for its line item"
    if amount != agreed:
        return checkout_id, f"the checkout's unit amount {amount} is not the agreed {agreed}"
    returned = checkout.get("currency")
    if isinstance(returned, str) and returned.lower() != currency:
        return checkout_id, f"the checkout's currency {returned!r} is not the agreed {currency!r}"
    return checkout_id, ""


# A merchant's test of its target -------------------------------------------------------------

TEST_KEY_PREFIX = "oanp-test-"


def marked_test_body(key: str) -> bytes:
    """A checkout request that cannot become a sale: marked as a test twice over, and with no
    line items, so an ACP server that ignores the marks still has nothing to sell."""
    body = {
        "line_items": [],
        "currency": "usd",
        "capabilities": {},
        "quote_id": key,
        "metadata": {"oanp_test": True},
    }
    return canonical_bytes(body)


def send_test(target: HandoffTarget) -> Answer:
    """POST a signed test request to ``target`` the way a handoff goes (same URL, key, headers
    and signature), under an Idempotency-Key of its own. Records nothing: the caller keeps
    the answer where the merchant will read it."""
    key = TEST_KEY_PREFIX + secrets.token_hex(8)
    return _post(target, body=marked_test_body(key), key=key, **{"OANP-Test": "true"})
