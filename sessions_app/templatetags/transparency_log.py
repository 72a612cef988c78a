"""The transparency log (docs/protocol.md §18) on the admins' audit page: what auditors pin
(its origin and verifier key), its tree, the checkpoint it serves with the witnesses'
cosignatures, and each configured witness's state, one that stopped answering as an alert."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django import template
from django.utils import timezone

from arbiter_app import selectors as arbiter

register = template.Library()


@dataclass(frozen=True)
class WitnessState:
    name: str
    #: ``None`` until a checkpoint has been sent to it.
    answering: bool | None
    #: The size it last cosigned: the next checkpoint goes to it with a proof from there.
    size: int
    answered_at: datetime | None
    failed_at: datetime | None
    error: str


def _moment(iso: object) -> datetime | None:
    return datetime.fromisoformat(iso) if isinstance(iso, str) else None


def _witness(name: str, seen: dict[str, Any] | None) -> WitnessState:
    if seen is None:
        return WitnessState(name, None, 0, None, None, "")
    return WitnessState(
        name,
        bool(seen["answering"]),
        int(seen["size"]),
        _moment(seen["answered_at"]),
        _moment(seen["failed_at"]),
        str(seen["error"]),
    )


@register.inclusion_tag("sessions_app/_transparency_log.html")
def transparency_log(scope: Any) -> dict[str, Any]:
    """The log's card, for admins only, as the audit page it sits on is."""
    if not (scope and scope.is_admin):
        return {}
    health: dict[str, Any] = arbiter.log_health()
    # Configured ones only, each whether sent a checkpoint yet or not: the record of a witness
    # taken off the list stays behind.
    names = [witness.name for witness in arbiter.configured_witnesses()]
    witnesses = [_witness(name, health["witnesses"].get(name)) for name in names]
    age = health["seconds_since_checkpoint"]
    checkpoint = arbiter.served_checkpoint()
    return {
        "identity": arbiter.log_identity(),
        "tree_size": health["tree_size"],
        "waiting": health["entries_waiting"],
        "last_signed": None if age is None else timezone.now() - timedelta(seconds=age),
        "checkpoint": checkpoint,
        "root": base64.b64encode(bytes(checkpoint.root)).decode() if checkpoint else "",
        "note": arbiter.note_text(checkpoint) if checkpoint else "",
        "cosignatures": list(checkpoint.cosignatures.all()) if checkpoint else [],
        "witnesses": witnesses,
        "stopped": [w for w in witnesses if w.answering is False],
    }
