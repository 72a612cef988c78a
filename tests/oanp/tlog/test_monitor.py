"""A log client's decisions, checkpoint after checkpoint: the same tree, a tree that grew (as a
consistency proof shows, or not), a fork and a rollback; which witnesses cosigned; and the state
document that keeps the last checkpoint verified of each log."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from oanp.audit.merkle import EMPTY_ROOT, consistency_proof, leaf_hash, root
from oanp.tlog import (
    Checkpoint,
    Cosigner,
    LogState,
    NoteSigner,
    Relation,
    compare_checkpoints,
    count_cosignatures,
    parse_log_state,
    parse_note,
    proves_consistency,
    sign_checkpoint,
)

ORIGIN = "example.com/log"
LOG = NoteSigner(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
W1 = Cosigner("w1.example/w", Ed25519PrivateKey.from_private_bytes(bytes(32)))
W2 = Cosigner("w2.example/w", Ed25519PrivateKey.from_private_bytes(bytes([2]) * 32))
W3 = Cosigner("w3.example/w", Ed25519PrivateKey.from_private_bytes(bytes([3]) * 32))
LEAVES = [leaf_hash(f"entry {i}".encode()) for i in range(40)]
OTHER = [leaf_hash(f"other {i}".encode()) for i in range(40)]


def head(size: int, leaves: list[bytes] = LEAVES) -> Checkpoint:
    return Checkpoint(ORIGIN, size, root(leaves[:size]))


@pytest.mark.parametrize(
    ("kept", "served", "expected"),
    [
        (None, head(7), Relation.FIRST),
        (head(7), head(7), Relation.SAME),
        (head(7), head(20), Relation.GROWN),
        (head(7), head(7, OTHER), Relation.FORK),
        (head(20), head(7), Relation.ROLLBACK),
        # Smaller is a rollback whatever the roots: a log never shrinks.
        (head(20), head(7, OTHER), Relation.ROLLBACK),
    ],
)
def test_a_checkpoint_stands_to_the_kept_one_by_size_then_root(
    kept: Checkpoint | None, served: Checkpoint, expected: Relation
) -> None:
    assert compare_checkpoints(kept, served) is expected


def test_checkpoints_of_two_logs_are_not_compared() -> None:
    with pytest.raises(ValueError, match="two logs"):
        compare_checkpoints(head(7), Checkpoint("other.example/log", 7, root(LEAVES[:7])))


@pytest.mark.parametrize(("old", "new"), [(1, 2), (7, 20), (8, 40), (16, 17), (39, 40)])
def test_a_grown_tree_extends_the_kept_one_as_its_proof_shows(old: int, new: int) -> None:
    proof = consistency_proof(LEAVES[:new], old)
    assert proves_consistency(head(old), head(new), proof)
    # The same proof for a kept tree of other leaves, or against another new root: no.
    assert not proves_consistency(head(old, OTHER), head(new), proof)
    assert not proves_consistency(head(old), head(new, OTHER), proof)
    # Nor a proof cut short, nor none at all.
    assert not proves_consistency(head(old), head(new), proof[:-1])
    assert not proves_consistency(head(old), head(new), [])


def test_consistency_from_the_empty_tree_and_at_one_size() -> None:
    empty = Checkpoint(ORIGIN, 0, EMPTY_ROOT)
    assert proves_consistency(empty, head(9), [])
    assert not proves_consistency(Checkpoint(ORIGIN, 0, LEAVES[0]), head(9), [])
    assert proves_consistency(head(9), head(9), [])
    assert not proves_consistency(head(9), head(9, OTHER), [])


def test_a_proof_between_two_logs_proves_nothing() -> None:
    other = Checkpoint("other.example/log", 20, root(LEAVES[:20]))
    assert not proves_consistency(head(7), other, consistency_proof(LEAVES[:20], 7))


def cosigned(*cosigners: Cosigner, size: int = 9) -> str:
    text = head(size).body()
    note = sign_checkpoint(head(size), [LOG])
    return note + "".join(c.cosign(text, 1_780_000_000 + n) for n, c in enumerate(cosigners))


def test_witnesses_count_one_at_a_time() -> None:
    witnesses = [W1.verifier(), W2.verifier(), W3.verifier()]
    found = count_cosignatures(parse_note(cosigned(W1, W3)), witnesses)
    assert (found.cosigned, found.invalid, found.missing) == (
        ("w1.example/w", "w3.example/w"),
        (),
        ("w2.example/w",),
    )
    assert found.trusted == 3
    assert found.meets(2)
    assert not found.meets(3)


def test_a_witness_whose_line_does_not_verify_counts_for_nothing_and_hides_nothing() -> None:
    # W2's cosignature of another checkpoint, moved onto this one.
    other = W2.cosign(head(10).body(), 1_780_000_000)
    note = parse_note(cosigned(W1, size=9) + other)
    found = count_cosignatures(note, [W1.verifier(), W2.verifier()])
    assert (found.cosigned, found.invalid, found.missing) == (
        ("w1.example/w",),
        ("w2.example/w",),
        (),
    )
    assert not found.meets(2)


def test_a_key_of_the_same_name_is_not_the_witness() -> None:
    impostor = Cosigner(W1.name, Ed25519PrivateKey.from_private_bytes(bytes([9]) * 32))
    found = count_cosignatures(parse_note(cosigned(impostor)), [W1.verifier()])
    assert found.missing == ("w1.example/w",)
    assert count_cosignatures(parse_note(cosigned()), []).meets(0)


def test_the_state_keeps_the_last_note_of_each_origin() -> None:
    first = sign_checkpoint(head(7), [LOG])
    state = LogState().keeping(ORIGIN, first)
    assert parse_log_state(state.format()) == state
    later = cosigned(W1, size=20)
    state = state.keeping(ORIGIN, later).keeping("b.example/log", first)
    again = parse_log_state(state.format())
    assert again.kept(ORIGIN) == later
    assert again.kept("b.example/log") == first
    assert again.kept("c.example/log") is None
    assert json.loads(state.format())["format"] == "oanp-log-state/1"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "not JSON"),
        ("[]", "no format"),
        ('{"format": "oanp-witness-state/1", "logs": {}}', "no format"),
        ('{"format": "oanp-log-state/1"}', "no logs"),
        ('{"format": "oanp-log-state/1", "logs": {"a": {}}}', "holds no checkpoint"),
        ('{"format": "oanp-log-state/1", "logs": {"a": {"checkpoint": "x"}}}', "no note"),
    ],
)
def test_a_state_document_of_another_shape_is_refused(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_log_state(text)
