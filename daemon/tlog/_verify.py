"""Whole-log verification: recompute the tree from the audit lines, check every tile, the
checkpoint's signature and root, and consistency with an older checkpoint
(``docs/spec/transparency.md §8``).

Rules (the contract), in order, first failure decides (``code``):

1. The directory's ``checkpoint`` must open under the pinned log key (``NOTE_*``,
   ``CHECKPOINT_*``; ``CHECKPOINT_MISSING`` without one); so must the ``--since`` checkpoint.
2. The lines are read in bounded chunks from the given files, oldest first; every complete
   line (ending with a newline) is a leaf; the first line must be ``seq`` 1
   (``LOG_UNAVAILABLE``: give the rotated files too). A final line without a newline is never
   a leaf (it was never acknowledged) and is reported as ``torn_tail``.
3. Every full tile (and entry bundle, where present) that the lines complete must exist
   (``TILES_MISSING``) and hold exactly the recomputed bytes (``TILES_EDITED``).
4. When the lines reach the checkpoint's size, the recomputed root must be the signed root
   (``LOG_REWRITTEN``), and the partial tiles of that size must exist and match. Fewer lines
   than the checkpoint's size is ``LOG_CUT_BACK``.
5. ``since``: an older checkpoint larger than the current one is ``LOG_CUT_BACK``; otherwise
   the root recomputed at its size must be its root (``LOG_FORKED``: the log now holds
   different lines than it signed then), and a consistency proof generated from the tiles
   must verify between the two checkpoints (``TILES_EDITED`` if it does not).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from daemon.tlog._checkpoint import Checkpoint, CheckpointError, open_checkpoint
from daemon.tlog._log import CHECKPOINT_FILE
from daemon.tlog._merkle import HASH_SIZE, leaf_hash, verify_consistency
from daemon.tlog._merkle import consistency_proof as make_consistency_proof
from daemon.tlog._note import VerifierKey
from daemon.tlog._tiles import (
    ENTRIES,
    TILE_WIDTH,
    TileDirectory,
    TileEdge,
    TileError,
    TileReader,
    encode_bundle,
    tile_path,
)

CHUNK: Final = 1 << 20
MAX_LINE: Final = 64 * 1024 * 1024


@attrs.frozen
class LogReport:
    verified: bool
    code: str | None = None
    message: str | None = None
    origin: str | None = None
    checkpoint_size: int | None = None
    lines: int = 0
    tiles_checked: int = 0
    since_size: int | None = None
    torn_tail: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": "VERIFIED" if self.verified else "INVALID",
            "code": self.code,
            "message": self.message,
            "origin": self.origin,
            "checkpoint_size": self.checkpoint_size,
            "lines": self.lines,
            "tiles_checked": self.tiles_checked,
            "since_size": self.since_size,
            "torn_tail": self.torn_tail,
        }


class _Failed(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def iter_lines(files: Sequence[Path], torn: list[bool]) -> Iterator[bytes]:
    """Complete lines (without newline) of ``files`` in order; sets ``torn[0]`` when a file
    ends without a newline (that segment is not yielded)."""
    for path in files:
        with path.open("rb") as handle:
            pending = b""
            while chunk := handle.read(CHUNK):
                pending += chunk
                *complete, pending = pending.split(b"\n")
                yield from complete
                if len(pending) > MAX_LINE:
                    raise _Failed("LOG_UNAVAILABLE", f"{path}: a line longer than {MAX_LINE}")
            if pending:
                torn[0] = True


def _open(data: bytes | None, key: VerifierKey, what: str) -> Checkpoint:
    if data is None:
        raise _Failed("CHECKPOINT_MISSING", f"{what}: no checkpoint")
    try:
        return open_checkpoint(data, key).checkpoint
    except CheckpointError as error:
        raise _Failed(error.code, f"{what}: {error}") from None


def verify_directory(
    directory: str | Path,
    files: Sequence[Path],
    log_key: VerifierKey,
    *,
    since: bytes | None = None,
) -> LogReport:
    """Verify a transparency directory against the audit lines in ``files`` (oldest first)."""
    state: dict[str, Any] = {"lines": 0, "tiles": 0, "torn": [False]}
    signed: Checkpoint | None = None
    old: Checkpoint | None = None
    try:
        tiles = TileDirectory(directory)
        signed = _open(tiles.read_file(CHECKPOINT_FILE), log_key, "checkpoint")
        if since is not None:
            old = _open(since, log_key, "since")
            if old.size > signed.size:
                raise _Failed(
                    "LOG_CUT_BACK",
                    f"the log signed size {old.size} before and now only {signed.size}",
                )
        _walk(tiles, files, signed, old, state)
        if old is not None and 0 < old.size < signed.size:
            reader = TileReader(tiles, signed.size)
            proof = make_consistency_proof(reader.node, old.size, signed.size)
            if not verify_consistency(old.size, signed.size, proof, old.root, signed.root):
                raise _Failed("TILES_EDITED", "the tiles do not prove consistency")
    except _Failed as failure:
        return LogReport(
            False,
            failure.code,
            str(failure),
            None if signed is None else signed.origin,
            None if signed is None else signed.size,
            state["lines"],
            state["tiles"],
            None if old is None else old.size,
            state["torn"][0],
        )
    except TileError as error:
        return LogReport(False, "TILES_MISSING", str(error))
    return LogReport(
        True,
        None,
        None,
        signed.origin,
        signed.size,
        state["lines"],
        state["tiles"],
        None if old is None else old.size,
        state["torn"][0],
    )


def _check_tile(
    tiles: TileDirectory, level: int | str, index: int, data: bytes, width: int = TILE_WIDTH
) -> None:
    found = tiles.read(level, index, width)
    if found is None:
        raise _Failed("TILES_MISSING", f"missing {tile_path(level, index, width)}")
    if found != data:
        raise _Failed("TILES_EDITED", f"{tile_path(level, index, width)} differs from the lines")


def _walk(
    tiles: TileDirectory,
    files: Sequence[Path],
    signed: Checkpoint,
    old: Checkpoint | None,
    state: dict[str, Any],
) -> None:
    edge = TileEdge()
    bundles = (tiles.root / "tile" / ENTRIES).is_dir()
    bundle: list[bytes] = []
    first = True
    for line in iter_lines(files, state["torn"]):
        if first:
            first = False
            try:
                seq = json.loads(line).get("seq")
            except (ValueError, AttributeError):
                seq = None
            if seq != 1:
                raise _Failed(
                    "LOG_UNAVAILABLE",
                    f"the first line is seq {seq!r}, not 1: give the rotated files, oldest first",
                )
        index = edge.size
        for level, number, data in edge.append(leaf_hash(line)):
            if edge.size <= signed.size or tiles.read(level, number) is not None:
                _check_tile(tiles, level, number, data)
                state["tiles"] += 1
        if bundles:
            bundle.append(line)
            if len(bundle) == TILE_WIDTH:
                if edge.size <= signed.size:
                    _check_tile(tiles, ENTRIES, index // TILE_WIDTH, encode_bundle(bundle))
                    state["tiles"] += 1
                bundle = []
        state["lines"] = edge.size
        if old is not None and edge.size == old.size and edge.root() != old.root:
            raise _Failed(
                "LOG_FORKED",
                f"the lines up to {old.size} do not hash to the root signed in the --since"
                " checkpoint: the log was rewritten since",
            )
        if edge.size == signed.size:
            if edge.root() != signed.root:
                raise _Failed(
                    "LOG_REWRITTEN",
                    f"the first {signed.size} lines do not hash to the checkpoint's root",
                )
            for level, number, data in edge.partial_tiles():
                _check_tile(tiles, level, number, data, len(data) // HASH_SIZE)
                state["tiles"] += 1
            if bundles and bundle:
                _check_tile(
                    tiles, ENTRIES, edge.size // TILE_WIDTH, encode_bundle(bundle), len(bundle)
                )
    if edge.size < signed.size:
        raise _Failed(
            "LOG_CUT_BACK",
            f"the checkpoint signs {signed.size} lines but the log has only {edge.size}",
        )
