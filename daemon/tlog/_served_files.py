"""One guarded way to read a file the daemon serves or answers from: tiles, entry bundles and
the checkpoint of the transparency directory, and audit lines found for a lookup.

Every such read goes through here, whichever route or reader asks (``GET /tile/…``, a proof,
``GET /v1/log/entry``, the publisher, ``log verify``), so a planted file cannot make one of
them hang, follow a link or read outside its directory.

Rules (the contract):

1. Names. A file is named by its path *relative to a root directory* (the transparency
   directory, the audit log's directory). Every component must be a plain name: not empty,
   not ``.`` or ``..``, no NUL, at most 255 bytes; the whole path at most :data:`MAX_PATH`
   bytes. Anything else is refused before a system call is made.
2. The walk. The root is opened as a directory (its own path is the operator's and may be a
   link); every component below it is opened relative to its parent's descriptor with
   ``O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC``
   (:func:`open_directory`): a symbolic link, or anything but a directory, at a component is
   refused (:class:`NotServed`, naming what it is) and nothing is opened through it.
3. The file is opened relative to its directory's descriptor with
   ``O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC`` (:func:`open_regular`), so the ``open``
   never blocks (a FIFO opens at once) and never follows a link; ``fstat`` must then say a
   regular file (``S_ISREG``). A link, a FIFO, a socket, a device or a directory is refused
   (:class:`NotServed`) and not a byte of it is read.
4. Bounded. Each read names the most its kind of file can hold (:func:`read_regular`'s
   ``limit``); a larger file is refused, and never more than ``limit`` bytes are read. Nothing
   outside the root is ever read.
5. Outcomes. An absent file (or directory on the way) is ``FileNotFoundError``; a refused one
   is :class:`NotServed`, counted (:data:`refusals`) and reported by a ``served_file_refused``
   warning at most once a minute per process (the path, what it is, how many since the last
   warning): a refusal is the operator's business (someone planted it), never the peer's.
   Callers that serve files answer both as "not found".
6. Off the event loop, under a limiter of its own (:class:`FileReads`): a read the daemon does
   for a request runs in a thread under its own ``trio.CapacityLimiter`` (:data:`READ_SLOTS`),
   never under trio's default one that checkpoint signing and the audit writer use, within
   :data:`READ_DEADLINE` seconds counted from the request (the wait for a slot included). Past
   it the caller gets :class:`ReadsStuck` (``BUSY``) at once and the thread is abandoned: it
   keeps its slot until its system call returns, so at most :data:`READ_SLOTS` threads are
   ever stuck, and a stuck read never delays signing, decisions or a stop (cancellation never
   waits for it). A ``served_file_stuck`` warning says so, at most once a minute.
7. Writes walk the same way (:func:`open_parent`): a file the daemon writes under a root (a
   tile, a bundle, the checkpoint) is created in the directory reached by rule 2's walk —
   missing components made there, never through a link — by a temporary name opened
   ``O_CREAT | O_EXCL | O_NOFOLLOW`` and renamed over the name within that directory, so a
   link planted at a tile or a tile directory can never send a write outside the root.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

import trio

from daemon.wire import _logs as logs
from daemon.wire._errors import Busy, ServiceError

__all__ = [
    "KINDS",
    "MAX_PATH",
    "READ_DEADLINE",
    "READ_SLOTS",
    "SYMLINK",
    "FileReads",
    "NotServed",
    "ReadsStuck",
    "kind_of",
    "open_directory",
    "open_parent",
    "open_regular",
    "open_under",
    "read_regular",
    "refusals",
]

#: The longest relative path read (rule 1): Linux's ``PATH_MAX``.
MAX_PATH: Final = 4096
_MAX_NAME: Final = 255
#: Threads reading at once per :class:`FileReads` (rule 6).
READ_SLOTS: Final = 8
#: Seconds a read may take, the wait for a slot included (rule 6).
READ_DEADLINE: Final = 5.0
#: Seconds between two warnings of the same kind (rules 5, 6).
WARNING_INTERVAL: Final = 60.0

_DIRECTORY_FLAGS: Final = (
    os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
)
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK: Final = 1 << 20
SYMLINK: Final = "a symbolic link"
KINDS: Final = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
    stat.S_IFLNK: SYMLINK,
}
T = TypeVar("T")


class NotServed(ServiceError):
    """A file (or a directory on its way) that is not what it must be (rules 1–4): ``kind``
    says what it is, ``where`` its path relative to the root."""

    def __init__(self, where: str, kind: str) -> None:
        super().__init__(f"{where} is {kind}: refused, nothing is read through it")
        self.where = where
        self.kind = kind


class ReadsStuck(Busy):
    """A read did not finish within its deadline (rule 6)."""


class _Reporter:
    """Counts one kind of event and warns at most once per :data:`WARNING_INTERVAL`."""

    def __init__(self, event: str) -> None:
        self.event = event
        self.total = 0
        self._unreported = 0
        self._warned_at = float("-inf")
        self._lock = threading.Lock()

    def __call__(self, message: str, **fields: object) -> None:
        with self._lock:
            self.total += 1
            self._unreported += 1
            now = time.monotonic()
            if now - self._warned_at < WARNING_INTERVAL:
                return
            count, self._unreported, self._warned_at = self._unreported, 0, now
        text = f"{message} ({count} since the last warning)"
        logs.warning(self.event, text, count=count, **fields)


#: Files refused (rule 5), in this process.
refusals: Final = _Reporter("served_file_refused")
_stuck: Final = _Reporter("served_file_stuck")


def _components(relative: str) -> list[str]:
    """Rule 1: the plain names of ``relative``, or :class:`NotServed`."""
    parts = relative.split("/")
    if _size(relative) > MAX_PATH or any(
        part in ("", ".", "..") or "\0" in part or _size(part) > _MAX_NAME for part in parts
    ):
        raise NotServed(relative[:64] + ("…" if len(relative) > 64 else ""), "not a plain path")
    return parts


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


def _mode_at(parent: int, name: str) -> int | None:
    """The mode of ``name`` under ``parent``, not following it (None if it cannot be told)."""
    try:
        return os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except OSError:
        return None


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, in words (``a FIFO``, ``a symbolic link``, …)."""
    return KINDS.get(stat.S_IFMT(mode), "a special file")


