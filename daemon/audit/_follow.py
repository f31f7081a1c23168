"""Following the committed lines of an audit log across its rotated files, and a sink's cursor
into them (``docs/audit-log.md`` "Shipping decision logs").

Rules (the contract):

1. A :class:`Position` is where a reader stands: after the line ``seq`` whose digest is
   ``head`` (``seq`` 0 and :data:`GENESIS` before the first line; a chain that starts in a
   rotated file, ``seq`` one before its first line and that line's ``prev``), the next line
   being at byte ``offset`` of the file whose first line is ``file`` (its ``seq``): the live
   file, or the rotated ``LOG.<first>-<last>``. Named by ``seq`` *and* file, so a position
   survives every rotation: the file is found again by its first ``seq``.
2. :meth:`Follower.read` returns the lines after the position up to ``upto`` (the durable
   ``seq`` the writer published), never one beyond: a line is read only once it is
   committed, so bytes a failed write leaves (and the writer cuts back) are never read. Every
   read is a ``pread`` from the position's offset (nothing is buffered across calls). Each
   line must continue the chain: ``seq`` = position + 1 and ``prev`` = the position's head;
   otherwise :class:`FollowError` (the log was replaced, or the cursor is another log's):
   nothing after it is read.
3. At the end of a file, the next line is in the file that starts with it: the live file
   when its first line has that ``seq`` (looked at first: a rotation links the archive name
   before it renames the next file in), else ``LOG.<seq>-…``. When neither exists though the
   line is committed, the files holding it were removed: the follower continues at the oldest
   file after the gap and counts the lines it could not read (:attr:`Follower.skipped`, and
   the ``on_gap`` call); with no file after it, :class:`FollowError`.
4. The cursor file (:func:`write_cursor`, :func:`read_cursor`): one line sealed like an audit
   line, ``{"format", "sink", "seq", "head", "file", "offset"}``, written atomically
   (temporary file, ``fsync``, ``rename``, directory ``fsync``) and read back only when its
   seal matches and every field has its exact type (else :class:`CursorError`).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from daemon.audit._audit import micros_of
from daemon.audit._audit_files import first_line, fsync_directory, line_ending_at, read_at
from daemon.audit._audit_format import (
    GENESIS,
    MAX_LINE_BYTES,
    AuditLogError,
    is_digest,
    parse_sealed,
    render_line,
)

__all__ = [
    "CURSOR_FORMAT",
    "Chunk",
    "CursorError",
    "FollowError",
    "Follower",
    "Position",
    "read_cursor",
    "write_cursor",
]

CURSOR_FORMAT: Final = "evidenced.audit.sink-cursor/1"
_CHUNK: Final = 1 << 20
#: One read settles at most this many bytes of lines (the selected and the passed-over ones).
_SCAN_BYTES: Final = 4 << 20
_CURSOR_MAX: Final = 4096


class FollowError(AuditLogError):
    """The log does not continue where the reader stands (rule 2), or cannot be found."""


class CursorError(AuditLogError):
    """A cursor file that is not one (rule 4)."""


@attrs.frozen
class Position:
    """Rule 1."""

    seq: int
    head: str
    file: int
    offset: int


START: Final = Position(0, GENESIS, 1, 0)


@attrs.frozen
class Chunk:
    """What one :meth:`Follower.read` settled: the ``events`` it selected, the position
    after the last line it read (``end``), how many lines, and the first one's timestamp
    (seconds since the epoch; None without lines)."""

    events: list[bytes]
    end: Position
    lines: int
    first_time: float | None


#: ``select(line, fields)``: the event to ship for a line (bytes), or None to pass it over.
Select = Callable[[bytes, dict[str, Any]], bytes | None]


def _archive_pattern(log: Path) -> re.Pattern[str]:
    return re.compile(re.escape(log.name) + r"\.(\d{12})-(\d{12})\Z")


class Follower:
    """Reads the committed lines of the log at ``log`` from ``position`` (module rules). Not
    thread-safe: one thread owns it."""

    def __init__(
        self,
        log: Path,
        position: Position,
        *,
        on_gap: Callable[[int, int, str], None] = lambda first, last, file: None,
    ) -> None:
        self.log = log
        self.position = position
        #: Committed lines that could not be read: their files were removed (rule 3).
        self.skipped = 0
        self.on_gap = on_gap
        self._fd: int | None = None
        self._fd_file = 0
        self._fd_name = ""

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- the files (rule 3)

    def _open_seq(self, path: Path) -> tuple[int, int | None]:
        """(descriptor, the seq of its first line) of ``path``; ``OSError`` if it cannot be
        opened."""
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            first = first_line(fd)
            seq = _seq_of(first) if first is not None else None
        except BaseException:
            os.close(fd)
            raise
        return fd, seq

    def _file(self, first_seq: int) -> int | None:
        """The descriptor of the file whose first line is ``first_seq`` (cached), or None."""
        if self._fd is not None and self._fd_file == first_seq:
            return self._fd
        candidates = [self.log]
        pattern = _archive_pattern(self.log)
        with contextlib.suppress(OSError):
            candidates += sorted(
                self.log.with_name(name)
                for name in os.listdir(self.log.parent)
                if (found := pattern.match(name)) is not None and int(found.group(1)) == first_seq
            )
        for path in candidates:
            try:
                fd, seq = self._open_seq(path)
            except OSError:
                continue
            if seq == first_seq:
                self.close()
                self._fd, self._fd_file, self._fd_name = fd, first_seq, path.name
                return fd
            os.close(fd)
        return None

    def _after_gap(self, wanted: int) -> Position | None:
        """Rule 3: the start of the oldest file beyond ``wanted``, None when there is none."""
        pattern = _archive_pattern(self.log)
        firsts: list[tuple[int, Path]] = []
        with contextlib.suppress(OSError):
            for name in os.listdir(self.log.parent):
                found = pattern.match(name)
                if found is not None and int(found.group(1)) > wanted:
                    firsts.append((int(found.group(1)), self.log.with_name(name)))
        with contextlib.suppress(OSError):
            fd, seq = self._open_seq(self.log)
            os.close(fd)
            if seq is not None and seq > wanted:
                firsts.append((seq, self.log))
        for first, path in sorted(firsts):
            try:
                fd, seq = self._open_seq(path)
            except OSError:
                continue
            try:
                line = first_line(fd)
            finally:
                os.close(fd)
            fields = _fields(line) if line is not None else None
            if seq == first and fields is not None and is_digest(fields.get("prev")):
                return Position(first - 1, fields["prev"], first, 0)
        return None

    # -- reading (rule 2)

    def read(self, upto: int, select: Select, *, max_events: int, max_bytes: int) -> Chunk:
        """The lines after :attr:`position` up to ``upto``: at most ``max_events`` selected
        events of at most ``max_bytes`` together (one larger event goes alone). Advances
        :attr:`position` past every line it returns or passes over."""
        position = self.position
        events: list[bytes] = []
        size = lines = scanned = 0
        first_time: float | None = None
        while position.seq < upto and len(events) < max_events and scanned < _SCAN_BYTES:
            fd = self._file(position.file)
            data = b"" if fd is None else _whole_lines(fd, position.offset)
            if not data:  # the end of this file (or no file): the next line starts another
                moved = self._next_file(position, upto, ended=fd is not None)
                if moved is None:
                    break
                position = moved
                continue
            start = 0
            full = False
            while start < len(data) and position.seq < upto:
                end = data.index(b"\n", start)
                line = data[start:end]
                fields = _fields(line)
                seq = fields.get("seq") if fields is not None else None
                if fields is None or seq != position.seq + 1 or fields.get("prev") != position.head:
                    raise FollowError(
                        f"{self._fd_name} at byte {position.offset} does not continue after "
                        f"seq {position.seq} ({position.head}): the log was replaced or cut, "
                        "or the cursor belongs to another log"
                    )
                event = select(line, fields)
                if event is not None:
                    if events and size + len(event) + 1 > max_bytes:
                        full = True
                        break
                    events.append(event)
                    size += len(event) + 1
                if first_time is None:
                    micros = micros_of(fields.get("timestamp"))
                    first_time = None if micros is None else micros / 1e6
                lines += 1
                scanned += end + 1 - start
                position = Position(
                    seq, fields["line_digest"], position.file, position.offset + end + 1 - start
                )
                start = end + 1
                if len(events) >= max_events or scanned >= _SCAN_BYTES:
                    full = True
                    break
            if full:
                break
        self.position = position
        return Chunk(events, position, lines, first_time)

    def _next_file(self, position: Position, upto: int, *, ended: bool) -> Position | None:
        """Past the end of ``position``'s file (``ended``), or without that file: the next
        file's start, by rule 3; None when there is no committed line to read yet."""
        wanted = position.seq + 1
        if wanted > upto:
            return None
        if position.file != wanted and self._file(wanted) is not None:
            return Position(position.seq, position.head, wanted, 0)
        if ended and position.file == wanted:
            return None  # the file that starts with the line has no whole line yet
        after = self._after_gap(wanted)
        if after is None:
            raise FollowError(
                f"the audit lines from seq {wanted} are in no file beside {self.log} "
                "(its rotated files were removed, or the log was replaced)"
            )
        self.skipped += after.file - wanted
        self.on_gap(wanted, after.file - 1, self._fd_name or self.log.name)
        return after


