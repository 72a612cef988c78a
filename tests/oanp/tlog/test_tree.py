"""The tile-backed tree: roots and proofs read from stored level hashes are RFC 6962's, as the
in-memory prover (oanp.audit.merkle) computes them and its verifiers accept, at every size up to
past two full levels; tile paths are C2SP's, and nothing else parses as one."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oanp.audit import merkle
from oanp.tlog.tree import (
    TILE_WIDTH,
    Tile,
    consistency_proof,
    entry_bundle_leaves,
    inclusion_proof,
    parse_tile_path,
    root_hash,
    tile_of,
    tile_root,
    tile_stored,
)


class Stored:
    """Level hashes as a log stores them: leaves at level 0, and above each full tile's root."""

    def __init__(self, leaves: Sequence[bytes]) -> None:
        self.levels: list[list[bytes]] = [list(leaves)]
        while len(self.levels[-1]) >= TILE_WIDTH:
            below = self.levels[-1]
            full = len(below) // TILE_WIDTH
            self.levels.append(
                [tile_root(below[i * TILE_WIDTH : (i + 1) * TILE_WIDTH]) for i in range(full)]
            )
        self.reads = 0

    def __call__(self, level: int, start: int, count: int) -> Sequence[bytes]:
        found = self.levels[level][start : start + count]
        assert len(found) == count, (level, start, count)
        self.reads += count
        return found


def leaves(n: int) -> list[bytes]:
    return [merkle.leaf_hash(hashlib.sha256(str(i).encode()).digest()) for i in range(n)]


SIZES = [1, 2, 3, 7, 8, 255, 256, 257, 511, 512, 700, 65535, 65536, 65537, 70000]
ALL = leaves(70000)
STORED = Stored(ALL)


@pytest.mark.parametrize("size", SIZES)
def test_roots_are_rfc_6962s_and_read_few_hashes(size: int) -> None:
    stored = Stored(ALL[:size])
    assert root_hash(stored, size) == merkle.root(ALL[:size])
    assert stored.reads <= 8 * 255
    assert root_hash(stored, 0) is None


# The in-memory prover hashes every leaf of a tree per proof: slow, so no deadline.
@settings(deadline=None)
@given(data=st.data())
def test_inclusion_proofs_are_the_in_memory_provers(data: st.DataObject) -> None:
    size = data.draw(st.sampled_from(SIZES) | st.integers(1, 70000))
    index = data.draw(st.integers(0, size - 1))
    proof = inclusion_proof(STORED, index, size)
    assert proof == merkle.inclusion_proof(ALL[:size], index)
    assert merkle.verify_inclusion(ALL[index], index, size, proof, merkle.root(ALL[:size]))


@settings(deadline=None)
@given(data=st.data())
def test_consistency_proofs_are_the_in_memory_provers(data: st.DataObject) -> None:
    new = data.draw(st.sampled_from(SIZES) | st.integers(1, 70000))
    old = data.draw(st.integers(0, new))
    proof = consistency_proof(STORED, old, new)
    assert proof == merkle.consistency_proof(ALL[:new], old)
    if old:
        assert merkle.verify_consistency(
            old, new, merkle.root(ALL[:old]), merkle.root(ALL[:new]), proof
        )


def test_misuse_is_refused() -> None:
    with pytest.raises(ValueError, match="not in a tree"):
        inclusion_proof(STORED, 5, 5)
    with pytest.raises(ValueError, match="no proof"):
        consistency_proof(STORED, 6, 5)
    with pytest.raises(ValueError, match="full tile"):
        tile_root(ALL[:255])


@pytest.mark.parametrize(
    ("tile", "path"),
    [
        (Tile(0, 0), "tile/0/000"),
        (Tile(0, 1234067), "tile/0/x001/x234/067"),
        (Tile(2, 5, 17), "tile/2/005.p/17"),
        (Tile(None, 1000, 255), "tile/entries/x001/000.p/255"),
        (Tile(63, 999), "tile/63/999"),
    ],
)
def test_tile_paths_are_c2sps(tile: Tile, path: str) -> None:
    assert tile.path() == path
    assert parse_tile_path(path) == tile


@pytest.mark.parametrize(
    "path",
    [
        "tile/0/1",
        "tile/0/0001",
        "tile/00/000",
        "tile/64/000",
        "tile/0/x000/001",
        "tile/0/001/002",
        "tile/0/000.p/0",
        "tile/0/000.p/256",
        "tile/0/000.p/01",
        "tile/entries/000.p/",
        "tile/x/000",
        "tiles/0/000",
        "tile/0",
    ],
)
def test_anything_else_is_no_tile(path: str) -> None:
    with pytest.raises(ValueError, match="tile"):
        parse_tile_path(path)


def test_a_tree_serves_its_full_tiles_and_the_partial_ones_it_has_reached() -> None:
    # C2SP's example: 70,000 leaves are 273 full level-0 tiles and one of 112, a full level-1
    # tile and one of 17, and a level-2 tile of 1.
    size = 70000
    assert tile_stored(Tile(0, 272), size)
    assert not tile_stored(Tile(0, 273), size)
    assert tile_stored(Tile(0, 273, 112), size)
    assert tile_stored(Tile(0, 273, 111), size)  # served for an earlier checkpoint
    assert not tile_stored(Tile(0, 273, 113), size)
    assert tile_stored(Tile(1, 0), size)
    assert tile_stored(Tile(1, 1, 17), size)
    assert tile_stored(Tile(2, 0, 1), size)
    assert not tile_stored(Tile(2, 0), size)
    assert not tile_stored(Tile(3, 0, 1), size)
    assert tile_stored(Tile(None, 273, 112), size)
    assert not tile_stored(Tile(0, 1, 1), 256)


def test_a_client_reads_each_tile_at_the_width_its_checkpoint_implies() -> None:
    size = 70000  # as above
    assert tile_of(0, 272, size) == Tile(0, 272)
    assert tile_of(0, 273, size) == Tile(0, 273, 112)
    assert tile_of(1, 0, size) == Tile(1, 0)
    assert tile_of(1, 1, size) == Tile(1, 1, 17)
    assert tile_of(2, 0, size) == Tile(2, 0, 1)
    assert tile_of(None, 273, size) == Tile(None, 273, 112)
    assert tile_of(0, 0, 256) == Tile(0, 0)
    for level, index in [(0, 274), (1, 2), (2, 1), (3, 0), (0, -1)]:
        with pytest.raises(ValueError, match="no tile"):
            tile_of(level, index, size)
    for tile in (tile_of(0, 273, size), tile_of(1, 1, size), tile_of(2, 0, size)):
        assert tile_stored(tile, size)


def test_an_entry_bundle_splits_into_its_leaves() -> None:
    leaves = [b"", b"a", b"x" * 300, bytes(65535)]
    data = b"".join(len(leaf).to_bytes(2, "big") + leaf for leaf in leaves)
    assert entry_bundle_leaves(data) == leaves
    assert entry_bundle_leaves(b"") == []
    with pytest.raises(ValueError, match="inside a length"):
        entry_bundle_leaves(data + b"\x00")
    with pytest.raises(ValueError, match="inside an entry"):
        entry_bundle_leaves(data[:-1])
