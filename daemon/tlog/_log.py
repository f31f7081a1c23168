"""The transparency log beside the audit log: tiles, entry bundles and signed checkpoints kept
in step with the audit lines (``docs/spec/transparency.md §6``).

Rules (the contract):

1. Leaves. Audit line ``seq`` (its exact bytes without the newline) is leaf ``seq - 1``.
   :meth:`TransparencyLog.append` takes lines that are already durable in the audit log, in
   order, and hashes them into the tree; full tiles (and, with ``entry_bundles``, full entry
   bundles) are written as they complete, in the same group commit, ``fsync``-ed when ``sync``.
2. Checkpoints. :meth:`TransparencyLog.sign_checkpoint` writes the partial tiles (and partial
   bundle) of the current size, then the signed checkpoint to ``checkpoint`` atomically, in
   that order, so a published checkpoint never names tiles that are not on disk.
   :meth:`TransparencyLog.checkpoint_due` rate-limits signing to one per ``interval``.
3. Proofs are served only for sizes up to the latest signed checkpoint and read only tile
   files (never the edge being appended to), so a proof request never races a commit.
4. Start-up (:meth:`TransparencyLog.open`), in order, first failure decides
   (:class:`TransparencyError`, ``code``): the checkpoint, if any, must verify under the
   configured key and origin (``CHECKPOINT_KEY``); it must not be larger than the audit log
   (``LOG_CUT_BACK``); the partial tiles of its size must exist and reproduce its root
   (``TILES_BROKEN``); the level-0 tile holding its last leaf must match the audit lines
   (``LOG_REWRITTEN``). Then the lines after it are appended (existing full tiles must hold
   the same bytes, else ``TILES_BROKEN``) and a checkpoint for the whole log is signed.
   Without a checkpoint the tree is rebuilt from line 1.
5. Failure while running. :meth:`TransparencyLog.commit` and
   :meth:`TransparencyLog.sign_if_due` never raise: a tile, bundle or checkpoint that cannot
   be written (or a line too long for a bundle) sets :attr:`TransparencyLog.failure`, after
   which nothing more is appended or signed in this run. The audit lines are unaffected; the
   next start rehashes them from the last checkpoint (rule 4).
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Final

from daemon.schema._tables import TransparencyTable, default_of
from daemon.tlog._checkpoint import Checkpoint, CheckpointError, open_checkpoint
from daemon.tlog._merkle import (
    HASH_SIZE,
    ProofRangeError,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    tree_root,
)
from daemon.tlog._note import SignerKey
from daemon.tlog._tiles import (
    ENTRIES,
    MAX_ENTRY_BYTES,
    TILE_WIDTH,
    TileDirectory,
    TileEdge,
    TileError,
    TileMismatch,
    decode_bundle,
    encode_bundle,
    fsync_directory,
    node_from_tiles,
    split_hashes,
    tile_path,
    tile_rows,
    tile_widths,
)
from daemon.wire import _logs as logs
from daemon.wire._errors import ServiceError

CHECKPOINT_FILE: Final = "checkpoint"
#: The ``[transparency] checkpoint_interval`` default (the schema's).
DEFAULT_INTERVAL: Final[float] = default_of(TransparencyTable, "checkpoint_interval")

#: ``lines(first_seq)``: the audit lines (without newline) from ``first_seq`` on, in order.
LineSource = Callable[[int], Iterable[bytes]]


class TransparencyError(ServiceError):
    """The transparency log cannot start or continue; ``code`` says why (rule 4)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class _SharedTiles:
    """Tiles by ``(level, index, width)`` with their inner nodes (:func:`tile_rows`), read
    from files, in a bounded LRU; thread-safe (a tile file never changes once renamed into
    place, so a cached tile is never stale)."""

    def __init__(self, directory: TileDirectory, capacity: int = 256) -> None:
        self.directory = directory
        self.capacity = capacity
        self._tiles: collections.OrderedDict[tuple[int, int, int], list[list[bytes]]] = (
            collections.OrderedDict()
        )
        self._lock = threading.Lock()

    def raw(self, level: int, index: int, width: int) -> bytes:
        data = self.directory.read(level, index, width)
        if data is None or len(data) != width * HASH_SIZE:
            raise TileError(f"tile {tile_path(level, index, width)} is missing or short")
        return data

    def rows(self, level: int, index: int, width: int) -> list[list[bytes]]:
        key = (level, index, width)
        with self._lock:
            found = self._tiles.get(key)
            if found is not None:
                self._tiles.move_to_end(key)
                return found
        rows = tile_rows(self.raw(level, index, width))
        with self._lock:
            self._tiles[key] = rows
            if len(self._tiles) > self.capacity:
                self._tiles.popitem(last=False)
        return rows

    def source(self, size: int) -> Callable[[int, int], bytes]:
        """A ``node(level, index)`` for a tree of ``size`` leaves."""

        def rows_of(level: int, index: int) -> list[list[bytes]]:
            full = size // TILE_WIDTH ** (level + 1)
            width = TILE_WIDTH if index < full else size // TILE_WIDTH**level % TILE_WIDTH
            return self.rows(level, index, width)

        def node(level: int, index: int) -> bytes:
            return node_from_tiles(rows_of, level, index)

        return node


