"""A client of a log served as C2SP ``tlog-tiles`` (c2sp.org/tlog-tiles): its checkpoint, its
tiles and its entry bundles over HTTP, the tiles read as :mod:`oanp.tlog.tree` asks for level
hashes.

Nothing fetched is trusted. The caller verifies the checkpoint's note; every hash read from a
tile goes into a root or a proof checked against that checkpoint; an entry bundle only says
where to look for a leaf, which an inclusion proof then shows or not. Tiles are read at the
widths the checkpoint's size implies (:func:`oanp.tlog.tree.tile_of`), each once; a partial tile
the log no longer serves is read from its full tile, which a grown log serves instead.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TYPE_CHECKING, Any

from oanp.audit.merkle import HASH_SIZE, leaf_hash
from oanp.tlog.note import MAX_NOTE_BYTES
from oanp.tlog.tree import TILE_WIDTH, Tile, entry_bundle_leaves, tile_of

if TYPE_CHECKING:
    import httpx

#: Seconds a read of the log may wait for each step (connect, each chunk).
TIMEOUT_SECONDS = 20.0
#: A full tile's bytes, and the most an entry bundle may hold: 256 leaves of up to 64 KiB.
MAX_TILE_BYTES = TILE_WIDTH * HASH_SIZE
MAX_ENTRY_BUNDLE_BYTES = TILE_WIDTH * (2 + 0xFFFF)
#: A discovery document is small; this bounds what a stray URL can make the client read.
MAX_DOCUMENT_BYTES = 1 << 20
#: Entry bundles fetched at once while scanning the log for leaves.
SCAN_THREADS = 8


class LogUnavailable(Exception):
    """The log cannot be read: unreachable, or an answer that is not the document asked for
    (a status other than 200, a body over its bound). The message names the URL and why."""


class TileMissing(Exception):
    """The log does not serve a tile that its checkpoint's size implies, or serves one of the
    wrong length: the log fails to show what it signed."""

    def __init__(self, tile: Tile, reason: str) -> None:
        super().__init__(f"{tile.path()}: {reason}")
        self.tile = tile


class LogClient:
    """GETs under a log's prefix (``--log URL``, e.g. ``https://host/oanp/v0.1/log``), and of
    other documents of the same server; thread-safe, as httpx's client is."""

    def __init__(
        self,
        url: str,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = TIMEOUT_SECONDS,
    ) -> None:
        # Here, not at the top: `oanp` starts without the network stack, which only a command
        # that reads a log needs.
        import httpx

        self.url = url.rstrip("/")
        self._http = httpx.Client(
            timeout=timeout, follow_redirects=True, transport=transport, trust_env=False
        )

    def __enter__(self) -> LogClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def get(self, url: str, limit: int) -> bytes | None:
        """The body of ``url``; ``None`` for a 404; :class:`LogUnavailable` for anything else
        but a 200, for a body over ``limit`` bytes, or for a server that cannot be reached."""
        import httpx

        try:
            with self._http.stream("GET", url) as response:
                if response.status_code == 404:
                    return None
                if response.status_code != 200:
                    raise LogUnavailable(f"{url}: HTTP {response.status_code}")
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > limit:
                        raise LogUnavailable(f"{url}: more than {limit} bytes")
                return bytes(body)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise LogUnavailable(f"{url}: {exc or type(exc).__name__}") from None

    def checkpoint(self) -> bytes:
        """The log's latest checkpoint, as served (a note, not yet verified)."""
        url = f"{self.url}/checkpoint"
        found = self.get(url, MAX_NOTE_BYTES)
        if found is None:
            raise LogUnavailable(f"{url}: no checkpoint (404): no log there, or none signed yet")
        return found

    def document(self, url: str) -> Any:
        """A JSON document of the same server, e.g. its ``/.well-known/oanp.json``."""
        found = self.get(url, MAX_DOCUMENT_BYTES)
        if found is None:
            raise LogUnavailable(f"{url}: not found (404)")
        try:
            return json.loads(found)
        except ValueError:
            raise LogUnavailable(f"{url}: not JSON") from None

    def tile(self, tile: Tile) -> bytes:
        """The bytes of ``tile``, as the log serves it for the checkpoint that implies it: a
        partial tile it no longer serves read from the full one, whose first hashes (or
        leaves) are the partial one's. :class:`TileMissing` when it serves neither."""
        limit = MAX_TILE_BYTES if tile.level is not None else MAX_ENTRY_BUNDLE_BYTES
        found = self.get(f"{self.url}/{tile.path()}", limit)
        if found is not None:
            return found
        if tile.width is not None:
            full = self.get(f"{self.url}/{Tile(tile.level, tile.index).path()}", limit)
            if full is not None:
                return _first(tile, full)
        raise TileMissing(tile, "not served (404), though the checkpoint's size implies it")


