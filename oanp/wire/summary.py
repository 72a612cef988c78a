"""The session summary of ``GET /oanp/v0.1/sessions/{id}``, built from the machine's state."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from oanp.wire.canonical import JsonObject, JsonValue
from oanp.wire.commitments import is_weak
from oanp.wire.envelope import format_timestamp
from oanp.wire.money import price_to_json
from oanp.wire.state import SessionState
from oanp.wire.terms import Values, issues_json, issues_open, terms_json


def _moment(value: datetime | None) -> str | None:
    return None if value is None else format_timestamp(value)


def _party(agent_id: str, commitment: str | None, reveal: JsonValue) -> JsonObject:
    return {
        "agent_id": agent_id,
        "constraints_commit": commitment,
        "weak_commitment": commitment is not None and is_weak(commitment),
        "revealed": reveal is not None,
    }


def _terms(state: SessionState, values: Values | None) -> JsonObject | None:
    return None if values is None else terms_json(state.issues, values)


def _standing_terms(state: SessionState) -> JsonObject:
    """Profile terms/v0.1 (docs/protocol.md §16): the declared issues, each side's standing
    terms, and the issues those differ on, counted as the verdicts count them."""
    buyer, merchant = state.buyer_standing_terms, state.merchant_terms
    return {
        "issues": issues_json(state.issues),
        "buyer": _terms(state, buyer),
        "merchant": _terms(state, merchant),
        "issues_open": issues_open(state.issues, buyer, merchant),
    }


def session_summary(state: SessionState, reveals: Mapping[str, JsonValue]) -> JsonObject:
    """State, round, turn, parties, commitments, profile, timers and outcome, and in a session
    with issues the terms standing; nothing private. A price-only session's summary has no
    ``terms`` member, nor its outcome ``final_terms``."""
    outcome: JsonObject | None = None
    if state.terminal:
        agreed = state.final_price is not None
        outcome = {
            "result": "agreed" if agreed else "closed",
            "final_price": None if state.final_price is None else price_to_json(state.final_price),
            "close_reason": None if state.close_reason is None else state.close_reason.value,
        }
        if state.issues:
            # An agreement leaves both sides standing on the terms it accepted.
            outcome["final_terms"] = _terms(state, state.merchant_terms) if agreed else None
    summary: JsonObject = {
        "session_id": state.session_id,
        "state": state.phase.value,
        "round": state.round,
        "turn": None if state.terminal or state.turn is None else state.turn.value,
        "final_answer": state.final_answer and not state.terminal,
        "buyer": _party(state.buyer_agent_id, state.buyer_commit, reveals.get("buyer")),
        "merchant": _party(state.merchant_agent_id, state.merchant_commit, reveals.get("merchant")),
        "item": state.item,
        "currency": state.currency,
        "max_rounds": state.max_rounds,
        "profile": state.profile,
        "opened_at": format_timestamp(state.opened_at),
        "timers": {
            "response_window_s": state.response_window_s,
            "turn_deadline": None if state.terminal else _moment(state.turn_deadline),
            "deadline": _moment(state.deadline),
        },
        "head": {"seq": state.head.seq, "entry_hash": state.head.entry_hash},
        "outcome": outcome,
    }
    if state.issues:
        summary["terms"] = _standing_terms(state)
    return summary
