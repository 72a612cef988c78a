"""The start-up checks of the transparency log: an origin that is no C2SP key name, or a
witness line that is not ``<cosignature verifier key> <URL>``, is an error naming it."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.test import override_settings

from oanp.tlog import Cosigner
from oanp_site.checks import transparency_log

WITNESS = Cosigner("witness.example/w1", Ed25519PrivateKey.from_private_bytes(bytes(32)))


def test_a_good_configuration_passes() -> None:
    with override_settings(
        OANP_LOG_ORIGIN="arbiter.example/oanp-log",
        OANP_WITNESSES=[f"{WITNESS.verifier_key} https://witness.example"],
    ):
        assert transparency_log() == []


@pytest.mark.parametrize(
    ("origin", "witnesses", "error", "says"),
    [
        ("arbiter example/log", [], "oanp.E004", "not a C2SP key name"),
        ("arbiter.example+log", [], "oanp.E004", "not a C2SP key name"),
        ("arbiter.example/log", ["nonsense https://w.example"], "oanp.E005", "'nonsense"),
        ("arbiter.example/log", [WITNESS.verifier_key], "oanp.E005", "no http(s) URL"),
        ("arbiter.example/log", [f"{WITNESS.verifier_key} ftp://w"], "oanp.E005", "no http(s)"),
    ],
)
def test_a_bad_origin_or_witness_is_named(
    origin: str, witnesses: list[str], error: str, says: str
) -> None:
    with override_settings(OANP_LOG_ORIGIN=origin, OANP_WITNESSES=witnesses):
        (found,) = transparency_log()
    assert found.id == error
    assert says in found.msg