def _first(tile: Tile, full: bytes) -> bytes:
    """The part of a full tile (or entry bundle) that is ``tile``, a partial one of it."""
    if tile.level is not None:
        return full[: tile.count * HASH_SIZE]
    try:
        leaves = entry_bundle_leaves(full)[: tile.count]
    except ValueError as exc:
        raise TileMissing(Tile(None, tile.index), str(exc)) from None
    return b"".join(len(leaf).to_bytes(2, "big") + leaf for leaf in leaves)


class TileHashes:
    """:data:`oanp.tlog.tree.LevelHashes` of the tree of ``size`` leaves, read from the log's
    tiles at the widths that size implies, each tile fetched once."""

    def __init__(self, client: LogClient, size: int) -> None:
        self.client = client
        self.size = size
        self._tiles: dict[Tile, list[bytes]] = {}

    def __call__(self, level: int, start: int, count: int) -> Sequence[bytes]:
        hashes: list[bytes] = []
        index = start
        while index < start + count:
            tile_hashes = self.hashes(tile_of(level, index // TILE_WIDTH, self.size))
            offset = index % TILE_WIDTH
            take = min(start + count - index, len(tile_hashes) - offset)
            hashes += tile_hashes[offset : offset + take]
            index += take
        return hashes

    def hashes(self, tile: Tile) -> list[bytes]:
        """The hashes ``tile`` holds: :class:`TileMissing` unless the log serves exactly its
        width of them."""
        cached = self._tiles.get(tile)
        if cached is None:
            data = self.client.tile(tile)
            if len(data) != tile.count * HASH_SIZE:
                raise TileMissing(tile, f"{len(data)} bytes, not {tile.count} hashes")
            cached = [data[i : i + HASH_SIZE] for i in range(0, len(data), HASH_SIZE)]
            self._tiles[tile] = cached
        return cached


def entry_leaf_hashes(client: LogClient, tile: Tile) -> list[bytes]:
    """The leaf hashes of the entries an entry bundle holds, as many as its width says."""
    try:
        leaves = entry_bundle_leaves(client.tile(tile))
    except ValueError as exc:
        raise TileMissing(tile, str(exc)) from None
    if len(leaves) != tile.count:
        raise TileMissing(tile, f"{len(leaves)} entries, not {tile.count}")
    return [leaf_hash(leaf) for leaf in leaves]


def find_leaves(client: LogClient, size: int, wanted: Collection[bytes]) -> dict[bytes, int]:
    """The index of each of the ``wanted`` leaf hashes in the tree of ``size``, found in the
    log's entry bundles, read from the first on (several at a time) until every one is found
    or the tree ends. What a bundle says is only where to look: an inclusion proof shows it."""
    found: dict[bytes, int] = {}
    bundles = (size + TILE_WIDTH - 1) // TILE_WIDTH
    if not wanted:
        return found

    def read(index: int) -> list[bytes]:
        return entry_leaf_hashes(client, tile_of(None, index, size))

    with ThreadPoolExecutor(SCAN_THREADS) as pool:
        for first in range(0, bundles, SCAN_THREADS):
            indexes = range(first, min(first + SCAN_THREADS, bundles))
            for index, hashes in zip(indexes, pool.map(read, indexes), strict=True):
                for offset, digest in enumerate(hashes):
                    if digest in wanted and digest not in found:
                        found[digest] = index * TILE_WIDTH + offset
            if len(found) == len(wanted):
                break
    return found
