"""The transparency log's refusals: one family under :class:`~oanp.wire.errors.VerificationError`.

What comes from a log, a witness or a log's client is checked here before anything trusts it;
each refusal's ``detail`` says in a few words what was wrong, never more than the input showed.
"""

from __future__ import annotations

from oanp.wire.errors import VerificationError, catalogue


class TlogError(VerificationError):
    """A note, key, checkpoint, cosignature or witness request that cannot be used."""

    code = "tlog_invalid"
    title = "Transparency log data refused"


class MalformedNote(TlogError):
    code = "note_malformed"
    meaning = "not a C2SP signed note: bad UTF-8, a control character, or a bad signature line"
    title = "Malformed signed note"


class MalformedVerifierKey(TlogError):
    code = "vkey_malformed"
    meaning = "not a verifier key name+hex(key ID)+base64(type||key) of a known type"
    title = "Malformed verifier key"


class NoteSignatureInvalid(TlogError):
    """A signature line whose name and key ID are a trusted key's, but which does not verify:
    the whole note is refused, not just that line."""

    code = "note_signature_invalid"
    meaning = "a signature from a trusted key that does not verify"
    title = "Signed note signature does not verify"


class NoteUnverified(TlogError):
    code = "note_unverified"
    meaning = "no signature of the note is from a trusted key"
    title = "Signed note has no trusted signature"


class MalformedCheckpoint(TlogError):
    code = "checkpoint_malformed"
    meaning = "note text that is not origin, tree size and root hash lines, then extension lines"
    title = "Malformed checkpoint"


class MalformedCosignature(TlogError):
    code = "cosignature_malformed"
    meaning = "a cosignature line that is not key ID, timestamp and Ed25519 signature"
    title = "Malformed cosignature"


class MalformedWitnessRequest(TlogError):
    code = "witness_request_malformed"
    meaning = "an add-checkpoint body that is not old size, proof lines, blank line, checkpoint"
    title = "Malformed add-checkpoint request"


#: Every refusal of the transparency log, for a catalogue.
TLOG_FAILURES = catalogue(__name__, TlogError)
