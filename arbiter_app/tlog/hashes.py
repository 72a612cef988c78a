"""The tree's level hashes as stored (:class:`~arbiter_app.log_records.TreeHash`), read as
:mod:`oanp.tlog.tree` asks for them, and appended as the integrator adds leaves."""

from __future__ import annotations

from collections.abc import Sequence

from arbiter_app.log_records import TreeHash
from oanp.tlog.tree import TILE_WIDTH, tile_root


class StoredHashes:
    """:data:`oanp.tlog.tree.LevelHashes` over the stored rows and those a batch is adding:
    what an integration reads before its rows are written, and a proof after."""

    def __init__(self) -> None:
        self.added: dict[tuple[int, int], bytes] = {}

    def __call__(self, level: int, start: int, count: int) -> Sequence[bytes]:
        found = {
            index: self.added[level, index]
            for index in range(start, start + count)
            if (level, index) in self.added
        }
        if len(found) < count:
            rows = TreeHash.objects.filter(
                level=level, index__gte=start, index__lt=start + count
            ).values_list("index", "hash")
            found.update((index, bytes(digest)) for index, digest in rows)
        if len(found) != count:
            raise LookupError(f"the tree holds no level-{level} hashes [{start}, {start + count})")
        return [found[index] for index in range(start, start + count)]

    def append_leaf(self, index: int, digest: bytes) -> None:
        """Leaf ``index``'s hash, and the hash above every tile it completes."""
        level, position = 0, index
        self.added[level, position] = digest
        while (position + 1) % TILE_WIDTH == 0:
            start = position + 1 - TILE_WIDTH
            above = tile_root(self(level, start, TILE_WIDTH))
            level, position = level + 1, position // TILE_WIDTH
            self.added[level, position] = above

    def rows(self) -> list[TreeHash]:
        return [
            TreeHash(level=level, index=index, hash=digest)
            for (level, index), digest in sorted(self.added.items())
        ]
