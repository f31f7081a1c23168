"""The hash-chained, durable, append-only audit log (format: ``docs/audit-log.md``).

Rules (the contract):

1. One line per event: every decision and every refused request, plus ``daemon_start``,
   ``daemon_stop`` and the log's own events (``audit_overflow``, ``audit_recovered``,
   ``torn_tail_removed``, ``audit_rotated``). Line format, seal and chain:
   :mod:`daemon.audit._audit_format`; evidence bytes are never logged, only ``{digest, size}``.
2. Durability. With ``durability="fsync"`` (default) :meth:`AuditLog.record` returns only when
   the line's bytes are written *and* ``fsync``-ed; concurrent records share one
   write+fsync (group commit). ``"write"`` returns after ``write(2)``; ``"none"`` once the
   line is queued. ``record`` returns the line's :class:`AuditRef` (``seq``, digest).
   :attr:`AuditLog.durable` is the last line that met the policy (what ``health`` reports:
   an anchor taken from it is never rolled back by a crash).
3. Overflow. At most ``max_pending`` lines wait for the writer. ``overflow="block"`` (default)
   makes :meth:`record` wait for room; ``overflow="drop"`` drops the line, counts it, and
   writes an ``audit_overflow`` line with the count once there is room: never silent.
4. Start-up (:meth:`AuditLog.open`): :mod:`daemon.audit._audit_startup` (safe open, sidecar,
   verification of the unverified part only, torn tail moved aside and recorded with a
   ``torn_tail_removed`` line). A broken file raises :class:`AuditLogCorrupt`; it is never
   repaired. The file is locked (``flock``) against a second writer.
5. Faults. A failed or partial write (or ``fsync``) truncates the file back to the end of the
   last durable line, fails the records of that batch and of every line rendered after it,
   and puts the log in an *outage*: every :meth:`record` raises :class:`AuditLogError` at
   once (counted per event) and :attr:`failure_reason` says why. The writer retries with
   exponential backoff (``retry_initial`` … ``retry_max`` seconds): once the file system has
   :data:`RESUME_HEADROOM` free, it cuts any partial bytes back and appends one
   ``audit_recovered`` line (the outage's first error and time, requests refused, lines
   lost, attempts, bytes truncated); once that line is durable the log serves again.
   Nothing rendered during an outage is ever written, so ``seq`` has no gap.
6. Rotation (``rotate_bytes`` > 0, or :meth:`rotate`): when the current file has reached
   ``rotate_bytes``, the next line goes to a new file that starts with an ``audit_rotated``
   line naming the previous file's archive name, final ``seq`` and head; ``seq`` continues
   across files. Files: :mod:`daemon.audit._audit_files` rule 4.
7. Sidecar. After every ``checkpoint_bytes`` of durable lines, after a rotation and at a
   clean close, ``LOG.head`` records the durable end (``fsync`` first), so the next start
   verifies only what came after it.
8. :meth:`close` flushes, fsyncs, writes the sidecar and releases the file; it never raises
   for a write failure: :attr:`failure_reason` tells the caller the close was not clean.
9. Transparency log (``docs/spec/transparency.md §6.2``): with :attr:`AuditLog.transparency`
   attached, every line becomes a leaf right after it is durable, in the writer thread of
   the same group commit (the outage-recovery line too); a checkpoint is signed after a
   flush when one is due, when the interval of unsigned leaves runs out, and at
   :meth:`close`. A tile that cannot be written degrades the transparency log only. The
   tiles already on disk are verified against the lines in the background
   (:func:`daemon.audit._transparency.attach`, :attr:`AuditLog.tree_background`): what it
   finds is an :attr:`alarm`, as an edit of an old line is.
10. A file changed under the writer. Before each batch is written (one ``fstat`` and one
    ``lstat`` per group commit, :func:`~daemon.audit._audit_files.change_under_writer`), the
    open file must hold exactly the bytes written to it and the path must still name it. A
    file truncated, grown by bytes the writer did not write, deleted, renamed or replaced is
    never written again, repaired or cut: the batch and everything after it fail as in rule
    5 (a change between that check and the batch's write is caught by one more ``fstat``
    after it: that batch fails too, so no line is acknowledged into a cut file), the
    sidecar is rewritten to the durable end the writer knows (so the next start refuses the
    cut-back or replaced file), one ``audit_alarm`` error goes to stderr, and the log stays
    in that outage for good (:attr:`failure_reason`, :attr:`alarm`): no retry, no
    ``audit_recovered`` line; only an operator ends it, by stopping the daemon. The same
    check runs before an outage's recovery line is written.
11. The clock. A line is timestamped when it is rendered, in ``seq`` order; a timestamp
    earlier than the previous line's (this run's, or the last line of the file at start) is
    a backwards step of the wall clock: the line is written as it is (the log's order, not
    its timestamps, is the history: ``store gc`` decides by it), counted in :meth:`status`
    (``clock_steps_back``, ``clock_largest_step_back_s``) and reported by an
    ``audit_clock_step_back`` warning (at most one a minute, naming the steps since the
    last).
"""

from __future__ import annotations

import collections
import contextlib
import enum
import errno
import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, TypeVar

import attrs
import orjson
import trio

