"""The deliveries across sessions, for the dashboard (through :mod:`arbiter_app.selectors`):
ACP handoffs and callback cursors as one list, newest first, paged by a position rather than
an offset so that new deliveries arriving meanwhile shift nothing; and one delivery with every
attempt it made. Callers pass the merchant agent ids in their scope, ``None`` for every one;
a callback is in a merchant's scope when it is one of its own agents' callbacks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db.models import Case, CharField, Count, F, OuterRef, Q, QuerySet, Subquery, Value, When

from arbiter_app.models import (
    AgentRole,
    CallbackCursor,
    DeliveryAttempt,
    Handoff,
    HandoffState,
)

HANDOFF, CALLBACK = "handoff", "callback"
KINDS = (HANDOFF, CALLBACK)
DELIVERED, FLAGGED, PENDING, RETRYING, FAILED, ABANDONED = (
    "delivered",
    "flagged",
    "pending",
    "retrying",
    "failed",
    "abandoned",
)
#: What became of a delivery, as the people who act on it read it. A flagged handoff reached
#: the merchant, whose checkout did not carry the agreed price. An abandoned one was given up
#: with its target (gone, or no longer an allowed address): it waits for the target to be
#: configured again. A callback is never "failed": a refused entry is skipped, and retries
#: spent disable the callback, which abandons what it had not sent.
OUTCOMES = (DELIVERED, FLAGGED, PENDING, RETRYING, FAILED, ABANDONED)
LABELS = {FLAGGED: "price mismatch flagged", PENDING: "first attempt on its way"}
TONES = {DELIVERED: "good", FLAGGED: "bad", RETRYING: "warn", FAILED: "bad", ABANDONED: "bad"}


class BadPosition(ValueError):
    """A page position that no page of this list ends at."""


@dataclass(frozen=True, slots=True)
class Position:
    """Where a page ends. The list runs by (created_at, kind, pk), newest first."""

    created_at: datetime
    kind: str
    pk: int

    _TOKEN = re.compile(r"(\d{1,17})-(handoff|callback)-(\d{1,18})")

    def token(self) -> str:
        micros = int(self.created_at.timestamp()) * 10**6 + self.created_at.microsecond
        return f"{micros}-{self.kind}-{self.pk}"

    @classmethod
    def parse(cls, token: str) -> Position:
        found = cls._TOKEN.fullmatch(token)
        if found is None:
            raise BadPosition(f"{token[:40]!r} is not a position in this list")
        micros, kind, pk = found.groups()
        seconds, fraction = divmod(int(micros), 10**6)
        try:
            created = datetime.fromtimestamp(seconds, UTC).replace(microsecond=fraction)
        except (OverflowError, OSError, ValueError) as exc:
            raise BadPosition(f"{token[:40]!r} is not a position in this list") from exc
        return cls(created, kind, int(pk))

    def older(self, kind: str) -> Q:
        """The rows of ``kind`` that come after this position."""
        earlier = Q(created_at__lt=self.created_at)
        if kind == self.kind:
            return earlier | Q(created_at=self.created_at, pk__lt=self.pk)
        if kind < self.kind:
            return earlier | Q(created_at=self.created_at)
        return earlier


@dataclass(frozen=True, slots=True)
class Delivery:
    kind: str
    pk: int
    session_id: str
    target_url: str
    #: One of :data:`OUTCOMES`.
    state: str
    #: Why it is disabled or flagged; "" when nothing is wrong.
    note: str
    created_at: datetime
    attempts: int
    last_attempt_at: datetime | None
    last_status: int | None
    last_outcome: str
    #: When the next attempt may start (while one runs, when it is presumed dead).
    next_attempt_at: datetime | None

    @property
    def position(self) -> Position:
        return Position(self.created_at, self.kind, self.pk)

    @property
    def label(self) -> str:
        return LABELS.get(self.state, self.state)

    @property
    def tone(self) -> str:
        return TONES.get(self.state, "")

    @property
    def resendable(self) -> bool:
        """Anything not cleanly delivered may be sent again now: a flagged handoff, to read
        the merchant's checkout again; the rest, from a fresh retry budget."""
        return self.state != DELIVERED


def _attempt_columns(relation: str) -> dict[str, Any]:
    latest = DeliveryAttempt.objects.filter(**{relation: OuterRef("pk")}).order_by(
        "-started_at", "-pk"
    )
    return {
        "attempt_count": Count("attempt_log"),
        "last_attempt_at": Subquery(latest.values("started_at")[:1]),
        "last_status": Subquery(latest.values("status_code")[:1]),
        "last_outcome": Subquery(latest.values("outcome")[:1]),
    }


