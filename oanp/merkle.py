"""Merkle tree hashing and proofs of RFC 6962 / RFC 9162 section 2.1, over SHA-256.

Leaves and interior nodes hash under different prefixes (0x00, 0x01) so no leaf can pass for a
subtree. Trees are built level by level: an odd node at the end of a level is carried up
unchanged, which yields exactly the RFC's left-heavy tree in O(n) hashes, without recursion.

Provers (:func:`root`, :func:`inclusion_proof`, :func:`consistency_proof`) take the leaf hashes
the caller holds and raise ``ValueError`` on misuse; verifiers answer ``False`` for anything
malformed, because their inputs come from whoever hands over a proof.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(data: bytes) -> bytes:
    """``SHA-256(0x00 || data)``: the hash of one leaf."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 || left || right)``: the hash of an interior node."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _levels(leaf_hashes: Sequence[bytes]) -> list[list[bytes]]:
    """Every level of the tree, leaves first, root level (one node) last."""
    if any(not isinstance(h, bytes) or len(h) != HASH_SIZE for h in leaf_hashes):
        raise ValueError(f"leaf hashes must be {HASH_SIZE}-byte values (see leaf_hash)")
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
    if not leaf_hashes:
        return EMPTY_ROOT
    return _levels(leaf_hashes)[-1][0]


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

    Empty when ``old_size`` is 0 or the whole tree: there is nothing to prove.
    """
    if not 0 <= old_size <= len(leaf_hashes):
        raise ValueError(f"old size {old_size} is outside 0..{len(leaf_hashes)}")
    if old_size in (0, len(leaf_hashes)):
        return []
    levels = _levels(leaf_hashes)
    # Walk up from the last old leaf. Each level names the node covering the old tree's
    # right edge; its sibling either completes the old root (left) or extends past it (right).
    node = old_size - 1
    height = 0
    # Skip the levels where the right edge is a left-aligned complete subtree of the old tree:
    # its hash is a node of the old tree that the verifier rebuilds from the proof itself.
    while node % 2 == 1:
        node //= 2
        height += 1
    proof = [] if node == 0 else [levels[height][node]]
    for level in levels[height:-1]:
        sibling = node ^ 1
        if sibling < len(level):
            proof.append(level[sibling])
        node //= 2
    return proof


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
