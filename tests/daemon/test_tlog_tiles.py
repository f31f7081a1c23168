"""C2SP tlog-tiles storage and the transparency log's start-up checks
(``docs/spec/transparency.md §4``, ``§6``), tested against tlog-scales, an independent Python
tlog-tiles reader and writer: it reads our tile directories (roots, proofs, entries) and we
read its."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from tlog_scales import backend as scales_backend
from tlog_scales import reader as scales_reader
from tlog_scales import signing as scales_signing
from tlog_scales import writer as scales_writer

from daemon.tlog._checkpoint import open_checkpoint
from daemon.tlog._log import TransparencyError, TransparencyLog
from daemon.tlog._merkle import (
    MemoryTree,
    ProofRangeError,
    consistency_proof,
    inclusion_proof,
    tree_root,
)
from daemon.tlog._note import SignerKey, VerifierKey
from daemon.tlog._tiles import (
    TileDirectory,
    TileError,
    TileReader,
    decode_bundle,
    encode_bundle,
    parse_tile_path,
    tile_path,
    tile_widths,
)

ORIGIN = "example.com/evidenced/test"


def lines_of(count: int, tag: bytes = b"line") -> list[bytes]:
    return [b'{"seq":%d,"event":"%s"}' % (i + 1, tag) for i in range(count)]


def source(lines: list[bytes]):  # type: ignore[no-untyped-def]
    def read(first_seq: int) -> Iterator[bytes]:
        return iter(lines[first_seq - 1 :])

    return read


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def signer() -> SignerKey:
    return SignerKey.generate(ORIGIN)


def test_tile_paths_follow_the_spec_examples() -> None:
    assert tile_path(0, 1234067) == "tile/0/x001/x234/067"
    assert tile_path(1, 5, 17) == "tile/1/005.p/17"
    assert tile_path("entries", 1000) == "tile/entries/x001/000"
    assert tile_widths(70_000) == [(0, 273, 112), (1, 1, 17), (2, 0, 1)]
    cases: list[tuple[int | str, int, int]] = [
        (0, 0, 256),
        (3, 999_999_999, 1),
        ("entries", 1234, 255),
    ]
    for level, index, width in cases:
        assert parse_tile_path(tile_path(level, index, width)) == (level, index, width)


@pytest.mark.parametrize(
    "bad",
    [
        "tile/0/x000/001",  # non-canonical leading group
        "tile/00/001",
        "tile/0/1",
        "tile/0/001.p/256",
        "tile/0/001.p/0",
        "tile/0/001.p/007",
        "tile/64/001",
        "tile/0/001/",
        "../tile/0/001",
    ],
)
def test_non_canonical_tile_paths_are_refused(bad: str) -> None:
    with pytest.raises(TileError):
        parse_tile_path(bad)


def test_entry_bundles_round_trip_and_refuse_truncation() -> None:
    entries = [b"", b"a", b"x" * 65535]
    data = encode_bundle(entries)
    assert decode_bundle(data) == entries
    with pytest.raises(TileError):
        decode_bundle(data[:-1])
    with pytest.raises(TileError):
        encode_bundle([b"x" * 65536])


def test_tlog_scales_reads_our_tiles_checkpoint_proofs_and_entries(
    tmp_path: Path, signer: SignerKey
) -> None:
    lines = lines_of(65_536 + 257)
    log = TransparencyLog.open(
        tmp_path, signer, log_size=0, lines=source(lines), sync=False, entry_bundles=True
    )
    memory = MemoryTree.from_entries(lines)
    sizes = [1, 255, 256, 257, 4000, 65_536, 65_536 + 257]
    notes = {}
    done = 0
    for size in sizes:
        log.append_lines(lines[done:size])
        done = size
        notes[size] = log.sign_checkpoint()
    theirs = scales_reader.TilesReader(scales_backend.LocalBackend(tmp_path))
    checkpoint = theirs.get_checkpoint()
    checkpoint.verify(scales_signing.Vkey.from_string(signer.verifier().encode()))
    assert checkpoint.size == sizes[-1]
    assert theirs.calculate_root_hash() == checkpoint.root_hash == memory.root()
    for size in sizes:  # the partial tiles of every signed size are still served
        theirs.set_size(size)
        assert theirs.calculate_root_hash() == memory.root(size)
        for index in {0, size // 3, size - 1}:
            assert theirs.get_inclusion_proof(index, size).node_hashes == log.inclusion_proof(
                index, size
            )
    theirs.set_size(sizes[-1])
    for old in sizes:
        assert theirs.get_consistency_proof(old, sizes[-1]).node_hashes == (
            log.consistency_proof(old, sizes[-1])
        )
    for index in (0, 255, 256, 65_535, 65_792):
        assert theirs.get_entry(index) == lines[index]


def test_we_read_a_log_written_by_tlog_scales(tmp_path: Path) -> None:
    private = SignerKey.generate("example.org/their-log")
    their_signer = scales_signing.PlainEd25519Signer("example.org/their-log", private.seed)
    writer = scales_writer.TilesWriter.create(tmp_path / "log", "example.org/their-log")
    entries = [b"their entry %d" % i for i in range(700)]
    for entry in entries[:300]:
        writer.add_leaf(entry)
    writer.commit([their_signer])
    for entry in entries[300:]:
        writer.add_leaf(entry)
    writer.commit([their_signer])
    signed = open_checkpoint(
        (tmp_path / "log" / "checkpoint").read_bytes(),
        VerifierKey.parse(private.verifier().encode()),
    )
    assert signed.checkpoint.size == 700
    reader = TileReader(TileDirectory(tmp_path / "log"), 700)
    memory = MemoryTree.from_entries(entries)
    assert tree_root(reader.node, 700) == signed.checkpoint.root == memory.root()
    assert inclusion_proof(reader.node, 123, 700) == inclusion_proof(memory.node, 123, 700)
    assert consistency_proof(reader.node, 300, 700) == consistency_proof(memory.node, 300, 700)
    bundle = TileDirectory(tmp_path / "log").read("entries", 2, 700 - 512)
    assert bundle is not None and decode_bundle(bundle) == entries[512:]


def test_restart_continues_the_tree_and_resigns(tmp_path: Path, signer: SignerKey) -> None:
    lines = lines_of(1000)
    log = TransparencyLog.open(tmp_path, signer, log_size=300, lines=source(lines), sync=False)
    assert log.checkpoint is not None and log.checkpoint.size == 300
    # lines 301..700 were appended (and tiles written) but the daemon died before signing
    log.append_lines(lines[300:700])
    reopened = TransparencyLog.open(
        tmp_path, signer, log_size=1000, lines=source(lines), sync=False
    )
    assert reopened.checkpoint is not None
    assert reopened.checkpoint.size == 1000
    assert reopened.checkpoint.root == MemoryTree.from_entries(lines).root()
    assert reopened.consistency_proof(300, 1000) == consistency_proof(
        MemoryTree.from_entries(lines).node, 300, 1000
    )


def _prepared(tmp_path: Path, signer: SignerKey, count: int = 600) -> list[bytes]:
    lines = lines_of(count)
    TransparencyLog.open(tmp_path, signer, log_size=count, lines=source(lines), sync=False)
    return lines


def _refused(tmp_path: Path, signer: SignerKey, lines: list[bytes], size: int) -> str:
    before = snapshot(tmp_path)
    with pytest.raises(TransparencyError) as caught:
        TransparencyLog.open(tmp_path, signer, log_size=size, lines=source(lines), sync=False)
    assert snapshot(tmp_path) == before  # nothing changed on failure
    return caught.value.code


def test_edited_partial_tile_is_refused(tmp_path: Path, signer: SignerKey) -> None:
    lines = _prepared(tmp_path, signer)
    partial = tmp_path / tile_path(0, 2, 600 - 512)
    data = bytearray(partial.read_bytes())
    data[0] ^= 1
    partial.write_bytes(bytes(data))
    assert _refused(tmp_path, signer, lines, 600) == "TILES_BROKEN"


def test_missing_partial_tile_is_refused(tmp_path: Path, signer: SignerKey) -> None:
    lines = _prepared(tmp_path, signer)
    (tmp_path / tile_path(1, 0, 2)).unlink()
    assert _refused(tmp_path, signer, lines, 600) == "TILES_BROKEN"


def test_edited_full_tile_is_refused_when_the_tree_is_rebuilt(
    tmp_path: Path, signer: SignerKey
) -> None:
    lines = _prepared(tmp_path, signer)
    (tmp_path / "checkpoint").unlink()  # force a rebuild from line 1
    full = tmp_path / tile_path(0, 1)
    full.write_bytes(hashlib.sha256(b"x").digest() * 256)
    assert _refused(tmp_path, signer, lines, 600) == "TILES_BROKEN"


def test_checkpoint_signed_by_another_key_is_refused_at_start(
    tmp_path: Path, signer: SignerKey
) -> None:
    lines = _prepared(tmp_path, signer)
    other = SignerKey.generate(ORIGIN)
    assert _refused(tmp_path, other, lines, 600) == "CHECKPOINT_KEY"


def test_log_cut_back_below_the_checkpoint_is_refused(tmp_path: Path, signer: SignerKey) -> None:
    lines = _prepared(tmp_path, signer)
    assert _refused(tmp_path, signer, lines[:590], 590) == "LOG_CUT_BACK"


def test_rewritten_line_under_the_checkpoint_is_refused(tmp_path: Path, signer: SignerKey) -> None:
    lines = _prepared(tmp_path, signer)
    forged = [*lines[:599], b'{"seq":600,"event":"forged"}']
    assert _refused(tmp_path, signer, forged, 600) == "LOG_REWRITTEN"


def test_missing_lines_for_a_rebuild_are_refused(tmp_path: Path, signer: SignerKey) -> None:
    lines = lines_of(10)
    with pytest.raises(TransparencyError) as caught:
        TransparencyLog.open(tmp_path, signer, log_size=20, lines=source(lines), sync=False)
    assert caught.value.code == "LOG_UNAVAILABLE"


def test_proofs_beyond_the_signed_size_are_refused(tmp_path: Path, signer: SignerKey) -> None:
    lines = lines_of(50)
    log = TransparencyLog.open(tmp_path, signer, log_size=40, lines=source(lines), sync=False)
    log.append_lines(lines[40:])  # appended, not yet signed
    with pytest.raises(ProofRangeError):
        log.inclusion_proof(45, 50)
    with pytest.raises(ProofRangeError):
        log.consistency_proof(10, 41)
    assert len(log.inclusion_proof(39, 40)) == 4


def test_copied_tile_directory_verifies_elsewhere(tmp_path: Path, signer: SignerKey) -> None:
    # A static mirror (any copy of the files) serves the same proofs.
    lines = _prepared(tmp_path / "a", signer)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    reader = TileReader(TileDirectory(tmp_path / "b"), 600)
    assert tree_root(reader.node, 600) == MemoryTree.from_entries(lines).root()
