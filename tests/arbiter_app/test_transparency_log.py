"""The transparency log (§18) over HTTP: every committed entry integrated into one tree, in
batches, a checkpoint signed for each; the checkpoint a C2SP signed note that verifies with the
verifier key /.well-known/oanp.json publishes; the tree rebuilt from the tiles served to the
checkpoint's root, entry bundles hashing to the level-0 tiles; a party's inclusion proof of its
entry, and consistency between checkpoints, checked with the RFC 6962 verifiers; and every bad
request a 4xx with its code."""

from __future__ import annotations

import base64
import itertools
import struct
import threading
from typing import Any

import pytest
from django.db import connections, transaction
from django.test import Client
from sigstore._internal.merkle import (
    _chain_border_right,
    _chain_inner,
    _decomp_inclusion_proof,
    _hash_leaf,
)
from sigstore._internal.rekor.checkpoint import SignedCheckpoint

from arbiter_app.log_records import LogCheckpoint, LogKey, LogLeaf, TreeState
from arbiter_app.models import Entry
from arbiter_app.tlog.integrator import Integrated, integrate
from arbiter_app.tlog.keys import log_signer
from oanp.audit import merkle
from oanp.tlog import note_verifier, verify_checkpoint
from oanp.tlog.tree import leaf_data
from tests.oanp.tlog.test_sigstore_reads_checkpoints import outside_key
from tests.support.factories.agents import ClientNegotiation, make_agent

pytestmark = pytest.mark.django_db

LOG = "/oanp/v0.1/log"


@pytest.fixture
def parties() -> tuple[Any, Any]:
    return make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant")


def negotiate(client: Client, parties: tuple[Any, Any], session_id: str) -> None:
    negotiation = ClientNegotiation(client, *parties, session_id, f"{session_id}-")
    negotiation.open()
    negotiation.finish()


def served_checkpoint(client: Client) -> Any:
    vkey = client.get("/.well-known/oanp.json").json()["log"]["verifier_key"]
    response = client.get(f"{LOG}/checkpoint")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    return verify_checkpoint(response.content, [note_verifier(vkey)]).checkpoint


def tile(client: Client, path: str) -> bytes:
    response = client.get(f"{LOG}/{path}")
    assert response.status_code == 200, (path, response.content)
    assert response["Content-Type"] == "application/octet-stream"
    return response.content


