"""C2SP Ed25519 checkpoint cosignatures (c2sp.org/tlog-cosignature, signature type 0x04).

A cosigner signs ``cosignature/v1\\ntime <timestamp>\\n`` followed by the checkpoint's note
text, and its signature line carries ``base64(key ID || u64 big-endian timestamp || Ed25519
signature)``: a statement that, at that time, this was the largest consistent tree it had seen
of the log. The message does not name the cosigner, so one key serves one cosigner only.

A cosigner's private key is kept as a signer key, the form Go's note package reads:
``PRIVATE+KEY+<name>+<hex key ID>+<base64(0x04 || 32-byte seed)>``.
"""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from oanp.tlog.checkpoint import parse_checkpoint
from oanp.tlog.errors import (
    MalformedCosignature,
    MalformedVerifierKey,
    NoteSignatureInvalid,
    NoteUnverified,
)
from oanp.tlog.note import (
    COSIGNATURE_ED25519,
    ED25519_SIGNATURE_SIZE,
    PUBLIC_KEY_SIZES,
    NoteSignature,
    VerifierKey,
    decode_base64,
    ed25519_verifies,
    encode_base64,
    is_key_name,
    key_id,
    parse_signature_line,
    parse_verifier_key,
)

COSIGNATURE_HEADER = "cosignature/v1"
TIMESTAMP_SIZE = 8
#: The spec's bound: a timestamp fits a signed 64-bit number.
MAX_TIMESTAMP = 2**63 - 1
SIGNER_KEY_PREFIX = "PRIVATE+KEY+"


def cosigned_message(checkpoint_body: str, timestamp: int) -> bytes:
    """The bytes a cosignature signs: the header line, the time line, then the checkpoint's
    whole note text (extension lines included)."""
    header = f"{COSIGNATURE_HEADER}\ntime {timestamp}\n"
    return (header + checkpoint_body).encode("utf-8")


def _timestamped(signature: bytes) -> tuple[int, bytes] | None:
    if len(signature) != TIMESTAMP_SIZE + ED25519_SIGNATURE_SIZE:
        return None
    timestamp = int.from_bytes(signature[:TIMESTAMP_SIZE], "big")
    if timestamp > MAX_TIMESTAMP:
        return None
    return timestamp, signature[TIMESTAMP_SIZE:]


class CosignatureVerifier:
    """A cosigner's public key (type 0x04) to verify its cosignatures with; a
    :class:`~oanp.tlog.note.Verifier`, so a checkpoint's cosignatures verify as notes do."""

    def __init__(self, name: str, public_key: bytes) -> None:
        if not is_key_name(name):
            raise ValueError(f"not a key name: {name!r}")
        if len(public_key) != PUBLIC_KEY_SIZES[COSIGNATURE_ED25519]:
            raise ValueError("an Ed25519 public key is 32 bytes")
        self._name = name
        self.public_key = public_key
        self._key_id = key_id(name, COSIGNATURE_ED25519, public_key)

    @property
    def name(self) -> str:
        return self._name

    @property
    def key_id(self) -> bytes:
        return self._key_id

    @property
    def verifier_key(self) -> str:
        """This key as a verifier key string."""
        return str(VerifierKey(self._name, COSIGNATURE_ED25519, self.public_key))

    def verify(self, text: str, signature: bytes) -> bool:
        """Whether ``signature`` (timestamp and Ed25519 signature) cosigns the checkpoint
        ``text``."""
        return self.timestamp(text, signature) is not None

    def timestamp(self, text: str, signature: bytes) -> int | None:
        """The time ``signature`` states, if it is this key's valid cosignature of ``text``."""
        parts = _timestamped(signature)
        if parts is None:
            return None
        timestamp, ed25519_signature = parts
        message = cosigned_message(text, timestamp)
        return timestamp if ed25519_verifies(self.public_key, ed25519_signature, message) else None


def cosignature_verifier(vkey: str) -> CosignatureVerifier:
    """The cosigner a verifier key string names; :class:`MalformedVerifierKey` for a
    malformed one or one of another type."""
    parsed = parse_verifier_key(vkey)
    if parsed.sig_type != COSIGNATURE_ED25519:
        raise MalformedVerifierKey(f"not an Ed25519 cosigner key (type 0x{parsed.sig_type:02x})")
    return CosignatureVerifier(parsed.name, parsed.public_key)


