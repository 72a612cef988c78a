"""A witness's add-checkpoint decisions (tlog-witness), each status the spec names, and the
record it keeps: it never cosigns a rollback or a fork."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Sequence

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from oanp.audit.merkle import EMPTY_ROOT, consistency_proof, leaf_hash, root
from oanp.tlog import (
    AddCheckpoint,
    Checkpoint,
    Cosigner,
    LogRecord,
    MalformedVerifierKey,
    MalformedWitnessRequest,
    NoteSignature,
    NoteSigner,
    Witness,
    log_verifiers,
    origin_hash,
    parse_add_checkpoint,
    parse_checkpoint,
    parse_note,
    sign_checkpoint,
    verify_checkpoint,
    verify_cosignature,
)
from oanp.tlog.note import parse_signature_line

ORIGIN = "example.com/log"
LOG = NoteSigner(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
COSIGNER = Cosigner("witness.example/w1", Ed25519PrivateKey.from_private_bytes(bytes(32)))
WITNESS = Witness([COSIGNER], log_verifiers([LOG.verifier_key]))
LEAVES = [leaf_hash(f"entry {i}".encode()) for i in range(9)]
NOW = 1_780_000_000


def signed(
    size: int, root_hash: bytes | None = None, signers: Sequence[NoteSigner] = (LOG,)
) -> str:
    tree_root = root(LEAVES[:size]) if root_hash is None else root_hash
    return sign_checkpoint(Checkpoint(ORIGIN, size, tree_root), signers)


def body(old: int, note: str, proof: Sequence[bytes] | None = None) -> str:
    lines = [f"old {old}\n"]
    lines += [base64.b64encode(node).decode() + "\n" for node in proof or ()]
    return "".join(lines) + "\n" + note


def record(size: int) -> LogRecord:
    return LogRecord(size, root(LEAVES[:size]), signed(size))


def grow(old: int, size: int) -> str:
    """The body that takes the log from ``old`` to ``size`` with the right proof."""
    return body(old, signed(size), consistency_proof(LEAVES[:size], old))


# tlog-witness.md: its example request and response bodies.
SPEC_REQUEST = (
    "old 20852014\n"
    "PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=\n"
    "jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=\n"
    "5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=\n"
    "/6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0=\n"
    "\n"
    "example.com/behind-the-sofa\n"
    "20852163\n"
    "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    "\n"
    "— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2"
    "q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
    "— example.com/behind-the-sofa opLqBQsREYCgu6xQkYQwJr9fo45a62DN9EdmHXnZdXNqlcVGlCum2Wks+49/V62"
    "67UEjw6QUXTS5Rovnzv++qbSzm9Q=\n"
)
SPEC_RESPONSE = (
    "— witness.example/w1 CMp+6LWBU0anHGH5aNDTJkH/gj79sG+T6+iP2ThYN5krrDJbR1HDnucjL39QsZTSvVjyQLrd"
    "k3DXDqI5G2HgLatVs0pWh6Up69HVOw==\n"
    "— witness.example/w1 I7rEps0pvK2UqkS2gSpVUDhrhVtQV9lgF6pRrWAvjJHjyWpW7VcE3SiOlVlbQNt64vWhO+D"
    "lkL0+UfzuOBMh9ChdMkP1vi/lCAsmlw==\n"
    "— witness.example/w2 AWui8Sk55XjYLOijihBjhqEH6nS1ndDymE0a+6idX7pLcnoB+dhnz0854aLZgrrKbYKA7nC"
    "3HNJhm/kWl7oJlqU3rXXvpysAdyP3wQ==\n"
)


def test_the_spec_example_request_reads_as_old_size_proof_and_checkpoint() -> None:
    request = parse_add_checkpoint(SPEC_REQUEST)
    assert request.old_size == 20852014
    assert len(request.proof) == 4
    assert request.proof[0] == base64.b64decode("PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=")
    note = parse_note(request.checkpoint)
    assert parse_checkpoint(note.text).size == 20852163
    assert len(note.signatures) == 2
    # This witness follows no such log.
    assert WITNESS.add_checkpoint(SPEC_REQUEST, {}, NOW).status == 404


def test_the_spec_example_response_is_cosignature_lines() -> None:
    lines = [parse_signature_line(line) for line in SPEC_RESPONSE.splitlines()]
    assert [s.name for s in lines] == [
        "witness.example/w1",
        "witness.example/w1",
        "witness.example/w2",
    ]
    assert all(len(s.signature) == 8 + 64 for s in lines)


# 200 ---------------------------------------------------------------------------------------


def test_a_first_checkpoint_is_cosigned_and_recorded() -> None:
    answer = WITNESS.add_checkpoint(grow(0, 5), {}, NOW)
    assert answer.status == 200
    assert answer.content_type == "text/plain; charset=utf-8"
    body_text = signed(5).partition("\n\n")[0] + "\n"
    assert verify_cosignature(answer.body, body_text, COSIGNER.verifier_key) == NOW
    assert answer.origin == ORIGIN
    assert answer.record is not None
    assert (answer.record.size, answer.record.root) == (5, root(LEAVES[:5]))


def test_the_record_serves_the_log_signature_and_the_cosignature() -> None:
    stranger = NoteSigner("example.com/stranger", Ed25519PrivateKey.generate())
    answer = WITNESS.add_checkpoint(body(0, signed(5, signers=[stranger, LOG])), {}, NOW)
    assert answer.record is not None
    verified = verify_checkpoint(answer.record.checkpoint, [LOG.verifier(), COSIGNER.verifier()])
    assert verified.signed_by == (ORIGIN, "witness.example/w1")
    # A signature the witness could not check is not served as if it had.
    assert [s.name for s in verified.note.signatures] == [ORIGIN, "witness.example/w1"]


def test_a_growing_tree_is_cosigned_at_each_size() -> None:
    records: dict[str, LogRecord] = {}
    for old, size in [(0, 0), (0, 5), (5, 9), (9, 9)]:
        answer = WITNESS.add_checkpoint(grow(old, size), records, NOW + size)
        assert answer.status == 200, answer.body
        assert answer.record is not None
        records[ORIGIN] = answer.record
    assert records[ORIGIN].size == 9


def test_a_tree_of_size_zero_is_cosigned_with_the_empty_root() -> None:
    answer = WITNESS.add_checkpoint(body(0, signed(0, EMPTY_ROOT)), {}, NOW)
    assert answer.status == 200
    assert answer.record == LogRecord(0, EMPTY_ROOT, answer.record.checkpoint)


def test_every_cosigner_of_the_witness_answers() -> None:
    second = Cosigner("witness.example/w2", Ed25519PrivateKey.generate())
    witness = Witness([COSIGNER, second], WITNESS.logs)
    answer = witness.add_checkpoint(grow(0, 5), {}, NOW)
    assert [line.split(" ")[1] for line in answer.body.splitlines()] == [
        "witness.example/w1",
        "witness.example/w2",
    ]


# 400 ---------------------------------------------------------------------------------------

NOTE = signed(5)


@pytest.mark.parametrize(
    ("request_body", "reason"),
    [
        (NOTE, "old <size>"),
        (f"old 01\n\n{NOTE}", "old <size>"),
        (f"old -1\n\n{NOTE}", "old <size>"),
        (f"old  0\n\n{NOTE}", "old <size>"),
        (f"OLD 0\n\n{NOTE}", "old <size>"),
        (f"old 0 \n\n{NOTE}", "old <size>"),
        (f"old {'9' * 5000}\n\n{NOTE}", "old <size>"),
        (f"old {2**64}\n\n{NOTE}", "old <size>"),
        (f"old 0\n{NOTE}", "old <size>|base64 hash"),
        ("old 0\n", "no blank line"),
        (f"old 0\nnot*base64\n\n{NOTE}", "one base64 hash"),
        (f"old 0\n{base64.b64encode(b'x' * 31).decode()}\n\n{NOTE}", "one base64 hash"),
        (body(0, NOTE, [b"x" * 32] * 64), "more than 63"),
        ("old 0\n\nno signature\n", "no blank line"),
        (f"old 0\n\n{NOTE}".encode()[:-2] + b"\xff\n", "UTF-8"),
        (f"old 0\n\n{NOTE.replace(chr(0x2014), '-')}", "em dash"),
    ],
)
def test_a_malformed_body_is_400(request_body: str | bytes, reason: str) -> None:
    answer = WITNESS.add_checkpoint(request_body, {}, NOW)
    assert answer.status == 400
    assert answer.record is None
    assert answer.body.endswith("\n")
    assert re.search(reason, answer.body), answer.body


def test_sixty_three_proof_lines_are_read() -> None:
    request = parse_add_checkpoint(body(7, NOTE, [bytes([i]) * 32 for i in range(63)]))
    assert request == AddCheckpoint(7, tuple(bytes([i]) * 32 for i in range(63)), NOTE)
    with pytest.raises(MalformedWitnessRequest, match="more than 63"):
        parse_add_checkpoint(body(7, NOTE, [b"x" * 32] * 64))


def test_an_old_size_above_the_checkpoints_is_400() -> None:
    answer = WITNESS.add_checkpoint(body(9, signed(5)), {ORIGIN: record(9)}, NOW)
    assert answer.status == 400
    assert "above" in answer.body


def test_a_checkpoint_text_that_is_no_checkpoint_is_400() -> None:
    text = f"{ORIGIN}\nfive\n{base64.b64encode(root(LEAVES[:5])).decode()}\n"
    note = text + "\n" + LOG.sign(text)
    assert WITNESS.add_checkpoint(body(0, note), {}, NOW).status == 400


# 404 and 403 -------------------------------------------------------------------------------


def test_an_unknown_origin_is_404() -> None:
    other = NoteSigner("example.com/other", Ed25519PrivateKey.generate())
    note = sign_checkpoint(Checkpoint("example.com/other", 5, root(LEAVES[:5])), [other])
    answer = WITNESS.add_checkpoint(body(0, note), {}, NOW)
    assert answer.status == 404


def test_a_checkpoint_no_trusted_key_signed_is_403() -> None:
    impostor = NoteSigner(ORIGIN, Ed25519PrivateKey.generate())
    answer = WITNESS.add_checkpoint(body(0, signed(5, signers=[impostor])), {}, NOW)
    assert answer.status == 403
    assert "no signature from a trusted key" in answer.body


def test_a_trusted_signature_that_fails_is_403() -> None:
    forged = NoteSignature(ORIGIN, LOG.key_id, b"\x00" * 64).line()
    note = Checkpoint(ORIGIN, 5, root(LEAVES[:5])).body() + "\n" + forged
    answer = WITNESS.add_checkpoint(body(0, note), {}, NOW)
    assert answer.status == 403
    tampered = signed(5).replace("\n5\n", "\n6\n")
    assert WITNESS.add_checkpoint(body(0, tampered), {}, NOW).status == 403


# 409 ---------------------------------------------------------------------------------------


def test_a_stale_old_size_is_409_with_the_recorded_size() -> None:
    answer = WITNESS.add_checkpoint(grow(5, 9), {ORIGIN: record(7)}, NOW)
    assert (answer.status, answer.body, answer.content_type) == (409, "7\n", "text/x.tlog.size")
    assert answer.record is None


def test_an_old_size_for_a_log_never_cosigned_is_409_with_zero() -> None:
    answer = WITNESS.add_checkpoint(grow(5, 9), {}, NOW)
    assert (answer.status, answer.body) == (409, "0\n")


def test_old_zero_after_a_cosigned_checkpoint_is_409() -> None:
    # A client without the witness's size asks with old 0 and learns it.
    answer = WITNESS.add_checkpoint(grow(0, 9), {ORIGIN: record(5)}, NOW)
    assert (answer.status, answer.body) == (409, "5\n")


# 422 ---------------------------------------------------------------------------------------


def test_a_proof_that_does_not_verify_is_422() -> None:
    proof = consistency_proof(LEAVES[:9], 5)
    proof[0] = bytes(32)
    answer = WITNESS.add_checkpoint(body(5, signed(9), proof), {ORIGIN: record(5)}, NOW)
    assert (answer.status, answer.record) == (422, None)
    assert "does not verify" in answer.body


def test_a_missing_proof_is_422() -> None:
    answer = WITNESS.add_checkpoint(body(5, signed(9)), {ORIGIN: record(5)}, NOW)
    assert answer.status == 422


def test_a_fork_that_proves_against_its_own_history_is_422() -> None:
    # A consistent proof from another tree's size 5 does not hold against the recorded root.
    forked = [leaf_hash(f"fork {i}".encode()) for i in range(9)]
    proof = consistency_proof(forked, 5)
    note = signed(9, root(forked))
    answer = WITNESS.add_checkpoint(body(5, note, proof), {ORIGIN: record(5)}, NOW)
    assert answer.status == 422


def test_a_proof_from_size_zero_is_422() -> None:
    answer = WITNESS.add_checkpoint(body(0, signed(5), [bytes(32)]), {}, NOW)
    assert answer.status == 422
    assert "size 0" in answer.body


def test_another_root_at_the_cosigned_size_is_422() -> None:
    answer = WITNESS.add_checkpoint(body(5, signed(5, bytes(32))), {ORIGIN: record(5)}, NOW)
    assert answer.status == 422
    assert "another root" in answer.body


def test_the_same_size_with_a_proof_is_422() -> None:
    answer = WITNESS.add_checkpoint(body(5, signed(5), [bytes(32)]), {ORIGIN: record(5)}, NOW)
    assert answer.status == 422


def test_size_zero_with_a_root_of_a_tree_is_422() -> None:
    answer = WITNESS.add_checkpoint(body(0, signed(0, root(LEAVES[:1]))), {}, NOW)
    assert answer.status == 422
    assert "empty tree" in answer.body


def test_no_rollback_is_ever_cosigned() -> None:
    records = {ORIGIN: record(9)}
    for request_body in (
        grow(5, 5),
        body(9, signed(5)),
        grow(0, 5),
        body(9, signed(0, EMPTY_ROOT)),
    ):
        answer = WITNESS.add_checkpoint(request_body, records, NOW)
        assert answer.status in (400, 409)
        assert answer.record is None


# Monitoring and configuration --------------------------------------------------------------


def test_the_recorded_checkpoint_is_served_under_its_origin_hash() -> None:
    answer = WITNESS.add_checkpoint(grow(0, 5), {}, NOW)
    assert answer.record is not None
    records = {ORIGIN: answer.record}
    served = WITNESS.served_checkpoint(origin_hash(ORIGIN), records)
    assert (served.status, served.body) == (200, answer.record.checkpoint)
    assert WITNESS.served_checkpoint(origin_hash("example.com/other"), records).status == 404
    assert WITNESS.served_checkpoint(origin_hash(ORIGIN), {}).status == 404


def test_the_origin_hash_is_the_lowercase_hex_sha256_of_the_origin() -> None:
    expected = hashlib.sha256(b"example.com/behind-the-sofa").hexdigest()
    assert origin_hash("example.com/behind-the-sofa") == expected
    assert re.fullmatch("[0-9a-f]{64}", expected)


def test_logs_are_trusted_by_origin_from_ed25519_note_keys() -> None:
    rotated = NoteSigner(ORIGIN, Ed25519PrivateKey.generate())
    logs = log_verifiers([LOG.verifier_key, rotated.verifier_key])
    assert list(logs) == [ORIGIN]
    assert [v.key_id for v in logs[ORIGIN]] == [LOG.key_id, rotated.key_id]
    with pytest.raises(MalformedVerifierKey):
        log_verifiers([COSIGNER.verifier_key])
    with pytest.raises(ValueError, match="at least one key"):
        Witness([], logs)