from daemon.audit._audit_files import (
    AuditLogInUse,
    Checkpoint,
    TornTail,
    archive_path,
    change_under_writer,
    create_next_file,
    install_next_file,
    line_ending_at,
    write_checkpoint,
)
from daemon.audit._audit_format import (
    GENESIS,
    MAX_LINE_BYTES,
    ROTATED_EVENT,
    Anchor,
    AuditLogError,
    AuditRef,
    escape_hostile,
    parse_anchor,
    render_line,
    seal,
)
from daemon.audit._audit_startup import AuditLogCorrupt, Opened, open_verified
from daemon.audit._audit_verify import VerifyReport, tail, verify_log
from daemon.audit._background_verify import TreeVerification
from daemon.schema._tables import AuditTable, check_key
from daemon.tlog import TransparencyLog
from daemon.tlog._lookup import LineIndex
from daemon.wire import _logs as logs

__all__ = [
    "GENESIS",
    "MAX_LINE_BYTES",
    "Anchor",
    "AuditLog",
    "AuditLogCorrupt",
    "AuditLogError",
    "AuditLogInUse",
    "AuditRef",
    "Durability",
    "FileOps",
    "Overflow",
    "VerifyReport",
    "parse_anchor",
    "render_line",
    "seal",
    "tail",
    "verify_log",
]

#: Events that answer a request: when one cannot be written the request is refused.
REQUEST_EVENTS: Final = frozenset({"decision", "refusal"})
#: The ``[audit]`` keys' declared defaults (the schema's), the defaults of :meth:`AuditLog.open`.
_AUDIT: Final = AuditTable()
DEFAULT_CHECKPOINT_BYTES: Final = 4 * 1024 * 1024
#: An outage ends only when the file system has this much room (statvfs), so a nearly full
#: disk does not flap between serving and refusing; then one line must be written and synced.
RESUME_HEADROOM: Final = 64 * 1024
#: At most one ``audit_clock_step_back`` warning per this many seconds (rule 11).
CLOCK_WARNING_INTERVAL: Final = 60.0
T = TypeVar("T")


class Durability(enum.Enum):
    FSYNC = "fsync"
    WRITE = "write"
    NONE = "none"


class Overflow(enum.Enum):
    BLOCK = "block"
    DROP = "drop"


class FileOps:
    """The system calls the writer makes on the log file: the seam where tests put a
    fault-injecting wrapper (a partial write, ``ENOSPC``, ``EIO`` from ``fsync``)."""

    def write(self, fd: int, data: memoryview) -> int:
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)


class _Chain:
    """The chain's state: the last rendered line's ``seq`` and digest."""

    __slots__ = ("head", "seq")

    def __init__(self, seq: int, head: str) -> None:
        self.seq = seq
        self.head = head


def timestamp() -> str:
    """Now, as the audit line's ``timestamp``: what structlog's ``TimeStamper(fmt="iso",
    utc=True)`` writes (``datetime.now(UTC).isoformat()`` with ``Z`` for ``+00:00``; a test
    holds the two equal). ``datetime.now`` floors the clock to the microsecond, as this does."""
    return iso_utc(time.time_ns() // 1000)


def micros_of(stamp: object) -> int | None:
    """The microseconds since the epoch of a line's ``timestamp`` (None: not one)."""
    if not isinstance(stamp, str):
        return None
    try:
        value = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if value.tzinfo is None:
        return None
    return (value - _EPOCH) // _MICROSECOND


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)


#: The last whole second rendered and its text, replaced as one tuple (any thread may render).
_second: tuple[int, str] = (-1, "")


def iso_utc(micros: int) -> str:
    """``micros`` (microseconds since the epoch) as ``datetime.isoformat`` writes it in UTC
    with ``Z``: no fraction when the microseconds are 0. The date and time of a second are
    rendered once, the fraction per call (a test compares it with ``datetime`` on any
    instant)."""
    global _second
    second, micro = divmod(micros, 1_000_000)
    cached = _second
    if cached[0] != second:
        cached = _second = (second, datetime.fromtimestamp(second, UTC).isoformat()[:19])
    return f"{cached[1]}.{micro:06d}Z" if micro else f"{cached[1]}Z"


_RESERVED: Final = frozenset({"seq", "prev", "line_digest", "timestamp"})


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
    """Lines written together. ``archive``: rotate before writing (the current file gets
    that name, these lines start the next file). ``last``: the batch's last line."""

    lines: list[bytes] = attrs.field(factory=list)
    done: _Signal = attrs.field(factory=_Signal)
    error: BaseException | None = None
    archive: Path | None = None
    last: AuditRef | None = None
    nbytes: int = 0