class TransparencyLog:
    """Tiles and checkpoints for one audit log. Not thread-safe for writers: one writer
    (the audit log's) calls :meth:`append` and :meth:`sign_checkpoint`; any thread may call
    the proof methods and read :attr:`checkpoint_note`."""

    def __init__(
        self,
        directory: Path,
        signer: SignerKey,
        *,
        sync: bool = True,
        entry_bundles: bool = False,
        interval: float = DEFAULT_INTERVAL,
    ) -> None:
        self.directory = directory
        self.tiles = TileDirectory(directory)
        self.signer = signer
        self.origin = signer.name
        self.sync = sync
        self.entry_bundles = entry_bundles
        self.interval = interval
        self.edge = TileEdge()
        self._bundle: list[bytes] = []
        self._shared = _SharedTiles(self.tiles)
        self.checkpoint_note: bytes | None = None
        self.checkpoint: Checkpoint | None = None
        self._signed_at = float("-inf")
        self._dirty_dirs: set[Path] = set()
        self.signatures = 0
        self.failure: str | None = None

    # -- start-up

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        signer: SignerKey,
        *,
        log_size: int,
        lines: LineSource,
        sync: bool = True,
        entry_bundles: bool = False,
        interval: float = DEFAULT_INTERVAL,
    ) -> TransparencyLog:
        """Recover (rule 4) and sign a checkpoint covering all ``log_size`` audit lines."""
        log = cls(
            Path(directory), signer, sync=sync, entry_bundles=entry_bundles, interval=interval
        )
        log.directory.mkdir(parents=True, exist_ok=True)
        start = log._load_checkpoint(log_size)
        if start:
            log._check_tail(lines)
        try:
            log.append_lines(_take(lines(start + 1), log_size - start, start + 1))
        except TileMismatch as error:
            raise TransparencyError("TILES_BROKEN", str(error)) from None
        except TileError as error:
            raise TransparencyError("LOG_UNAVAILABLE", str(error)) from None
        log.sign_checkpoint()
        return log

    def _load_checkpoint(self, log_size: int) -> int:
        data = self.tiles.read_file(CHECKPOINT_FILE)
        if data is None:
            return 0
        try:
            signed = open_checkpoint(data, self.signer.verifier())
        except CheckpointError as error:
            raise TransparencyError(
                "CHECKPOINT_KEY",
                f"{self.directory / CHECKPOINT_FILE} does not verify under the configured key"
                f" {self.signer.verifier().encode()} ({error.code}: {error})",
            ) from None
        size = signed.checkpoint.size
        if size > log_size:
            raise TransparencyError(
                "LOG_CUT_BACK",
                f"the signed checkpoint covers {size} lines but the audit log has {log_size}:"
                " lines were cut off the log",
            )
        partials: list[list[bytes]] = []
        try:
            for level, full, width in tile_widths(size):
                row: list[bytes] = []
                if width:
                    row = split_hashes(self._shared.raw(level, full, width))
                partials.append(row)
            edge = TileEdge(size, partials)
        except TileError as error:
            raise TransparencyError("TILES_BROKEN", f"{error} (checkpoint size {size})") from None
        if edge.root() != signed.checkpoint.root:
            raise TransparencyError(
                "TILES_BROKEN", f"the tiles of size {size} do not reproduce the signed root"
            )
        self.edge = edge
        self.checkpoint, self.checkpoint_note = signed.checkpoint, data
        if self.entry_bundles and size % TILE_WIDTH:
            bundle = self.tiles.read(ENTRIES, size // TILE_WIDTH, size % TILE_WIDTH)
            self._bundle = [] if bundle is None else decode_bundle(bundle)
        return size

    def _check_tail(self, lines: LineSource) -> None:
        """The level-0 tile holding the checkpoint's last leaf must hash the audit lines."""
        size = self.edge.size
        first = (size - 1) // TILE_WIDTH * TILE_WIDTH
        node = self._shared.source(size)
        for offset, line in enumerate(_take(lines(first + 1), size - first, first + 1)):
            if leaf_hash(line) != node(0, first + offset):
                raise TransparencyError(
                    "LOG_REWRITTEN",
                    f"audit line {first + offset + 1} is not the line the signed tree holds"
                    " (the log was rewritten)",
                )
        if self.entry_bundles and len(self._bundle) != size % TILE_WIDTH:
            self._bundle = list(_take(lines(size - size % TILE_WIDTH + 1), size % TILE_WIDTH, 1))

    # -- the writer side

    @property
    def size(self) -> int:
        return self.edge.size

    def append_lines(self, lines: Iterable[bytes]) -> None:
        """Hash durable audit lines (no newline) into the tree; write completed tiles."""
        for line in lines:
            if self.entry_bundles:
                if len(line) > MAX_ENTRY_BYTES:
                    raise TileError(
                        f"an audit line of {len(line)} bytes does not fit an entry bundle"
                        f" ({MAX_ENTRY_BYTES} bytes at most)"
                    )
                self._bundle.append(line)
            index = self.edge.size
            for level, number, data in self.edge.append(leaf_hash(line)):
                self._write(tile_path(level, number), data, immutable=(level, number))
            if self.entry_bundles and len(self._bundle) == TILE_WIDTH:
                self._write(
                    tile_path(ENTRIES, index // TILE_WIDTH),
                    encode_bundle(self._bundle),
                    immutable=(ENTRIES, index // TILE_WIDTH),
                )
                self._bundle = []
        self._sync_dirs()

    def _write(
        self, relative: str, data: bytes, *, immutable: tuple[int | str, int] | None = None
    ) -> None:
        if immutable is not None:
            existing = self.tiles.read(*immutable)
            if existing is not None:
                if existing != data:
                    raise TileMismatch(f"{relative} differs from the tree of the audit lines")
                return
        target = self.tiles.write_atomic(relative, data, sync=self.sync, sync_directory=False)
        if self.sync:
            self._dirty_dirs.add(target.parent)

    def _sync_dirs(self) -> None:
        if self.sync:
            for path in sorted(self._dirty_dirs):
                fsync_directory(path)
        self._dirty_dirs.clear()

    def commit(self, lines: Iterable[bytes]) -> None:
        """(the audit writer, after the lines are durable) :meth:`append_lines`, never
        raising (rule 5)."""
        if self.failure is not None:
            return
        try:
            self.append_lines(lines)
        except (OSError, TileError) as error:
            self._failed(f"tiles not written: {error}")

    def sign_if_due(self, now: float | None = None) -> bool:
        """Sign a checkpoint if one is due (rule 2); never raising (rule 5)."""
        if self.failure is not None or not self.checkpoint_due(now):
            return False
        try:
            self.sign_checkpoint()
        except (OSError, TileError) as error:
            self._failed(f"checkpoint not signed: {error}")
            return False
        return True

    def seconds_until_due(self) -> float | None:
        """Seconds until an unsigned tree may be signed (``None``: nothing to sign)."""
        if self.failure is not None or (
            self.checkpoint is not None and self.checkpoint.size == self.edge.size
        ):
            return None
        return max(0.0, self._signed_at + self.interval - time.monotonic())

    def _failed(self, message: str) -> None:
        self.failure = message
        sentence = f"transparency log {self.directory}: {message}; no further checkpoint" + (
            " is signed until a restart rebuilds the tiles from the audit lines"
        )
        logs.error("transparency_failed", sentence, directory=str(self.directory), reason=message)

    def checkpoint_due(self, now: float | None = None) -> bool:
        """Is there an unsigned leaf and has ``interval`` passed since the last signature?"""
        if self.checkpoint is not None and self.checkpoint.size == self.edge.size:
            return False
        moment = time.monotonic() if now is None else now
        return moment - self._signed_at >= self.interval

    def sign_checkpoint(self) -> bytes:
        """Write this size's partial tiles and a newly signed checkpoint (rule 2)."""
        size = self.edge.size
        for level, number, data in self.edge.partial_tiles():
            self._write(tile_path(level, number, len(data) // HASH_SIZE), data)
        if self.entry_bundles and self._bundle:
            self._write(
                tile_path(ENTRIES, size // TILE_WIDTH, len(self._bundle)),
                encode_bundle(self._bundle),
            )
        self._sync_dirs()
        checkpoint = Checkpoint(self.origin, size, self.edge.root())
        note = checkpoint.sign(self.signer)
        self.tiles.write_atomic(CHECKPOINT_FILE, note, sync=self.sync)
        self.checkpoint, self.checkpoint_note = checkpoint, note
        self._signed_at = time.monotonic()
        self.signatures += 1
        return note

    # -- proofs (any thread)

    def _bounded(self, size: int) -> Callable[[int, int], bytes]:
        signed = 0 if self.checkpoint is None else self.checkpoint.size
        if not 0 < size <= signed:
            raise ProofRangeError(
                f"tree size {size} is not between 1 and the latest checkpoint's size {signed}"
            )
        # The tiles of the latest checkpoint hold every perfect subtree of any smaller tree;
        # a smaller size's own partial tiles exist only if a checkpoint was signed at it.
        return self._shared.source(signed)

    def inclusion_proof(self, index: int, tree_size: int) -> list[bytes]:
        return inclusion_proof(self._bounded(tree_size), index, tree_size)

    def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        node = self._bounded(new_size)
        return consistency_proof(node, old_size, new_size)

    def root(self, size: int) -> bytes:
        return tree_root(self._bounded(size), size)


def _take(lines: Iterable[bytes], count: int, first_seq: int) -> Iterator[bytes]:
    """Exactly ``count`` lines, else :class:`TransparencyError` (the log is shorter)."""
    taken = 0
    if count <= 0:
        return
    for line in lines:
        yield line
        taken += 1
        if taken == count:
            return
    raise TransparencyError(
        "LOG_UNAVAILABLE",
        f"audit lines {first_seq}..{first_seq + count - 1} are needed to rebuild the tree"
        f" but only {taken} could be read",
    )
