"""C2SP signed notes: the spec's own examples, keys and key IDs, what a note may not be, and
which signatures count when one is verified."""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from oanp.tlog import (
    MalformedNote,
    MalformedVerifierKey,
    NoteSignature,
    NoteSignatureInvalid,
    NoteSigner,
    NoteUnverified,
    NoteVerifier,
    TlogError,
    key_id,
    note_verifier,
    parse_note,
    parse_verifier_key,
    verify_note,
)
from oanp.tlog.errors import TLOG_FAILURES
from oanp.tlog.note import MAX_NOTE_BYTES, MAX_SIGNATURES, format_note
from oanp.wire.errors import VerificationError

# signed-note.md, "Verifier keys", "Example": this key verifies this note.
SPEC_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
SPEC_NOTE = (
    "This is an example message.\n"
    "\n"
    "— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKu"
    "wHjG1Yu72IneyaQM=\n"
)
# signed-note.md, its first example: a text holding an empty line.
SPEC_POEM = (
    "Ognuno sta solo sul cuor della terra\n"
    "trafitto da un raggio di sole:\n"
    "\n"
    "ed è subito sera.\n"
    "\n"
    "— quasimodo.example/salvatore NnugSzTjtVAewIS+Z/iJhUPeFDkO/5QQ2i5ddnGITLlC+EhfLW9oJKONrMouFS"
    "QU0xMcXxj99ihAQwaqP3ZekRwNtIc=\n"
)

