"""The RFC 9162 tree and proofs against independent implementations we do not write
(``docs/spec/transparency.md §1``): pymerkle (roots, inclusion proofs), the Merkle inclusion
verifier inside sigstore, tlog-scales' RFC 9162 proof checkers, and the worked 7-leaf
example of RFC 9162 §2.1.5 (originally RFC 6962 §2.1.3)."""

from __future__ import annotations

import hashlib
import types
import warnings

import pytest
import tlog_scales.tlog as scales
from pymerkle import InmemoryTree
from sigstore._internal import merkle as sigstore_merkle

from daemon.tlog._merkle import (
    EMPTY_ROOT,
    MemoryTree,
    ProofRangeError,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    verify_consistency,
    verify_inclusion,
)

ENTRIES = [b"entry %d" % i for i in range(1100)]
PROOF_SIZES = [*range(1, 66), 127, 128, 129, 255, 256, 257, 511, 513, 1000, 1100]


@pytest.fixture(scope="module")
def ours() -> MemoryTree:
    return MemoryTree.from_entries(ENTRIES)


@pytest.fixture(scope="module")
def reference() -> InmemoryTree:
    tree = InmemoryTree(algorithm="sha256")  # RFC 9162 hashing: 0x00/0x01 prefixes
    for entry in ENTRIES:
        tree.append_entry(entry)
    return tree


def test_roots_of_every_size_1_to_1100_match_pymerkle(
    ours: MemoryTree, reference: InmemoryTree
) -> None:
    assert EMPTY_ROOT == hashlib.sha256(b"").digest() == ours.root(0)
    mismatched = [n for n in range(1, 1101) if ours.root(n) != reference.get_root(n)]
    assert mismatched == []


