"""Merkle tree hashing and proofs of RFC 6962 / RFC 9162 section 2.1, over SHA-256.

Leaves and interior nodes hash under different prefixes (0x00, 0x01) so no leaf can pass for a
subtree. Trees are built level by level: an odd node at the end of a level is carried up
unchanged, which yields exactly the RFC's left-heavy tree in O(n) hashes, without recursion.

Provers (:func:`root`, :func:`inclusion_proof`, :func:`consistency_proof`) take the leaf hashes
the caller holds and raise ``ValueError`` on misuse; verifiers answer ``False`` for anything
malformed, because their inputs come from whoever hands over a proof. :class:`TreeBuilder` takes
leaves one at a time and holds only the roots of its complete subtrees, so a million-leaf root
costs a few hundred bytes; :class:`PackedHashes` keeps leaves at 32 bytes each for a
consistency proof over a tree too large to hold as Python objects.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import overload

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(data: bytes) -> bytes:
    """``SHA-256(0x00 || data)``: the hash of one leaf."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 || left || right)``: the hash of an interior node."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _check_leaves(leaf_hashes: Sequence[bytes]) -> None:
    if not isinstance(leaf_hashes, PackedHashes) and any(
        not isinstance(h, bytes) or len(h) != HASH_SIZE for h in leaf_hashes
    ):
        raise ValueError(f"leaf hashes must be {HASH_SIZE}-byte values (see leaf_hash)")


class PackedHashes(Sequence[bytes]):
    """Hashes appended one at a time, stored back to back: 32 bytes each, not a Python object
    of some 70 bytes plus its list slot."""

    def __init__(self) -> None:
        self._data = bytearray()

    def append(self, digest: bytes) -> None:
        if len(digest) != HASH_SIZE:
            raise ValueError(f"a hash is {HASH_SIZE} bytes, not {len(digest)}")
        self._data += digest

    def __len__(self) -> int:
        return len(self._data) // HASH_SIZE

    @overload
    def __getitem__(self, index: int) -> bytes: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[bytes]: ...
    def __getitem__(self, index: int | slice) -> bytes | Sequence[bytes]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return bytes(self._data[index * HASH_SIZE : (index + 1) * HASH_SIZE])


class TreeBuilder:
    """The root of a tree whose leaves arrive one at a time, in O(log n) memory.

    After ``n`` leaves the builder holds one complete subtree per 1 bit of ``n``, largest
    first: exactly the subtrees RFC 6962's recursive split leaves on the tree's left edge, so
    folding them from the right gives the RFC's root.
    """

    def __init__(self) -> None:
        self._subtrees: list[tuple[int, bytes]] = []  # (leaf count, root), largest first
        self.size = 0

    def append(self, leaf_hash: bytes) -> None:
        count, node = 1, leaf_hash
        while self._subtrees and self._subtrees[-1][0] == count:
            left_count, left = self._subtrees.pop()
            count, node = left_count + count, node_hash(left, node)
        self._subtrees.append((count, node))
        self.size += 1

    def root(self) -> bytes:
        if not self._subtrees:
            return EMPTY_ROOT
        node = self._subtrees[-1][1]
        for _, left in reversed(self._subtrees[:-1]):
            node = node_hash(left, node)
        return node


def _subtree_root(leaf_hashes: Sequence[bytes], start: int, end: int) -> bytes:
    tree = TreeBuilder()
    for index in range(start, end):
        tree.append(leaf_hashes[index])
    return tree.root()


def _levels(leaf_hashes: Sequence[bytes]) -> list[list[bytes]]:
    """Every level of the tree, leaves first, root level (one node) last."""
    _check_leaves(leaf_hashes)
    levels = [list(leaf_hashes)]
    while len(levels[-1]) > 1:
        below = levels[-1]
        above = [node_hash(below[i], below[i + 1]) for i in range(0, len(below) - 1, 2)]
        if len(below) % 2:
            above.append(below[-1])
        levels.append(above)
    return levels


def root(leaf_hashes: Sequence[bytes]) -> bytes:
    """The Merkle tree hash of the leaves; the empty tree's is ``SHA-256("")``."""
    _check_leaves(leaf_hashes)
    return _subtree_root(leaf_hashes, 0, len(leaf_hashes))


