"""The error tree: every refusal's ``code`` and ``status`` are a stable contract, and
:meth:`ProtocolError.as_problem` is the RFC 9457 body a transport sends."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re

import pytest

from oanp.wire import errors
from oanp.wire.errors import FieldError, ProtocolError

#: Every error class of the module, by name.
CLASSES: dict[str, type[ProtocolError]] = {
    name: cls
    for name, cls in vars(errors).items()
    if inspect.isclass(cls) and issubclass(cls, ProtocolError) and cls.__module__ == errors.__name__
}

#: What clients branch on and transports answer: changing a line is a breaking change of the
#: wire, so this table is frozen by hand rather than derived from the code it checks.
STABLE: dict[str, tuple[str, int]] = {
    "ProtocolError": ("protocol_error", 400),
    "MalformedEnvelope": ("malformed_json", 400),
    "SchemaInvalid": ("schema_invalid", 400),
    "EnvelopeTooLarge": ("envelope_too_large", 413),
    "PrivateKeySent": ("private_key_sent", 400),
    "BadPartyKey": ("bad_party_key", 400),
    "NotAParty": ("not_a_party", 403),
    "UnknownSession": ("unknown_session", 404),
    "Conflict": ("conflict", 409),
    "OutOfTurn": ("out_of_turn", 409),
    "SessionTerminal": ("session_terminal", 409),
    "SessionExists": ("session_exists", 409),
    "MessageIdReused": ("message_id_reused", 409),
    # A refinement the wire does not tell apart: a reuse the log's store could not resolve.
    "MessageIdSeen": ("message_id_reused", 409),
    "TimerExpired": ("timer_expired", 409),
    "RevealTooEarly": ("reveal_too_early", 409),
    "AlreadyRevealed": ("already_revealed", 409),
    "NothingCommitted": ("nothing_committed", 409),
    "Unprocessable": ("unprocessable", 422),
    "BadSignature": ("bad_signature", 422),
    "SignatureRequired": ("signature_required", 422),
    "RoleMayNotSend": ("role_may_not_send", 422),
    "WrongRound": ("wrong_round", 422),
    "PricePrecision": ("price_precision", 422),
    "PriceNotStanding": ("price_not_standing", 422),
    "BadTerms": ("bad_terms", 422),
    "TermsNotStanding": ("terms_not_standing", 422),
    "DeadlineOutOfRange": ("deadline_out_of_range", 422),
    "RevealMismatch": ("reveal_mismatch", 422),
    "SettlementNotEnabled": ("settlement_not_enabled", 422),
    "NotSettleable": ("not_settleable", 422),
    "WeakCommitment": ("weak_commitment", 422),
    "VerificationError": ("verification_failed", 422),
    "SignatureInvalid": ("signature_invalid", 422),
    "SignatureMalformed": ("signature_malformed", 422),
    "AlgorithmNotAllowed": ("alg_not_allowed", 422),
    "UnknownKey": ("unknown_kid", 422),
    "KeyInvalid": ("key_invalid", 422),
}


@pytest.mark.parametrize(("name", "expected"), STABLE.items(), ids=list(STABLE))
def test_each_error_keeps_its_code_and_status(name, expected):
    cls = CLASSES[name]
    assert (cls.code, cls.status) == expected


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_every_error_class_has_a_frozen_code(name):
    # A new refusal is a new wire code: it must be added to STABLE on purpose.
    assert name in STABLE


def test_codes_that_classes_define_are_unique():
    own = [cls.code for cls in CLASSES.values() if "code" in vars(cls)]
    assert len(own) == len(set(own)), sorted(own)


def test_a_class_without_a_code_of_its_own_answers_exactly_as_its_parent():
    inheriting = {n: c for n, c in CLASSES.items() if "code" not in vars(c)}
    assert set(inheriting) == {"MessageIdSeen"}
    for cls in inheriting.values():
        parent = cls.__mro__[1]
        assert (cls.code, cls.status, cls.title) == (parent.code, parent.status, parent.title)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_codes_are_snake_case_and_titles_say_something(name):
    cls = CLASSES[name]
    assert re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", cls.code)
    assert cls.title.strip() == cls.title
    assert len(cls.title) >= 10


@pytest.mark.parametrize(
    ("family", "status"),
    [
        (errors.Conflict, 409),
        (errors.Unprocessable, 422),
        (errors.VerificationError, 422),
    ],
)
def test_a_family_shares_its_status(family, status):
    members = [c for c in CLASSES.values() if issubclass(c, family)]
    assert len(members) >= 5
    assert {c.status for c in members} == {status}


def test_protocol_statuses_are_the_ones_section_7_names():
    assert {c.status for c in CLASSES.values()} == {400, 403, 404, 409, 413, 422}


def test_the_error_carries_its_detail_as_its_message():
    error = errors.OutOfTurn("offer.counter from the merchant is not allowed now")
    assert str(error) == error.detail == "offer.counter from the merchant is not allowed now"
    assert error.errors == ()
    assert isinstance(error, errors.Conflict)


def test_a_problem_without_field_errors_has_exactly_four_members():
    problem = errors.WrongRound("this is round 2, not 3").as_problem()
    assert problem == {
        "title": "Wrong round number",
        "status": 422,
        "code": "wrong_round",
        "detail": "this is round 2, not 3",
    }


def test_a_problem_lists_every_field_error_in_order():
    bad = [
        FieldError("$.message_id", "must be 1-64 characters"),
        FieldError("$.payload.price", "must be a JSON number"),
    ]
    problem = errors.SchemaInvalid("2 fields are invalid", errors=bad).as_problem()
    assert problem["errors"] == [
        {"field": "$.message_id", "message": "must be 1-64 characters"},
        {"field": "$.payload.price", "message": "must be a JSON number"},
    ]
    assert (problem["code"], problem["status"]) == ("schema_invalid", 400)


def test_a_problem_leaves_type_and_instance_to_the_transport():
    problem = errors.UnknownSession("no session 'x'").as_problem()
    assert "type" not in problem
    assert "instance" not in problem


def test_a_problem_is_plain_json():
    problem = errors.SchemaInvalid("bad", errors=[FieldError("$.a", "é")]).as_problem()
    assert json.loads(json.dumps(problem)) == problem


def test_the_field_errors_are_a_snapshot_of_what_was_passed():
    bad = [FieldError("$.a", "x")]
    error = errors.SchemaInvalid("bad", errors=bad)
    bad.append(FieldError("$.b", "y"))
    assert error.errors == (FieldError("$.a", "x"),)


def test_a_field_error_is_frozen_and_compares_by_value():
    error = FieldError("$.payload.round", "must be an integer from 1 to 20")
    assert error == FieldError("$.payload.round", "must be an integer from 1 to 20")
    assert error.as_dict() == {
        "field": "$.payload.round",
        "message": "must be an integer from 1 to 20",
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        error.field = "$.other"  # type: ignore[misc]


def test_a_subclass_is_caught_as_the_base_a_transport_handles():
    with pytest.raises(ProtocolError) as caught:
        raise errors.SignatureInvalid("signature does not verify")
    assert caught.value.as_problem()["code"] == "signature_invalid"
    assert isinstance(caught.value, errors.VerificationError)