@attrs.define
class _Outage:
    """An audit outage: since when, why, and what it cost (rule 5)."""

    error: str
    since: str
    last_error: str
    backoff: float
    #: Rule 10: the file changed under the writer (what happened); never retried.
    changed: str | None = None
    refused: int = 0
    lost: int = 0
    attempts: int = 0
    truncated_bytes: int = 0
    unrecorded: collections.Counter[str] = attrs.field(factory=collections.Counter)

    def reason(self) -> str:
        if self.changed is not None:
            return (
                f"audit log changed under the daemon since {self.since}: {self.changed}; "
                f"every request is refused with AUDIT_FAILED until an operator stops the "
                f"daemon ({self.refused} so far; docs/operations.md §15)"
            )
        return (
            f"audit log cannot be written since {self.since}: {self.last_error}; "
            f"{self.refused} requests refused so far; retrying"
        )

    def status(self) -> dict[str, Any]:
        return {
            "error": self.error,
            "last_error": self.last_error,
            "since": self.since,
            "changed": self.changed,
            "refused": self.refused,
            "lost": self.lost,
            "attempts": self.attempts,
            "truncated_bytes": self.truncated_bytes,
        }

    def recovered_fields(self) -> dict[str, Any]:
        return {
            "error": self.error,
            "failed_at": self.since,
            "refused": self.refused,
            "lost": self.lost,
            "unrecorded": dict(sorted(self.unrecorded.items())),
            "attempts": self.attempts,
            "truncated_bytes": self.truncated_bytes,
        }


