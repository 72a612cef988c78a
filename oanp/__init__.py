"""OANP v0.1, the pure protocol: envelopes, money, canonical JSON, commitments, the arbiter's
state machine, the hash-chained log, its audit and signatures, and one error tree.

Sans-IO, like h11: no clock, no randomness, no network, no framework; time, salts and keys are
passed in. Its modules sit in four folders, by whom they serve:

- :mod:`oanp.wire`, the wire and the machine: what every side of a session shares (envelopes,
  money, canonical JSON, the error tree, terms, commitments, profiles, settlement) and the
  arbiter's state machine with its log, snapshots, signatures, summary, discovery and schemas;
- :mod:`oanp.audit`, the offline auditor: the invariants re-derived from a log, replays, Merkle
  trees, the streamed reader and the audit bundles;
- :mod:`oanp.agents`, the agents' logic: the reference parties, their strategies, tradeoffs and
  private limits, the guardrails of a model-driven party, rehearsals; their I/O is the
  agents' network side, :mod:`oanp.net`;
- :mod:`oanp.tlog`, the transparency log in the C2SP formats: signed notes, checkpoints,
  cosignatures and a witness's decisions, on the auditor's Merkle trees.

The auditor and the agents' logic build on the wire and never on each other; the wire imports
neither, and the transparency log sits above them (import-linter's contracts in
pyproject.toml). What is named here is the public API; anything else is reached through its
module (``oanp.wire.profiles``, ``oanp.agents.strategies``, ``oanp.tlog`` …). :mod:`oanp.net`
(client, negotiators, MCP, CLI) is imported by its own path and never from here, so importing
``oanp`` loads no network library.
"""

from oanp.audit import Report, build_bundle, verify_bundle, verify_log
from oanp.wire.canonical import (
    JsonObject,
    JsonValue,
    canonical_bytes,
    hash_canonical,
    json_value,
    read_json,
    tagged_sha256,
)
from oanp.wire.commitments import Reveal, commit, encode_salt, parse_reveal, verify_reveal
from oanp.wire.envelope import (
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
from oanp.wire.errors import FieldError, ProtocolError, VerificationError
from oanp.wire.log import Entry, Head, chain_breaks, make_entry
from oanp.wire.machine import Negotiation
from oanp.wire.money import fits_currency, minor_units, price_to_json
from oanp.wire.signing import SigningKey, jwks_document, verify_detached
from oanp.wire.state import Arbiter, Phase, SessionState

__all__ = [
    "OANP_VERSION",
    "Arbiter",
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
    "SigningKey",
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
