"""A party's signing key on disk (docs/protocol.md §17): ``oanp keygen`` writes one as a private
JWK, and ``--signing-key FILE`` of ``oanp negotiate``, ``oanp merchant`` and ``oanp mcp`` reads
it back to sign every envelope the agent sends.

The file holds the private key: it is created readable and writable by its owner only (0600),
and an existing file is replaced only when asked. Only the public JWK leaves this machine: the
commands register it with the arbiter before their first envelope.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from oanp.net.files import write_key_file
from oanp.wire.signing import SigningKey

#: The algorithms a party may sign with, the first the default.
ALGORITHMS = ("Ed25519", "ES256")


class KeyFileError(Exception):
    """A key file that cannot be written or read; the message names the file and says why."""


def generate(alg: str) -> SigningKey:
    """A new private key for ``alg``: Ed25519, or ES256 (ECDSA on P-256)."""
    if alg == "Ed25519":
        return SigningKey.from_cryptography(Ed25519PrivateKey.generate())
    if alg == "ES256":
        return SigningKey.from_cryptography(ec.generate_private_key(ec.SECP256R1()))
    raise ValueError(f"unsupported algorithm {alg!r}: one of {', '.join(ALGORITHMS)}")


def write_signing_key(path: Path, key: SigningKey, *, force: bool = False) -> None:
    """Write ``key`` as a private JWK to ``path``, mode 0600; an existing file is refused
    unless ``force``, which replaces it whole."""
    data = (json.dumps(key.private_jwk(), indent=1) + "\n").encode()
    try:
        write_key_file(path, data, force=force)
    except FileExistsError:
        raise KeyFileError(f"{path} exists: not overwritten (--force replaces it)") from None
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot write it: {exc.strerror or exc}") from None


def read_key_file(path: Path) -> SigningKey:
    """The private key a key file holds; :class:`KeyFileError` saying why for a file that is
    missing, unreadable, not a JWK, a public key only, or a private JWK that is no usable
    Ed25519 or P-256 key."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KeyFileError(f"{path}: no such file (oanp keygen --out FILE makes one)") from None
    except UnicodeDecodeError:
        raise KeyFileError(f"{path}: not a JWK file (not UTF-8 text)") from None
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    try:
        jwk = json.loads(text)
    except ValueError:
        raise KeyFileError(f"{path}: not a JWK file (not JSON)") from None
    if not isinstance(jwk, dict) or "kty" not in jwk:
        raise KeyFileError(f"{path}: not a JWK (expected one JSON object with a kty)")
    if "d" not in jwk:
        raise KeyFileError(
            f"{path}: holds a public key only (no 'd'): signing needs the private JWK "
            "oanp keygen wrote"
        )
    try:
        return SigningKey.from_private_jwk(jwk)
    except ValueError as exc:
        raise KeyFileError(f"{path}: not a usable private key: {exc}") from None


def add_keygen_command(commands: Any) -> None:
    """Register ``keygen`` on the ``oanp`` subparsers."""
    keygen = commands.add_parser(
        "keygen",
        help="make a signing key: the private JWK to a file, the public JWK to stdout",
    )
    keygen.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="FILE",
        help="where to write the private JWK (mode 0600); an existing file is refused",
    )
    keygen.add_argument(
        "--alg", choices=ALGORITHMS, default=ALGORITHMS[0], help="default: %(default)s"
    )
    keygen.add_argument("--force", action="store_true", help="replace an existing FILE")


def keygen_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``oanp keygen``: 0 with the public JWK on one line of ``out``, 2 with a message on
    ``err`` when the file cannot be written."""
    key = generate(args.alg)
    try:
        write_signing_key(args.out, key, force=args.force)
    except KeyFileError as exc:
        print(f"oanp keygen: {exc}", file=err)
        return 2
    print(json.dumps(key.public_jwk(), separators=(",", ":")), file=out)
    print(f"oanp keygen: private {key.alg} key {key.kid} written to {args.out}", file=err)
    return 0
