"""C2SP checkpoints: the spec's example, the body's three lines and extension lines, what a
checkpoint's text may not be, and signing and reading one back."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from oanp.audit.merkle import EMPTY_ROOT, leaf_hash, root
from oanp.tlog import (
    Checkpoint,
    MalformedCheckpoint,
    NoteSignatureInvalid,
    NoteSigner,
    NoteUnverified,
    parse_checkpoint,
    parse_note,
    sign_checkpoint,
    verify_checkpoint,
)
from oanp.tlog.note import format_note

# tlog-checkpoint.md, its example.
SPEC_CHECKPOINT = (
    "example.com/behind-the-sofa\n"
    "20852163\n"
    "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    "\n"
    "— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2"
    "q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
)

LOG = NoteSigner("example.com/log", Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
ROOT = root([leaf_hash(bytes([i])) for i in range(5)])


def test_the_spec_example_reads_as_origin_size_and_root() -> None:
    note = parse_note(SPEC_CHECKPOINT)
    checkpoint = parse_checkpoint(note.text)
    assert checkpoint == Checkpoint(
        "example.com/behind-the-sofa",
        20852163,
        base64.b64decode("CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="),
    )
    assert checkpoint.body() == note.text


def test_the_body_is_three_lines_each_ending_in_a_newline() -> None:
    checkpoint = Checkpoint("example.com/log", 5, ROOT)
    assert checkpoint.body() == f"example.com/log\n5\n{base64.b64encode(ROOT).decode()}\n"
    assert Checkpoint("example.com/log", 0, EMPTY_ROOT).body() == (
        "example.com/log\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n"
    )


def test_extension_lines_follow_the_root_and_read_back() -> None:
    checkpoint = Checkpoint("example.com/log", 5, ROOT, ("Timestamp: 1679349379", "x y"))
    assert checkpoint.body().endswith("\nTimestamp: 1679349379\nx y\n")
    assert parse_checkpoint(checkpoint.body()) == checkpoint


def test_the_largest_tree_size_is_a_64_bit_number() -> None:
    body = f"o\n{2**64 - 1}\n{base64.b64encode(ROOT).decode()}\n"
    assert parse_checkpoint(body).size == 2**64 - 1


B64_ROOT = base64.b64encode(ROOT).decode()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (f"example.com/log\n5\n{B64_ROOT}", "ends in a newline"),
        ("example.com/log\n5\n", "origin, size and root"),
        (f"\n5\n{B64_ROOT}\n", "origin is one non-empty line"),
        (f"example.com/log\n05\n{B64_ROOT}\n", "without leading zeros"),
        (f"example.com/log\n00\n{B64_ROOT}\n", "without leading zeros"),
        (f"example.com/log\n+5\n{B64_ROOT}\n", "without leading zeros"),
        (f"example.com/log\n-1\n{B64_ROOT}\n", "without leading zeros"),
        (f"example.com/log\n 5\n{B64_ROOT}\n", "without leading zeros"),
        (f"example.com/log\n5.0\n{B64_ROOT}\n", "without leading zeros"),
        (f"example.com/log\n\n{B64_ROOT}\n", "without leading zeros"),
        (f"example.com/log\n\u0665\n{B64_ROOT}\n", "without leading zeros"),
        (f"example.com/log\n{'9' * 5000}\n{B64_ROOT}\n", "without leading zeros"),
        (f"example.com/log\n{2**64}\n{B64_ROOT}\n", "64-bit"),
        ("example.com/log\n5\nnot base64!\n", "not base64"),
        (f"example.com/log\n5\n{B64_ROOT.rstrip('=')}\n", "not base64"),
        (f"example.com/log\n5\n{base64.b64encode(ROOT[:31]).decode()}\n", "32 bytes"),
        (f"example.com/log\n5\n{base64.b64encode(ROOT + b'x').decode()}\n", "32 bytes"),
        (f"example.com/log\n5\n{B64_ROOT}\n\n", "extension line"),
        (f"example.com/log\n5\n{B64_ROOT}\next\n\n", "extension line"),
    ],
)
def test_a_malformed_checkpoint_is_refused(text: str, reason: str) -> None:
    with pytest.raises(MalformedCheckpoint, match=reason):
        parse_checkpoint(text)


@pytest.mark.parametrize(
    ("origin", "size", "root_hash", "extensions"),
    [
        ("", 5, ROOT, ()),
        ("two\nlines", 5, ROOT, ()),
        ("o", -1, ROOT, ()),
        ("o", 2**64, ROOT, ()),
        ("o", 5, ROOT[:31], ()),
        ("o", 5, ROOT, ("",)),
        ("o", 5, ROOT, ("a\nb",)),
    ],
)
def test_a_checkpoint_that_would_write_another_text_is_refused(
    origin: str, size: int, root_hash: bytes, extensions: tuple[str, ...]
) -> None:
    with pytest.raises(MalformedCheckpoint):
        Checkpoint(origin, size, root_hash, extensions)


def test_a_signed_checkpoint_reads_back_verified() -> None:
    checkpoint = Checkpoint("example.com/log", 5, ROOT)
    signed = sign_checkpoint(checkpoint, [LOG])
    assert signed == checkpoint.body() + "\n" + LOG.sign(checkpoint.body())
    verified = verify_checkpoint(signed, [LOG.verifier()])
    assert verified.checkpoint == checkpoint
    assert verified.signed_by == ("example.com/log",)
    assert verified.note.format() == signed
    assert verify_checkpoint(signed.encode(), [LOG.verifier()]).checkpoint == checkpoint


def test_a_checkpoint_is_read_only_once_its_note_verifies() -> None:
    # Not a checkpoint's text, but unsigned by the trusted key: the signature is what refuses it.
    other = NoteSigner("example.com/other", Ed25519PrivateKey.generate())
    text = "not a checkpoint\n"
    with pytest.raises(NoteUnverified):
        verify_checkpoint(format_note(text, [other.sign(text)]), [LOG.verifier()])
    with pytest.raises(MalformedCheckpoint):
        verify_checkpoint(format_note(text, [LOG.sign(text)]), [LOG.verifier()])


def test_a_changed_checkpoint_does_not_verify() -> None:
    signed = sign_checkpoint(Checkpoint("example.com/log", 5, ROOT), [LOG])
    with pytest.raises(NoteSignatureInvalid):
        verify_checkpoint(signed.replace("\n5\n", "\n6\n"), [LOG.verifier()])