SIGNER = NoteSigner("example.com/log", Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
OTHER = NoteSigner("example.com/other", Ed25519PrivateKey.from_private_bytes(bytes(32)))


# The spec's examples -------------------------------------------------------------------------


def test_the_spec_example_key_verifies_the_spec_example_note() -> None:
    note = parse_note(SPEC_NOTE)
    assert note.text == "This is an example message.\n"
    assert verify_note(note, [note_verifier(SPEC_VKEY)]) == ["example.com/foo"]
    assert verify_note(parse_note(SPEC_NOTE.encode()), [note_verifier(SPEC_VKEY)])


def test_the_spec_example_key_id_is_the_hash_of_name_type_and_key() -> None:
    vkey = parse_verifier_key(SPEC_VKEY)
    assert (vkey.name, vkey.sig_type) == ("example.com/foo", 0x01)
    expected = hashlib.sha256(b"example.com/foo\n\x01" + vkey.public_key).digest()[:4]
    assert key_id("example.com/foo", 0x01, vkey.public_key) == expected == bytes.fromhex("530d903a")
    assert str(vkey) == SPEC_VKEY


def test_the_text_ends_at_the_last_blank_line() -> None:
    note = parse_note(SPEC_POEM)
    assert note.text == (
        "Ognuno sta solo sul cuor della terra\n"
        "trafitto da un raggio di sole:\n"
        "\n"
        "ed è subito sera.\n"
    )
    [signature] = note.signatures
    assert signature.name == "quasimodo.example/salvatore"
    assert len(signature.key_id) == 4
    assert len(signature.signature) == 64
    assert note.format() == SPEC_POEM


def test_a_changed_spec_note_does_not_verify() -> None:
    changed = SPEC_NOTE.replace("example message", "example massage")
    with pytest.raises(NoteSignatureInvalid, match=r"example\.com/foo"):
        verify_note(parse_note(changed), [note_verifier(SPEC_VKEY)])


# Signing -------------------------------------------------------------------------------------


def test_a_signer_writes_the_spec_line_and_its_verifier_key() -> None:
    text = "hello\n\nworld\n"
    line = SIGNER.sign(text)
    assert line.startswith("— example.com/log ")
    assert line.endswith("\n")
    raw = base64.b64decode(line.split(" ")[2])
    public_key = SIGNER.public_key
    assert raw[:4] == hashlib.sha256(b"example.com/log\n\x01" + public_key).digest()[:4]
    assert len(raw) == 4 + 64
    material = base64.b64encode(b"\x01" + public_key).decode()
    assert SIGNER.verifier_key == f"example.com/log+{raw[:4].hex()}+{material}"
    note = parse_note(format_note(text, [line]))
    assert note.text == text
    assert verify_note(note, [note_verifier(SIGNER.verifier_key)]) == ["example.com/log"]


def test_ed25519_signatures_are_deterministic() -> None:
    assert SIGNER.sign("same\n") == SIGNER.sign("same\n")


@pytest.mark.parametrize("text", ["no newline", "tab\there\n", "\r\n", "\ud800\n"])
def test_a_signer_refuses_text_no_note_may_hold(text: str) -> None:
    with pytest.raises(ValueError, match="note's text"):
        SIGNER.sign(text)


@pytest.mark.parametrize("name", ["", "with space", "with+plus", "nbsp\u00a0name", "line\nfeed"])
def test_a_key_name_has_no_space_and_no_plus(name: str) -> None:
    with pytest.raises(ValueError, match="not a key name"):
        NoteSigner(name, Ed25519PrivateKey.generate())


# Malformed notes -----------------------------------------------------------------------------

SIGNED = SIGNER.sign("text\n")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"text\n\n" + SIGNED.encode()[:-3] + b"\xff\n", "UTF-8"),
        ("text\n\n" + SIGNED + "\ud800", "UTF-8"),
        ("te\txt\n\n" + SIGNED, "control character"),
        ("text\r\n\n" + SIGNED, "control character"),
        ("text\n" + SIGNED, "no blank line"),
        ("text\n\n", "no signature line"),
        ("text\n\n" + SIGNED.removesuffix("\n"), "not ending in a newline"),
        ("text\n\n" + SIGNED + "\n", "no signature line"),
        ("text\n\n" + SIGNED.replace("—", "--"), "em dash"),
        ("text\n\n" + SIGNED.replace("— ", "—"), "em dash"),
        ("text\n\n" + SIGNED.replace("example.com/log", "example.com+log"), "valid key"),
        ("text\n\n" + SIGNED.replace("example.com/log ", " "), "valid key"),
        ("text\n\n" + SIGNED.replace("example.com/log ", "example.com/log  "), "not base64"),
        ("text\n\n— example.com/log\n", "too short"),
        ("text\n\n— example.com/log not*base64\n", "not base64"),
        ("text\n\n— example.com/log AAAA\n", "too short"),
        ("text\n\n— example.com/log AAAAAQ=\n", "not base64"),
        ("text\n\n— example.com/log AAAAAR==\n", "not base64"),
        ("text\n\n" + SIGNED * (MAX_SIGNATURES + 1), "more than 100"),
        ("x" * MAX_NOTE_BYTES + "\n\n" + SIGNED, "at most"),
        (("x" * MAX_NOTE_BYTES + "\n\n" + SIGNED).encode(), "at most"),
    ],
)
def test_a_malformed_note_is_refused(data: str | bytes, reason: str) -> None:
    with pytest.raises(MalformedNote, match=reason):
        parse_note(data)


@pytest.mark.parametrize("count", [1, 16, MAX_SIGNATURES])
def test_up_to_a_hundred_signatures_are_read(count: int) -> None:
    note = parse_note("text\n\n" + SIGNED * count)
    assert len(note.signatures) == count
    assert verify_note(note, [SIGNER.verifier()]) == ["example.com/log"]


# Verifying: which signatures count -----------------------------------------------------------


def test_signatures_of_unknown_keys_are_ignored() -> None:
    text = "text\n"
    # Same name another key, same key another name: neither is the trusted key.
    impostor = NoteSigner("example.com/log", Ed25519PrivateKey.generate())
    renamed = NoteSignature("example.com/renamed", SIGNER.key_id, b"\x00" * 64).line()
    note = parse_note(format_note(text, [impostor.sign(text), renamed, SIGNER.sign(text)]))
    assert verify_note(note, [SIGNER.verifier()]) == ["example.com/log"]


def test_a_note_no_trusted_key_signed_is_refused() -> None:
    note = parse_note(format_note("text\n", [OTHER.sign("text\n")]))
    with pytest.raises(NoteUnverified, match="no signature from a trusted key"):
        verify_note(note, [SIGNER.verifier()])
    with pytest.raises(NoteUnverified):
        verify_note(note, [])


