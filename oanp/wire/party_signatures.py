"""Party signatures (docs/protocol.md §12): an envelope signed by the agent that sent it.

Without them a log's party entries rest on the arbiter's word; with them an auditor proves who
offered what. A party signs the JCS bytes of its envelope without ``signature`` as a detached
compact JWS (``header..signature``) whose protected header is exactly ``alg``, ``kid`` and
``typ: "oanp-envelope+jws"``, and puts it in the envelope's top-level ``signature``. The log
keeps the envelope with its signature, so the hash chain commits to it.

A key counts for an envelope only if its sender registered it at or before the moment the
arbiter received the envelope and had not retired it by then: keys are never deleted, so a
signature stays checkable after its key is retired.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from oanp.wire.canonical import JsonObject, JsonValue, canonical_bytes
from oanp.wire.envelope import format_timestamp, parse_timestamp
from oanp.wire.errors import (
    BadPartyKey,
    BadSignature,
    PrivateKeySent,
    ProtocolError,
    VerificationError,
)
from oanp.wire.signing import (
    PRIVATE_MEMBERS,
    SigningKey,
    protected_header,
    public_signing_jwk,
    verify_detached,
)

ENVELOPE_TYP = "oanp-envelope+jws"
#: The envelope's member that carries its sender's signature.
SIGNATURE = "signature"


def unsigned(body: Mapping[str, JsonValue]) -> JsonObject:
    """The envelope without its signature: what a party signs, and what tells a replay from
    a reuse of its ``message_id`` (an ES256 signature differs at every signing)."""
    return {name: value for name, value in body.items() if name != SIGNATURE}


def signing_input(body: Mapping[str, JsonValue]) -> bytes:
    """The bytes a party signs: JCS of the envelope without ``signature``."""
    return canonical_bytes(unsigned(body))


def sign_envelope(body: Mapping[str, JsonValue], key: SigningKey) -> JsonObject:
    """``body`` signed by ``key``: a copy with ``signature`` set (replaced, if it had one)."""
    signature = key.sign_detached(signing_input(body), typ=ENVELOPE_TYP)
    return {**unsigned(body), SIGNATURE: signature}


def registrable_key(jwk: object) -> dict[str, str]:
    """The public JWK to register for ``jwk``, sent by an agent or pasted by its owner.

    Raises :class:`PrivateKeySent` (400 ``private_key_sent``) for a key holding a private
    member, before anything else looks at it, and :class:`BadPartyKey` (400) for anything that
    is not one public OKP Ed25519 or EC P-256 JWK.
    """
    if not isinstance(jwk, Mapping):
        raise BadPartyKey("a key is one JWK: a JSON object")
    private = sorted(PRIVATE_MEMBERS & set(jwk))
    if private:
        raise PrivateKeySent(
            f"the JWK holds private member(s) {', '.join(private)}: send the public key only, "
            "and keep the private one where it was made"
        )
    try:
        return public_signing_jwk(jwk)
    except (ValueError, KeyError) as exc:
        raise BadPartyKey(f"not a usable public key: {exc}") from exc


@dataclass(frozen=True)
class PartyKey:
    """A public key an agent registered, with the span in which it signs for that agent."""

    agent_id: str
    jwk: Mapping[str, str]
    registered_at: datetime
    retired_at: datetime | None = None

    @property
    def kid(self) -> str:
        return self.jwk["kid"]

    def as_json(self) -> JsonObject:
        """As the API lists it and bundles carry it: the JWK, ``registered_at`` and
        ``retired_at`` (``null`` while in force)."""
        retired = None if self.retired_at is None else format_timestamp(self.retired_at)
        return {
            **self.jwk,
            "registered_at": format_timestamp(self.registered_at),
            "retired_at": retired,
        }

    @classmethod
    def from_json(cls, agent_id: str, value: object) -> PartyKey:
        """A key as :meth:`as_json` writes it; ``ValueError`` saying why for anything else."""
        if not isinstance(value, Mapping):
            raise ValueError("a party key is a JSON object")
        jwk = {k: v for k, v in value.items() if k not in ("registered_at", "retired_at")}
        try:
            public = registrable_key(jwk)
        except ProtocolError as exc:
            raise ValueError(exc.detail) from exc
        if public != jwk:
            raise ValueError(f"key {jwk.get('kid')!r} is not written as registered")
        retired = value.get("retired_at")
        return cls(
            agent_id,
            public,
            _moment(value.get("registered_at")),
            None if retired is None else _moment(retired),
        )

    def signs_at(self, moment: datetime) -> bool:
        """Whether the key counts for an envelope the arbiter received at ``moment``."""
        return self.registered_at <= moment and (
            self.retired_at is None or moment < self.retired_at
        )


def check_party_signature(
    body: Mapping[str, JsonValue], keys: Sequence[PartyKey], received_at: datetime
) -> str:
    """The ``kid`` whose key signed this party envelope, of its sender, in force at
    ``received_at``; :class:`BadSignature` saying why otherwise.

    ``keys`` are the sender's registered keys (its agent id in ``body``); a kid of any other
    agent is, for this sender, a kid it never registered.
    """
    signature = body.get(SIGNATURE)
    sender = body.get("sender")
    agent_id = sender.get("agent_id") if isinstance(sender, Mapping) else None
    if not isinstance(signature, str):
        raise BadSignature("the envelope carries no signature to check")
    kid = _kid_of(signature)
    found = [k for k in keys if k.kid == kid and k.agent_id == agent_id]
    if not found:
        raise BadSignature(f"kid {kid!r} is not a key agent {agent_id!r} registered")
    key = found[0]
    if not key.signs_at(received_at):
        when = (
            f"was registered only at {key.registered_at.isoformat()}"
            if received_at < key.registered_at
            else f"was retired at {key.retired_at.isoformat() if key.retired_at else '?'}"
        )
        raise BadSignature(f"key {kid!r} {when}, before the envelope was received")
    try:
        verify_detached(signature, signing_input(body), {"keys": [dict(key.jwk)]}, typ=ENVELOPE_TYP)
    except VerificationError as exc:
        raise BadSignature(f"the signature is refused: {exc.detail}") from exc
    return kid


def _moment(value: object) -> datetime:
    try:
        return parse_timestamp(value)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a UTC timestamp") from exc


def _kid_of(signature: str) -> str:
    """The ``kid`` of a detached JWS's header, read only to find the key: the verification
    reads the whole header again, strictly."""
    try:
        return protected_header(signature)["kid"]
    except VerificationError as exc:
        raise BadSignature(f"the signature is malformed: {exc.detail}") from exc
