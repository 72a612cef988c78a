"""RFC 6962 / RFC 9162 Merkle trees: roots, inclusion and consistency proofs."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oanp.audit.merkle import (
    EMPTY_ROOT,
    PackedHashes,
    TreeBuilder,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root,
    verify_consistency,
    verify_inclusion,
)

# certificate-transparency's test leaves and the roots of their first 1..8 leaves.
CT_LEAVES = [
    bytes.fromhex(h)
    for h in [
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    ]
]
CT_ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]


# The RFC's recursive definitions, written as literally as possible, as the reference.


def _split(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def naive_root(hashes: list[bytes]) -> bytes:
    if not hashes:
        return hashlib.sha256(b"").digest()
    if len(hashes) == 1:
        return hashes[0]
    k = _split(len(hashes))
    return node_hash(naive_root(hashes[:k]), naive_root(hashes[k:]))


def naive_path(m: int, hashes: list[bytes]) -> list[bytes]:
    if len(hashes) == 1:
        return []
    k = _split(len(hashes))
    if m < k:
        return [*naive_path(m, hashes[:k]), naive_root(hashes[k:])]
    return [*naive_path(m - k, hashes[k:]), naive_root(hashes[:k])]


def naive_subproof(m: int, hashes: list[bytes], complete: bool) -> list[bytes]:
    n = len(hashes)
    if m == n:
        return [] if complete else [naive_root(hashes)]
    k = _split(n)
    if m <= k:
        return [*naive_subproof(m, hashes[:k], complete), naive_root(hashes[k:])]
    return [*naive_subproof(m - k, hashes[k:], False), naive_root(hashes[:k])]


def _leaves(count: int) -> list[bytes]:
    return [leaf_hash(i.to_bytes(4, "big")) for i in range(count)]


def _flip(value: bytes) -> bytes:
    return bytes([value[0] ^ 1]) + value[1:]


leaf_lists = st.lists(st.binary(max_size=8), min_size=1, max_size=70).map(
    lambda data: [leaf_hash(d) for d in data]
)


def test_hash_prefixes_follow_rfc_6962() -> None:
    assert leaf_hash(b"x") == hashlib.sha256(b"\x00x").digest()
    assert (
        node_hash(b"a" * 32, b"b" * 32) == hashlib.sha256(b"\x01" + b"a" * 32 + b"b" * 32).digest()
    )


def test_empty_tree_root_is_sha256_of_nothing() -> None:
    assert (
        root([])
        == EMPTY_ROOT
        == bytes.fromhex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    )


@pytest.mark.parametrize("size", range(1, 9))
def test_certificate_transparency_roots(size: int) -> None:
    assert root([leaf_hash(d) for d in CT_LEAVES[:size]]).hex() == CT_ROOTS[size - 1]


@given(leaf_lists)
def test_root_matches_the_recursive_definition(hashes: list[bytes]) -> None:
    assert root(hashes) == naive_root(hashes)


def test_root_of_a_large_tree_matches_the_recursive_definition() -> None:
    hashes = _leaves(100_000)
    assert root(hashes) == naive_root(hashes)


def test_a_tree_built_leaf_by_leaf_has_the_root_of_every_prefix() -> None:
    hashes = _leaves(300)
    tree = TreeBuilder()
    assert tree.root() == EMPTY_ROOT
    for n, h in enumerate(hashes, start=1):
        tree.append(h)
        assert (tree.size, tree.root()) == (n, naive_root(hashes[:n])), n


def test_packed_hashes_prove_what_a_list_proves() -> None:
    hashes = _leaves(1000)
    packed = PackedHashes()
    for h in hashes:
        packed.append(h)
    assert len(packed) == 1000
    assert (packed[0], packed[-1], list(packed[3:6])) == (hashes[0], hashes[-1], hashes[3:6])
    assert root(packed) == root(hashes)
    for m in (1, 2, 3, 512, 513, 999):
        assert consistency_proof(packed, m) == consistency_proof(hashes, m) != []
    with pytest.raises(IndexError):
        packed[1000]
    with pytest.raises(ValueError, match="32 bytes"):
        packed.append(b"short")


def test_provers_refuse_what_is_not_a_leaf_hash() -> None:
    with pytest.raises(ValueError, match="32-byte"):
        root([b"raw entry, not hashed"])
    with pytest.raises(ValueError, match="outside"):
        inclusion_proof(_leaves(3), 3)
    with pytest.raises(ValueError, match="outside"):
        consistency_proof(_leaves(3), 4)


@settings(max_examples=60)
@given(leaf_lists)
def test_every_inclusion_proof_verifies_and_binds_leaf_index_and_root(
    hashes: list[bytes],
) -> None:
    n = len(hashes)
    tree_root = root(hashes)
    for index, h in enumerate(hashes):
        proof = inclusion_proof(hashes, index)
        assert proof == naive_path(index, hashes)
        assert verify_inclusion(h, index, n, proof, tree_root)
        assert not verify_inclusion(_flip(h), index, n, proof, tree_root)
        assert not verify_inclusion(h, index, n, proof, _flip(tree_root))
        for other in range(n):
            if other != index and hashes[other] != h:
                assert not verify_inclusion(h, other, n, proof, tree_root)
        assert not verify_inclusion(h, index, n, [*proof, tree_root], tree_root)
        if proof:
            assert not verify_inclusion(h, index, n, proof[:-1], tree_root)
            assert not verify_inclusion(h, index, n, [_flip(proof[0]), *proof[1:]], tree_root)


def test_every_consistency_proof_up_to_40_leaves_verifies() -> None:
    hashes = _leaves(40)
    for n in range(1, 41):
        new_root = root(hashes[:n])
        for m in range(1, n + 1):
            proof = consistency_proof(hashes[:n], m)
            old_root = root(hashes[:m])
            assert proof == naive_subproof(m, hashes[:n], True), (m, n)
            assert verify_consistency(m, n, old_root, new_root, proof), (m, n)
            assert not verify_consistency(m, n, _flip(old_root), new_root, proof), (m, n)
            assert not verify_consistency(m, n, old_root, _flip(new_root), proof), (m, n)
            assert not verify_consistency(m, n, old_root, new_root, [*proof, new_root]), (m, n)
            if proof:
                assert not verify_consistency(m, n, old_root, new_root, proof[:-1]), (m, n)


def test_consistency_from_the_empty_tree() -> None:
    hashes = _leaves(5)
    assert consistency_proof(hashes, 0) == []
    assert verify_consistency(0, 5, EMPTY_ROOT, root(hashes), [])
    assert not verify_consistency(0, 5, root(hashes), root(hashes), [])
    assert not verify_consistency(0, 5, EMPTY_ROOT, root(hashes), [root(hashes)])


def test_certificate_transparency_consistency_proof() -> None:
    # From certificate-transparency's merkle_tree_test: sizes 6 -> 8 over the leaves above.
    hashes = [leaf_hash(d) for d in CT_LEAVES]
    assert [p.hex() for p in consistency_proof(hashes, 6)] == [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ]


garbage = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=4),
    st.binary(max_size=40),
    st.lists(st.binary(min_size=31, max_size=33), max_size=4),
)


@given(garbage, garbage, garbage, garbage, garbage)
def test_verifiers_answer_false_for_garbage(
    a: object, b: object, c: object, d: object, e: object
) -> None:
    assert verify_inclusion(a, b, c, d, e) is False  # type: ignore[arg-type]
    assert verify_consistency(a, b, c, d, e) is False  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("index", "size"), [(-1, 4), (4, 4), (0, 0), (True, 4), (0, -3), (0, 2**80)]
)
def test_verify_inclusion_refuses_out_of_range_positions(index: int, size: int) -> None:
    hashes = _leaves(4)
    proof = inclusion_proof(hashes, 0)
    assert not verify_inclusion(hashes[0], index, size, proof, root(hashes))


@pytest.mark.parametrize(("m", "n"), [(-1, 4), (5, 4), (2, -1), (False, 4), (2, 2**70)])
def test_verify_consistency_refuses_out_of_range_sizes(m: int, n: int) -> None:
    hashes = _leaves(4)
    proof = consistency_proof(hashes, 2)
    assert not verify_consistency(m, n, root(hashes[:2]), root(hashes), proof)


def test_verifiers_refuse_wrong_length_hashes() -> None:
    hashes = _leaves(4)
    proof = inclusion_proof(hashes, 1)
    assert verify_inclusion(hashes[1], 1, 4, proof, root(hashes))
    assert not verify_inclusion(hashes[1][:31], 1, 4, proof, root(hashes))
    assert not verify_inclusion(hashes[1], 1, 4, [*proof[:-1], proof[-1] + b"\x00"], root(hashes))
    assert not verify_inclusion(hashes[1], 1, 4, proof, root(hashes)[:31])
    old = root(hashes[:3])
    cproof = consistency_proof(hashes, 3)
    assert verify_consistency(3, 4, old, root(hashes), cproof)
    assert not verify_consistency(3, 4, old + b"\x00", root(hashes), cproof)
    assert not verify_consistency(3, 4, old, root(hashes), [*cproof[:-1], cproof[-1][:31]])