def test_a_failing_trusted_signature_refuses_the_whole_note() -> None:
    forged = NoteSignature(SIGNER.name, SIGNER.key_id, b"\x01" * 64).line()
    note = parse_note(format_note("text\n", [OTHER.sign("text\n"), forged]))
    with pytest.raises(NoteSignatureInvalid, match=r"example\.com/log does not verify"):
        verify_note(note, [SIGNER.verifier(), OTHER.verifier()])
    short = NoteSignature(SIGNER.name, SIGNER.key_id, b"\x01" * 63).line()
    with pytest.raises(NoteSignatureInvalid):
        verify_note(parse_note(format_note("text\n", [short])), [SIGNER.verifier()])


def test_every_trusted_signer_is_named_once_in_the_note_order() -> None:
    text = "text\n"
    note = parse_note(format_note(text, [OTHER.sign(text), SIGNER.sign(text), OTHER.sign(text)]))
    assert verify_note(note, [SIGNER.verifier(), OTHER.verifier()]) == [
        "example.com/other",
        "example.com/log",
    ]


# Verifier keys -------------------------------------------------------------------------------

PUBLIC = parse_verifier_key(SPEC_VKEY).public_key


def vkey(name: str, sig_type: int, public_key: bytes, hex_id: str | None = None) -> str:
    hex_id = hex_id if hex_id is not None else key_id(name, sig_type, public_key).hex()
    return f"{name}+{hex_id}+{base64.b64encode(bytes([sig_type]) + public_key).decode()}"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("example.com/foo+530d903a", "name\\+hex key ID\\+base64"),
        (SPEC_VKEY + "+extra", "not base64"),
        ("+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "key name"),
        (vkey("example com", 1, PUBLIC), "key name"),
        (vkey("example.com/\u2003foo", 1, PUBLIC), "key name"),
        ("example.com/foo+530d903+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "8 lowercase"),
        ("example.com/foo+530d903a0+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "8 lowercase"),
        ("example.com/foo+530D903A+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "8 lowercase"),
        ("example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2", "not base64"),
        ("example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k=", "not base64"),
        ("example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2_", "not base64"),
        ("example.com/foo+530d903a+", "empty"),
        (vkey("example.com/foo", 0x02, PUBLIC), "unknown signature type 0x02"),
        (vkey("example.com/foo", 0x06, PUBLIC), "unknown signature type 0x06"),
        (vkey("example.com/foo", 0x01, PUBLIC[:31]), "32 bytes"),
        (vkey("example.com/foo", 0x01, PUBLIC + b"\x00"), "32 bytes"),
        (vkey("example.com/foo", 0x01, PUBLIC, "530d903b"), "not the one"),
        (vkey("example.com/bar", 0x01, PUBLIC, "530d903a"), "not the one"),
        (vkey("example.com/foo", 0x04, PUBLIC, "530d903a"), "not the one"),
    ],
)
def test_a_malformed_verifier_key_is_refused(text: str, reason: str) -> None:
    with pytest.raises(MalformedVerifierKey, match=reason):
        parse_verifier_key(text)


def test_a_note_verifier_is_an_ed25519_note_key() -> None:
    cosigner_key = vkey("example.com/foo", 0x04, PUBLIC)
    assert parse_verifier_key(cosigner_key).sig_type == 0x04
    with pytest.raises(MalformedVerifierKey, match="not an Ed25519 note key"):
        note_verifier(cosigner_key)
    verifier = note_verifier(SPEC_VKEY)
    assert isinstance(verifier, NoteVerifier)
    assert verifier.verifier_key == SPEC_VKEY


def test_the_refusals_are_one_family_with_a_code_and_a_short_message() -> None:
    codes = [refusal.code for refusal in TLOG_FAILURES]
    assert len(codes) == len(set(codes)) == 7
    with pytest.raises(TlogError) as raised:
        parse_note("no signatures\n")
    assert isinstance(raised.value, VerificationError)
    assert raised.value.code == "note_malformed"
    assert len(raised.value.detail) < 80
