"""The transparency log of every entry (docs/protocol.md §18), in the C2SP formats (c2sp.org):
the global tree's roots and proofs computed from the hashes its tiles hold
(:mod:`oanp.tlog.tree`), signed notes and their verifier keys (:mod:`oanp.tlog.note`),
checkpoints (:mod:`oanp.tlog.checkpoint`), Ed25519 cosignatures (:mod:`oanp.tlog.cosignature`),
a witness's decisions (:mod:`oanp.tlog.witness`) and a log client's, checkpoint after
checkpoint (:mod:`oanp.tlog.monitor`), every refusal one family
(:mod:`oanp.tlog.errors`).

Pure, as the rest of the protocol: keys and times are handed in, nothing is read or sent. It
builds on the auditor's RFC 6962 trees (:mod:`oanp.audit.merkle`); the witness's server is on
the agents' network side (:mod:`oanp.net.witness`), and so is the client that checks the log
(:mod:`oanp.net.log_audit`).
"""

from oanp.tlog.checkpoint import (
    Checkpoint,
    VerifiedCheckpoint,
    parse_checkpoint,
    sign_checkpoint,
    verify_checkpoint,
)
from oanp.tlog.cosignature import (
    CosignatureVerifier,
    Cosigner,
    cosignature_verifier,
    cosigned_message,
    parse_signer_key,
    verify_cosignature,
)
from oanp.tlog.errors import (
    MalformedCheckpoint,
    MalformedCosignature,
    MalformedNote,
    MalformedVerifierKey,
    MalformedWitnessRequest,
    NoteSignatureInvalid,
    NoteUnverified,
    TlogError,
)
from oanp.tlog.monitor import (
    Cosignatures,
    LogState,
    Relation,
    compare_checkpoints,
    count_cosignatures,
    parse_log_state,
    proves_consistency,
)
from oanp.tlog.note import (
    Note,
    NoteSignature,
    NoteSigner,
    NoteVerifier,
    Verifier,
    VerifierKey,
    key_id,
    note_verifier,
    parse_note,
    parse_verifier_key,
    verify_note,
)
from oanp.tlog.witness import (
    AddCheckpoint,
    Answer,
    LogRecord,
    Witness,
    log_verifiers,
    origin_hash,
    parse_add_checkpoint,
)

__all__ = [
    "AddCheckpoint",
    "Answer",
    "Checkpoint",
    "CosignatureVerifier",
    "Cosignatures",
    "Cosigner",
    "LogRecord",
    "LogState",
    "MalformedCheckpoint",
    "MalformedCosignature",
    "MalformedNote",
    "MalformedVerifierKey",
    "MalformedWitnessRequest",
    "Note",
    "NoteSignature",
    "NoteSignatureInvalid",
    "NoteSigner",
    "NoteUnverified",
    "NoteVerifier",
    "Relation",
    "TlogError",
    "VerifiedCheckpoint",
    "Verifier",
    "VerifierKey",
    "Witness",
    "compare_checkpoints",
    "cosignature_verifier",
    "cosigned_message",
    "count_cosignatures",
    "key_id",
    "log_verifiers",
    "note_verifier",
    "origin_hash",
    "parse_add_checkpoint",
    "parse_checkpoint",
    "parse_log_state",
    "parse_note",
    "parse_signer_key",
    "parse_verifier_key",
    "proves_consistency",
    "sign_checkpoint",
    "verify_checkpoint",
    "verify_cosignature",
    "verify_note",
]
