"""The audit of party signatures (docs/protocol.md §17): every signed party entry of a log
checked against the keys its sender registered, as a bundle's ``party_keys`` lists them.

An entry's signature counts only with a key of its sender that was registered at or before the
entry's ``received_at`` and not retired by then, and only if it verifies over JCS of the
envelope without ``signature``: the same check the arbiter made before it logged the entry, so
an arbiter that logged an offer nobody signed is caught here, trusting no one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from oanp.wire.canonical import JsonValue
from oanp.wire.envelope import parse_timestamp
from oanp.wire.errors import BadSignature
from oanp.wire.party_signatures import SIGNATURE, PartyKey, check_party_signature

#: A bundle's ``party_keys`` read: each agent's registered keys.
PartyKeys = Mapping[str, Sequence[PartyKey]]


def read_party_keys(value: object) -> dict[str, list[PartyKey]]:
    """A bundle's ``party_keys`` member, ``{agent_id: [JWK + registered_at + retired_at]}``;
    ``ValueError`` saying where for anything else."""
    if not isinstance(value, Mapping):
        raise ValueError("party_keys is not an object")
    keys: dict[str, list[PartyKey]] = {}
    for agent_id, listed in value.items():
        if not isinstance(listed, list):
            raise ValueError(f"party_keys.{agent_id} is not a list")
        try:
            keys[agent_id] = [PartyKey.from_json(agent_id, key) for key in listed]
        except ValueError as exc:
            raise ValueError(f"party_keys.{agent_id}: {exc}") from exc
    return keys


@dataclass(slots=True)
class SignedEntries:
    """What the audit of one log's party signatures found."""

    signed: int = 0
    valid: int = 0
    unsigned: int = 0
    problems: list[str] = field(default_factory=list)

    def describe(self) -> str:
        found = f"{self.valid}/{self.signed} signed entries valid, {self.unsigned} unsigned"
        return "; ".join([found, *self.problems])


def check_signed_entries(
    entries: Sequence[Mapping[str, JsonValue]], keys: PartyKeys
) -> SignedEntries:
    """Each party entry of a log: unsigned, or signed by a key of its sender in force at its
    ``received_at``. Entries of the arbiter, and entries too broken to name a sender (which
    the chain and the invariants already fail), are not counted."""
    found = SignedEntries()
    for position, entry in enumerate(entries, start=1):
        envelope = entry.get("envelope") if isinstance(entry, Mapping) else None
        sender = envelope.get("sender") if isinstance(envelope, Mapping) else None
        if not isinstance(envelope, Mapping) or not isinstance(sender, Mapping):
            continue
        agent_id, role = sender.get("agent_id"), sender.get("role")
        if role not in ("buyer", "merchant") or not isinstance(agent_id, str):
            continue
        if SIGNATURE not in envelope:
            found.unsigned += 1
            continue
        found.signed += 1
        try:
            received_at = parse_timestamp(entry.get("received_at"))
            check_party_signature(envelope, keys.get(agent_id, ()), received_at)
        except (BadSignature, ValueError) as exc:
            detail = exc.detail if isinstance(exc, BadSignature) else str(exc)
            found.problems.append(f"entry {position}: {detail}")
            continue
        found.valid += 1
    return found
