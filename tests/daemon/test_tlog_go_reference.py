"""Tiles, roots and proofs against Go's ``golang.org/x/mod/sumdb/tlog``, the reference
implementation of tiled logs (the checksum database's), which C2SP ``tlog-tiles`` was written
from (``docs/spec/transparency.md §1``, ``§4``).

The figures below were printed once by a small Go program over the same 70,000 entries
(``entry 0`` … ``entry 69999``) with ``tlog.StoredHashes``, ``tlog.TreeHash``,
``tlog.NewTiles(8, 0, 70000)`` + ``tlog.ReadTileData`` (only the full tiles and the partial
tiles of size 70,000, with Go's ``tile/8/`` height prefix dropped as C2SP does),
``tlog.ProveRecord`` and ``tlog.ProveTree``; a proof is summarised by its length and the
SHA-256 of its concatenated hashes, the tiles by the SHA-256 of the sorted lines
``<path> <sha256 hex of the tile>``. Go's ``FormatTree`` writes the same three checkpoint
lines with its origin ``go.sum database tree``.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

from daemon.tlog._checkpoint import Checkpoint
from daemon.tlog._log import TransparencyLog
from daemon.tlog._merkle import MemoryTree, consistency_proof, inclusion_proof
from daemon.tlog._note import SignerKey

SIZE = 70_000
GO_ROOTS = {
    1: "773885a613489e24ce2cf76199d6a423f042e4bbf12d7eecee912ef276c65701",
    2: "5a47662fd8a317d96049a3f9f47c55dc67ca66051baa3683dbb19b2fe09a07b0",
    3: "94fbd0dd836f50301692e6d0eade728ee19ec52bfff1606ed807c8575d5aaa19",
    255: "cf66793e6329dff242eb3cee0a6f36ad3e3a196dcc573a1ec775e102be863f1c",
    256: "da6596d95369f5fef322ab8e4e0da3b0b50236aa9c8a3b1d246f7411c9e2e32e",
    257: "5c1fdfe835358022f2392de478dbe053fc130cfe1d3a082879a90cf6bf14bf7e",
    65536: "07b1a377960a4e12e3348d6e9329ae6316a95b02fb1c22e909231b3aa44861a7",
    65537: "b99c570aaf13b96e026383e8e252e69c7142b3ad7e6e0264f3dc10dfd884d8c5",
    70000: "a3920fba7f239a071a9bd10721f1341addefbaededb41c7e24437a9d16bdf00a",
}
GO_TILES = (277, "b4ed529f0d0268ed449ed4aa00e10e6a50a565bde6346485485349f23c53b012")
GO_INCLUSION = {
    (0, 70000): (17, "fb98eb48060be330762ccc3d412141843d1975eda7bdf1c4c840f17416f40775"),
    (12345, 70000): (17, "c2c267fa58479cfddaafb588b128dd83de6fe1b84c1979b8e5651fe0318cd8e6"),
    (65535, 70000): (17, "755554a2b77e2d838c8017af27298b138431dd493ec90adccab66c2936a4a9af"),
    (69999, 70000): (9, "2a8bc48c7658d606eed507c740ee61d87ece2555d453519138390befc347d733"),
    (255, 257): (9, "ce78791d9f7a0592c88f96569bd756a557f2d3f8f39a5c5f917c5c53081cbf2f"),
}
GO_CONSISTENCY = {
    (1, 70000): (17, "fb98eb48060be330762ccc3d412141843d1975eda7bdf1c4c840f17416f40775"),
    (256, 70000): (9, "da8b2d627c05b4aa2372b6ce1e7b2d27edfdb98f6f598347222b94c964f661e7"),
    (65536, 70000): (1, "794b28db0171a2edd112dc902f24a7dfd7c25a2bfe7ccd38b16373b5bf0712a5"),
    (69999, 70000): (10, "b1ee7dbb17201123d923775e884f54794e599afd7e834295936d71ca20bbdb67"),
    (3, 257): (10, "58ee5e387e48e976ca60cf455bff25e85df28a280a519ea022e233c6138825a3"),
}
GO_TREE_NOTE = "go.sum database tree\n70000\no5IPun8jmgcam9EHIfE0Gt3vuu3ttBx+JEN6nRa98Ao=\n"

ENTRIES = [b"entry %d" % i for i in range(SIZE)]


@pytest.fixture(scope="module")
def tree() -> MemoryTree:
    return MemoryTree.from_entries(ENTRIES)


def summary(proof: list[bytes]) -> tuple[int, str]:
    return len(proof), hashlib.sha256(b"".join(proof)).hexdigest()


def test_roots_match_go(tree: MemoryTree) -> None:
    assert {size: tree.root(size).hex() for size in GO_ROOTS} == GO_ROOTS


def test_proofs_match_go(tree: MemoryTree) -> None:
    for (index, size), expected in GO_INCLUSION.items():
        assert summary(inclusion_proof(tree.node, index, size)) == expected
    for (old, new), expected in GO_CONSISTENCY.items():
        assert summary(consistency_proof(tree.node, old, new)) == expected


def test_tile_files_match_go_byte_for_byte(tmp_path: Path) -> None:
    TransparencyLog.open(
        tmp_path,
        SignerKey.generate("example.com/go-vectors"),
        log_size=SIZE,
        lines=lambda first: iter(ENTRIES[first - 1 :]),
        sync=False,
    )
    lines = sorted(
        f"{path.relative_to(tmp_path)} {hashlib.sha256(path.read_bytes()).hexdigest()}"
        for path in (tmp_path / "tile").rglob("*")
        if path.is_file()
    )
    digest = hashlib.sha256(("\n".join(lines) + "\n").encode()).hexdigest()
    assert (len(lines), digest) == GO_TILES


def test_checkpoint_text_matches_go_format_tree() -> None:
    root = bytes.fromhex(GO_ROOTS[SIZE])
    assert Checkpoint("go.sum database tree", SIZE, root).text() == GO_TREE_NOTE
    assert base64.b64decode(GO_TREE_NOTE.split("\n")[2]) == root
