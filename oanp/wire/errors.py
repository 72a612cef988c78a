"""The one error tree of the protocol.

Every refusal the protocol can make is a :class:`ProtocolError` with a stable ``code`` (what
clients branch on) and an HTTP ``status`` hint (what a transport answers). A transport translates
these to RFC 9457 problems in exactly one place; nothing else may escape the parser.
"""

from __future__ import annotations

import sys
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
    """Base of every refusal. A refusal's class fixes its ``code``, ``status``, ``title`` and
    ``meaning`` (one line, for the catalogue); a class without a meaning of its own is a family
    that groups refusals and is never raised itself."""

    code: str = "protocol_error"
    status: int = 400
    title: str = "Protocol error"
    meaning: str = ""

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


@dataclass(frozen=True, slots=True)
class Refusal:
    """One entry of a catalogue of refusals: what a client branches on, and what it means."""

    code: str
    status: int
    title: str
    meaning: str


def catalogue(module: str, family: type[ProtocolError] | None = None) -> tuple[Refusal, ...]:
    """The refusals declared in ``module`` (called at its end, once they all are), in the order
    they are defined: each :class:`ProtocolError` class defined there, of ``family`` when one is
    named, with a code and a meaning of its own. A subclass that keeps its parent's code (a
    finer-grained exception) is its parent's refusal, not another; imported ones belong to the
    module that defines them."""
    return tuple(
        Refusal(value.code, value.status, value.title, value.meaning)
        for value in vars(sys.modules[module]).values()
        if isinstance(value, type)
        and issubclass(value, family or ProtocolError)
        and value.__module__ == module
        and "code" in vars(value)
        and vars(value).get("meaning")
    )


# 400 ---------------------------------------------------------------------------------------


class MalformedEnvelope(ProtocolError):
    """The bytes are not one JSON object we can read at all."""

    code = "malformed_json"
    meaning = "the body is not one UTF-8 JSON value without duplicate names, NaN or Infinity"
    title = "Malformed JSON"


class SchemaInvalid(ProtocolError):
    """Readable JSON that breaks the closed schema; ``errors`` names every bad field."""

    code = "schema_invalid"
    meaning = (
        "the envelope, a payload or a query string breaks its closed schema; errors names "
        "every bad field"
    )
    title = "Envelope does not match the schema"


class EnvelopeTooLarge(ProtocolError):
    code = "envelope_too_large"
    meaning = "the body is over its limit: 64 KiB, or 16 KiB for a reveal"
    status = 413
    title = "Body too large"

    @classmethod
    def over(cls, limit: int, *, size: int | None = None) -> EnvelopeTooLarge:
        """The one 413: a body over ``limit`` bytes, of ``size`` bytes when that is known."""
        if size is None:
            return cls(f"the body is over {limit} bytes")
        return cls(f"the body is {size} bytes; the limit is {limit}")


class PrivateKeySent(ProtocolError):
    """A key to register that holds private material: refused, and never stored or logged."""

    code = "private_key_sent"
    meaning = "a party key to register holds a private member (d, p, q, ...)"
    title = "Private key sent"


class BadPartyKey(ProtocolError):
    code = "bad_party_key"
    meaning = "a party key to register is not one public OKP Ed25519 or EC P-256 JWK"
    title = "Not a usable public key"


# 403 / 404 ---------------------------------------------------------------------------------


class NotAParty(ProtocolError):
    code = "not_a_party"
    meaning = "the sender is not the session's party in its role"
    status = 403
    title = "Sender is not a party of this session"


class UnknownSession(ProtocolError):
    code = "unknown_session"
    meaning = "no such session, or one the caller is not a party to"
    status = 404
    title = "Unknown session"


# 409 ---------------------------------------------------------------------------------------


class Conflict(ProtocolError):
    status = 409
    code = "conflict"
    title = "Conflict with the session state"


class OutOfTurn(Conflict):
    code = "out_of_turn"
    meaning = "a move the session's state does not allow the sender now"
    title = "Not this party's turn"


class SessionTerminal(Conflict):
    code = "session_terminal"
    meaning = "the session has ended"
    title = "The session has ended"


class SessionExists(Conflict):
    code = "session_exists"
    meaning = "an open of a session_id that is taken"
    title = "A session with this id exists"


class MessageIdReused(Conflict):
    code = "message_id_reused"
    meaning = "a message_id already logged, with another body"
    title = "This message_id was already used with another body"


class MessageIdSeen(MessageIdReused):
    """The session has logged this ``message_id`` already. The machine keeps no bodies, so
    whoever stores the log tells a retry (the first answer again, 200) from a reuse with
    another body; left unresolved, it is that reuse's 409."""


class TimerExpired(Conflict):
    """The envelope arrived after the session's timer fell due: the timer wins the race."""

    code = "timer_expired"
    meaning = "the session's timer fell due before the envelope arrived"
    title = "The session's timer expired before this envelope arrived"


class RevealTooEarly(Conflict):
    code = "reveal_too_early"
    meaning = "a reveal before the session ended"
    title = "Constraints can only be revealed after the session ended"


