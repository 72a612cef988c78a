"""The session summary of ``GET /oanp/v0.1/sessions/{id}``, built from the machine's state."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from oanp.canonical import JsonObject, JsonValue
from oanp.commitments import is_weak
from oanp.envelope import format_timestamp
from oanp.machine import SessionState
from oanp.money import price_to_json


def _moment(value: datetime | None) -> str | None:
    return None if value is None else format_timestamp(value)


def _party(agent_id: str, commitment: str | None, reveal: JsonValue) -> JsonObject:
    return {
        "agent_id": agent_id,
        "constraints_commit": commitment,
        "weak_commitment": commitment is not None and is_weak(commitment),
        "revealed": reveal is not None,
    }


def session_summary(state: SessionState, reveals: Mapping[str, JsonValue]) -> JsonObject:
    """State, round, turn, parties, commitments, profile, timers and outcome; nothing private."""
    outcome: JsonObject | None = None
    if state.terminal:
        outcome = {
            "result": "agreed" if state.final_price is not None else "closed",
            "final_price": None if state.final_price is None else price_to_json(state.final_price),
            "close_reason": None if state.close_reason is None else state.close_reason.value,
        }
    return {
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