def inclusion_proof(leaf_hashes: Sequence[bytes], index: int) -> list[bytes]:
    """The audit path of leaf ``index`` (RFC 9162 2.1.3.1), from the leaf's sibling upwards."""
    if not 0 <= index < len(leaf_hashes):
        raise ValueError(f"index {index} is outside a tree of {len(leaf_hashes)} leaves")
    proof = []
    for level in _levels(leaf_hashes)[:-1]:
        sibling = index ^ 1
        # A carried-up last node has no sibling on this level and contributes nothing.
        if sibling < len(level):
            proof.append(level[sibling])
        index //= 2
    return proof


def consistency_proof(leaf_hashes: Sequence[bytes], old_size: int) -> list[bytes]:
    """The proof (RFC 9162 2.1.4.1) that the first ``old_size`` leaves are a prefix of the tree.

    Empty when ``old_size`` is 0 or the whole tree: there is nothing to prove. The RFC's
    SUBPROOF recursion, each node it names hashed from its leaves: those subtrees are
    disjoint, so the whole proof costs one pass over the leaves and O(log n) memory, which
    :class:`PackedHashes` of a million leaves allows.
    """
    if not 0 <= old_size <= len(leaf_hashes):
        raise ValueError(f"old size {old_size} is outside 0..{len(leaf_hashes)}")
    _check_leaves(leaf_hashes)
    if old_size in (0, len(leaf_hashes)):
        return []
    return list(_subproof(leaf_hashes, old_size, 0, len(leaf_hashes), complete=True))


def _subproof(
    leaves: Sequence[bytes], old_size: int, start: int, end: int, *, complete: bool
) -> Iterator[bytes]:
    """SUBPROOF(m, D[start:end], b) of RFC 6962 2.1.2, nodes in the order the RFC lists them."""
    size = end - start
    if old_size == size:
        if not complete:
            yield _subtree_root(leaves, start, end)
        return
    split = 1 << ((size - 1).bit_length() - 1)  # the largest power of two below size
    if old_size <= split:
        yield from _subproof(leaves, old_size, start, start + split, complete=complete)
        yield _subtree_root(leaves, start + split, end)
    else:
        yield from _subproof(leaves, old_size - split, start + split, end, complete=False)
        yield _subtree_root(leaves, start, start + split)


def _is_hash(value: object) -> bool:
    return isinstance(value, bytes) and len(value) == HASH_SIZE


def _is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _hashes(proof: object) -> list[bytes] | None:
    if not isinstance(proof, Sequence) or isinstance(proof, str | bytes | bytearray):
        return None
    items = list(proof)
    return items if all(_is_hash(h) for h in items) else None


def verify_inclusion(
    leaf_hash: bytes, index: int, tree_size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """Whether ``proof`` puts ``leaf_hash`` at ``index`` in the tree of ``tree_size`` and ``root``.

    RFC 9162 2.1.3.2. ``False`` for every malformed input, never an exception.
    """
    path = _hashes(proof)
    if (
        path is None
        or not (_is_hash(leaf_hash) and _is_hash(root))
        or not (_is_size(index) and _is_size(tree_size))
        or index >= tree_size
    ):
        return False
    fn, sn = index, tree_size - 1
    r = leaf_hash
    for p in path:
        if sn == 0:
            return False
        if fn % 2 == 1 or fn == sn:
            r = node_hash(p, r)
            while fn % 2 == 0 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """Whether ``proof`` shows the tree ``old_root`` of ``old_size`` is a prefix of ``new_root``.

    RFC 9162 2.1.4.2, extended to the cases it leaves out: equal sizes need equal roots and an
    empty proof; old size 0 needs the empty tree's root and an empty proof. ``False`` for every
    malformed input, never an exception.
    """
    path = _hashes(proof)
    if (
        path is None
        or not (_is_hash(old_root) and _is_hash(new_root))
        or not (_is_size(old_size) and _is_size(new_size))
        or old_size > new_size
    ):
        return False
    if old_size == 0:
        return not path and old_root == EMPTY_ROOT
    if old_size == new_size:
        return not path and old_root == new_root
    if not path:
        return False
    # When the old tree is a complete subtree its root is the path's start and is not sent.
    if old_size & (old_size - 1) == 0:
        path = [old_root, *path]
    fn, sn = old_size - 1, new_size - 1
    while fn % 2 == 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn % 2 == 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while fn % 2 == 0 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return fr == old_root and sr == new_root and sn == 0
