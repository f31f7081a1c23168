"""The hash-chained, durable, append-only audit log (format: ``docs/audit-log.md``).

Rules (the contract):

1. One line per event: every decision and every refused request, plus ``daemon_start`` and
   ``daemon_stop``. A line is a JSON object rendered by structlog's ``JSONRenderer`` (orjson) with
   sorted keys, no whitespace, UTF-8 (non-ASCII raw) and ends with one ``\\n``. Evidence bytes
   are never logged, only ``{digest, size}``.
2. Chain. Every line carries ``seq`` (1, 2, ... with no gap across restarts) and ``prev``
   (the previous line's ``line_digest``; :data:`GENESIS` for line 1), and *ends* with
   ``,"line_digest":"sha256:<hex>"}`` where hex = SHA-256 of the line's *body*: the exact
   bytes before that suffix, closed with ``}`` (the body is the sorted, compact rendering of
   every other field). :func:`verify_log` rechecks seal, ``seq`` and ``prev`` on every line
   and names the first one that is edited (any byte), reordered, dropped, duplicated, or
   torn (no final newline).
3. Durability. With ``durability="fsync"`` (default) :meth:`AuditLog.record` returns only when
   the line's bytes are written *and* ``fsync``-ed; concurrent records share one
   write+fsync (group commit). ``"write"`` returns after ``write(2)`` (survives a process
   crash, not a power loss); ``"none"`` returns once the line is queued (a crash may lose
   queued lines; they are still written in order, and fsync-ed at close).
4. Overflow. At most ``max_pending`` lines wait for the writer. ``overflow="block"`` (default)
   makes :meth:`record` wait for room; ``overflow="drop"`` drops the line, counts it, and
   writes an ``audit_overflow`` line with the count once there is room: never silent.
5. Restarts. :meth:`AuditLog.open` verifies an existing file completely and continues its
   chain. A broken file raises :class:`AuditLogCorrupt` naming the line; it is never
   truncated, repaired or overwritten. The file is locked (``flock``) against a second writer.
6. Failure. A write or fsync error fails the waiting records and every later one with
   :class:`AuditLogError` (the server then answers ``AUDIT_FAILED``, never an unlogged
   decision).
"""

from __future__ import annotations

import collections
import enum
import fcntl
import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any, Final

import attrs
import orjson
import structlog
import trio

GENESIS: Final = "sha256:" + "0" * 64
#: A line longer than this is refused by the verifier (no unbounded reads).
MAX_LINE_BYTES: Final = 64 * 1024 * 1024


class Durability(enum.Enum):
    FSYNC = "fsync"
    WRITE = "write"
    NONE = "none"


class Overflow(enum.Enum):
    BLOCK = "block"
    DROP = "drop"


class AuditLogError(Exception):
    """The audit log cannot be opened or written (our fault, not the client's)."""


class AuditLogCorrupt(AuditLogError):
    """An existing audit log does not verify; ``report`` says where and why."""

    def __init__(self, path: str, report: VerifyReport) -> None:
        super().__init__(
            f"audit log {path} is broken at line {report.first_bad_line}: {report.reason}"
        )
        self.report = report


# --------------------------------------------------------------------------- rendering


_SEAL_RE: Final = re.compile(rb',"line_digest":"(sha256:[0-9a-f]{64})"\}\Z')


def seal(body: bytes) -> tuple[bytes, str]:
    """(sealed line, its digest) for a rendered body ``{...}`` (no newline)."""
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    return body[:-1] + b',"line_digest":"' + digest.encode("ascii") + b'"}', digest


def _render_body(fields: Mapping[str, Any]) -> bytes:
    # orjson with sorted keys: byte-identical to json.dumps(ensure_ascii=False, sort_keys=True,
    # separators=(",", ":")) for the float-free values the daemon logs.
    body: bytes = orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)
    return body


def render_line(fields: Mapping[str, Any]) -> bytes:
    """The sealed line for ``fields`` (exactly what the writer produces; for tools/tests)."""
    return seal(_render_body(dict(fields)))[0]


class _Chain:
    """structlog processor (before the renderer): ``seq`` and ``prev`` for the next line."""

    def __init__(self, seq: int, head: str) -> None:
        self.seq = seq
        self.head = head

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
        event["seq"] = self.seq + 1
        event["prev"] = self.head
        return event