def _whole_lines(fd: int, offset: int) -> bytes:
    """The whole lines from ``offset`` (at least one when there is one, up to about
    :data:`_CHUNK` bytes), without the partial one after them."""
    length = _CHUNK
    while True:
        data = read_at(fd, offset, length)
        cut = data.rfind(b"\n")
        if cut >= 0:
            return data[: cut + 1]
        if len(data) < length or length > MAX_LINE_BYTES:
            return b""
        length *= 4


def _fields(line: bytes) -> dict[str, Any] | None:
    try:
        fields = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return fields if isinstance(fields, dict) else None


def _seq_of(line: bytes) -> int | None:
    fields = _fields(line)
    seq = None if fields is None else fields.get("seq")
    return seq if type(seq) is int else None


def start_of(log: Path) -> Position:
    """Before the first line of the log's oldest file beside it (a sink starting at
    ``oldest``)."""
    follower = Follower(log, START)
    try:
        found = follower._after_gap(0)
    finally:
        follower.close()
    return START if found is None else found


def end_of(log: Path, durable: int) -> Position:
    """After the line ``durable`` (a sink starting at ``now``): at start it is the live file's
    last line; otherwise the live file is read from its first line up to it."""
    if durable == 0:
        return START
    fd = os.open(log, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        first = first_line(fd)
        opening = _fields(first) if first is not None else None
        if opening is None or type(opening.get("seq")) is not int:
            raise FollowError(f"{log} has no first line")
        size = os.fstat(fd).st_size
        last = line_ending_at(fd, size)
        fields = _fields(last) if last is not None else None
    finally:
        os.close(fd)
    first_seq = opening["seq"]
    if fields is not None and fields.get("seq") == durable:
        return Position(durable, fields["line_digest"], first_seq, size)
    follower = Follower(log, Position(first_seq - 1, str(opening.get("prev")), first_seq, 0))
    try:
        while follower.position.seq < durable:
            before = follower.position
            follower.read(durable, lambda line, fields: None, max_events=1, max_bytes=1)
            if follower.position == before:
                raise FollowError(f"{log} does not hold the durable line seq {durable}")
    finally:
        follower.close()
    return follower.position


# --------------------------------------------------------------------------- the cursor


def write_cursor(path: Path, sink: str, position: Position) -> None:
    """Rule 4: atomically replace the cursor file. ``OSError`` on failure (the old one
    stays)."""
    data = (
        render_line(
            {
                "format": CURSOR_FORMAT,
                "sink": sink,
                "seq": position.seq,
                "head": position.head,
                "file": position.file,
                "offset": position.offset,
            }
        )
        + b"\n"
    )
    temporary = path.with_name(path.name + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    fd = os.open(
        temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640
    )
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(temporary)
        raise
    os.close(fd)
    os.replace(temporary, path)
    fsync_directory(path)


def read_cursor(path: Path, sink: str) -> Position | None:
    """Rule 4: the position a cursor file records, None when there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise CursorError(f"cannot read sink cursor {path}: {error.strerror}") from None
    try:
        data = read_at(fd, 0, _CURSOR_MAX + 1)
    finally:
        os.close(fd)
    damaged = f"sink cursor {path} is damaged"
    if not data.endswith(b"\n") or data.count(b"\n") != 1:
        raise CursorError(f"{damaged} (not one line)")
    _, fields, reason = parse_sealed(data[:-1])
    if fields is None:
        raise CursorError(f"{damaged} ({reason})")
    fields.pop("line_digest", None)
    if set(fields) != {"format", "sink", "seq", "head", "file", "offset"}:
        raise CursorError(f"{damaged} (unexpected fields)")
    numbers = (fields["seq"], fields["file"], fields["offset"])
    if (
        fields["format"] != CURSOR_FORMAT
        or any(type(value) is not int or value < 0 for value in numbers)
        or fields["file"] < 1
        or not is_digest(fields["head"])
    ):
        raise CursorError(f"{damaged} (a field has the wrong type or value)")
    if fields["sink"] != sink:
        raise CursorError(f"sink cursor {path} belongs to sink {fields['sink']!r}, not {sink!r}")
    return Position(fields["seq"], fields["head"], fields["file"], fields["offset"])
