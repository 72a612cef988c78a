"""OANP v0.1, the pure protocol: envelopes, money, canonical JSON, commitments, the arbiter's
state machine, the hash-chained log, its audit and signatures, and one error tree.

Sans-IO, like h11: no clock, no randomness, no network, no framework; time, salts and keys are
passed in. What is named here is the public API; anything else is reached through its module
(``oanp.profiles``, ``oanp.strategies``, ``oanp.agents`` …). The agents' network side,
:mod:`oanp.net` (client, negotiators, MCP, CLI), is imported by its own path and never from
here, so importing ``oanp`` loads no network library (import-linter's contracts in
pyproject.toml keep it so).
"""

from oanp.audit import Report, build_bundle, verify_bundle, verify_log
from oanp.canonical import (
    JsonObject,
    JsonValue,
    canonical_bytes,
    hash_canonical,
    json_value,
    read_json,
    tagged_sha256,
)
from oanp.commitments import Reveal, commit, encode_salt, parse_reveal, verify_reveal
from oanp.envelope import (
    OANP_VERSION,
    Envelope,
    MessageType,
    Role,
    check_sender,
    envelope_from_json,
    format_timestamp,
    parse_envelope,
    parse_timestamp,
)
from oanp.errors import FieldError, ProtocolError, VerificationError
from oanp.log import Entry, Head, chain_breaks, make_entry
from oanp.machine import Negotiation
from oanp.money import fits_currency, minor_units, price_to_json
from oanp.signing import ArbiterKey, jwks_document, verify_detached
from oanp.state import Arbiter, Phase, SessionState

__all__ = [
    "OANP_VERSION",
    "Arbiter",
    "ArbiterKey",
    "Entry",
    "Envelope",
    "FieldError",
    "Head",
    "JsonObject",
    "JsonValue",
    "MessageType",
    "Negotiation",
    "Phase",
    "ProtocolError",
    "Report",
    "Reveal",
    "Role",
    "SessionState",
    "VerificationError",
    "build_bundle",
    "canonical_bytes",
    "chain_breaks",
    "check_sender",
    "commit",
    "encode_salt",
    "envelope_from_json",
    "fits_currency",
    "format_timestamp",
    "hash_canonical",
    "json_value",
    "jwks_document",
    "make_entry",
    "minor_units",
    "parse_envelope",
    "parse_reveal",
    "parse_timestamp",
    "price_to_json",
    "read_json",
    "tagged_sha256",
    "verify_bundle",
    "verify_detached",
    "verify_log",
    "verify_reveal",
]
