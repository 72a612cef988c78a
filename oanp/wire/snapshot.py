"""A session's state as JSON and back, so a store can keep it beside the log.

Replaying a log rebuilds the same state, but costs a parse and a hash per entry on every move;
a snapshot costs one read. Decimals travel as strings so no price ever passes through a float.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields
from datetime import datetime
from decimal import Decimal
from typing import Any

from oanp.wire.canonical import JsonObject, JsonValue
from oanp.wire.envelope import Role, format_timestamp, parse_timestamp
from oanp.wire.log import Head
from oanp.wire.profiles import Reason
from oanp.wire.state import Phase, SessionState
from oanp.wire.terms import ChoiceIssue, NumberIssue, Values, read_issues

SNAPSHOT_VERSION = 1


def _dump(value: object) -> JsonValue:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, Phase | Role | Reason):
        return value.value
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, Head):
        return {"seq": value.seq, "entry_hash": value.entry_hash}
    if isinstance(value, frozenset):
        return sorted(value)
    if isinstance(value, dict):
        return value
    if isinstance(value, NumberIssue | ChoiceIssue):
        return value.as_json()
    if isinstance(value, tuple):  # issues, or values: numbers as strings, choices as indices
        return [_dump(v) for v in value]
    raise TypeError(f"cannot snapshot {type(value).__name__}")


def _optional(read: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda raw: None if raw is None else read(raw)


def _values(raw: list[str | int]) -> Values:
    return tuple(Decimal(v) if isinstance(v, str) else v for v in raw)


_LOADERS: Mapping[str, Callable[[Any], Any]] = {
    "phase": Phase,
    "turn": _optional(Role),
    "close_reason": _optional(Reason),
    "deadline": _optional(parse_timestamp),
    "opened_at": parse_timestamp,
    "turn_deadline": _optional(parse_timestamp),
    "buyer_price": _optional(Decimal),
    "previous_buyer_price": _optional(Decimal),
    "merchant_price": _optional(Decimal),
    "last_spread": _optional(Decimal),
    "final_price": _optional(Decimal),
    "revealed_ceiling": _optional(Decimal),
    "revealed_floor": _optional(Decimal),
    "head": lambda raw: Head(raw["seq"], raw["entry_hash"]),
    "message_ids": frozenset,
    "issues": lambda raw: read_issues(raw) if raw else (),
    "buyer_terms": _optional(_values),
    "previous_buyer_terms": _optional(_values),
    "merchant_terms": _optional(_values),
}


def dump_state(state: SessionState) -> JsonObject:
    """The state as a JSON object (not canonical: it is storage, never hashed)."""
    document: JsonObject = {"v": SNAPSHOT_VERSION}
    for spec in fields(state):
        document[spec.name] = _dump(getattr(state, spec.name))
    return document


def load_state(document: Mapping[str, Any]) -> SessionState:
    """Rebuild the state :func:`dump_state` wrote; ``ValueError`` on another version."""
    if document.get("v") != SNAPSHOT_VERSION:
        raise ValueError(f"snapshot version {document.get('v')!r} is not {SNAPSHOT_VERSION}")
    # A field added since the snapshot was stored takes its default (a final answer: no).
    values = {
        spec.name: _LOADERS.get(spec.name, lambda raw: raw)(document[spec.name])
        for spec in fields(SessionState)
        if spec.name in document or spec.default is MISSING
    }
    return SessionState(**values)
