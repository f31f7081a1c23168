"""RFC 9162 Merkle tree hashing, proof generation and proof verification
(``docs/spec/transparency.md §1``).

Rules (the contract):

1. Hashing. A leaf is ``SHA-256(0x00 || entry)``, an interior node
   ``SHA-256(0x01 || left || right)``, the empty tree ``SHA-256("")``; a tree of ``n > 1``
   leaves splits at the largest power of two strictly below ``n``. Nothing is padded.
2. Generation is generic over a *node source*: a callable ``node(level, index)`` returning the
   hash of the perfect subtree that covers leaves ``[index·2^level, (index+1)·2^level)``.
   Tiles (:mod:`daemon.tlog._tiles`) and :class:`MemoryTree` are node sources. A generator
   asks only for nodes that lie entirely inside the tree size it was given.
3. Bounds. :func:`inclusion_proof` requires ``0 <= index < size``; :func:`consistency_proof`
   requires ``0 < old_size <= new_size``; anything else raises :class:`ProofRangeError`
   (the caller's mistake, never a wrong proof).
4. Verification never raises for bad proofs: :func:`verify_inclusion` and
   :func:`verify_consistency` return ``True`` only when the proof recomputes the given
   root(s) exactly and is consumed exactly (RFC 9162 §2.1.3.2 and §2.1.4.2, including the
   rule that a consistency proof between two equal sizes is empty and the roots are equal).
   Hashes that are not 32 bytes make a proof invalid.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from daemon.wire._errors import PeerError

HASH_SIZE: Final = 32
EMPTY_ROOT: Final = hashlib.sha256(b"").digest()

#: ``node(level, index)``: the hash of the perfect subtree at that level and index.
NodeSource = Callable[[int, int], bytes]

_sha256 = hashlib.sha256


class ProofRangeError(PeerError, ValueError):
    """An index or size outside the tree (or out of order) was asked for."""


def leaf_hash(entry: bytes) -> bytes:
    """``SHA-256(0x00 || entry)``."""
    return _sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 || left || right)``."""
    return _sha256(b"\x01" + left + right).digest()


def split_point(size: int) -> int:
    """The largest power of two strictly less than ``size`` (``size >= 2``)."""
    return 1 << ((size - 1).bit_length() - 1)


def reduce_perfect(hashes: Sequence[bytes]) -> bytes:
    """The root of a perfect subtree given its ``2^k`` bottom hashes, in order."""
    level = list(hashes)
    while len(level) > 1:
        level = [
            _sha256(b"\x01" + level[i] + level[i + 1]).digest() for i in range(0, len(level), 2)
        ]
    return level[0]


def root_from_perfect_subtrees(subtrees: Sequence[bytes]) -> bytes:
    """The root of a tree given the hashes of the perfect subtrees its size decomposes into,
    largest (leftmost) first: the right fold ``H(s0, H(s1, ... s_last))``."""
    if not subtrees:
        return EMPTY_ROOT
    accumulator = subtrees[-1]
    for subtree in reversed(subtrees[:-1]):
        accumulator = _sha256(b"\x01" + subtree + accumulator).digest()
    return accumulator


def subtree_hash(node: NodeSource, start: int, end: int) -> bytes:
    """``MTH(D[start:end])`` for ``start`` aligned to the largest power of two ``<= end-start``
    (every range the RFC recursion asks for is), from perfect subtrees."""
    size = end - start
    if size <= 0:
        return EMPTY_ROOT
    parts: list[bytes] = []
    while size:
        level = size.bit_length() - 1
        parts.append(node(level, start >> level))
        start += 1 << level
        size -= 1 << level
    return root_from_perfect_subtrees(parts)


def tree_root(node: NodeSource, size: int) -> bytes:
    """``MTH(D[0:size])``."""
    if size < 0:
        raise ProofRangeError(f"tree size {size} is negative")
    return subtree_hash(node, 0, size)