class NothingCommitted(Conflict):
    """The party left before it committed (a merchant withdrawing instead of acking)."""

    code = "nothing_committed"
    meaning = "a reveal by a party that left before it committed"
    title = "This party made no commitment in the session, so it has nothing to reveal"


class AlreadyRevealed(Conflict):
    code = "already_revealed"
    meaning = "the party has revealed already"
    title = "This party already revealed its constraints"


# 422 ---------------------------------------------------------------------------------------


class Unprocessable(ProtocolError):
    status = 422
    code = "unprocessable"
    title = "Unprocessable envelope"


class BadSignature(Unprocessable):
    """A party envelope's ``signature`` that does not stand for its sender (§12)."""

    code = "bad_signature"
    meaning = (
        "the envelope's signature is malformed, names a kid its sender never registered or had "
        "retired, or does not verify"
    )
    title = "Envelope signature refused"


class SignatureRequired(Unprocessable):
    code = "signature_required"
    meaning = "an unsigned envelope from an agent whose owner requires signatures"
    title = "Envelope must be signed"


class RoleMayNotSend(Unprocessable):
    code = "role_may_not_send"
    meaning = "a type the sender's role may not send"
    title = "This role may not send this message type"


class WrongRound(Unprocessable):
    code = "wrong_round"
    meaning = "the move names another round than the current one"
    title = "Wrong round number"


class PricePrecision(Unprocessable):
    code = "price_precision"
    meaning = "a price with more decimals than the session's currency allows"
    title = "Price has more decimals than the currency allows"


class PriceNotStanding(Unprocessable):
    code = "price_not_standing"
    meaning = "an accept of a price that is not the other side's standing price"
    title = "Accepted price is not the other side's standing price"


class BadTerms(Unprocessable):
    """An offer's terms miss a declared issue, name an undeclared one, or hold a value outside
    its domain (docs/protocol.md §11)."""

    code = "bad_terms"
    meaning = "terms outside the declared issues, or in a session that declares none"
    title = "Terms outside the declared issues"


class TermsNotStanding(Unprocessable):
    """An accept whose terms are not exactly the other side's standing terms."""

    code = "terms_not_standing"
    meaning = "an accept of terms that are not the other side's standing terms"
    title = "Accepted terms are not the other side's standing terms"


class DeadlineOutOfRange(Unprocessable):
    code = "deadline_out_of_range"
    meaning = "a deadline not after now, or more than 24 hours ahead"
    title = "Deadline must be in the future and at most 24 hours ahead"


class SettlementNotEnabled(Unprocessable):
    code = "settlement_not_enabled"
    meaning = "settlement by reveal in a session not opened for it"
    title = "This session was not opened for settlement by reveal"


class NotSettleable(Unprocessable):
    code = "not_settleable"
    meaning = "a settling reveal naming no positive limit, or made while issues are open"
    title = "The reveal does not name the limit settlement needs"


class WeakCommitment(Unprocessable):
    code = "weak_commitment"
    meaning = "an unsalted commitment where settlement by reveal needs a salted one"
    title = "Settlement by reveal needs a salted commitment"


class RevealMismatch(Unprocessable):
    code = "reveal_mismatch"
    meaning = "revealed constraints and salt that do not open the commitment"
    title = "Revealed constraints and salt do not match the commitment"


# Verification (auditors) -------------------------------------------------------------------


class VerificationError(ProtocolError):
    """A signature, proof or log that does not verify. Status 422 when a server relays it."""

    status = 422
    code = "verification_failed"
    title = "Verification failed"


class SignatureInvalid(VerificationError):
    code = "signature_invalid"
    meaning = "a signature that does not verify"
    title = "Signature does not verify"


class SignatureMalformed(VerificationError):
    """Not a detached compact JWS with exactly the protected header this protocol signs."""

    code = "signature_malformed"
    meaning = "not a detached compact JWS with the protected header the protocol signs"
    title = "Signature is malformed"


class AlgorithmNotAllowed(VerificationError):
    """The header names an algorithm outside the allow-list, or one the key is not for."""

    code = "alg_not_allowed"
    meaning = "an algorithm outside the allow-list, or one the key is not for"
    title = "Signature algorithm not allowed"


class UnknownKey(VerificationError):
    code = "unknown_kid"
    meaning = "no key with the signature's kid in the key set"
    title = "No key with this kid in the key set"


class KeyInvalid(VerificationError):
    """The key set holds the kid, but not as a usable signing key whose thumbprint is the kid."""

    code = "key_invalid"
    meaning = "the kid's key is not a usable signing key whose thumbprint is the kid"
    title = "Key is not usable for this signature"


#: What an auditor's verification finds wrong; no transport answers these.
VERIFICATION_FAILURES = catalogue(__name__, VerificationError)
#: What a transport answers: every refusal but the failed verifications.
REFUSALS = tuple(r for r in catalogue(__name__) if r not in VERIFICATION_FAILURES)
