"""A hosted agent's tactics as they are stored: a strategy of
:data:`oanp.agents.strategies.STRATEGIES`, its parameters validated by that registry, and when it
reveals its floor to settle.

The registry is the only list of strategies and parameters: this module only checks a choice
against it and puts it in the shape :class:`~sessions_app.models.HostedTactics` keeps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oanp.agents.strategies import STRATEGIES, UnknownStrategy
from oanp.wire.envelope import MAX_ROUNDS_LIMIT
from oanp.wire.settlement import SettlePolicy

#: The latest round a settle policy may name: a session has at most this many.
LAST_SETTLE_ROUND = MAX_ROUNDS_LIMIT


def tactics_fields(
    *, strategy: str, parameters: Mapping[str, object], settle: SettlePolicy
) -> dict[str, Any]:
    """The stored fields of a hosted agent that plays ``strategy`` tuned by ``parameters``
    and settles by ``settle``: every parameter filled in, as text.

    Raises :class:`~oanp.agents.strategies.UnknownStrategy`,
    :class:`~oanp.agents.strategies.ParameterError` or ``ValueError`` (a settle round past the last
    a session can have).
    """
    named = STRATEGIES.get(strategy)
    if named is None:
        raise UnknownStrategy(f"unknown strategy {strategy!r}; one of {', '.join(STRATEGIES)}")
    if settle.from_round > LAST_SETTLE_ROUND:
        raise ValueError(f"a session has at most {LAST_SETTLE_ROUND} rounds to settle in")
    return {
        "strategy": strategy,
        "parameters": named.stored("merchant", parameters),
        "settle_when": settle.when,
        # Only "round" reads its round: the others store 1, so equal policies compare equal.
        "settle_from_round": settle.from_round if settle.when == "round" else 1,
    }


def changed_tactics(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What an edit changed, as the audit names it: ``strategy``; ``parameters`` when the
    strategy stayed (a new strategy brings a set of its own); ``settle``."""
    changed = []
    if before["strategy"] != after["strategy"]:
        changed.append("strategy")
    elif (
        STRATEGIES[after["strategy"]].stored("merchant", before["parameters"])
        != after["parameters"]
    ):
        # Profiles saved before parameters existed hold none: their defaults are no change.
        changed.append("parameters")
    if (before["settle_when"], before["settle_from_round"]) != (
        after["settle_when"],
        after["settle_from_round"],
    ):
        changed.append("settle")
    return changed


def settle_text(fields: Mapping[str, Any]) -> str:
    """A stored settle policy as the audit records it: never, stuck, or round N."""
    if fields["settle_when"] == "round":
        return f"round {fields['settle_from_round']}"
    return str(fields["settle_when"])
