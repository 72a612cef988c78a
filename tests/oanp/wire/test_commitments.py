"""Commitments open only with the exact constraints and salt; reveals expose broken limits."""

from __future__ import annotations

from decimal import Decimal

import pytest

from oanp.wire.commitments import (
    commit,
    encode_salt,
    is_commitment,
    is_weak,
    limit_breaches,
    opens,
    reference_commit,
    verify_reveal,
)
from oanp.wire.errors import RevealMismatch

BUYER = {"budget_cap": 400, "true_ceiling": 420, "urgency": "medium"}
ITEM = {"date": "2026-04-28", "route": "SFO-JFK"}
SALT = encode_salt(bytes(range(32)))


def test_forms_are_recognized_and_the_reference_one_is_weak():
    salted = commit(BUYER, ITEM, 5, SALT)
    weak = reference_commit(BUYER, ITEM, 5)
    assert is_commitment(salted)
    assert is_commitment(weak)
    assert not is_weak(salted)
    assert is_weak(weak)
    assert not is_commitment("sha256:" + "A" * 64)  # upper-case hex is not the form


@pytest.mark.parametrize(
    "change",
    [
        {"constraints": {**BUYER, "true_ceiling": 421}},
        {"item": {**ITEM, "date": "2026-04-29"}},
        {"max_rounds": 4},
        {"salt": encode_salt(bytes(32))},
        {"salt": None},
        {"salt": "not base64url!"},
        {"salt": encode_salt(bytes(32))[:-2]},
    ],
)
def test_a_salted_commitment_opens_only_with_everything_it_committed(change):
    committed = commit(BUYER, ITEM, 5, SALT)
    reveal = {"constraints": BUYER, "item": ITEM, "max_rounds": 5, "salt": SALT}
    assert opens(committed, **reveal)
    assert not opens(committed, **{**reveal, **change})


def test_a_reference_commitment_opens_without_a_salt():
    assert opens(
        reference_commit(BUYER, ITEM, 5), constraints=BUYER, item=ITEM, max_rounds=5, salt=None
    )


def test_a_buyer_that_offered_above_its_ceiling_is_exposed_by_its_reveal():
    committed = commit(BUYER, ITEM, 5, SALT)
    breaches = verify_reveal(
        committed,
        role="buyer",
        constraints=BUYER,
        salt=SALT,
        item=ITEM,
        max_rounds=5,
        prices=[(1, Decimal(320)), (2, Decimal("420.01"))],
    )
    assert [(b.round, b.price) for b in breaches] == [(2, Decimal("420.01"))]
    assert "above its true_ceiling 420" in breaches[0].describe("buyer")


def test_a_merchant_is_held_to_its_floor():
    constraints = {"floor_price": 280, "ideal_price": 400}
    assert limit_breaches("merchant", constraints, [(1, Decimal(280))]) == []
    assert len(limit_breaches("merchant", constraints, [(1, Decimal("279.99"))])) == 1


def test_an_honest_reveal_has_no_breaches_and_a_false_one_is_refused():
    committed = commit(BUYER, ITEM, 5, SALT)
    honest = verify_reveal(
        committed,
        role="buyer",
        constraints=BUYER,
        salt=SALT,
        item=ITEM,
        max_rounds=5,
        prices=[(1, Decimal(320)), (2, Decimal(340))],
    )
    assert honest == []
    with pytest.raises(RevealMismatch) as refused:
        verify_reveal(
            committed,
            role="buyer",
            constraints={**BUYER, "true_ceiling": 500},
            salt=SALT,
            item=ITEM,
            max_rounds=5,
            prices=[],
        )
    assert (refused.value.code, refused.value.status) == ("reveal_mismatch", 422)


def test_salts_are_32_bytes():
    with pytest.raises(ValueError, match="32 bytes"):
        encode_salt(bytes(16))
