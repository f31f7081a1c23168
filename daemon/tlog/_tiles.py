"""C2SP ``tlog-tiles`` storage: tile paths, the tree's right edge, tile files
(``docs/spec/transparency.md §4``).

Rules (the contract):

1. Paths. ``tile/<L>/<N>`` for a full tile, ``tile/<L>/<N>.p/<W>`` for a partial one,
   ``tile/entries/<N>[.p/<W>]`` for entry bundles. ``L`` is decimal without leading zeros;
   ``N`` is written in 3-digit groups, every group but the last prefixed with ``x``
   (1234067 → ``x001/x234/067``); ``1 <= W <= 255``. :func:`parse_tile_path` accepts exactly
   the paths :func:`tile_path` writes and refuses everything else with :class:`TileError`.
2. Content. A level-``L`` tile holds consecutive hashes of perfect subtrees of ``256^L``
   leaves (level 0: leaf hashes); hash ``i`` of tile ``N`` at level ``L >= 1`` is the root of
   full tile ``N·256 + i`` of level ``L - 1``. A full tile is 256 hashes (8,192 bytes); a
   partial tile for tree size ``s`` at level ``L`` has ``floor(s / 256^L) mod 256`` hashes and
   is never empty and never hashed into the level above. An entry bundle holds the entries of
   one level-0 tile, each prefixed by its length as a big-endian uint16.
3. :class:`TileEdge` is the tree's right edge: the hashes of the incomplete tile of every
   level. Appending leaf hashes yields the full tiles that became complete (written once,
   immutable); :meth:`TileEdge.partial_tiles` yields the partial tiles of the current size.
4. :class:`TileDirectory` reads every file through :mod:`daemon.tlog._served_files` (rules
   1–5 there: walked from the directory without following a link, regular files only, at most
   :data:`MAX_FILE_BYTES` for a tile or bundle); a file that is absent or refused reads as
   none (``None``). It writes a tile file atomically (a temporary file in the same
   directory, then ``rename``: a reader sees a whole file or none), ``fsync``-ing the file and
   its directory when asked. A full tile or bundle that already exists is compared, never
   overwritten: different bytes raise :class:`TileMismatch`.
5. :class:`TileReader` is a node source (:mod:`daemon.tlog._merkle` rule 2) for one tree size
   over a directory: it reads the full tile, or the partial tile of exactly that size's width,
   and checks every tile's length. A missing or short tile raises :class:`TileError`.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import hashlib
import itertools
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Final

from daemon.tlog._merkle import HASH_SIZE, reduce_perfect, root_from_perfect_subtrees
from daemon.tlog._served_files import NotServed, open_parent, read_regular
from daemon.wire._errors import PeerError

TILE_HEIGHT: Final = 8
TILE_WIDTH: Final = 1 << TILE_HEIGHT
FULL_TILE_BYTES: Final = TILE_WIDTH * HASH_SIZE
#: ``tile/entries/...``: entries of a bundle are length-prefixed by a uint16.
MAX_ENTRY_BYTES: Final = 0xFFFF
#: The largest file of the layout, a full entry bundle: what a read of one may return.
MAX_FILE_BYTES: Final = TILE_WIDTH * (2 + MAX_ENTRY_BYTES)
#: The largest tile index a path may name (rule 1): what a tree of 2^63 leaves needs, and
#: the length of the longest path, so a request's text is bounded before it is converted.
MAX_INDEX: Final = (1 << 63) - 1
_MAX_PATH_CHARS: Final = len(f"tile/entries/{'x000/' * 6}000.p/255")
ENTRIES: Final = "entries"
_sha256 = hashlib.sha256

#: ``rows(level, index)``: the :func:`tile_rows` of one tile.
TileRows = Callable[[int, int], list[list[bytes]]]


class TileError(PeerError):
    """A tile path is malformed, or a tile is missing, short or not a whole number of hashes."""


class TileMismatch(TileError):
    """An existing immutable tile (or bundle) differs from the bytes the tree requires."""


# --------------------------------------------------------------------------- paths


def _index_path(index: int) -> str:
    groups = [f"{index % 1000:03d}"]
    index //= 1000
    while index:
        groups.append(f"x{index % 1000:03d}")
        index //= 1000
    return "/".join(reversed(groups))


def tile_path(level: int | str, index: int, width: int = TILE_WIDTH) -> str:
    """The path of a tile (``level`` an int) or entry bundle (``level == "entries"``)."""
    if not 0 <= index <= MAX_INDEX or not 1 <= width <= TILE_WIDTH:
        raise TileError(f"no tile with index {index} and width {width}")
    if level != ENTRIES and (type(level) is not int or not 0 <= level <= 63):
        raise TileError(f"no tile level {level!r}")
    path = f"tile/{level}/{_index_path(index)}"
    return path if width == TILE_WIDTH else f"{path}.p/{width}"


_PATH_RE: Final = re.compile(
    r"tile/(?P<level>entries|0|[1-9][0-9]?)/(?P<groups>(?:x[0-9]{3}/)*)(?P<last>[0-9]{3})"
    r"(?:\.p/(?P<width>[1-9][0-9]{0,2}))?"
)


def parse_tile_path(path: str) -> tuple[int | str, int, int]:
    """``(level, index, width)`` of a path written by :func:`tile_path`; the text's length
    is bounded before its numbers are converted."""
    if len(path) > _MAX_PATH_CHARS:
        raise TileError(f"not a tile path (over {_MAX_PATH_CHARS} characters)")
    match = _PATH_RE.fullmatch(path)
    if match is None:
        raise TileError(f"not a tile path: {path!r}")
    groups = [group[1:] for group in match["groups"].split("/") if group]
    if groups and groups[0] == "000":
        raise TileError(f"not a tile path (leading zero group): {path!r}")
    index = int("".join(groups) + match["last"])
    if index > MAX_INDEX:
        raise TileError(f"not a tile path (index over {MAX_INDEX}): {path!r}")
    width = int(match["width"]) if match["width"] else TILE_WIDTH
    if match["width"] and width >= TILE_WIDTH:
        raise TileError(f"not a tile path (partial width {width}): {path!r}")
    level: int | str = ENTRIES if match["level"] == ENTRIES else int(match["level"])
    if level != ENTRIES and int(level) > 63:
        raise TileError(f"not a tile path (level {level}): {path!r}")
    return level, index, width


def tile_widths(size: int) -> list[tuple[int, int, int]]:
    """``(level, full tiles, partial width)`` for every level a tree of ``size`` uses."""
    result = []
    level, count = 0, size
    while count:
        full, width = divmod(count, TILE_WIDTH)
        result.append((level, full, width))
        count = full
        level += 1
    return result


# --------------------------------------------------------------------------- bundles


def encode_bundle(entries: Iterable[bytes]) -> bytes:
    """An entry bundle: each entry prefixed by its big-endian uint16 length."""
    parts = []
    for entry in entries:
        if len(entry) > MAX_ENTRY_BYTES:
            raise TileError(f"an entry of {len(entry)} bytes does not fit an entry bundle")
        parts.append(len(entry).to_bytes(2, "big"))
        parts.append(entry)
    return b"".join(parts)


def decode_bundle(data: bytes) -> list[bytes]:
    """The entries of a bundle; a truncated bundle raises :class:`TileError`."""
    entries, offset = [], 0
    while offset < len(data):
        if offset + 2 > len(data):
            raise TileError("entry bundle ends inside a length prefix")
        length = int.from_bytes(data[offset : offset + 2], "big")
        offset += 2
        if offset + length > len(data):
            raise TileError("entry bundle ends inside an entry")
        entries.append(data[offset : offset + length])
        offset += length
    return entries


def split_hashes(data: bytes) -> list[bytes]:
    if len(data) % HASH_SIZE:
        raise TileError(f"a tile of {len(data)} bytes is not a whole number of hashes")
    return [data[i : i + HASH_SIZE] for i in range(0, len(data), HASH_SIZE)]


# --------------------------------------------------------------------------- the right edge


class TileEdge:
    """The tree's right edge: per tile level, the hashes of its incomplete tile."""

    def __init__(self, size: int = 0, partials: Sequence[Sequence[bytes]] = ()) -> None:
        self.size = size
        self.partials: list[list[bytes]] = [list(row) for row in partials]
        expected = [width for _, _, width in tile_widths(size)]
        got = [len(row) for row in self.partials]
        while got and not got[-1]:
            got.pop()
        while expected and not expected[-1]:
            expected.pop()
        if got != expected:
            raise TileError(f"edge widths {got} do not match a tree of size {size}")

    def append(self, leaf: bytes) -> list[tuple[int, int, bytes]]:
        """Add one leaf hash; return the full tiles ``(level, index, data)`` it completed."""
        completed: list[tuple[int, int, bytes]] = []
        level, current = 0, leaf
        count = self.size
        self.size += 1
        while True:
            if level == len(self.partials):
                self.partials.append([])
            row = self.partials[level]
            row.append(current)
            if len(row) < TILE_WIDTH:
                return completed
            completed.append((level, count // TILE_WIDTH, b"".join(row)))
            current = reduce_perfect(row)
            row.clear()
            count //= TILE_WIDTH
            level += 1

    def full_tiles(self, level: int) -> int:
        """How many full tiles level ``level`` has."""
        full: int = self.size // TILE_WIDTH ** (level + 1)
        return full

    def partial_tiles(self) -> list[tuple[int, int, bytes]]:
        """``(level, index, data)`` of every non-empty partial tile of the current size."""
        return [
            (level, self.full_tiles(level), b"".join(row))
            for level, row in enumerate(self.partials)
            if row
        ]

    def root(self) -> bytes:
        """``MTH`` of the whole tree, from the edge alone."""
        subtrees: list[bytes] = []
        for row in reversed(self.partials):
            start = 0
            for bit in range(TILE_HEIGHT - 1, -1, -1):
                if len(row) >> bit & 1:
                    subtrees.append(reduce_perfect(row[start : start + (1 << bit)]))
                    start += 1 << bit
        return root_from_perfect_subtrees(subtrees)


# --------------------------------------------------------------------------- files


class TileDirectory:
    """The tile tree under one directory (the log's static prefix)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._counter = itertools.count()

    def path(self, level: int | str, index: int, width: int = TILE_WIDTH) -> Path:
        return self.root / tile_path(level, index, width)

    def read(self, level: int | str, index: int, width: int = TILE_WIDTH) -> bytes | None:
        """The tile's bytes, or ``None`` if there is no such file (rule 4)."""
        return self.read_file(tile_path(level, index, width))

    def read_file(self, relative: str) -> bytes | None:
        """The bytes of ``root/relative`` (e.g. ``checkpoint``), or ``None`` if it is absent
        or refused (rule 4; ``daemon.tlog._served_files`` rules 1–5)."""
        try:
            return read_regular(self.root, relative, MAX_FILE_BYTES)
        except (FileNotFoundError, NotServed):
            return None

    def write_atomic(
        self, relative: str, data: bytes, *, sync: bool, sync_directory: bool = True
    ) -> Path:
        """Write ``root/relative`` by temporary file and ``rename`` within its directory,
        walked without following a link (:mod:`daemon.tlog._served_files` rule 7: a link
        planted on the way is :class:`NotServed`, an ``OSError`` here, and nothing is
        written); with ``sync`` the file is ``fsync``-ed before the rename and, with
        ``sync_directory``, its directory after."""
        try:
            directory, name = open_parent(self.root, relative)
        except NotServed as refused:
            raise OSError(errno.ELOOP, f"{self.root}: {refused}") from None
        try:
            temporary = f".{name}.tmp-{os.getpid()}-{next(self._counter)}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(temporary, flags, 0o644, dir_fd=directory)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if sync:
                    os.fsync(fd)
            except BaseException:
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=directory)
                raise
            os.close(fd)
            os.replace(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
            if sync and sync_directory:
                os.fsync(directory)
        finally:
            os.close(directory)
        return self.root / relative

    def write_tile(
        self, level: int | str, index: int, data: bytes, *, width: int = TILE_WIDTH, sync: bool
    ) -> None:
        """Write a tile; an existing full tile must hold exactly ``data`` (rule 4)."""
        if width == TILE_WIDTH:
            existing = self.read(level, index)
            if existing is not None:
                if existing != data:
                    raise TileMismatch(f"{tile_path(level, index)} differs from the log's lines")
                return
        self.write_atomic(tile_path(level, index, width), data, sync=sync)


def fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class TileReader:
    """A node source for a tree of ``size`` leaves, reading tiles from ``directory``."""

    def __init__(self, directory: TileDirectory, size: int, *, cache_tiles: int = 64) -> None:
        self.directory = directory
        self.size = size
        self._cache: collections.OrderedDict[tuple[int, int], list[list[bytes]]] = (
            collections.OrderedDict()
        )
        self._cache_tiles = cache_tiles

    def width(self, level: int, index: int) -> int:
        """The width of tile ``(level, index)`` at this size (``TileError`` if it has none)."""
        full = self.size // TILE_WIDTH ** (level + 1)
        if index < full:
            return TILE_WIDTH
        width: int = self.size // TILE_WIDTH**level % TILE_WIDTH
        if index > full or width == 0:
            raise TileError(f"tile {level}/{index} is not part of a tree of size {self.size}")
        return width

    def tile(self, level: int, index: int) -> bytes:
        """The stored hashes of tile ``(level, index)`` at this size, length-checked."""
        width = self.width(level, index)
        found = self.directory.read(level, index, width)
        if found is None:
            raise TileError(f"missing tile {tile_path(level, index, width)}")
        if len(found) != width * HASH_SIZE:
            raise TileError(
                f"tile {tile_path(level, index, width)} has {len(found)} bytes,"
                f" not {width * HASH_SIZE}"
            )
        return found

    def rows(self, level: int, index: int) -> list[list[bytes]]:
        key = (level, index)
        rows = self._cache.get(key)
        if rows is not None:
            self._cache.move_to_end(key)
            return rows
        rows = tile_rows(self.tile(level, index))
        self._cache[key] = rows
        if len(self._cache) > self._cache_tiles:
            self._cache.popitem(last=False)
        return rows

    def node(self, level: int, index: int) -> bytes:
        return node_from_tiles(self.rows, level, index)


def tile_rows(data: bytes) -> list[list[bytes]]:
    """A tile's stored hashes (row 0) and every complete node above them inside the tile:
    ``rows[r][i]`` is the root over stored hashes ``[i·2^r, (i+1)·2^r)``."""
    rows = [split_hashes(data)]
    while len(rows[-1]) >= 2:
        below = rows[-1]
        rows.append(
            [
                _sha256(b"\x01" + below[i] + below[i + 1]).digest()
                for i in range(0, len(below) - 1, 2)
            ]
        )
    return rows


def node_from_tiles(rows_of: TileRows, level: int, index: int) -> bytes:
    """``node(level, index)`` from the tile holding it: tile level ``level // 8``, row
    ``level % 8`` of that tile's :func:`tile_rows`."""
    tile_level, height = divmod(level, TILE_HEIGHT)
    number, offset = divmod(index << height, TILE_WIDTH)
    rows = rows_of(tile_level, number)
    position = offset >> height
    if height >= len(rows) or position >= len(rows[height]):
        raise TileError(f"tile {tile_level}/{number} does not cover node {level}/{index}")
    return rows[height][position]


def iter_full_tiles(size: int) -> Iterator[tuple[int, int]]:
    """``(level, index)`` of every full tile of a tree of ``size`` leaves."""
    for level, full, _ in tile_widths(size):
        for index in range(full):
            yield level, index


__all__ = [
    "ENTRIES",
    "FULL_TILE_BYTES",
    "MAX_ENTRY_BYTES",
    "MAX_FILE_BYTES",
    "MAX_INDEX",
    "TILE_HEIGHT",
    "TILE_WIDTH",
    "TileDirectory",
    "TileEdge",
    "TileError",
    "TileMismatch",
    "TileReader",
    "decode_bundle",
    "encode_bundle",
    "fsync_directory",
    "iter_full_tiles",
    "node_from_tiles",
    "parse_tile_path",
    "split_hashes",
    "tile_path",
    "tile_rows",
    "tile_widths",
]
