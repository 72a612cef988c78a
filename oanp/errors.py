"""The one error tree of the protocol.

Every refusal the protocol can make is a :class:`ProtocolError` with a stable ``code`` (what
clients branch on) and an HTTP ``status`` hint (what a transport answers). A transport translates
these to RFC 9457 problems in exactly one place; nothing else may escape the parser.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldError:
    """One bad field of a request: a JSON-pointer-like dotted path and why it is bad."""

    field: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message}


class ProtocolError(Exception):
    """Base of every refusal. Subclasses fix ``code`` and ``status``."""

    code: str = "protocol_error"
    status: int = 400
    title: str = "Protocol error"

    def __init__(self, detail: str, *, errors: Sequence[FieldError] = ()) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors: tuple[FieldError, ...] = tuple(errors)

    def as_problem(self) -> dict[str, object]:
        """The RFC 9457 body, minus ``type``/``instance`` which the transport knows."""
        problem: dict[str, object] = {
            "title": self.title,
            "status": self.status,
            "code": self.code,
            "detail": self.detail,
        }
        if self.errors:
            problem["errors"] = [e.as_dict() for e in self.errors]
        return problem


# 400 ---------------------------------------------------------------------------------------


class MalformedEnvelope(ProtocolError):
    """The bytes are not one JSON object we can read at all."""

    code = "malformed_json"
    title = "Malformed JSON"


class SchemaInvalid(ProtocolError):
    """Readable JSON that breaks the closed schema; ``errors`` names every bad field."""

    code = "schema_invalid"
    title = "Envelope does not match the schema"


class EnvelopeTooLarge(ProtocolError):
    code = "envelope_too_large"
    status = 413
    title = "Envelope larger than 64 KiB"


# 403 / 404 ---------------------------------------------------------------------------------


class NotAParty(ProtocolError):
    code = "not_a_party"
    status = 403
    title = "Sender is not a party of this session"


class UnknownSession(ProtocolError):
    code = "unknown_session"
    status = 404
    title = "Unknown session"


# 409 ---------------------------------------------------------------------------------------


class Conflict(ProtocolError):
    status = 409
    code = "conflict"
    title = "Conflict with the session state"


class OutOfTurn(Conflict):
    code = "out_of_turn"
    title = "Not this party's turn"


class SessionTerminal(Conflict):
    code = "session_terminal"
    title = "The session has ended"


class SessionExists(Conflict):
    code = "session_exists"
    title = "A session with this id exists"


class MessageIdReused(Conflict):
    code = "message_id_reused"
    title = "This message_id was already used with another body"


class MessageIdSeen(MessageIdReused):
    """The session has logged this ``message_id`` already. The machine keeps no bodies, so
    whoever stores the log tells a retry (the first answer again, 200) from a reuse with
    another body; left unresolved, it is that reuse's 409."""


class TimerExpired(Conflict):
    """The envelope arrived after the session's timer fell due: the timer wins the race."""

    code = "timer_expired"
    title = "The session's timer expired before this envelope arrived"


class RevealTooEarly(Conflict):
    code = "reveal_too_early"
    title = "Constraints can only be revealed after the session ended"


class NothingCommitted(Conflict):
    """The party left before it committed (a merchant withdrawing instead of acking)."""

    code = "nothing_committed"
    title = "This party made no commitment in the session, so it has nothing to reveal"


class AlreadyRevealed(Conflict):
    code = "already_revealed"
    title = "This party already revealed its constraints"


# 422 ---------------------------------------------------------------------------------------


class Unprocessable(ProtocolError):
    status = 422
    code = "unprocessable"
    title = "Unprocessable envelope"


class RoleMayNotSend(Unprocessable):
    code = "role_may_not_send"
    title = "This role may not send this message type"


class WrongRound(Unprocessable):
    code = "wrong_round"
    title = "Wrong round number"


class PricePrecision(Unprocessable):
    code = "price_precision"
    title = "Price has more decimals than the currency allows"


class PriceNotStanding(Unprocessable):
    code = "price_not_standing"
    title = "Accepted price is not the other side's standing price"


class BadTerms(Unprocessable):
    """An offer's terms miss a declared issue, name an undeclared one, or hold a value outside
    its domain (docs/protocol.md §11)."""

    code = "bad_terms"
    title = "Terms outside the declared issues"


class TermsNotStanding(Unprocessable):
    """An accept whose terms are not exactly the other side's standing terms."""

    code = "terms_not_standing"
    title = "Accepted terms are not the other side's standing terms"


class DeadlineOutOfRange(Unprocessable):
    code = "deadline_out_of_range"
    title = "Deadline must be in the future and at most 24 hours ahead"


class SettlementNotEnabled(Unprocessable):
    code = "settlement_not_enabled"
    title = "This session was not opened for settlement by reveal"


class NotSettleable(Unprocessable):
    code = "not_settleable"
    title = "The reveal does not name the limit settlement needs"


class WeakCommitment(Unprocessable):
    code = "weak_commitment"
    title = "Settlement by reveal needs a salted commitment"


class RevealMismatch(Unprocessable):
    code = "reveal_mismatch"
    title = "Revealed constraints and salt do not match the commitment"


# Verification (auditors) -------------------------------------------------------------------


class VerificationError(ProtocolError):
    """A signature, proof or log that does not verify. Status 422 when a server relays it."""

    status = 422
    code = "verification_failed"
    title = "Verification failed"


class SignatureInvalid(VerificationError):
    code = "signature_invalid"
    title = "Signature does not verify"


class SignatureMalformed(VerificationError):
    """Not a detached compact JWS with exactly the protected header this protocol signs."""

    code = "signature_malformed"
    title = "Signature is malformed"


class AlgorithmNotAllowed(VerificationError):
    """The header names an algorithm outside the allow-list, or one the key is not for."""

    code = "alg_not_allowed"
    title = "Signature algorithm not allowed"


class UnknownKey(VerificationError):
    code = "unknown_kid"
    title = "No key with this kid in the key set"


class KeyInvalid(VerificationError):
    """The key set holds the kid, but not as a usable signing key whose thumbprint is the kid."""

    code = "key_invalid"
    title = "Key is not usable for this signature"
