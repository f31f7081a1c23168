"""Opening an existing audit log at start-up: where to verify from, and the torn-tail rule.

Rules (the contract), in order:

1. The sidecar (``LOG.head``) is read first. If it records lines (``seq`` ≥ 1) but the log
   is missing or empty, the log was moved aside or deleted: refused (never a new, unlinked
   chain). To start a new file deliberately: ``evidenced audit rotate`` (linked), or remove
   the sidecar (a new chain from genesis, a visible choice).
2. The log is opened safely (:func:`~daemon.audit._audit_files.open_log`).
3. With a sidecar, its point is located in the file: the sidecar must name this log file;
   the file's first line must have the sidecar's ``first_seq``; the line that ends at the
   sidecar's byte ``offset`` must be sealed and carry its ``seq`` and ``head``. Then only
   the bytes after ``offset`` are verified. A file shorter than ``offset`` or another line
   there is refused (cut back or rewritten). A file whose first line is a later
   ``audit_rotated`` link (the sidecar predates a rotation) is verified whole, after checking
   the link against the sidecar when it names the same ``seq``. Without a sidecar the whole
   file is verified.
4. Verification stops at the first bad line. If the only fault is a *torn tail* (a final
   segment without newline, which an acknowledged line never is: lines are acknowledged
   only after their whole batch, newline included, was written), the tail is moved to
   ``LOG.torn-<timestamp>`` and cut off (:func:`~daemon.audit._audit_files.remove_torn_tail`); the
   writer then records ``torn_tail_removed``. Any other fault raises
   :class:`AuditLogCorrupt` and the file is left byte-identical.
5. The verified end is made durable (``fsync``) and recorded in a new sidecar (best effort:
   a sidecar that cannot be written only means the next start verifies more).
6. When only the bytes after the sidecar's point were verified, the prefix before it is
   verified in the background (:mod:`daemon.audit._background_verify`): :attr:`Opened.background`
   says how that goes, and an edit found there is an alarm (``health`` ``degraded``), not a
   refusal of a start that already serves.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from daemon.audit._audit_files import (
    Checkpoint,
    TornTail,
    first_line,
    line_ending_at,
    open_log,
    read_checkpoint,
    remove_torn_tail,
    sidecar_path,
    write_checkpoint,
)
from daemon.audit._audit_format import AuditLogError, parse_sealed, start_state
from daemon.audit._audit_verify import VerifyReport, scan
from daemon.audit._background_verify import Verification
from daemon.audit._background_verify import start as verify_in_background


class AuditLogCorrupt(AuditLogError):
    """An existing audit log does not verify; ``report`` says where and why."""

    def __init__(self, path: str, report: VerifyReport) -> None:
        where = f"at line {report.first_bad_line}" if report.first_bad_line is not None else "there"
        super().__init__(f"audit log {path} is broken {where}: {report.reason}")
        self.report = report


@attrs.frozen
class Opened:
    """An open, locked, verified log file and its chain state at its end."""

    fd: int
    seq: int
    head: str
    size: int
    first_seq: int  # seq of the file's first line (seq + 1 while the file is empty)
    checkpoint_offset: int  # the sidecar's offset now on disk (0: none)
    verified_from: int  # the byte offset verification started at (0: the whole file)
    torn: TornTail | None
    background: Verification | None = None  # rule 6


def open_verified(path: Path) -> Opened:
    """Rules 1–5."""
    checkpoint = read_checkpoint(path)
    if checkpoint is not None:
        try:
            present = os.lstat(path).st_size > 0
        except FileNotFoundError:
            present = False
        except OSError as error:
            raise AuditLogError(f"cannot open audit log {path}: {error.strerror}") from None
        if not present:
            raise AuditLogError(
                f"audit log {path} is missing or empty, but {sidecar_path(path).name} records "
                f"its chain up to seq {checkpoint.seq} (head {checkpoint.head}): the log was "
                "moved aside or deleted. Restore it; or start a new file deliberately: "
                f"`evidenced audit rotate` links it, removing {sidecar_path(path).name} starts "
                "an unlinked chain"
            )
    fd, _ = open_log(path)
    try:
        return _verify_open(fd, path, checkpoint)
    except BaseException:
        os.close(fd)
        raise


def _verify_open(fd: int, path: Path, checkpoint: Checkpoint | None) -> Opened:
    start, state, number = 0, None, 1
    first_seq: int | None = None
    if checkpoint is not None:
        try:
            located = _locate(fd, path, checkpoint)
        except _Contradiction as contradiction:
            _explain(fd, path)  # a precise bad line when the file itself shows one
            raise AuditLogError(str(contradiction)) from None
        if located:
            start, state = checkpoint.offset, (checkpoint.seq, checkpoint.head)
            number = checkpoint.seq - checkpoint.first_seq + 2
            first_seq = checkpoint.first_seq
    with os.fdopen(os.dup(fd), "rb") as handle:
        result = scan(handle, start=start, state=state, first_line=number)
    if first_seq is None:
        first_seq = result.first_seq
    torn = None
    if not result.ok:
        if not result.torn:
            report = VerifyReport(
                False,
                result.seq - first_seq + 1 if first_seq is not None else 0,
                result.head,
                result.seq,
                result.bad_line,
                result.reason,
                first_seq,
                str(path),
            )
            raise AuditLogCorrupt(str(path), report)
        try:
            torn = remove_torn_tail(fd, path, result.end)
        except OSError as error:
            raise AuditLogError(
                f"audit log {path} ends with a torn line that cannot be moved aside: "
                f"{error.strerror or error}"
            ) from None
    if first_seq is None:
        first_seq = result.seq + 1
    offset = checkpoint.offset if checkpoint is not None and start else 0
    if result.seq and result.end > offset:
        try:
            os.fsync(fd)
            point = Checkpoint(path.name, first_seq, result.seq, result.head, result.end)
            write_checkpoint(path, point)
            offset = result.end
        except OSError:
            pass
    background = None
    if start and state is not None:
        background = verify_in_background(path, fd, start, *state)
    return Opened(
        fd, result.seq, result.head, result.end, first_seq, offset, start, torn, background
    )


class _Contradiction(Exception):
    """The sidecar and the file disagree."""


def _explain(fd: int, path: Path) -> None:
    """Verify the whole file: raise :class:`AuditLogCorrupt` for its first bad line, if any
    other than a torn tail."""
    with os.fdopen(os.dup(fd), "rb") as handle:
        result = scan(handle)
    if not result.ok and not result.torn:
        first = result.first_seq
        lines = result.seq - first + 1 if first is not None else 0
        raise AuditLogCorrupt(
            str(path),
            VerifyReport(
                False, lines, result.head, result.seq, result.bad_line, result.reason, first
            ),
        )


def _locate(fd: int, path: Path, checkpoint: Checkpoint) -> bool:
    """True: verify from the sidecar's point. False: the sidecar predates a rotation of this
    file; verify the whole file. :class:`AuditLogError` when it contradicts the file."""
    name = sidecar_path(path).name
    recorded = (
        f"{name} records seq {checkpoint.seq} (head {checkpoint.head}) at byte {checkpoint.offset}"
    )
    if checkpoint.log != path.name:
        raise _Contradiction(
            f"{name} describes log file {checkpoint.log!r}, not {path.name!r}; remove it to "
            "verify the whole log at start-up"
        )
    head_line = first_line(fd)
    first = parse_sealed(head_line)[1] if head_line is not None else None
    first_seq = first.get("seq") if first is not None else None
    if type(first_seq) is int and first_seq > checkpoint.seq:
        previous = start_state(first)
        if (
            previous is None
            or previous[0] < checkpoint.seq
            or (previous[0] == checkpoint.seq and previous[1] != checkpoint.head)
        ):
            raise _Contradiction(
                f"audit log {path} starts at seq {first_seq} without a link to the chain "
                f"{recorded}: it was replaced"
            )
        return False
    if first_seq != checkpoint.first_seq:
        raise _Contradiction(
            f"audit log {path} does not start where {name} says (first seq "
            f"{checkpoint.first_seq}, found {first_seq!r}): it was replaced or rewritten"
        )
    size = os.fstat(fd).st_size
    if size < checkpoint.offset:
        raise _Contradiction(
            f"audit log {path} has {size} bytes but {recorded}: the log was cut back"
        )
    line = line_ending_at(fd, checkpoint.offset)
    digest, fields, _ = parse_sealed(line) if line is not None else ("", None, None)
    if fields is None or fields.get("seq") != checkpoint.seq or digest != checkpoint.head:
        raise _Contradiction(
            f"audit log {path} does not have the line {recorded}: the log was rewritten"
        )
    return True
