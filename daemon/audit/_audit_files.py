"""The audit log's files: safe opening, the verified-head sidecar, torn tails, rotation.

Rules (the contract):

1. Safe open (:func:`open_log`). The path's last component must not be a symbolic link
   (``O_NOFOLLOW``; checked with ``lstat`` first so nothing is created through a dangling
   link), and the opened file must be a regular file (a FIFO, device or directory is refused
   before any blocking open: ``O_NONBLOCK``, then ``fstat``), owned by the daemon's
   effective user, with exactly one name (a leftover name of an interrupted rotation of this
   log is removed first; any other hard link is refused). Each refusal is an
   :class:`AuditLogError` naming the path and the reason. The file is then locked
   (``flock``) against a second writer.
2. Sidecar (:class:`Checkpoint`, ``LOG.head``): one sealed JSON line (the same seal as a log
   line) naming the log file, the ``seq`` of its first line, and a verified, durable
   ``(seq, head, offset)`` in it. Written atomically (temporary file, ``fsync``, ``rename``,
   directory ``fsync``) and only for lines already durable. Read back, it is refused unless
   its seal matches and every field has its exact type; the caller then checks it against
   the log (:meth:`Checkpoint.locate`).
3. Torn tail (:func:`remove_torn_tail`): the bytes after the last whole line are copied to
   ``LOG.torn-<UTC timestamp>`` (created exclusively, ``fsync``-ed) *before* the log is
   truncated back to that line and ``fsync``-ed: the evidence always exists first.
4. Rotation (:func:`create_next_file`, :func:`install_next_file`): the next file is written
   completely under ``LOG.rotating`` and ``fsync``-ed; then the current file gets its
   archive name ``LOG.<first seq>-<last seq>`` (12-digit, zero-padded) by ``link``, and the
   new file replaces ``LOG`` by one atomic ``rename``. Any failure before that rename undoes
   the link and leaves ``LOG`` untouched.
5. A change under the writer (:func:`change_under_writer`): the open file must still hold
   exactly the bytes its writer put there (its size is what was written) and ``LOG`` must
   still name it (the same device and inode). Otherwise the change is named, in this order:
   *truncated* (shorter), *grown* (bytes the writer did not write), *deleted* (no file at the
   path: removed or moved aside), *replaced* (the path names another file: renamed over, or a
   link). One ``fstat`` and one ``lstat``; reading nothing.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import stat
import time
from pathlib import Path
from typing import Any, Final

import attrs

from daemon.audit._audit_format import (
    AuditLogError,
    is_digest,
    parse_sealed,
    render_line,
)


class AuditLogInUse(AuditLogError):
    """Another process holds the audit log's lock (a running daemon)."""


SIDECAR_SUFFIX: Final = ".head"
ROTATING_SUFFIX: Final = ".rotating"
SIDECAR_FORMAT: Final = "evidenced.audit.head/1"
_SIDECAR_MAX_BYTES: Final = 4096
_COPY_CHUNK: Final = 1 << 20
_KINDS: Final = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symbolic link",
}


def utc_stamp() -> str:
    """A file-name-safe UTC timestamp, e.g. ``20261129T205622.690552Z``."""
    now = time.time()
    seconds = int(now)
    fraction = int((now - seconds) * 1e6)
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(seconds)) + f".{fraction:06d}Z"