class _Seal:
    """structlog processor (after the renderer): appends ``line_digest`` and advances the
    chain, only once the line is fully rendered (a failed render leaves no gap)."""

    def __init__(self, chain: _Chain) -> None:
        self.chain = chain

    def __call__(self, logger: Any, method: str, body: Any) -> Any:
        line, digest = seal(body)
        self.chain.seq += 1
        self.chain.head = digest
        return line


_RESERVED: Final = frozenset({"seq", "prev", "line_digest", "timestamp"})


# --------------------------------------------------------------------------- verification


@attrs.frozen
class VerifyReport:
    """Outcome of :func:`verify_log`. ``first_bad_line`` is 1-based; ``head`` is the last good
    line's digest."""

    intact: bool
    lines: int
    head: str
    last_seq: int
    first_bad_line: int | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": "INTACT" if self.intact else "BROKEN",
            "lines": self.lines,
            "head": self.head,
            "last_seq": self.last_seq,
            "first_bad_line": self.first_bad_line,
            "reason": self.reason,
        }


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _iter_lines(path: Path) -> Iterator[tuple[bytes, bool]]:
    """Yield (line without newline, had_newline), reading in bounded chunks."""
    with path.open("rb") as handle:
        pending = b""
        while True:
            chunk = handle.read(1 << 20)
            if not chunk:
                break
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for line in complete:
                yield line, True
            if len(pending) > MAX_LINE_BYTES:
                yield pending[: MAX_LINE_BYTES + 1], False
                return
        if pending:
            yield pending, False


def _check_line(raw: bytes, had_newline: bool, seq: int, head: str) -> tuple[str, str | None]:
    """Return (line digest, None) or ("", reason)."""
    if len(raw) > MAX_LINE_BYTES:
        return "", f"line longer than {MAX_LINE_BYTES} bytes"
    if not had_newline:
        return "", "truncated line (no final newline)"
    match = _SEAL_RE.search(raw)
    if match is None:
        return "", "line does not end with its line_digest seal (edited line)"
    digest = match.group(1).decode("ascii")
    body = raw[: match.start()] + b"}"
    if "sha256:" + hashlib.sha256(body).hexdigest() != digest:
        return "", "line_digest does not match the line's bytes (edited line)"
    try:
        fields = json.loads(raw.decode("utf-8"), object_pairs_hook=_refuse_duplicates)
    except (ValueError, RecursionError) as error:
        return "", f"not a JSON line ({error})"
    if not isinstance(fields, dict):
        return "", "not a JSON object"
    if type(fields.get("seq")) is not int or fields["seq"] != seq + 1:
        return "", f"sequence number {fields.get('seq')!r} where {seq + 1} was expected"
    if fields.get("prev") != head:
        return "", "prev does not match the previous line's digest (dropped or reordered line)"
    return digest, None


def verify_log(path: str | os.PathLike[str], *, anchors: tuple[str, ...] = ()) -> VerifyReport:
    """Verify a whole audit log file; never raises for bad content (OSError for I/O).

    ``anchors`` are ``line_digest`` values recorded elsewhere earlier (``health`` →
    ``audit.head``): each must still be in the chain, else the file was rewritten or cut
    back, which the chain alone cannot show (the report names the first missing anchor).
    """
    seq, head, count = 0, GENESIS, 0
    missing = set(anchors)
    for number, (raw, had_newline) in enumerate(_iter_lines(Path(path)), start=1):
        digest, reason = _check_line(raw, had_newline, seq, head)
        if reason is not None:
            return VerifyReport(False, count, head, seq, number, reason)
        seq, head, count = seq + 1, digest, count + 1
        missing.discard(digest)
    for anchor in anchors:
        if anchor in missing:
            return VerifyReport(
                False,
                count,
                head,
                seq,
                None,
                f"anchor {anchor} is not in the chain (the log was rewritten or truncated)",
            )
    return VerifyReport(True, count, head, seq)