def _describe(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        code = errno.errorcode.get(error.errno or 0, str(error.errno))
        return f"{error.strerror} ({code})"
    return str(error) or type(error).__name__


def _event_of(line: bytes) -> str:
    try:
        event = orjson.loads(line).get("event")
    except (orjson.JSONDecodeError, AttributeError):
        return "?"
    return event if isinstance(event, str) else "?"


def _now() -> str:
    return timestamp()


class _Changed(Exception):
    """(writer thread) Rule 10: the file changed under the writer; the message says how."""


class AuditLog:
    """The daemon's audit log. Create with :meth:`open`, run :meth:`run` in a nursery, then
    ``await record(...)``; :meth:`close` flushes, fsyncs and writes nothing more."""

    def __init__(
        self,
        path: Path,
        opened: Opened,
        *,
        durability: Durability,
        overflow: Overflow,
        max_pending: int,
        rotate_bytes: int = 0,
        checkpoint_bytes: int = DEFAULT_CHECKPOINT_BYTES,
        retry_initial: float = 0.05,
        retry_max: float = 1.0,
        file_ops: FileOps | None = None,
    ) -> None:
        self.path = path
        self._ops = file_ops or FileOps()
        self._fd: int | None = opened.fd
        self.durability = durability
        self.overflow = overflow
        self.max_pending = max_pending
        self.rotate_bytes = rotate_bytes
        self._chain = _Chain(opened.seq, opened.head)
        self._durable = AuditRef(opened.seq, opened.head)
        self._size = opened.size  # durable bytes of the current file
        self._file_first_seq = opened.first_seq  # of the current file on disk
        self._file_bytes = opened.size  # rendered bytes of the current file (rotation)
        self._render_first_seq = opened.first_seq  # of the file being rendered into
        self._rotate_at = rotate_bytes if rotate_bytes > 0 else sys.maxsize
        self._checkpoint_every = max(1, checkpoint_bytes)
        self._checkpointed = opened.checkpoint_offset
        self._retry = (retry_initial, retry_max)
        self._batch = _Batch()
        self._sealed: list[_Batch] = []
        self._wakeup = trio.Event()
        self._room = _Signal()
        self._flush_lock = trio.Lock()
        self._closed = False
        self._outage: _Outage | None = None
        self._close_error: str | None = None
        self._truncated = 0
        self.lines_written = opened.seq - opened.first_seq + 1
        self.dropped = 0
        self._dropped_unreported = 0
        self.fsyncs = 0
        #: Called from the writer thread after each batch is written (and fsync-ed when
        #: durable): ``(lines, seconds)`` (``daemon.server._metrics``).
        self.on_batch: Callable[[int, float], None] | None = None
        self.rotations = 0
        self.recoveries = 0
        self.checkpoint_error: str | None = None
        self.torn_tail: TornTail | None = opened.torn
        self.background = opened.background  # the prefix start-up did not verify
        #: The background verification of the transparency tree (``attach_transparency``).
        self.tree_background: TreeVerification | None = None
        self.verified_from = opened.verified_from
        #: The transparency log fed with every durable line (``docs/spec/transparency.md
        #: §6.2``); attached by the server after :meth:`open`, ``None`` when not configured.
        self.transparency: TransparencyLog | None = None
        #: The lookup index fed with every durable line and its offset (``daemon.tlog._lookup``
        #: rule 6); attached with the transparency log.
        self.line_index: LineIndex | None = None
        self._last_rendered = b""
        #: Rule 11: the previous line's timestamp (microseconds; None: unknown) and the steps.
        self._last_micros = _last_timestamp(opened)
        self.clock_steps_back = 0
        self.clock_largest_step_back = 0
        self._clock_unreported = 0
        self._clock_warned_at = -math.inf

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        durability: Durability | str = _AUDIT.durability,
        overflow: Overflow | str = _AUDIT.overflow,
        max_pending: int = _AUDIT.max_pending,
        rotate_bytes: int = _AUDIT.rotate_bytes,
        checkpoint_bytes: int = DEFAULT_CHECKPOINT_BYTES,
        retry_initial: float = 0.05,
        retry_max: float = 1.0,
        file_ops: FileOps | None = None,
    ) -> AuditLog:
        """Open safely, verify what is not yet verified, trim a torn tail (recording it),
        lock, and continue the chain (rule 4)."""
        target = Path(path)
        durability = Durability(durability)
        overflow = Overflow(overflow)
        check_key(AuditTable, "max_pending", max_pending)
        check_key(AuditTable, "rotate_bytes", rotate_bytes)
        opened = open_verified(target)
        log = cls(
            target,
            opened,
            durability=durability,
            overflow=overflow,
            max_pending=max_pending,
            rotate_bytes=rotate_bytes,
            checkpoint_bytes=checkpoint_bytes,
            retry_initial=retry_initial,
            retry_max=retry_max,
            file_ops=file_ops,
        )
        if opened.torn is not None:
            try:
                log._append_now("torn_tail_removed", opened.torn.fields())
            except OSError as error:
                log.close_sync()
                raise AuditLogError(
                    f"cannot record the torn tail moved to {opened.torn.evidence}: "
                    f"{_describe(error)}"
                ) from None
        return log

    # -- state

    @property
    def head(self) -> str:
        """The digest of the last line rendered (written or pending)."""
        return self._chain.head

    @property
    def in_tree(self) -> bool:
        """Whether a transparency log takes every line (answers then carry ``log_index``)."""
        return self.transparency is not None

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the last line rendered (written or pending)."""
        return self._chain.seq

    @property
    def durable(self) -> AuditRef:
        """The last line that met the durability policy (rule 2)."""
        return self._durable

    @property
    def pending(self) -> int:
        """Lines rendered but not yet durable."""
        return self._chain.seq - self._durable.seq

    @property
    def failure_reason(self) -> str | None:
        """Why the log cannot be written now (None when it can); after :meth:`close`, why
        the close was not clean."""
        if self._outage is not None:
            return self._outage.reason()
        return self._close_error

    @property
    def alarm(self) -> str | None:
        """An edit the background verification found in the prefix start-up trusted, or in
        the transparency tree (``daemon.audit._background_verify``): lines are still written;
        or the file changed under the writer (rule 10): nothing is written any more.
        ``health`` is degraded with it."""
        if self._outage is not None and self._outage.changed is not None:
            return self._outage.reason()
        for verification in (self.background, self.tree_background):
            if verification is not None and verification.alarm is not None:
                return verification.alarm
        return None

    def status(self) -> dict[str, Any]:
        durable = self._durable
        return {
            "path": str(self.path),
            "durability": self.durability.value,
            "overflow": self.overflow.value,
            "lines": self.lines_written,
            "pending": self.pending,
            "dropped": self.dropped,
            "head": durable.line_digest,
            "seq": durable.seq,
            "anchor": durable.anchor if durable.seq else None,
            "fsyncs": self.fsyncs,
            "failed": self._outage is not None,
            "failure": self._outage.status() if self._outage is not None else None,
            "rotations": self.rotations,
            "clock_steps_back": self.clock_steps_back,
            "clock_largest_step_back_s": self.clock_largest_step_back / 1e6,
        }

    # -- appending

    def _render(self, event: str, fields: Mapping[str, Any]) -> bytes:
        if "event" in fields or not _RESERVED.isdisjoint(fields):
            raise ValueError("reserved audit field")
        # One function, no per-line processor pipeline: the bytes structlog's TimeStamper
        # and JSONRenderer(serializer=orjson.dumps, option=OPT_SORT_KEYS) made, then the
        # seal; the chain advances only once the line is fully rendered (a failed render
        # leaves no gap). tests/daemon/test_audit_render.py holds the bytes equal.
        line = dict(fields)
        line["event"] = event
        micros = time.time_ns() // 1000
        line["timestamp"] = iso_utc(micros)
        chain = self._chain
        line["seq"] = chain.seq + 1
        line["prev"] = chain.head
        sealed, digest = seal(escape_hostile(orjson.dumps(line, option=orjson.OPT_SORT_KEYS)))
        chain.seq += 1
        chain.head = digest
        rendered = sealed + b"\n"
        self._file_bytes += len(rendered)
        self._last_rendered = rendered
        previous, self._last_micros = self._last_micros, micros
        if previous is not None and micros < previous:
            self._clock_stepped_back(previous, micros, chain.seq)
        return rendered

    def _clock_stepped_back(self, previous: int, micros: int, seq: int) -> None:
        """Rule 11: count the step; warn at most once per :data:`CLOCK_WARNING_INTERVAL`."""
        step = previous - micros
        self.clock_steps_back += 1
        self.clock_largest_step_back = max(self.clock_largest_step_back, step)
        self._clock_unreported += 1
        now = time.monotonic()
        if now - self._clock_warned_at < CLOCK_WARNING_INTERVAL:
            return
        count, self._clock_unreported = self._clock_unreported, 0
        self._clock_warned_at = now
        message = (
            f"the wall clock stepped back {step / 1e6:.6f} s: audit line seq {seq} is "
            f"timestamped {iso_utc(micros)}, before the previous line ({iso_utc(previous)}); "
            f"{count} step(s) back since the last warning. The line is kept in order (the "
            "log's order, not its timestamps, is what store gc and replay trust); check the "
            "time source"
        )
        logs.warning(
            "audit_clock_step_back",
            message,
            path=str(self.path),
            seq=seq,
            step_seconds=step / 1e6,
            steps=count,
        )

    @property
    def last_rendered(self) -> str:
        """The text of the line rendered last, without its newline: inside a
        :meth:`record_answer` callback, the line the answer is for."""
        return self._last_rendered[:-1].decode("utf-8")

    async def record(self, event: str, **fields: Any) -> AuditRef | None:
        """Append one line; return its (``seq``, digest) once the durability policy is met
        (``None`` if the overflow policy dropped it). Raises :class:`AuditLogError`."""
        return (await self._record(event, fields, None, cancellable=True))[0]

    async def record_shielded(self, event: str, **fields: Any) -> AuditRef | None:
        """:meth:`record` that cancellation cannot interrupt: the same as awaiting ``record``
        inside ``trio.CancelScope(shield=True)`` (a pending cancellation is delivered at the
        caller's next checkpoint), without a cancel scope per line."""
        return (await self._record(event, fields, None, cancellable=False))[0]

    async def record_answer(
        self, event: str, answer: Callable[[AuditRef | None], T], /, **fields: Any
    ) -> tuple[AuditRef | None, T]:
        """:meth:`record_shielded` for a line whose answer must carry its place in the chain:
        ``answer(ref)`` runs right after the line is rendered, before anything is written.
        If it raises, the line is withdrawn (no gap, nothing logged) and the exception
        propagates; else (ref, its result) once the line meets the durability policy."""
        return await self._record(event, fields, answer, cancellable=False)

    def _failed(self, error: BaseException) -> AuditLogError:
        """The error of a line whose batch failed: the write's, or the alarm (rule 10)."""
        if isinstance(error, _Changed) and self._outage is not None:
            return AuditLogError(self._outage.reason())
        return AuditLogError(f"audit log write failed: {_describe(error)}")

    def _refuse(self, outage: _Outage, event: str) -> AuditLogError:
        outage.unrecorded[event] += 1
        if event in REQUEST_EVENTS:
            outage.refused += 1
        return AuditLogError(outage.reason())

    async def _record(
        self,
        event: str,
        fields: dict[str, Any],
        answer: Callable[[AuditRef | None], Any] | None,
        *,
        cancellable: bool,
    ) -> tuple[AuditRef | None, Any]:
        if self._outage is not None:
            raise self._refuse(self._outage, event)
        if self._closed:
            raise AuditLogError("audit log is closed")
        while len(self._batch.lines) >= self.max_pending:
            if self.overflow is Overflow.DROP:
                self.dropped += 1
                self._dropped_unreported += 1
                return None, None if answer is None else answer(None)
            await self._room.wait(cancellable=cancellable)
            if self._outage is not None:
                raise self._refuse(self._outage, event)
            if self._closed:
                raise AuditLogError("audit log is closed")
        if self._dropped_unreported:
            count, self._dropped_unreported = self._dropped_unreported, 0
            self._batch.lines.append(
                self._render("audit_overflow", {"dropped": count, "dropped_total": self.dropped})
            )
        if self._file_bytes >= self._rotate_at:
            self._begin_rotation()
        batch = self._batch
        chain = self._chain
        before = (chain.seq, chain.head, self._file_bytes)
        batch.lines.append(self._render(event, fields))
        ref = AuditRef(chain.seq, chain.head)
        built = None
        if answer is not None:
            try:
                built = answer(ref)
            except BaseException:
                batch.lines.pop()
                chain.seq, chain.head, self._file_bytes = before
                raise
        self._wakeup.set()
        if self.durability is Durability.NONE:
            return ref, built
        await batch.done.wait(cancellable=cancellable)
        if batch.error is not None:
            raise self._failed(batch.error)
        return ref, built

    async def record_batch(self, lines: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Any]:
        """Append the lines of another process (the sequencer, :mod:`daemon.server._sequencer`):
        each is checked and rendered into the current batch exactly as :meth:`record_shielded`
        would, then the call waits (uncancellably) until every batch they went into met the
        durability policy. Per line, in order: ``(ref, rendered bytes)``, ``None`` when the
        overflow policy dropped it, an :class:`AuditLogError` (an outage, a failed write, the
        log closed), or a ``ValueError`` (a field that cannot be rendered: nothing logged)."""
        results: list[Any] = []
        waits: list[tuple[int, _Batch]] = []
        for event, fields in lines:
            if self._outage is not None:
                results.append(self._refuse(self._outage, event))
                continue
            if self._closed:
                results.append(AuditLogError("audit log is closed"))
                continue
            dropped = False
            while len(self._batch.lines) >= self.max_pending:
                if self.overflow is Overflow.DROP:
                    self.dropped += 1
                    self._dropped_unreported += 1
                    dropped = True
                    break
                await self._room.wait(cancellable=False)
                if self._outage is not None or self._closed:
                    break
            if dropped:
                results.append(None)
                continue
            if self._outage is not None:
                results.append(self._refuse(self._outage, event))
                continue
            if self._closed:
                results.append(AuditLogError("audit log is closed"))
                continue
            if self._dropped_unreported:
                count, self._dropped_unreported = self._dropped_unreported, 0
                self._batch.lines.append(
                    self._render(
                        "audit_overflow", {"dropped": count, "dropped_total": self.dropped}
                    )
                )
            if self._file_bytes >= self._rotate_at:
                self._begin_rotation()
            chain = self._chain
            before = (chain.seq, chain.head, self._file_bytes)
            try:
                rendered = self._render(event, fields)
            except (ValueError, TypeError) as error:
                chain.seq, chain.head, self._file_bytes = before
                results.append(ValueError(str(error)))
                continue
            self._batch.lines.append(rendered)
            waits.append((len(results), self._batch))
            results.append((AuditRef(chain.seq, chain.head), rendered))
        if waits:
            self._wakeup.set()
        if self.durability is Durability.NONE:
            return results
        for index, batch in waits:
            await batch.done.wait(cancellable=False)
            if batch.error is not None:
                results[index] = self._failed(batch.error)
        return results

    # -- rotation

    def rotate(self) -> bool:
        """Start the next file before the next line (rule 6); False when this file is empty.
        Takes effect with the next flush (which refuses a file no longer at its path: rule
        10)."""
        if self._file_bytes == 0 or self._outage is not None or self._closed:
            return False
        return self._begin_rotation()

    def _begin_rotation(self) -> bool:
        if self._fd is None:
            return False
        chain = self._chain
        archive = archive_path(self.path, self._render_first_seq, chain.seq)
        self._seal_batch()
        self._batch = _Batch(archive=archive)
        self._file_bytes = 0
        self._render_first_seq = chain.seq + 1
        self._batch.lines.append(
            self._render(
                ROTATED_EVENT,
                {
                    "previous_file": archive.name,
                    "previous_seq": chain.seq,
                    "previous_head": chain.head,
                },
            )
        )
        self._wakeup.set()
        return True

    def _seal_batch(self) -> None:
        if self._batch.lines:
            self._batch.last = AuditRef(self._chain.seq, self._chain.head)
            self._sealed.append(self._batch)
            self._batch = _Batch()

    # -- the writer

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The writer task: group commit (one write and one fsync per batch) and, during an
        outage, the retries (rule 5)."""
        task_status.started()
        while True:
            outage = self._outage
            if outage is not None:
                if self._closed:
                    return
                if outage.changed is not None:  # rule 10: never retried; close() ends it
                    await self._wakeup.wait()
                    self._wakeup = trio.Event()
                    continue
                with trio.move_on_after(outage.backoff):
                    await self._wakeup.wait()
                self._wakeup = trio.Event()
                if self._closed:
                    return
                await self.recover()
                continue
            tree = self.transparency
            due = None if tree is None else tree.seconds_until_due()
            if due is None:
                await self._wakeup.wait()
            else:  # leaves not yet signed: sign them when the interval is over
                with trio.move_on_after(due):
                    await self._wakeup.wait()
            self._wakeup = trio.Event()
            await self._flush_once()
            if self._closed and not self._batch.lines and not self._sealed:
                return

    async def _flush_once(self) -> None:
        lock = self._flush_lock
        try:  # the writer's common case, uncontended: no scheduler round to take the lock
            lock.acquire_nowait()
        except trio.WouldBlock:
            await lock.acquire()
        try:
            await self._flush_locked()
        finally:
            lock.release()

    async def _flush_locked(self) -> None:
        self._seal_batch()
        if not self._sealed:
            await self._sign_tree()
            return
        batches, self._sealed = self._sealed, []
        room, self._room = self._room, _Signal()
        room.set()
        sync = self.durability is Durability.FSYNC
        for index, batch in enumerate(batches):
            try:
                await _in_thread(self._write_batch, batch, sync)
            except _Changed as change:
                self._fail(change, batches[index:], changed=str(change))
                return
            except OSError as error:
                self._fail(error, batches[index:])
                return
            self._commit(batch)
        await self._sign_tree()
        if self._size - self._checkpointed >= self._checkpoint_every:
            await self._checkpoint()

    async def _sign_tree(self) -> None:
        """Sign a transparency checkpoint when one is due (at most one per interval)."""
        tree = self.transparency
        if tree is not None and tree.checkpoint_due():
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(tree.sign_if_due)

    def _write_batch(self, batch: _Batch, sync: bool) -> None:
        """(worker thread) Write one batch once the file is checked (rule 10); on failure
        truncate back and re-raise."""
        data = b"".join(batch.lines)
        batch.nbytes = len(data)
        fd = self._fd
        if fd is None:
            raise OSError(errno.EBADF, "audit log is closed")
        self._check_file(fd, self._size)
        if batch.archive is not None:
            self._write_next_file(batch.archive, data)
            self._into_tree(batch.lines, 0)
            return
        began = time.perf_counter()
        try:
            _write_all(self._ops, fd, data)
            if sync:
                self._ops.fsync(fd)
                self.fsyncs += 1
        except OSError:
            self._truncated += _truncate_back(fd, self._size)
            raise
        if os.fstat(fd).st_size != self._size + len(data):  # changed since the check above
            self._check_file(fd, self._size + len(data))
        if self.on_batch is not None:
            self.on_batch(len(batch.lines), time.perf_counter() - began)
        self._into_tree(batch.lines, self._size)

    def _check_file(self, fd: int, size: int) -> None:
        """(worker thread) Rule 10: raise :class:`_Changed` when the file is not the one this
        writer left at ``size`` bytes, having recorded that end in the sidecar first."""
        change = change_under_writer(fd, self.path, size)
        if change is None:
            return
        durable = self._durable
        if durable.seq:  # best effort: the next start then refuses the file (startup rule 3)
            point = Checkpoint(
                self.path.name, self._file_first_seq, durable.seq, durable.line_digest, self._size
            )
            with contextlib.suppress(OSError):
                self._write_checkpoint(point)
        raise _Changed(change)

    def _into_tree(self, lines: list[bytes], offset: int) -> None:
        """(worker thread) Durable lines become leaves, in the same group commit; a tile
        that cannot be written degrades the transparency log, never the audit log. The
        lookup index takes them with their offset in the file (``offset``: the first's)."""
        tree = self.transparency
        if tree is not None:
            tree.commit([line[:-1] for line in lines])
        if self.line_index is not None:
            self.line_index.add(lines, offset)

    def _write_next_file(self, archive: Path, data: bytes) -> None:
        """(worker thread) Rotation: the next file is written and fsync-ed whole, then
        installed (``_audit_files`` rule 4); on failure nothing changed."""
        old = self._fd
        if old is None:
            raise OSError(errno.EBADF, "audit log is closed")
        self._ops.fsync(old)
        fd, temporary = create_next_file(self.path)
        try:
            _write_all(self._ops, fd, data)
            self._ops.fsync(fd)
            self.fsyncs += 1
            install_next_file(self.path, temporary, archive)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        self._fd = fd
        os.close(old)

    def _commit(self, batch: _Batch) -> None:
        assert batch.last is not None
        if batch.archive is not None:
            self._size = 0
            self._file_first_seq = batch.last.seq - len(batch.lines) + 1
            self.lines_written = 0
            self.rotations += 1
            self._checkpointed = -self._checkpoint_every  # describe the new file soon
        self._size += batch.nbytes
        self._durable = batch.last
        self.lines_written += len(batch.lines)
        batch.done.set()

    def _fail(self, error: Exception, failed: list[_Batch], *, changed: str | None = None) -> None:
        """Enter (or prolong) an outage: fail every line not yet durable (rule 5); for good
        when the file ``changed`` under the writer (rule 10)."""
        batches = [*failed, *self._sealed, self._batch]
        self._sealed, self._batch = [], _Batch()
        description = _describe(error)
        outage = self._outage
        if outage is None:
            outage = _Outage(description, _now(), description, self._retry[0])
            if changed is None:
                message = f"audit log write failed ({description}); requests are refused" + (
                    " with AUDIT_FAILED until it can be written again"
                )
                logs.error("audit_write_failed", message, path=str(self.path), error=description)
        if changed is not None and outage.changed is None:
            outage.changed = changed
            logs.error(
                "audit_alarm",
                f"ALARM audit log {self.path} changed under the daemon: {changed}. Nothing more "
                "is written to it; every request is refused with AUDIT_FAILED until an "
                "operator stops the daemon (docs/operations.md §15)",
                path=str(self.path),
                change=changed.partition(":")[0],
            )
        outage.last_error = description
        outage.truncated_bytes += self._truncated
        self._truncated = 0
        answered = self.durability is Durability.NONE
        for batch in batches:
            for line in batch.lines:
                event = _event_of(line)
                outage.unrecorded[event] += 1
                if answered:
                    outage.lost += 1
                elif event in REQUEST_EVENTS:
                    outage.refused += 1
            batch.error = error
            batch.done.set()
        chain = self._chain
        chain.seq, chain.head = self._durable
        self._file_bytes = self._size
        self._render_first_seq = self._file_first_seq
        self._outage = outage
        room, self._room = self._room, _Signal()
        room.set()

    async def recover(self) -> bool:
        """One recovery attempt now (rule 5): True when the log can be written (again)."""
        if self._outage is None:
            return True
        async with self._flush_lock:
            outage = self._outage
            if outage is None:
                return True
            if self._fd is None or outage.changed is not None:
                return False
            outage.attempts += 1
            chain = self._chain
            line = self._render("audit_recovered", outage.recovered_fields())
            ref = AuditRef(chain.seq, chain.head)
            try:
                with trio.CancelScope(shield=True):
                    removed = await trio.to_thread.run_sync(self._write_recovery, line)
            except _Changed as change:
                chain.seq, chain.head = self._durable
                self._file_bytes = self._size
                self._fail(change, [], changed=str(change))
                return False
            except OSError as error:
                chain.seq, chain.head = self._durable
                self._file_bytes = self._size
                outage.last_error = _describe(error)
                outage.truncated_bytes += self._truncated
                self._truncated = 0
                outage.backoff = min(outage.backoff * 2, self._retry[1])
                return False
            outage.truncated_bytes += removed
            self._size += len(line)
            self._durable = ref
            self.lines_written += 1
            self._outage = None
            self.recoveries += 1
            message = f"audit log writable again after {outage.attempts} attempts; " + (
                f"{outage.refused} requests were refused meanwhile (audit_recovered, seq {ref.seq})"
            )
            logs.info(
                "audit_recovered",
                message,
                path=str(self.path),
                attempts=outage.attempts,
                refused=outage.refused,
                seq=ref.seq,
            )
            return True

    def _write_recovery(self, line: bytes) -> int:
        """(worker thread) Cut any partial bytes back to the durable end, append ``line``,
        fsync; returns the bytes cut. On failure truncate back and re-raise."""
        fd = self._fd
        if fd is None:
            raise OSError(errno.EBADF, "audit log is closed")
        size = os.fstat(fd).st_size
        # Rule 10, allowing the partial bytes a failed write may have left beyond the end.
        self._check_file(fd, max(size, self._size))
        removed = 0
        if size > self._size:
            os.ftruncate(fd, self._size)
            removed = size - self._size
        room = os.fstatvfs(fd)
        free = room.f_bavail * room.f_frsize
        if room.f_blocks and free < RESUME_HEADROOM:
            raise OSError(
                errno.ENOSPC, f"{free} bytes free, waiting for {RESUME_HEADROOM} (no flapping)"
            )
        try:
            _write_all(self._ops, fd, line)
            self._ops.fsync(fd)
            self.fsyncs += 1
        except OSError:
            self._truncated += _truncate_back(fd, self._size)
            raise
        self._into_tree([line], self._size)
        return removed

    def _append_now(self, event: str, fields: Mapping[str, Any]) -> None:
        """Write one line synchronously, before the writer runs (start-up)."""
        fd = self._fd
        assert fd is not None
        chain = self._chain
        line = self._render(event, fields)
        try:
            _write_all(self._ops, fd, line)
            self._ops.fsync(fd)
        except OSError:
            _truncate_back(fd, self._size)
            chain.seq, chain.head = self._durable
            raise
        self._size += len(line)
        self._durable = AuditRef(chain.seq, chain.head)
        self.lines_written += 1

    async def _checkpoint(self) -> None:
        """Record the durable end in the sidecar (rule 7); failures are reported in
        :attr:`checkpoint_error`, never fatal (the old sidecar stays valid)."""
        durable = self._durable
        if durable.seq == 0 or self._fd is None:
            return
        point = Checkpoint(
            self.path.name, self._file_first_seq, durable.seq, durable.line_digest, self._size
        )
        try:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self._write_checkpoint, point)
        except OSError as error:
            self.checkpoint_error = _describe(error)
        else:
            self.checkpoint_error = None
        self._checkpointed = self._size

    def _write_checkpoint(self, point: Checkpoint) -> None:
        fd = self._fd
        if fd is None:
            raise OSError(errno.EBADF, "audit log is closed")
        self._ops.fsync(fd)  # the sidecar never names a line that is not durable
        write_checkpoint(self.path, point)

    async def close(self) -> None:
        """Flush everything pending, fsync, write the sidecar, release the file, stop
        :meth:`run`. Idempotent. Never raises for a write failure (rule 8)."""
        self._closed = True
        if self._fd is None:
            self._wakeup.set()
            return
        async with self._flush_lock:
            while (self._batch.lines or self._sealed) and self._outage is None:
                await self._flush_locked()
            tree = self.transparency
            if tree is not None and self._outage is None:  # the last lines get signed too
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(tree.sign_if_due, math.inf)
            if self._outage is None and self._fd is not None:
                try:
                    await trio.to_thread.run_sync(self._ops.fsync, self._fd)
                except OSError as error:
                    self._close_error = f"the final fsync failed: {_describe(error)}"
                else:
                    if self._size != self._checkpointed:
                        await self._checkpoint()
            fd, self._fd = self._fd, None
            if fd is not None:
                os.close(fd)
        self._wakeup.set()

    def close_sync(self) -> None:
        """Release the file without flushing (for hosts that never ran the writer); later
        writes fail with :class:`AuditLogError`."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


async def _in_thread(fn: Callable[..., None], *args: Any) -> None:
    """``fn(*args)`` in one of trio's cached threads, waited for uncancellably (as a shielded
    ``trio.to_thread.run_sync`` would be: a batch being written is always waited for), and
    its exception re-raised here. The group commit's one hop per batch: the thread hands its
    outcome straight back to the waiting task, without ``to_thread``'s limiter, context copy
    and cancellation bookkeeping (about half the hop's CPU)."""
    task = trio.lowlevel.current_task()
    token = trio.lowlevel.current_trio_token()

    def deliver(result: Any) -> None:  # an outcome.Outcome: the value or the error
        token.run_sync_soon(trio.lowlevel.reschedule, task, result)

    trio.lowlevel.start_thread_soon(lambda: fn(*args), deliver)
    await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)


def _last_timestamp(opened: Opened) -> int | None:
    """Rule 11: the timestamp of the file's last line (microseconds), None when unknown."""
    try:
        line = line_ending_at(opened.fd, opened.size)
    except OSError:
        return None
    if line is None:
        return None
    try:
        fields = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return micros_of(fields.get("timestamp")) if isinstance(fields, dict) else None


def _write_all(ops: FileOps, fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[ops.write(fd, view) :]


def _truncate_back(fd: int, size: int) -> int:
    """Cut the file back to ``size`` (the end of the last durable line); the bytes removed
    (0 when none, or when that fails too: then the next attempt cuts them)."""
    try:
        now = os.fstat(fd).st_size
        if now > size:
            os.ftruncate(fd, size)
            return now - size
    except OSError:
        pass
    return 0
