"""How a session's log reads to a person: one line per entry, as the demos and
``oanp negotiate`` print it while a session runs.

It only reads what the log already says, so it lives beside :mod:`oanp.wire.log` in the pure core,
where the in-process demo, the agent commands and the hosted demo can all reach it.
"""

from __future__ import annotations

from typing import Any

from oanp.wire.log import Entry


def describe_entry(entry: Entry) -> str:
    """One line for a log entry: who sent what, with its prices or reason."""
    envelope = entry.envelope
    sender = envelope["sender"]
    payload = envelope["payload"]
    assert isinstance(sender, dict)
    assert isinstance(payload, dict)
    kind = str(envelope["type"])
    head = f"#{entry.seq:<3} {sender['role']!s:<9}{kind:<15}"
    if kind == "session.open":
        return (
            f"{head}with {payload['merchant_agent_id']}, {payload['currency']}, "
            f"max {payload.get('max_rounds', 5)} rounds, commitment {payload['constraints_commit']}"
        )
    if kind == "session.ack":
        return f"{head}commitment {payload['constraints_commit']}"
    if kind.startswith("offer."):
        return f"{head}round {payload['round']}: {payload['price']}{_terms(payload.get('terms'))}"
    if kind == "round.verdict":
        return (
            f"{head}round {payload['round']}: {payload['status']} ({payload['rationale']}), "
            f"buyer {payload['buyer_price']}, merchant {payload['merchant_price']}, "
            f"spread {payload['spread']}"
            + ("" if "issues_open" not in payload else f", issues open {payload['issues_open']}")
        )
    if kind == "session.agree":
        agreement = payload.get("agreement")
        terms = agreement.get("final_terms") if isinstance(agreement, dict) else None
        return (
            f"{head}{payload['final_price']} {payload['currency']}{_terms(terms)}, "
            f"digest {payload['session_digest']}, {payload['signature_alg']} kid {payload['kid']}"
        )
    return f"{head}{payload.get('reason')}: {payload.get('detail', '')}"


def describe_entry_json(entry: dict[str, Any]) -> str:
    """One line for a log entry in its JSON form, as the arbiter's API serves it: what the
    agent commands print and the MCP tools' entries say."""
    return describe_entry(
        Entry(
            entry["seq"],
            entry["received_at"],
            entry["envelope"],
            entry["prev_hash"],
            entry["entry_hash"],
        )
    )


def terms_text(terms: object) -> str:
    """Terms in words, as ``name value`` pairs in their order: ``checked_bags 1, fare_class
    basic``; nothing for a price-only session's (none)."""
    if not isinstance(terms, dict):
        return ""
    return ", ".join(f"{name} {value}" for name, value in terms.items())


def _terms(terms: object) -> str:
    """Terms beside a price, or nothing in a price-only session."""
    text = terms_text(terms)
    return f" with {text}" if text else ""
