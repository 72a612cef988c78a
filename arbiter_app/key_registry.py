"""Reads of the keys agents registered to sign their envelopes (docs/protocol.md §17), for the
API, the dashboard, the session page and the exports; :mod:`arbiter_app.selectors` offers them."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from django.db.models import Q, QuerySet

from arbiter_app.models import AgentKey, Session, SignatureRequirement
from oanp.wire.canonical import JsonObject
from oanp.wire.party_signatures import PartyKey


def agent_keys(agent_id: str) -> list[AgentKey]:
    """Every key ``agent_id`` registered, retired ones too, oldest first."""
    return list(AgentKey.objects.filter(agent_id=agent_id))


def signatures_required(agent_id: str) -> bool:
    return SignatureRequirement.objects.filter(agent_id=agent_id).exists()


def party_keys(agent_ids: Collection[str]) -> dict[str, list[PartyKey]]:
    """The keys each of ``agent_ids`` registered, to check its signatures with."""
    return _by_agent(AgentKey.objects.filter(agent_id__in=agent_ids))


def party_keys_json(agent_ids: Collection[str]) -> dict[str, list[JsonObject]]:
    """``{agent_id: [JWK + registered_at + retired_at]}``: what a log or bundle carries."""
    return _as_json(party_keys(agent_ids).items())


def party_keys_of_sessions(sessions: QuerySet[Session]) -> dict[str, list[JsonObject]]:
    """:func:`party_keys_json` of every party of ``sessions``, in one query."""
    unordered = sessions.order_by()
    keys = AgentKey.objects.filter(
        Q(agent_id__in=unordered.values("buyer_agent_id"))
        | Q(agent_id__in=unordered.values("merchant_agent_id"))
    )
    return _as_json(_by_agent(keys).items())


def _by_agent(keys: QuerySet[AgentKey]) -> dict[str, list[PartyKey]]:
    found: dict[str, list[PartyKey]] = {}
    for key in keys:
        found.setdefault(key.agent_id, []).append(key.as_party_key())
    return found


def _as_json(listed: Iterable[tuple[str, list[PartyKey]]]) -> dict[str, list[JsonObject]]:
    return {agent_id: [key.as_json() for key in keys] for agent_id, keys in listed}