def open_directory(parent: int, name: str, where: str | None = None) -> int:
    """Rule 2: a descriptor of directory ``name`` under ``parent``, never through a link;
    :class:`NotServed` when it is a link or not a directory, ``FileNotFoundError`` when
    absent. The caller closes it."""
    try:
        return os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            mode = _mode_at(parent, name)
            link = mode is not None and stat.S_ISLNK(mode)
            raise NotServed(where or name, SYMLINK if link else "not a directory") from None
        raise


def open_regular(parent: int, name: str, where: str | None = None) -> int:
    """Rule 3: a blocking descriptor of regular file ``name`` under ``parent``;
    :class:`NotServed` for anything else, ``FileNotFoundError`` when absent. The caller
    closes it."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        raise
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise NotServed(where or name, SYMLINK) from None
        mode = _mode_at(parent, name)  # a socket (ENXIO) or another file that refuses to open
        if mode is None or stat.S_ISREG(mode):
            raise
        raise NotServed(where or name, kind_of(mode)) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotServed(where or name, kind_of(mode))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _walk(root: Path, parts: list[str], *, create: bool) -> int:
    """Rule 2: a descriptor of directory ``root/parts…``, every component below ``root``
    opened without following a link (``create``: a missing one is made first, rule 7). The
    caller closes it."""
    if create:
        root.mkdir(parents=True, exist_ok=True)  # the root's own path is the operator's
    current = os.open(root, _DIRECTORY_FLAGS & ~os.O_NOFOLLOW)
    try:
        for index, part in enumerate(parts):
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=current)
            following = open_directory(current, part, "/".join(parts[: index + 1]))
            os.close(current)
            current = following
    except BaseException:
        os.close(current)
        raise
    return current


def open_under(root: Path, relative: str) -> int:
    """Rules 1–3: a descriptor of regular file ``root/relative``, walked without following
    a link below ``root``. The caller closes it."""
    parts = _components(relative)
    directory = _walk(root, parts[:-1], create=False)
    try:
        return open_regular(directory, parts[-1], relative)
    finally:
        os.close(directory)


def open_parent(root: Path, relative: str) -> tuple[int, str]:
    """Rule 7: ``(a descriptor of the directory that holds root/relative, the file's name)``,
    the directories walked without following a link and made where missing. The caller
    creates the file relative to the descriptor (``O_NOFOLLOW``) and closes it."""
    parts = _components(relative)
    return _walk(root, parts[:-1], create=True), parts[-1]


def read_regular(root: Path, relative: str, limit: int) -> bytes:
    """The bytes of regular file ``root/relative`` of at most ``limit`` bytes (rules 1–5)."""
    try:
        fd = open_under(root, relative)
        try:
            size = os.fstat(fd).st_size
            if size > limit:
                raise NotServed(relative, f"{size} bytes, more than its kind holds ({limit})")
            chunks: list[bytes] = []
            left = limit + 1
            while left > 0:
                chunk = os.read(fd, min(left, _CHUNK))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            if left <= 0:
                raise NotServed(relative, f"more than its kind holds ({limit} bytes)")
            return b"".join(chunks)
        finally:
            os.close(fd)
    except NotServed as refused:
        refusals(
            f"{root}: {refused}",
            directory=str(root),
            path=refused.where,
            kind=refused.kind,
        )
        raise


class FileReads:
    """Rule 6: reads for requests, in threads under this limiter, within a deadline."""

    def __init__(self, slots: int = READ_SLOTS, deadline: float = READ_DEADLINE) -> None:
        self.limiter = trio.CapacityLimiter(slots)
        self.deadline = deadline

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` in a thread under :attr:`limiter` within :attr:`deadline`, else
        :class:`ReadsStuck` (rule 6)."""
        with trio.move_on_after(self.deadline):
            return await trio.to_thread.run_sync(
                fn, *args, limiter=self.limiter, abandon_on_cancel=True
            )
        busy = self.limiter.borrowed_tokens
        _stuck(
            f"a file read took longer than {self.deadline} s ({busy} of"
            f" {self.limiter.total_tokens} read threads busy): answered BUSY",
            deadline_s=self.deadline,
            busy=busy,
        )
        raise ReadsStuck(f"the log's files did not answer within {self.deadline} s; retry later")
