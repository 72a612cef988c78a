"""The global tree's hashes as C2SP ``tlog-tiles`` stores them, and RFC 6962 roots and proofs
computed from them without ever holding the leaves.

A tile at level ``L`` holds up to 256 consecutive *level hashes*: at level 0 the leaf hashes,
at level ``L`` the Merkle Tree Hash of each full tile at level ``L - 1``, so the level-``L``
hash ``j`` is ``MTH(D[j * 256**L : (j + 1) * 256**L])``. Any aligned perfect subtree is then
the root of at most 128 level hashes, and any range the RFC's proofs name splits into a few
such subtrees: a root or a proof reads O(log n) hashes of a tree of any size.

The hashes are the caller's to store and read (:data:`LevelHashes`); this module only says
which to read and how they combine.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from oanp.audit.merkle import node_hash
from oanp.wire.canonical import canonical_bytes

#: Hashes per full tile, and the factor between levels.
TILE_WIDTH = 256
#: ``level_hashes(level, start, count)``: ``count`` stored level hashes from index ``start``.
LevelHashes = Callable[[int, int, int], Sequence[bytes]]
#: The levels C2SP allows: a tree of 2**64 leaves needs 8.
MAX_LEVEL = 63

_LEVEL = re.compile(r"(0|[1-9][0-9]?)")
_GROUP = re.compile(r"x[0-9]{3}")
_LAST = re.compile(r"[0-9]{3}")
_WIDTH = re.compile(r"[1-9][0-9]{0,2}")


def _perfect_root(hashes: Sequence[bytes]) -> bytes:
    """The root of a perfect binary tree over ``hashes`` (a power of two of them)."""
    level = list(hashes)
    while len(level) > 1:
        level = [node_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def tile_root(hashes: Sequence[bytes]) -> bytes:
    """The level hash above a full tile: the root of its 256 hashes."""
    if len(hashes) != TILE_WIDTH:
        raise ValueError(f"a full tile holds {TILE_WIDTH} hashes, not {len(hashes)}")
    return _perfect_root(hashes)


def _perfect(read: LevelHashes, start: int, size: int) -> bytes:
    """``MTH(D[start : start + size])`` for ``size`` a power of two and ``start`` a multiple
    of it: the root of ``size / 256**level`` level hashes, at the highest level that holds it."""
    level = 0
    while size % (TILE_WIDTH ** (level + 1)) == 0:
        level += 1
    unit: int = TILE_WIDTH**level
    return _perfect_root(read(level, start // unit, size // unit))


def subtree_hash(read: LevelHashes, start: int, end: int) -> bytes:
    """``MTH(D[start:end])`` of RFC 6962 for the ranges its proofs name: ``start`` a multiple
    of the largest power of two below ``end - start`` (every range of a proof from 0 is)."""
    if not 0 <= start < end:
        raise ValueError(f"no leaves in [{start}, {end})")
    size = end - start
    if size & (size - 1) == 0:
        return _perfect(read, start, size)
    split = 1 << ((size - 1).bit_length() - 1)  # the largest power of two below size
    return node_hash(_perfect(read, start, split), subtree_hash(read, start + split, end))


def root_hash(read: LevelHashes, size: int) -> bytes | None:
    """The root of the tree's first ``size`` leaves; ``None`` for the empty tree, whose root
    (SHA-256 of nothing) the caller spells as it needs."""
    return subtree_hash(read, 0, size) if size else None


def inclusion_proof(read: LevelHashes, index: int, size: int) -> list[bytes]:
    """RFC 6962 section 2.1.1 ``PATH(index, D[0:size])``, leaf side first."""
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of {size}")
    return _path(read, index, 0, size)


def _path(read: LevelHashes, index: int, start: int, end: int) -> list[bytes]:
    if end - start == 1:
        return []
    split = 1 << ((end - start - 1).bit_length() - 1)
    if index < start + split:
        return [*_path(read, index, start, start + split), subtree_hash(read, start + split, end)]
    return [*_path(read, index, start + split, end), subtree_hash(read, start, start + split)]


def consistency_proof(read: LevelHashes, old: int, new: int) -> list[bytes]:
    """RFC 6962 section 2.1.2 ``PROOF(old, D[0:new])``: empty when ``old`` is 0 or ``new``."""
    if not 0 <= old <= new:
        raise ValueError(f"no proof from {old} to {new}")
    if old in (0, new):
        return []
    return _subproof(read, old, 0, new, complete=True)


def _subproof(read: LevelHashes, old: int, start: int, end: int, *, complete: bool) -> list[bytes]:
    if old == end - start:
        return [] if complete else [subtree_hash(read, start, end)]
    split = 1 << ((end - start - 1).bit_length() - 1)
    if old <= split:
        return [
            *_subproof(read, old, start, start + split, complete=complete),
            subtree_hash(read, start + split, end),
        ]
    return [
        *_subproof(read, old - split, start + split, end, complete=False),
        subtree_hash(read, start, start + split),
    ]


# Tile paths -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tile:
    """One tile (``level`` 0 to 63) or entry bundle (``level`` ``None``): its index, and its
    width when partial (1 to 255; ``None`` for a full one)."""

    level: int | None
    index: int
    width: int | None = None

    @property
    def count(self) -> int:
        return self.width or TILE_WIDTH

    def path(self) -> str:
        """``tile/<L>/<N>[.p/<W>]`` or ``tile/entries/<N>[.p/<W>]``, ``N`` in 3-digit groups,
        every group but the last prefixed ``x``."""
        digits = f"{self.index:03d}"
        digits = "0" * (-len(digits) % 3) + digits
        groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
        index = "/".join([*(f"x{g}" for g in groups[:-1]), groups[-1]])
        level = "entries" if self.level is None else str(self.level)
        return f"tile/{level}/{index}" + ("" if self.width is None else f".p/{self.width}")


def parse_tile_path(path: str) -> Tile:
    """The tile a path names (after the log's prefix, as :meth:`Tile.path` writes it);
    ``ValueError`` for anything else, leading zeros and stray segments included."""
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != "tile":
        raise ValueError("not a tile path")
    level_text, rest = parts[1], parts[2:]
    width: int | None = None
    if len(rest) >= 2 and rest[-2].endswith(".p"):
        if not _WIDTH.fullmatch(rest[-1]) or int(rest[-1]) >= TILE_WIDTH:
            raise ValueError("a partial tile's width is 1 to 255")
        width = int(rest[-1])
        rest = [*rest[:-2], rest[-2].removesuffix(".p")]
    *groups, last = rest
    if not all(_GROUP.fullmatch(g) for g in groups) or not _LAST.fullmatch(last):
        raise ValueError("a tile index is 3-digit groups, all but the last after an x")
    if groups and groups[0] == "x000":
        raise ValueError("a tile index has no leading zero groups")
    index = int("".join(g[1:] for g in groups) + last)
    if level_text == "entries":
        return Tile(None, index, width)
    if not _LEVEL.fullmatch(level_text) or int(level_text) > MAX_LEVEL:
        raise ValueError("a tile level is 0 to 63")
    return Tile(int(level_text), index, width)


def tile_stored(tile: Tile, size: int) -> bool:
    """Whether a tree of ``size`` leaves holds ``tile``'s hashes: a full tile once complete, a
    partial one of any width the level has reached within it. Level hashes are only ever
    appended, so a partial tile served for an earlier checkpoint stays servable."""
    unit: int = TILE_WIDTH ** (tile.level or 0)
    return tile.index * TILE_WIDTH + tile.count <= size // unit


def tile_of(level: int | None, index: int, size: int) -> Tile:
    """Tile ``index`` of ``level`` (``None`` for an entry bundle) as a tree of ``size`` leaves
    holds it: full once complete, else partial at the one width this size implies,
    ``floor(size / 256**level) mod 256``, the only partial tile a log must serve for a
    checkpoint of that size. ``ValueError`` for a tile the tree does not reach."""
    reached = size // TILE_WIDTH ** (level or 0)
    if index >= 0 and (index + 1) * TILE_WIDTH <= reached:
        return Tile(level, index)
    if index >= 0 and index * TILE_WIDTH < reached:
        return Tile(level, index, reached % TILE_WIDTH)
    raise ValueError(f"a tree of {size} has no tile {index} at level {level}")


def entry_bundle_leaves(data: bytes) -> list[bytes]:
    """The leaves' data an entry bundle holds, each prefixed by its big-endian 16-bit length;
    ``ValueError`` for bytes that do not split so, to the end."""
    leaves, at = [], 0
    while at < len(data):
        if at + 2 > len(data):
            raise ValueError("an entry bundle ends inside a length")
        end = at + 2 + int.from_bytes(data[at : at + 2], "big")
        if end > len(data):
            raise ValueError("an entry bundle ends inside an entry")
        leaves.append(data[at + 2 : end])
        at = end
    return leaves


def leaf_data(session_id: str, seq: int, entry_hash: str) -> bytes:
    """A log entry's leaf in the global tree: JCS of ``{"session_id", "seq", "entry_hash"}``
    (docs/protocol.md §18); the entry hash commits to the whole entry."""
    return canonical_bytes({"session_id": session_id, "seq": seq, "entry_hash": entry_hash})