def level_zero(client: Client, size: int) -> list[bytes]:
    """Every leaf hash of a tree of ``size``, from its level-0 tiles, full and partial."""
    hashes: list[bytes] = []
    for index in range((size + 255) // 256):
        width = min(256, size - index * 256)
        data = tile(client, f"tile/0/{index:03d}" + ("" if width == 256 else f".p/{width}"))
        hashes += [data[i : i + 32] for i in range(0, len(data), 32)]
    return hashes


def test_every_entry_is_integrated_and_the_served_tree_is_the_checkpoints(
    client: Client, parties
) -> None:
    for n in range(30):  # 270 entries: a full level-0 tile and a level-1 hash
        negotiate(client, parties, f"sess-{n:02d}")
    assert client.get(f"{LOG}/checkpoint").json()["code"] == "not_integrated"
    done = integrate(batch=100)
    assert done.added == 100
    while integrate(batch=100).added:
        pass
    total = Entry.objects.count()
    assert LogLeaf.objects.count() == total > 256
    checkpoint = served_checkpoint(client)
    assert checkpoint.size == total
    leaves = level_zero(client, total)
    assert merkle.root(leaves) == checkpoint.root
    # The level-1 tile holds the root of the full level-0 tile below it.
    assert tile(client, "tile/1/000.p/1") == merkle.root(leaves[:256])
    # Entry bundles: each leaf's data, length-prefixed, hashing to the level-0 tile.
    bundle = tile(client, f"tile/entries/001.p/{total - 256}")
    data, at = [], 0
    while at < len(bundle):
        (length,) = struct.unpack(">H", bundle[at : at + 2])
        data.append(bundle[at + 2 : at + 2 + length])
        at += 2 + length
    assert [merkle.leaf_hash(d) for d in data] == leaves[256:]
    # Full tiles never change; a partial one may give way to its full tile.
    assert "immutable" in client.get(f"{LOG}/tile/0/000")["Cache-Control"]
    assert "immutable" not in client.get(f"{LOG}/tile/0/001.p/{total - 256}")["Cache-Control"]
    # Each batch signed its checkpoint; every two are consistent.
    sizes = sorted(LogCheckpoint.objects.values_list("size", flat=True))
    assert sizes[:2] == [100, 200]
    for old, new in itertools.pairwise(sizes):
        proof = merkle.consistency_proof(leaves[:new], old)
        assert merkle.verify_consistency(
            old, new, merkle.root(leaves[:old]), merkle.root(leaves[:new]), proof
        )


def test_a_party_proves_its_entry_is_in_the_log(client: Client, parties) -> None:
    buyer, merchant = parties
    negotiate(client, parties, "sess-proof")
    proof_path = "/oanp/v0.1/sessions/sess-proof/proof"
    early = client.get(proof_path, {"seq": 9}, headers=buyer.headers)
    assert (early.status_code, early.json()["code"]) == (404, "not_integrated")
    integrate()
    answer = client.get(proof_path, {"seq": 9}, headers=merchant.headers).json()
    assert "checkpoint" in answer, answer
    vkey = client.get("/.well-known/oanp.json").json()["log"]["verifier_key"]
    checkpoint = verify_checkpoint(answer["checkpoint"], [note_verifier(vkey)]).checkpoint
    entry = Entry.objects.get(session__session_id="sess-proof", seq=9)
    leaf = merkle.leaf_hash(leaf_data("sess-proof", 9, entry.entry_hash))
    path = [base64.b64decode(h) for h in answer["inclusion"]]
    assert merkle.verify_inclusion(leaf, answer["index"], checkpoint.size, path, checkpoint.root)
    # Not a party: as if there were no such session. A seq that is not one: 400.
    stranger = make_agent("buyer-002", "buyer")
    assert client.get(proof_path, {"seq": 9}, headers=stranger.headers).status_code == 404
    for seq in ("0", "x", "", "99999999999"):
        bad = client.get(proof_path, {"seq": seq}, headers=buyer.headers)
        assert (bad.status_code, bad.json()["code"]) == (400, "schema_invalid"), seq
    missing = client.get(proof_path, {"seq": 10}, headers=buyer.headers)
    assert (missing.status_code, missing.json()["code"]) == (404, "not_integrated")


@pytest.mark.parametrize(
    "path",
    [
        "tile/0/001",
        "tile/0/000.p/10",
        "tile/1/000.p/1",
        "tile/entries/000.p/10",
        "tile/0/1",
        "tile/x/000",
        "tile/0/000.p/0",
        "tile/64/000",
    ],
)
def test_a_tile_the_tree_does_not_hold_or_no_tile_at_all_is_404(
    client: Client, parties, path: str
) -> None:
    negotiate(client, parties, "sess-tiles")  # 9 entries
    integrate()
    response = client.get(f"{LOG}/{path}")
    assert (response.status_code, response.json()["code"]) == (404, "tile_not_found")
    assert client.get(f"{LOG}/tile/0/000.p/9").status_code == 200
    assert client.get(f"{LOG}/tile/0/000.p/5").status_code == 200  # for an earlier checkpoint


def test_an_outside_implementation_checks_the_served_checkpoint_and_a_partys_proof(
    client: Client, parties
) -> None:
    """sigstore's readers (its Rekor checkpoint reader and Merkle inclusion chain, kept in its
    ``_internal`` package) check what the server serves, given the published verifier key."""
    buyer, _ = parties
    for n in range(3):
        negotiate(client, parties, f"sess-out-{n}")
    integrate()
    vkey = client.get("/.well-known/oanp.json").json()["log"]["verifier_key"]
    note = client.get(f"{LOG}/checkpoint").content.decode()
    read = SignedCheckpoint.from_text(note)
    read.signed_note.verify(*outside_key(vkey))
    size, root = read.checkpoint.log_size, bytes.fromhex(read.checkpoint.log_hash)
    proof = client.get(
        "/oanp/v0.1/sessions/sess-out-1/proof", {"seq": 4}, headers=buyer.headers
    ).json()
    entry = Entry.objects.get(session__session_id="sess-out-1", seq=4)
    hashes = [base64.b64decode(h) for h in proof["inclusion"]]
    inner, border = _decomp_inclusion_proof(proof["index"], size)
    assert len(hashes) == inner + border
    seed = _hash_leaf(leaf_data("sess-out-1", 4, entry.entry_hash))
    seed = _chain_inner(seed, hashes[:inner], proof["index"])
    assert _chain_border_right(seed, hashes[inner:]) == root


def test_the_log_signs_with_the_key_the_database_holds(client: Client, parties) -> None:
    first = log_signer()
    LogKey.objects.all().delete()  # the database restored to before the key, or emptied
    negotiate(client, parties, "sess-key")
    integrate()
    vkey = client.get("/.well-known/oanp.json").json()["log"]["verifier_key"]
    stored = LogKey.objects.get()
    assert vkey == log_signer().verifier_key != first.verifier_key
    assert bytes(stored.public_key) == log_signer().public_key
    assert served_checkpoint(client).size == Entry.objects.count()


@pytest.mark.django_db(transaction=True)
def test_a_run_that_finds_the_tree_locked_gives_way_to_the_next(client: Client, parties) -> None:
    negotiate(client, parties, "sess-locked")
    integrate(batch=1)  # the tree's row exists
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with transaction.atomic():
            TreeState.objects.select_for_update().get(pk=1)
            held.set()
            release.wait(30)
        connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(30)
        assert integrate() == Integrated(0, None)  # after the lock timeout, not for ever
    finally:
        release.set()
        holder.join(30)
    assert integrate().added == 8  # the next run takes them