def tail(path: str | os.PathLike[str], count: int) -> list[dict[str, Any]]:
    """The last ``count`` parseable lines of the log, oldest first (unverified)."""
    window: collections.deque[bytes] = collections.deque(maxlen=max(count, 0))
    for raw, had_newline in _iter_lines(Path(path)):
        if had_newline:
            window.append(raw)
    records = []
    for raw in window:
        try:
            value = json.loads(raw.decode("utf-8"))
        except ValueError:
            value = {"unparseable_line": raw.decode("utf-8", errors="replace")}
        records.append(value)
    return records


# --------------------------------------------------------------------------- the writer


class _Signal:
    """A one-shot event (like ``trio.Event``) whose waiters may choose to be uncancellable:
    :meth:`AuditLog.record_shielded` waits on it as a shielded ``record`` would, without the
    cost of a cancel scope per line."""

    __slots__ = ("_set", "_tasks")

    def __init__(self) -> None:
        self._set = False
        self._tasks: set[trio.lowlevel.Task] = set()

    def set(self) -> None:
        if not self._set:
            self._set = True
            for task in self._tasks:
                trio.lowlevel.reschedule(task)
            self._tasks.clear()

    async def wait(self, *, cancellable: bool = True) -> None:
        if self._set:
            if cancellable:
                await trio.lowlevel.checkpoint()
            else:
                await trio.lowlevel.cancel_shielded_checkpoint()
            return
        task = trio.lowlevel.current_task()
        self._tasks.add(task)

        def abort(_: Any) -> trio.lowlevel.Abort:
            if not cancellable:
                return trio.lowlevel.Abort.FAILED  # woken only by set()
            self._tasks.discard(task)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)


@attrs.define
class _Batch:
    lines: list[bytes] = attrs.field(factory=list)
    done: _Signal = attrs.field(factory=_Signal)
    error: BaseException | None = None


