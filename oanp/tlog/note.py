"""C2SP signed notes (c2sp.org/signed-note): a text, a blank line, and signature lines
``— <key name> base64(key ID || signature)``, each key named by a verifier key
``<name>+<hex key ID>+base64(type || public key)``.

Parsing follows the spec and Go's reference reader: UTF-8 without control characters but
newline, the text split from the signatures at the *last* blank line, at least one signature
line and at most :data:`MAX_SIGNATURES`. Verifying ignores signatures whose (name, key ID) no
trusted key has, refuses the whole note when a trusted key's signature fails, and refuses a
note no trusted key signed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from oanp.tlog.errors import (
    MalformedNote,
    MalformedVerifierKey,
    NoteSignatureInvalid,
    NoteUnverified,
)

#: Signature type of an Ed25519 note signature.
ED25519 = 0x01
#: Signature type of a timestamped Ed25519 checkpoint cosignature (c2sp.org/tlog-cosignature).
COSIGNATURE_ED25519 = 0x04
#: The public key length of each signature type this package reads; any other is refused.
PUBLIC_KEY_SIZES: Mapping[int, int] = {ED25519: 32, COSIGNATURE_ED25519: 32}
KEY_ID_SIZE = 4
ED25519_SIGNATURE_SIZE = 64
#: The spec asks verifiers to accept at least 16; Go's reader stops at 100.
MAX_SIGNATURES = 100
#: Room for 100 signatures of the largest post-quantum size (some 5 kB each) and a long text.
MAX_NOTE_BYTES = 1 << 20
SIGNATURE_PREFIX = "\u2014 "

_CONTROL = re.compile("[\x00-\x09\x0b-\x1f]")
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_HEX_KEY_ID = re.compile(r"[0-9a-f]{8}")


def decode_base64(text: str) -> bytes:
    """Standard base64 (RFC 4648 section 4), strictly: padded, no stray characters, no unused
    bits set, so that one value has one spelling; ``ValueError`` otherwise."""
    if not _BASE64.fullmatch(text) or len(text) % 4:
        raise ValueError("not standard padded base64")
    try:
        data = base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ValueError("not standard padded base64") from exc
    if base64.b64encode(data).decode("ascii") != text:
        raise ValueError("base64 with unused bits set")
    return data


def encode_base64(data: bytes) -> str:
    """Standard padded base64, as every line of these formats writes it."""
    return base64.b64encode(data).decode("ascii")


def is_key_name(name: str) -> bool:
    """Whether ``name`` may name a key: non-empty, no Unicode space, no ``+``, no control
    character (a note may hold none)."""
    return (
        bool(name)
        and "+" not in name
        and not any(c.isspace() for c in name)
        and not _CONTROL.search(name)
    )


def key_id(name: str, sig_type: int, public_key: bytes) -> bytes:
    """The 4-byte key ID the spec recommends, and tlog-cosignature requires:
    ``SHA-256(name || 0x0A || type || public key)[:4]``."""
    if not 0 <= sig_type <= 0xFF:
        raise ValueError(f"a signature type is one byte, not {sig_type}")
    material = name.encode("utf-8") + b"\n" + bytes([sig_type]) + public_key
    return hashlib.sha256(material).digest()[:KEY_ID_SIZE]


class NoteSignature(NamedTuple):
    """One signature line: the key's name, its key ID, and the signature bytes after the ID."""

    name: str
    key_id: bytes
    signature: bytes

    def line(self) -> str:
        """The signature line, newline included."""
        return f"{SIGNATURE_PREFIX}{self.name} {encode_base64(self.key_id + self.signature)}\n"


@dataclass(frozen=True)
class Note:
    """A parsed, not yet verified, signed note: its text (final newline included) and every
    signature line, in order."""

    text: str
    signatures: tuple[NoteSignature, ...]

    def format(self) -> str:
        """The note as it is sent: the text, a blank line, the signature lines."""
        return format_note(self.text, (s.line() for s in self.signatures))


def format_note(text: str, signature_lines: Iterable[str]) -> str:
    """``text`` followed by a blank line and ``signature_lines`` (each ending in a newline)."""
    check_note_text(text)
    lines = list(signature_lines)
    if not lines or not all(line.endswith("\n") for line in lines):
        raise ValueError("a note needs signature lines, each ending in a newline")
    return text + "\n" + "".join(lines)