def fsync_directory(path: Path) -> None:
    """Best effort: make a create/rename/unlink in ``path``'s directory durable."""
    try:
        fd = os.open(path.parent if str(path.parent) else Path("."), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- safe open


def _refuse_kind(path: Path, mode: int) -> None:
    if stat.S_ISLNK(mode):
        raise AuditLogError(
            f"audit log {path} is a symbolic link; refusing to follow it (configure the real path)"
        )
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise AuditLogError(f"audit log {path} is {kind}, not a regular file; refusing it")


def archive_path(path: Path, first_seq: int, last_seq: int) -> Path:
    return path.with_name(f"{path.name}.{first_seq:012d}-{last_seq:012d}")


def _remove_interrupted_rotation_links(path: Path, st: os.stat_result) -> None:
    """An archive name pointing at the live file is what a rotation interrupted between its
    ``link`` and its ``rename`` leaves: remove that name (the file keeps ``path``)."""
    pattern = re.compile(re.escape(path.name) + r"\.\d{12,}-\d{12,}\Z")
    try:
        names = os.listdir(path.parent if str(path.parent) else ".")
    except OSError:
        return
    for name in names:
        if not pattern.match(name):
            continue
        candidate = path.with_name(name)
        try:
            other = os.lstat(candidate)
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            os.unlink(candidate)
            fsync_directory(path)


def open_log(path: Path) -> tuple[int, bool]:
    """Open (creating it when missing) and lock the log for reading and appending; returns
    (fd, created). Rule 1."""
    try:
        before: os.stat_result | None = os.lstat(path)
    except FileNotFoundError:
        before = None
    except OSError as error:
        raise AuditLogError(f"cannot open audit log {path}: {error.strerror or error}") from None
    if before is not None:
        _refuse_kind(path, before.st_mode)
    flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    created = False
    try:
        try:
            if before is not None:
                raise FileExistsError
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o640)
            created = True
        except FileExistsError:
            fd = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ELOOP:
            _refuse_kind(path, stat.S_IFLNK)
        if error.errno == errno.ENXIO:
            _refuse_kind(path, stat.S_IFIFO)
        raise AuditLogError(f"cannot open audit log {path}: {error.strerror or error}") from None
    try:
        st = os.fstat(fd)
        _refuse_kind(path, st.st_mode)
        if st.st_uid != os.geteuid():
            raise AuditLogError(
                f"audit log {path} is owned by uid {st.st_uid}, not by this daemon's user "
                f"(uid {os.geteuid()}); refusing it"
            )
        if st.st_nlink > 1:
            _remove_interrupted_rotation_links(path, st)
            st = os.fstat(fd)
        if st.st_nlink != 1:
            raise AuditLogError(
                f"audit log {path} has {st.st_nlink} names (hard links); an audit log must "
                "have exactly one"
            )
        os.set_blocking(fd, True)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AuditLogInUse(f"audit log {path} is in use by another process") from None
        if created:
            fsync_directory(path)
    except BaseException:
        os.close(fd)
        if created:
            os.unlink(path)
        raise
    return fd, created


def read_at(fd: int, offset: int, length: int) -> bytes:
    """Exactly the bytes [offset, offset+length) (fewer only at the end of the file)."""
    parts: list[bytes] = []
    while length > 0:
        data = os.pread(fd, min(length, _COPY_CHUNK), offset)
        if not data:
            break
        parts.append(data)
        offset += len(data)
        length -= len(data)
    return b"".join(parts)


def line_ending_at(fd: int, end: int) -> bytes | None:
    """The line (without newline) whose newline is the byte before ``end``; None when that
    byte is not a newline. Reads backwards in bounded steps."""
    if end <= 0 or read_at(fd, end - 1, 1) != b"\n":
        return None
    start, step = end - 1, 4096
    while start > 0:
        begin = max(0, start - step)
        chunk = read_at(fd, begin, start - begin)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            return read_at(fd, begin + cut + 1, end - 1 - (begin + cut + 1))
        start, step = begin, min(step * 4, 1 << 22)
    return read_at(fd, 0, end - 1)


def first_line(fd: int) -> bytes | None:
    """The file's first whole line (without newline), or None (empty, or no newline)."""
    offset, parts = 0, []
    while True:
        chunk = os.pread(fd, 65536, offset)
        if not chunk:
            return None
        cut = chunk.find(b"\n")
        if cut >= 0:
            parts.append(chunk[:cut])
            return b"".join(parts)
        parts.append(chunk)
        offset += len(chunk)


# --------------------------------------------------------------------------- sidecar


@attrs.frozen
class Checkpoint:
    """A verified, durable point of the current log file (rule 2)."""

    log: str
    first_seq: int
    seq: int
    head: str
    offset: int

    def render(self) -> bytes:
        return (
            render_line(
                {
                    "format": SIDECAR_FORMAT,
                    "log": self.log,
                    "first_seq": self.first_seq,
                    "seq": self.seq,
                    "head": self.head,
                    "offset": self.offset,
                }
            )
            + b"\n"
        )

    @classmethod
    def parse(cls, data: bytes, where: Path) -> Checkpoint:
        damaged = f"audit head sidecar {where} is damaged"
        if not data.endswith(b"\n") or data.count(b"\n") != 1:
            raise AuditLogError(f"{damaged} (not one line)")
        _, fields, reason = parse_sealed(data[:-1])
        if fields is None:
            raise AuditLogError(f"{damaged} ({reason})")
        fields.pop("line_digest", None)
        expected = {"format", "log", "first_seq", "seq", "head", "offset"}
        if set(fields) != expected or fields["format"] != SIDECAR_FORMAT:
            raise AuditLogError(f"{damaged} (unexpected fields or format)")
        numbers = [fields["first_seq"], fields["seq"], fields["offset"]]
        if (
            any(type(value) is not int or value < 1 for value in numbers)
            or type(fields["log"]) is not str
            or not is_digest(fields["head"])
            or fields["seq"] < fields["first_seq"]
        ):
            raise AuditLogError(f"{damaged} (a field has the wrong type or value)")
        return cls(
            fields["log"], fields["first_seq"], fields["seq"], fields["head"], fields["offset"]
        )


def sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


def read_checkpoint(path: Path) -> Checkpoint | None:
    """The log's sidecar, None when there is none; :class:`AuditLogError` when it is not a
    regular file of ours or does not parse (rule 2)."""
    where = sidecar_path(path)
    try:
        fd = os.open(where, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise AuditLogError(f"cannot read audit head sidecar {where}: {error.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise AuditLogError(f"audit head sidecar {where} is not a regular file of ours")
        data = read_at(fd, 0, _SIDECAR_MAX_BYTES + 1)
    finally:
        os.close(fd)
    return Checkpoint.parse(data, where)


def write_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """Atomically replace the sidecar (rule 2). ``OSError`` on failure (the old one stays)."""
    where = sidecar_path(path)
    temporary = where.with_name(where.name + ".tmp")
    _unlink_stale(temporary)
    fd = os.open(
        temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640
    )
    try:
        data = checkpoint.render()
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(temporary)
        raise
    os.close(fd)
    os.replace(temporary, where)
    fsync_directory(where)


def _unlink_stale(path: Path) -> None:
    """Remove a leftover temporary file of ours (a crash between create and rename)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        raise OSError(errno.EEXIST, f"{path} exists and is not a leftover file of ours", str(path))
    os.unlink(path)


# --------------------------------------------------------------------------- torn tail


@attrs.frozen
class TornTail:
    """What :func:`remove_torn_tail` moved aside."""

    evidence: Path
    offset: int
    length: int
    digest: str

    def fields(self) -> dict[str, Any]:
        return {
            "evidence_file": self.evidence.name,
            "offset": self.offset,
            "length": self.length,
            "digest": self.digest,
        }


def remove_torn_tail(fd: int, path: Path, offset: int) -> TornTail:
    """Move the bytes after ``offset`` to ``LOG.torn-<timestamp>``, then truncate (rule 3)."""
    size = os.fstat(fd).st_size
    evidence = path.with_name(f"{path.name}.torn-{utc_stamp()}")
    out = os.open(
        evidence, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640
    )
    digest = hashlib.sha256()
    try:
        position = offset
        while position < size:
            data = os.pread(fd, min(_COPY_CHUNK, size - position), position)
            if not data:
                break
            digest.update(data)
            view = memoryview(data)
            while view:
                view = view[os.write(out, view) :]
            position += len(data)
        os.fsync(out)
    finally:
        os.close(out)
    fsync_directory(evidence)
    os.ftruncate(fd, offset)
    os.fsync(fd)
    return TornTail(evidence, offset, position - offset, "sha256:" + digest.hexdigest())


# --------------------------------------------------------------------------- rotation


def create_next_file(path: Path) -> tuple[int, Path]:
    """Create and lock ``LOG.rotating`` for the next file (rule 4)."""
    temporary = path.with_name(path.name + ROTATING_SUFFIX)
    _unlink_stale(temporary)
    fd = os.open(
        temporary,
        os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o640,
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        os.unlink(temporary)
        raise
    return fd, temporary


def install_next_file(path: Path, temporary: Path, archive: Path) -> None:
    """Give the current file its archive name and put the next file in its place (rule 4).
    On failure nothing has changed (the archive link is undone) and ``OSError`` is raised."""
    os.link(path, archive, follow_symlinks=False)
    try:
        os.replace(temporary, path)
    except BaseException:
        os.unlink(archive)
        raise
    fsync_directory(path)


def change_under_writer(fd: int, path: Path, size: int) -> str | None:
    """Rule 5: what happened to the open log file ``fd``, which its writer left at ``size``
    bytes under ``path``; None when nothing did. ``OSError`` when ``path`` cannot be looked
    at (a permission taken away: not evidence of a change, the caller retries)."""
    here = os.fstat(fd)
    if here.st_size < size:
        return (
            f"truncated: the file is {here.st_size} bytes, the daemon wrote {size} "
            f"({size - here.st_size} bytes of acknowledged lines cut off)"
        )
    if here.st_size > size:
        return (
            f"grown: the file is {here.st_size} bytes, the daemon wrote {size} "
            f"({here.st_size - size} bytes it did not write)"
        )
    try:
        there = os.lstat(path)
    except FileNotFoundError:
        there = None
    if there is None:
        return (
            "deleted: no file at the path any more (the daemon's open descriptor still holds "
            "every line until it stops)"
        )
    if (there.st_dev, there.st_ino) != (here.st_dev, here.st_ino):
        return (
            f"replaced: the path names another file (inode {there.st_ino}, the daemon's is "
            f"{here.st_ino}): renamed over, or a link"
        )
    return None
