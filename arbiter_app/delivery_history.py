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
#: A callback is never "failed": a refused entry is skipped, and retries spent disable it.
STATES = tuple(HandoffState.values)


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
    state: str
    #: Why it is disabled or flagged; "" when nothing is wrong.
    note: str
    created_at: datetime
    attempts: int
    last_attempt_at: datetime | None
    last_status: int | None
    last_outcome: str

    @property
    def position(self) -> Position:
        return Position(self.created_at, self.kind, self.pk)

    @property
    def redeliverable(self) -> bool:
        """Only a handoff may be redelivered, and the bulk action is for the failed ones."""
        return self.kind == HANDOFF and self.state == HandoffState.FAILED


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
    return found.annotate(
        delivery_state=F("state"), target_url=F("target__endpoint"), **_attempt_columns("handoff")
    )


def callback_cursors(agent_ids: list[str] | None) -> QuerySet[CallbackCursor]:
    found = CallbackCursor.objects.select_related("callback", "session")
    if agent_ids is not None:
        found = found.filter(callback__role=AgentRole.MERCHANT, callback__agent_id__in=agent_ids)
    state = Case(
        When(callback__disabled_at__isnull=False, then=Value(HandoffState.DISABLED.value)),
        When(delivered_seq__gte=F("session__head_seq"), then=Value(HandoffState.DELIVERED.value)),
        default=Value(HandoffState.PENDING.value),
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


def failed_handoffs(agent_ids: list[str] | None, pks: list[int]) -> list[Delivery]:
    """Those of the handoffs ``pks`` in scope that failed: what a bulk redelivery may take."""
    rows = handoffs(agent_ids).filter(pk__in=pks, state=HandoffState.FAILED).order_by("-pk")
    return [_delivery(HANDOFF, row) for row in rows]