def check_note_text(text: str) -> None:
    """``ValueError`` unless ``text`` can be a note's text: UTF-8, ending in a newline, with no
    control character but newline."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("a note's text must be UTF-8") from None
    if not text.endswith("\n"):
        raise ValueError("a note's text ends in a newline")
    if _CONTROL.search(text):
        raise ValueError("a note's text holds no control character but newline")


def parse_signature_line(line: str) -> NoteSignature:
    """One line ``— <name> <base64>`` (without its newline) as a :class:`NoteSignature`."""
    if not line.startswith(SIGNATURE_PREFIX):
        raise MalformedNote("a signature line starts with an em dash and a space")
    name, _, encoded = line[len(SIGNATURE_PREFIX) :].partition(" ")
    if not is_key_name(name):
        raise MalformedNote("a signature line names no valid key")
    try:
        signature = decode_base64(encoded)
    except ValueError:
        raise MalformedNote(f"the signature of {name} is not base64") from None
    if len(signature) <= KEY_ID_SIZE:
        raise MalformedNote(f"the signature of {name} is too short")
    return NoteSignature(name, signature[:KEY_ID_SIZE], signature[KEY_ID_SIZE:])


def parse_note(data: str | bytes) -> Note:
    """A signed note's text and signature lines; :class:`MalformedNote` for anything else."""
    if isinstance(data, bytes | bytearray):
        if len(data) > MAX_NOTE_BYTES:
            raise MalformedNote(f"a note is at most {MAX_NOTE_BYTES} bytes")
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedNote("a note is UTF-8") from None
    try:
        size = len(data.encode("utf-8"))
    except UnicodeEncodeError:
        raise MalformedNote("a note is UTF-8") from None
    if size > MAX_NOTE_BYTES:
        raise MalformedNote(f"a note is at most {MAX_NOTE_BYTES} bytes")
    if _CONTROL.search(data):
        raise MalformedNote("a note holds no control character but newline")
    split = data.rfind("\n\n")
    if split < 0:
        raise MalformedNote("no blank line before the signatures")
    text, block = data[: split + 1], data[split + 2 :]
    if not block.endswith("\n"):
        raise MalformedNote("no signature line, or one not ending in a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise MalformedNote(f"more than {MAX_SIGNATURES} signatures")
    return Note(text, tuple(parse_signature_line(line) for line in lines))


class Verifier(Protocol):
    """A trusted key: its name and key ID, and whether a signature of a note's text is its."""

    @property
    def name(self) -> str: ...

    @property
    def key_id(self) -> bytes: ...

    def verify(self, text: str, signature: bytes) -> bool: ...


def verify_note(note: Note, verifiers: Iterable[Verifier]) -> list[str]:
    """The names of the trusted keys that signed ``note``, in the note's order.

    A signature whose (name, key ID) no verifier has is ignored, as the spec requires even when
    the name or the ID alone matches; a trusted key's signature that fails refuses the whole
    note (:class:`NoteSignatureInvalid`), and so does a note with none (:class:`NoteUnverified`).
    """
    known = {(v.name, v.key_id): v for v in verifiers}
    names: list[str] = []
    for signature in note.signatures:
        verifier = known.get((signature.name, signature.key_id))
        if verifier is None:
            continue
        if not verifier.verify(note.text, signature.signature):
            raise NoteSignatureInvalid(f"the signature of {signature.name} does not verify")
        if signature.name not in names:
            names.append(signature.name)
    if not names:
        raise NoteUnverified("no signature from a trusted key")
    return names


@dataclass(frozen=True)
class VerifierKey:
    """A parsed verifier key: name, signature type and public key (its key ID computed)."""

    name: str
    sig_type: int
    public_key: bytes

    @property
    def key_id(self) -> bytes:
        """The key ID of this name, type and key."""
        return key_id(self.name, self.sig_type, self.public_key)

    def __str__(self) -> str:
        material = encode_base64(bytes([self.sig_type]) + self.public_key)
        return f"{self.name}+{self.key_id.hex()}+{material}"


def parse_verifier_key(text: str) -> VerifierKey:
    """A verifier key ``<name>+<hex key ID>+<base64(type || key)>`` of a type this package
    knows, whose key ID is the one its name, type and key give."""
    # Two cuts only: the base64 key may hold '+' itself.
    parts = text.split("+", 2)
    if len(parts) != 3:
        raise MalformedVerifierKey("a verifier key is name+hex key ID+base64 key")
    name, hex_id, encoded = parts
    if not is_key_name(name):
        raise MalformedVerifierKey("a key name is non-empty, without spaces or '+'")
    if not _HEX_KEY_ID.fullmatch(hex_id):
        raise MalformedVerifierKey("a key ID is 8 lowercase hex digits")
    try:
        material = decode_base64(encoded)
    except ValueError:
        raise MalformedVerifierKey("the key is not base64") from None
    if not material:
        raise MalformedVerifierKey("the key is empty")
    sig_type, public_key = material[0], material[1:]
    size = PUBLIC_KEY_SIZES.get(sig_type)
    if size is None:
        raise MalformedVerifierKey(f"unknown signature type 0x{sig_type:02x}")
    if len(public_key) != size:
        raise MalformedVerifierKey(f"a type 0x{sig_type:02x} key is {size} bytes")
    vkey = VerifierKey(name, sig_type, public_key)
    if vkey.key_id.hex() != hex_id:
        raise MalformedVerifierKey("the key ID is not the one the name and key give")
    return vkey


def ed25519_verifies(public_key: bytes, signature: bytes, message: bytes) -> bool:
    """Whether ``signature`` is ``public_key``'s Ed25519 signature of ``message``."""
    if len(signature) != ED25519_SIGNATURE_SIZE:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


class NoteVerifier:
    """An Ed25519 note key (type 0x01) to verify signatures with."""

    def __init__(self, name: str, public_key: bytes) -> None:
        if not is_key_name(name):
            raise ValueError(f"not a key name: {name!r}")
        if len(public_key) != PUBLIC_KEY_SIZES[ED25519]:
            raise ValueError("an Ed25519 public key is 32 bytes")
        self._name = name
        self.public_key = public_key
        self._key_id = key_id(name, ED25519, public_key)

    @property
    def name(self) -> str:
        return self._name

    @property
    def key_id(self) -> bytes:
        return self._key_id

    @property
    def verifier_key(self) -> str:
        """This key as a verifier key string."""
        return str(VerifierKey(self._name, ED25519, self.public_key))

    def verify(self, text: str, signature: bytes) -> bool:
        """Whether ``signature`` is this key's signature of ``text``."""
        return ed25519_verifies(self.public_key, signature, text.encode("utf-8"))


def note_verifier(vkey: str) -> NoteVerifier:
    """The Ed25519 note key a verifier key string names; :class:`MalformedVerifierKey` for a
    malformed one or one of another type."""
    parsed = parse_verifier_key(vkey)
    if parsed.sig_type != ED25519:
        raise MalformedVerifierKey(f"not an Ed25519 note key (type 0x{parsed.sig_type:02x})")
    return NoteVerifier(parsed.name, parsed.public_key)


class NoteSigner:
    """An Ed25519 note key (type 0x01) with its name, to sign note texts with."""

    def __init__(self, name: str, private_key: Ed25519PrivateKey) -> None:
        if not is_key_name(name):
            raise ValueError(f"not a key name: {name!r}")
        self.name = name
        self._private_key = private_key
        self.public_key = private_key.public_key().public_bytes_raw()
        self.key_id = key_id(name, ED25519, self.public_key)

    @property
    def verifier_key(self) -> str:
        """``<name>+<hex key ID>+<base64(0x01 || public key)>``."""
        return str(VerifierKey(self.name, ED25519, self.public_key))

    def verifier(self) -> NoteVerifier:
        """The public half, to verify this signer's notes with."""
        return NoteVerifier(self.name, self.public_key)

    def sign(self, text: str) -> str:
        """The signature line of ``text`` (a note's text, final newline included)."""
        check_note_text(text)
        signature = self._private_key.sign(text.encode("utf-8"))
        return NoteSignature(self.name, self.key_id, signature).line()