def test_inclusion_proofs_for_every_index_match_pymerkle(
    ours: MemoryTree, reference: InmemoryTree
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for size in PROOF_SIZES:
            root = ours.root(size)
            for index in range(size):
                proof = inclusion_proof(ours.node, index, size)
                # pymerkle counts leaves from 1 and puts the leaf's own hash first in its path.
                theirs = reference.prove_inclusion(index + 1, size)
                assert theirs.path[1:] == proof, (size, index)
                assert verify_inclusion(leaf_hash(ENTRIES[index]), index, size, proof, root)


def test_sigstore_verifier_accepts_our_inclusion_proofs(ours: MemoryTree) -> None:
    for size in (1, 2, 3, 7, 64, 255, 257, 1000, 1100):
        root = ours.root(size)
        for index in sorted({0, 1 % size, size // 2, size - 2 if size > 1 else 0, size - 1}):
            entry = types.SimpleNamespace(
                _inner=types.SimpleNamespace(
                    inclusion_proof=types.SimpleNamespace(
                        log_index=index,
                        tree_size=size,
                        hashes=inclusion_proof(ours.node, index, size),
                        root_hash=root,
                    ),
                    canonicalized_body=ENTRIES[index],
                )
            )
            sigstore_merkle.verify_merkle_inclusion(entry)  # type: ignore[arg-type]


def test_sigstore_verifier_refuses_a_proof_for_another_index(ours: MemoryTree) -> None:
    proof = inclusion_proof(ours.node, 5, 100)
    entry = types.SimpleNamespace(
        _inner=types.SimpleNamespace(
            inclusion_proof=types.SimpleNamespace(
                log_index=6, tree_size=100, hashes=proof, root_hash=ours.root(100)
            ),
            canonicalized_body=ENTRIES[6],
        )
    )
    with pytest.raises(Exception, match="invalid root hash"):
        sigstore_merkle.verify_merkle_inclusion(entry)  # type: ignore[arg-type]


def test_consistency_proofs_pass_tlog_scales_rfc_checker(ours: MemoryTree) -> None:
    for new in PROOF_SIZES:
        for old in range(1, new + 1):
            if new > 300 and old % 37 and old not in (1, new - 1, new):
                continue
            proof = consistency_proof(ours.node, old, new)
            old_root, new_root = ours.root(old), ours.root(new)
            scales.ConsistencyProof(old, new, proof).check(old_root, new_root)
            assert verify_consistency(old, new, proof, old_root, new_root)


def test_inclusion_proofs_pass_tlog_scales_rfc_checker(ours: MemoryTree) -> None:
    for size in (1, 2, 5, 200, 1100):
        for index in range(size):
            proof = inclusion_proof(ours.node, index, size)
            scales.InclusionProof(index, size, proof).check(
                leaf_hash(ENTRIES[index]), ours.root(size)
            )


def test_rfc9162_worked_example_of_seven_leaves() -> None:
    d = [b"d%d" % i for i in range(7)]
    a, b, c, dd, e, f, j = (leaf_hash(x) for x in d)
    g, h, i = node_hash(a, b), node_hash(c, dd), node_hash(e, f)
    k, l = node_hash(g, h), node_hash(i, j)  # noqa: E741 - the RFC's name
    tree = MemoryTree.from_entries(d)
    assert tree.root() == node_hash(k, l)
    assert inclusion_proof(tree.node, 0, 7) == [b, h, l]
    assert inclusion_proof(tree.node, 3, 7) == [c, g, l]
    assert inclusion_proof(tree.node, 4, 7) == [f, j, k]
    assert inclusion_proof(tree.node, 6, 7) == [i, k]
    assert consistency_proof(tree.node, 3, 7) == [c, dd, g, l]
    assert consistency_proof(tree.node, 4, 7) == [l]
    assert consistency_proof(tree.node, 6, 7) == [i, j, k]
    assert consistency_proof(tree.node, 7, 7) == []


def test_proof_for_another_index_is_refused(ours: MemoryTree) -> None:
    root = ours.root(300)
    proof = inclusion_proof(ours.node, 10, 300)
    assert not verify_inclusion(leaf_hash(ENTRIES[11]), 11, 300, proof, root)
    assert not verify_inclusion(leaf_hash(ENTRIES[10]), 11, 300, proof, root)
    assert not verify_inclusion(leaf_hash(ENTRIES[10]), 10, 300, [*proof, proof[0]], root)
    assert not verify_inclusion(leaf_hash(ENTRIES[10]), 10, 300, proof[:-1], root)


def test_cut_back_tree_fails_consistency(ours: MemoryTree) -> None:
    # A log cut back to 90 leaves and regrown differently is not an extension of size 100.
    regrown = MemoryTree.from_entries([*ENTRIES[:90], *(b"forged %d" % i for i in range(20))])
    proof = consistency_proof(regrown.node, 100, 110)
    assert not verify_consistency(100, 110, proof, ours.root(100), regrown.root(110))
    assert verify_consistency(100, 110, proof, regrown.root(100), regrown.root(110))


def test_out_of_range_proof_requests_are_refused(ours: MemoryTree) -> None:
    with pytest.raises(ProofRangeError):
        inclusion_proof(ours.node, 5, 5)
    with pytest.raises(ProofRangeError):
        inclusion_proof(ours.node, -1, 5)
    with pytest.raises(ProofRangeError):
        consistency_proof(ours.node, 0, 5)
    with pytest.raises(ProofRangeError):
        consistency_proof(ours.node, 6, 5)


def test_malformed_proof_hashes_are_invalid_not_errors(ours: MemoryTree) -> None:
    root = ours.root(8)
    proof = inclusion_proof(ours.node, 3, 8)
    assert not verify_inclusion(leaf_hash(ENTRIES[3]), 3, 8, [*proof[:-1], b"short"], root)
    assert not verify_consistency(4, 8, [b"x" * 31], ours.root(4), root)
    assert not verify_consistency(8, 8, [root], root, root)
    assert verify_consistency(8, 8, [], root, root)