def handoffs(agent_ids: list[str] | None) -> QuerySet[Handoff]:
    found = Handoff.objects.select_related("session", "target")
    if agent_ids is not None:
        found = found.filter(session__merchant_agent_id__in=agent_ids)
    outcome = Case(
        When(state=HandoffState.DELIVERED, flagged=True, then=Value(FLAGGED)),
        When(state=HandoffState.DELIVERED, then=Value(DELIVERED)),
        When(state=HandoffState.FAILED, then=Value(FAILED)),
        When(state=HandoffState.DISABLED, then=Value(ABANDONED)),
        # Pending at a disabled target: its next attempt will only find it disabled.
        When(target__disabled_at__isnull=False, then=Value(ABANDONED)),
        When(attempts__gt=0, then=Value(RETRYING)),
        default=Value(PENDING),
        output_field=CharField(),
    )
    return found.annotate(
        delivery_state=outcome, target_url=F("target__endpoint"), **_attempt_columns("handoff")
    )


def callback_cursors(agent_ids: list[str] | None) -> QuerySet[CallbackCursor]:
    found = CallbackCursor.objects.select_related("callback", "session")
    if agent_ids is not None:
        found = found.filter(callback__role=AgentRole.MERCHANT, callback__agent_id__in=agent_ids)
    state = Case(
        When(delivered_seq__gte=F("session__head_seq"), then=Value(DELIVERED)),
        When(callback__disabled_at__isnull=False, then=Value(ABANDONED)),
        When(attempts__gt=0, then=Value(RETRYING)),
        default=Value(PENDING),
        output_field=CharField(),
    )
    return found.annotate(
        delivery_state=state, target_url=F("callback__url"), **_attempt_columns("cursor")
    )


def _delivery(kind: str, row: Any) -> Delivery:
    if kind == HANDOFF:
        target_url = row.target_url.rstrip("/") + "/checkout_sessions"
        note = row.target.disabled_reason or row.flag_reason
    else:
        target_url, note = row.target_url, row.callback.disabled_reason
    return Delivery(
        kind=kind,
        pk=row.pk,
        session_id=row.session.session_id,
        target_url=target_url,
        state=row.delivery_state,
        note=note,
        created_at=row.created_at,
        attempts=row.attempt_count,
        last_attempt_at=row.last_attempt_at,
        last_status=row.last_status,
        last_outcome=row.last_outcome or "",
        next_attempt_at=row.next_attempt_at,
    )


def _tables(agent_ids: list[str] | None, kind: str | None) -> list[tuple[str, QuerySet[Any]]]:
    tables: list[tuple[str, QuerySet[Any]]] = [
        (HANDOFF, handoffs(agent_ids)),
        (CALLBACK, callback_cursors(agent_ids)),
    ]
    return [(k, rows) for k, rows in tables if kind in (None, k)]


def delivery_page(
    agent_ids: list[str] | None,
    *,
    kind: str | None = None,
    state: str | None = None,
    target: str = "",
    after: Position | None = None,
    limit: int = 50,
) -> tuple[list[Delivery], Position | None]:
    """A page of deliveries, newest first, and the position of the next one (``None`` on the
    last page). Each table gives at most a page, so merging them costs two small queries."""
    found: list[Delivery] = []
    for name, rows in _tables(agent_ids, kind):
        if state:
            rows = rows.filter(delivery_state=state)
        if target:
            rows = rows.filter(target_url__icontains=target)
        if after is not None:
            rows = rows.filter(after.older(name))
        found += [_delivery(name, row) for row in rows.order_by("-created_at", "-pk")[: limit + 1]]
    found.sort(key=lambda d: (d.created_at, d.kind, d.pk), reverse=True)
    page = found[:limit]
    return page, page[-1].position if len(found) > limit else None


def delivery_of(
    agent_ids: list[str] | None, kind: str, pk: int
) -> tuple[Delivery, list[DeliveryAttempt]] | None:
    """One delivery in scope and every attempt it made, oldest first; ``None`` when there is
    none such in scope."""
    for name, rows in _tables(agent_ids, kind):
        row = rows.filter(pk=pk).first()
        if row is not None:
            attempts = row.attempt_log.order_by("started_at", "number")
            return _delivery(name, row), list(attempts)
    return None


def resendable(agent_ids: list[str] | None, kind: str, pks: list[int]) -> list[Delivery]:
    """Those of the deliveries of ``kind`` named ``pks`` in scope that are not cleanly
    delivered: what "resend now" may take, newest first."""
    rows = dict(_tables(agent_ids, kind))[kind].filter(pk__in=pks).exclude(delivery_state=DELIVERED)
    return [_delivery(kind, row) for row in rows.order_by("-created_at", "-pk")]