class Cosigner:
    """A named Ed25519 cosigner, such as a witness, to cosign checkpoints with."""

    def __init__(self, name: str, private_key: Ed25519PrivateKey) -> None:
        if not is_key_name(name):
            raise ValueError(f"not a key name: {name!r}")
        self.name = name
        self._private_key = private_key
        self.public_key = private_key.public_key().public_bytes_raw()
        self.key_id = key_id(name, COSIGNATURE_ED25519, self.public_key)

    @property
    def verifier_key(self) -> str:
        """``<name>+<hex key ID>+<base64(0x04 || public key)>``."""
        return str(VerifierKey(self.name, COSIGNATURE_ED25519, self.public_key))

    @property
    def signer_key(self) -> str:
        """The private key as text: ``PRIVATE+KEY+<name>+<hex key ID>+<base64(0x04 || seed)>``.
        Whoever holds it can cosign as this cosigner."""
        seed = encode_base64(bytes([COSIGNATURE_ED25519]) + self._private_key.private_bytes_raw())
        return f"{SIGNER_KEY_PREFIX}{self.name}+{self.key_id.hex()}+{seed}"

    def verifier(self) -> CosignatureVerifier:
        """The public half, to verify this cosigner's cosignatures with."""
        return CosignatureVerifier(self.name, self.public_key)

    def cosign(self, checkpoint_body: str, timestamp: int) -> str:
        """The cosignature line of the checkpoint whose note text is ``checkpoint_body``, made
        at ``timestamp`` (POSIX seconds, 1 to 2^63 - 1: zero would state no time)."""
        if isinstance(timestamp, bool) or not 1 <= timestamp <= MAX_TIMESTAMP:
            raise ValueError(f"a cosignature's timestamp is 1 to 2^63 - 1, not {timestamp}")
        parse_checkpoint(checkpoint_body)
        signature = self._private_key.sign(cosigned_message(checkpoint_body, timestamp))
        stamped = timestamp.to_bytes(TIMESTAMP_SIZE, "big") + signature
        return NoteSignature(self.name, self.key_id, stamped).line()


def parse_signer_key(text: str) -> Cosigner:
    """The cosigner a signer key (:attr:`Cosigner.signer_key`) holds; :class:`ValueError`
    saying what is wrong, never the key."""
    if not text.startswith(SIGNER_KEY_PREFIX):
        raise ValueError(f"a cosigner's signer key starts with {SIGNER_KEY_PREFIX}")
    # Two cuts only: the base64 key may hold '+' itself.
    parts = text[len(SIGNER_KEY_PREFIX) :].split("+", 2)
    if len(parts) != 3 or not is_key_name(parts[0]):
        raise ValueError("a signer key is PRIVATE+KEY+name+hex key ID+base64 key")
    name, hex_id, encoded = parts
    try:
        material = decode_base64(encoded)
    except ValueError:
        raise ValueError("the signer key's key is not base64") from None
    if len(material) != 33 or material[0] != COSIGNATURE_ED25519:
        raise ValueError("not an Ed25519 cosigner key (type 0x04, 32-byte seed)")
    cosigner = Cosigner(name, Ed25519PrivateKey.from_private_bytes(material[1:]))
    if cosigner.key_id.hex() != hex_id:
        raise ValueError("the signer key's key ID is not the one its name and key give")
    return cosigner


def verify_cosignature(line: str, checkpoint_body: str, vkey: str | CosignatureVerifier) -> int:
    """The timestamp of the cosignature ``line`` (``— <name> <base64>``, its newline optional)
    of the checkpoint whose note text is ``checkpoint_body``, once it verifies with ``vkey``.

    :class:`NoteUnverified` when the line is another key's, :class:`MalformedCosignature` when
    it is not a timestamped Ed25519 signature, :class:`NoteSignatureInvalid` when it does not
    verify.
    """
    verifier = vkey if isinstance(vkey, CosignatureVerifier) else cosignature_verifier(vkey)
    signature = parse_signature_line(line.removesuffix("\n"))
    if (signature.name, signature.key_id) != (verifier.name, verifier.key_id):
        raise NoteUnverified(f"the cosignature is not from {verifier.name}")
    if _timestamped(signature.signature) is None:
        raise MalformedCosignature("not a timestamp and an Ed25519 signature")
    timestamp = verifier.timestamp(checkpoint_body, signature.signature)
    if timestamp is None:
        raise NoteSignatureInvalid(f"the cosignature of {verifier.name} does not verify")
    return timestamp