def inclusion_proof(node: NodeSource, index: int, size: int) -> list[bytes]:
    """``PATH(index, D[0:size])``: sibling hashes from the leaf upward."""
    if not 0 <= index < size:
        raise ProofRangeError(f"leaf index {index} is not in a tree of size {size}")
    proof: list[bytes] = []
    start, end = 0, size
    # Walk down from the root; each step records the sibling, collected top-down.
    while end - start > 1:
        k = split_point(end - start)
        if index - start < k:
            proof.append(subtree_hash(node, start + k, end))
            end = start + k
        else:
            proof.append(subtree_hash(node, start, start + k))
            start += k
    proof.reverse()
    return proof


def consistency_proof(node: NodeSource, old_size: int, new_size: int) -> list[bytes]:
    """``PROOF(old_size, D[0:new_size])`` (empty when the sizes are equal)."""
    if not 0 < old_size <= new_size:
        raise ProofRangeError(
            f"no consistency proof from size {old_size} to size {new_size}"
            " (0 < old_size <= new_size is required)"
        )
    proof: list[bytes] = []
    start, size, m, complete = 0, new_size, old_size, True
    while m != size:
        k = split_point(size)
        if m <= k:
            proof.append(subtree_hash(node, start + k, start + size))
            size = k
        else:
            proof.append(subtree_hash(node, start, start + k))
            start, size, m, complete = start + k, size - k, m - k, False
    if not complete:
        proof.append(subtree_hash(node, start, start + size))
    proof.reverse()
    return proof


def _well_formed(proof: Iterable[object]) -> bool:
    return all(type(item) is bytes and len(item) == HASH_SIZE for item in proof)


def verify_inclusion(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """RFC 9162 §2.1.3.2: does ``proof`` show leaf hash ``leaf`` at ``index`` under ``root``?"""
    if not 0 <= index < size or not _well_formed([leaf, root, *proof]):
        return False
    fn, sn, r = index, size - 1, leaf
    for sibling in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = _sha256(b"\x01" + sibling + r).digest()
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = _sha256(b"\x01" + r + sibling).digest()
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(
    old_size: int, new_size: int, proof: Sequence[bytes], old_root: bytes, new_root: bytes
) -> bool:
    """RFC 9162 §2.1.4.2: is the tree ``(new_size, new_root)`` an append-only extension of
    ``(old_size, old_root)``? Equal sizes need an empty proof and equal roots."""
    if not _well_formed([old_root, new_root, *proof]):
        return False
    if not 0 < old_size <= new_size:
        return False
    if old_size == new_size:
        return not proof and old_root == new_root
    if not proof:
        return False
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = _sha256(b"\x01" + c + fr).digest()
            sr = _sha256(b"\x01" + c + sr).digest()
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = _sha256(b"\x01" + sr + c).digest()
        fn >>= 1
        sn >>= 1
    return fr == old_root and sr == new_root and sn == 0


class MemoryTree:
    """Every node of a tree held in memory (``levels[h][i]`` is ``node(h, i)``); a node source
    for small trees, tests and benchmarks. :meth:`append` adds one leaf hash."""

    def __init__(self, leaf_hashes: Iterable[bytes] = ()) -> None:
        self.levels: list[list[bytes]] = [[]]
        for leaf in leaf_hashes:
            self.append(leaf)

    @classmethod
    def from_entries(cls, entries: Iterable[bytes]) -> MemoryTree:
        return cls(leaf_hash(entry) for entry in entries)

    @property
    def size(self) -> int:
        return len(self.levels[0])

    def append(self, leaf: bytes) -> None:
        level, current = 0, leaf
        while True:
            row = self.levels[level]
            row.append(current)
            if len(row) & 1:
                return
            current = _sha256(b"\x01" + row[-2] + current).digest()
            level += 1
            if level == len(self.levels):
                self.levels.append([])

    def node(self, level: int, index: int) -> bytes:
        return self.levels[level][index]

    def root(self, size: int | None = None) -> bytes:
        return tree_root(self.node, self.size if size is None else size)