class AuditLog:
    """The daemon's audit log. Create with :meth:`open`, run :meth:`run` in a nursery, then
    ``await record(...)``; :meth:`close` flushes, fsyncs and writes nothing more."""

    def __init__(
        self,
        path: Path,
        fd: int,
        report: VerifyReport,
        *,
        durability: Durability,
        overflow: Overflow,
        max_pending: int,
    ) -> None:
        self.path = path
        self._fd: int | None = fd
        self.durability = durability
        self.overflow = overflow
        self.max_pending = max_pending
        self._chain = _Chain(report.last_seq, report.head)
        # structlog's processor chain, run directly (as a bound logger would, minus the
        # per-call proxy binding and any global structlog configuration, e.g. a level filter).
        self._processors: tuple[Any, ...] = (
            structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
            self._chain,
            structlog.processors.JSONRenderer(serializer=orjson.dumps, option=orjson.OPT_SORT_KEYS),
            _Seal(self._chain),
        )
        self._batch = _Batch()
        self._wakeup = trio.Event()
        self._room = _Signal()
        self._flush_lock = trio.Lock()
        self._closed = False
        self._failed: BaseException | None = None
        self.lines_written = report.lines
        self.dropped = 0
        self._dropped_unreported = 0
        self.fsyncs = 0

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        durability: Durability | str = Durability.FSYNC,
        overflow: Overflow | str = Overflow.BLOCK,
        max_pending: int = 4096,
    ) -> AuditLog:
        """Verify the existing file (if any), lock it, and continue its chain."""
        target = Path(path)
        durability = Durability(durability)
        overflow = Overflow(overflow)
        if type(max_pending) is not int or max_pending < 1:
            raise ValueError("max_pending must be a positive integer")
        created = not target.exists()
        try:
            fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
        except OSError as error:
            raise AuditLogError(
                f"cannot open audit log {target}: {error.strerror or error}"
            ) from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise AuditLogError(f"audit log {target} is in use by another process") from None
            report = verify_log(target)
            if not report.intact:
                raise AuditLogCorrupt(str(target), report)
            if created:
                _fsync_directory(target)
        except BaseException:
            os.close(fd)
            raise
        return cls(
            target, fd, report, durability=durability, overflow=overflow, max_pending=max_pending
        )

    # -- state

    @property
    def head(self) -> str:
        """The digest of the last line rendered (written or pending)."""
        return self._chain.head

    @property
    def last_seq(self) -> int:
        return self._chain.seq

    @property
    def pending(self) -> int:
        return len(self._batch.lines)

    def status(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "durability": self.durability.value,
            "overflow": self.overflow.value,
            "lines": self.lines_written,
            "pending": self.pending,
            "dropped": self.dropped,
            "head": self.head,
            "fsyncs": self.fsyncs,
            "failed": self._failed is not None,
        }

    # -- appending

    def _render(self, event: str, fields: Mapping[str, Any]) -> bytes:
        if "event" in fields or not _RESERVED.isdisjoint(fields):
            raise ValueError("reserved audit field")
        line: Any = dict(fields)
        line["event"] = event
        for processor in self._processors:
            line = processor(None, "info", line)
        return bytes(line) + b"\n"

    async def record(self, event: str, **fields: Any) -> str | None:
        """Append one line; return its ``line_digest`` once the durability policy is met
        (``None`` if the overflow policy dropped it). Raises :class:`AuditLogError`."""
        return await self._record(event, fields, cancellable=True)

    async def record_shielded(self, event: str, **fields: Any) -> str | None:
        """:meth:`record` that cancellation cannot interrupt: the same as awaiting ``record``
        inside ``trio.CancelScope(shield=True)`` (a pending cancellation is delivered at the
        caller's next checkpoint), without a cancel scope per line."""
        return await self._record(event, fields, cancellable=False)

    async def _record(self, event: str, fields: dict[str, Any], *, cancellable: bool) -> str | None:
        if self._failed is not None:
            raise AuditLogError(f"audit log write failed earlier: {self._failed}")
        if self._closed:
            raise AuditLogError("audit log is closed")
        while len(self._batch.lines) >= self.max_pending:
            if self.overflow is Overflow.DROP:
                self.dropped += 1
                self._dropped_unreported += 1
                return None
            await self._room.wait(cancellable=cancellable)
            if self._failed is not None:
                raise AuditLogError(f"audit log write failed: {self._failed}")
        if self._dropped_unreported:
            count, self._dropped_unreported = self._dropped_unreported, 0
            self._batch.lines.append(
                self._render("audit_overflow", {"dropped": count, "dropped_total": self.dropped})
            )
        self._batch.lines.append(self._render(event, fields))
        digest = self._chain.head
        batch = self._batch
        self._wakeup.set()
        if self.durability is Durability.NONE:
            return digest
        await batch.done.wait(cancellable=cancellable)
        if batch.error is not None:
            raise AuditLogError(f"audit log write failed: {batch.error}")
        return digest

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The writer task (group commit): one write (and one fsync) per batch."""
        task_status.started()
        while True:
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            await self._flush_once()
            if self._closed and not self._batch.lines:
                return

    async def _flush_once(self) -> None:
        async with self._flush_lock:
            await self._flush_locked()

    async def _flush_locked(self) -> None:
        batch = self._batch
        if not batch.lines:
            return
        self._batch = _Batch()
        room, self._room = self._room, _Signal()
        room.set()
        data = b"".join(batch.lines)
        sync = self.durability is Durability.FSYNC
        try:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self._write, data, sync)
            self.lines_written += len(batch.lines)
        except OSError as error:
            self._failed = error
            batch.error = error
        finally:
            batch.done.set()

    def _write(self, data: bytes, sync: bool) -> None:
        fd = self._fd
        if fd is None:
            raise OSError("audit log is closed")
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if sync:
            os.fsync(fd)
            self.fsyncs += 1

    async def close(self) -> None:
        """Flush everything pending, fsync, release the file, stop :meth:`run`. Idempotent."""
        self._closed = True
        if self._fd is None:
            self._wakeup.set()
            return
        async with self._flush_lock:
            while self._batch.lines and self._failed is None:
                await self._flush_locked()
            fd, self._fd = self._fd, None
            if fd is None:
                return
            try:
                if self._failed is None:
                    os.fsync(fd)
            finally:
                os.close(fd)
        self._wakeup.set()

    def close_sync(self) -> None:
        """Release the file without flushing (for hosts that never ran the writer); later
        writes fail with :class:`AuditLogError`."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def _fsync_directory(path: Path) -> None:
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
