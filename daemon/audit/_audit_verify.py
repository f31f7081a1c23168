"""Verifying audit log files: one file, a rotated series, anchors; and reading the tail.

Rules (the contract):

1. :func:`scan` reads a file in bounded chunks from a byte offset and checks each line with
   :func:`~daemon.audit._audit_format.check_line` against the state before it. With no state (the
   start of a file) the first line must start a chain: ``seq`` 1 after :data:`GENESIS`, or
   an ``audit_rotated`` line naming the previous file's final ``seq`` and head. It stops at
   the first failure and says where (1-based line, byte offset after the last good line) and
   whether the failure is only a *torn tail*: a final segment without newline that ends at
   the end of the file (what a failed or interrupted append leaves).
2. :func:`verify_log` checks one file or a series ``A B C`` in order: each file continues the
   chain of the one before (its first line's ``seq``/``prev`` follow the previous file's
   last line). Then the anchors: ``SEQ:DIGEST`` requires the line with that ``seq`` to carry
   that digest (a different digest: rewritten; a ``seq`` beyond the last line: cut back; a
   ``seq`` before the first given file: not checkable with these files, so not intact);
   a bare ``DIGEST`` must be the digest of some line. It never raises for bad content
   (``OSError`` for I/O, ``ValueError`` for a malformed anchor). A file may also be given as
   an open binary stream (``sys.stdin.buffer`` for ``audit verify -``): it is read from where
   it stands, never seeked, so a pipe works.
3. :func:`tail` returns the last lines unverified, oldest first (a path or a stream too).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Final

import attrs

from daemon.audit._audit_format import (
    GENESIS,
    MAX_LINE_BYTES,
    Anchor,
    check_line,
    parse_anchor,
    parse_sealed,
    start_state,
)

_CHUNK = 1 << 20


@attrs.frozen
class VerifyReport:
    """Outcome of :func:`verify_log`. ``first_bad_line`` is 1-based within ``bad_file`` (None
    when the failure is not a line, e.g. an anchor beyond the end); ``head``/``last_seq`` are
    the last good line's; ``first_seq`` is the first verified line's (1: from genesis)."""

    intact: bool
    lines: int
    head: str
    last_seq: int
    first_bad_line: int | None = None
    reason: str | None = None
    first_seq: int | None = None
    bad_file: str | None = None
    files: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": "INTACT" if self.intact else "BROKEN",
            "lines": self.lines,
            "head": self.head,
            "last_seq": self.last_seq,
            "first_seq": self.first_seq,
            "anchor": f"{self.last_seq}:{self.head}" if self.last_seq else None,
            "files": self.files,
            "first_bad_line": self.first_bad_line,
            "bad_file": self.bad_file,
            "reason": self.reason,
        }

    def describe_failure(self) -> str:
        """One human sentence for a broken report (never "line None")."""
        where = f" ({self.bad_file})" if self.bad_file and self.files > 1 else ""
        if self.first_bad_line is None:
            return f"audit log does not verify{where}: {self.reason}"
        return f"audit log broken at line {self.first_bad_line}{where}: {self.reason}"


@attrs.define
class Scan:
    """What :func:`scan` found. ``end`` is the byte offset just after the last good line."""

    seq: int
    head: str
    end: int
    lines: int = 0
    first_seq: int | None = None
    bad_line: int | None = None
    reason: str | None = None
    torn: bool = False

    @property
    def ok(self) -> bool:
        return self.reason is None


def iter_lines(handle: IO[bytes], start: int = 0) -> Iterator[tuple[bytes, bool]]:
    """Yield (line without newline, had_newline) from byte ``start``, in bounded chunks. A
    final segment without newline is yielded with ``had_newline`` False; so is an overlong
    one (then reading stops)."""
    if start:  # a stream from its start is never seeked: a pipe has no position
        handle.seek(start)
    pending = b""
    while True:
        chunk = handle.read(_CHUNK)
        if not chunk:
            break
        pending += chunk
        *complete, pending = pending.split(b"\n")
        yield from ((line, True) for line in complete)
        if len(pending) > MAX_LINE_BYTES:
            yield pending[: MAX_LINE_BYTES + 1], False
            return
    if pending:
        yield pending, False


Watch = Callable[[int, int, str], str | None]


def scan(
    handle: IO[bytes],
    *,
    start: int = 0,
    state: tuple[int, str] | None = None,
    first_line: int = 1,
    watch: Watch | None = None,
) -> Scan:
    """Check lines from byte ``start`` (line number ``first_line``) continuing ``state``
    ((seq, head) before it; None at the start of a file: the first line decides).
    ``watch(line_number, seq, digest)`` may stop the scan with a reason."""
    seq, head = state if state is not None else (0, GENESIS)
    result = Scan(seq, head, start)
    number = first_line - 1
    end = start
    for number, (raw, had_newline) in enumerate(iter_lines(handle, start), start=first_line):
        if state is None:
            first = parse_sealed(raw)[1] if had_newline else None
            state = start_state(first)
            if state is None:
                reason = check_line(raw, had_newline, 0, GENESIS)[2] if first is None else None
                return _stop(result, seq, head, end, number, first_line, reason, had_newline, raw)
            seq, head = state
        digest, _, reason = check_line(raw, had_newline, seq, head)
        if reason is None and watch is not None:
            reason = watch(number, seq + 1, digest)
        if reason is not None:
            return _stop(result, seq, head, end, number, first_line, reason, had_newline, raw)
        if result.first_seq is None:
            result.first_seq = seq + 1
        seq, head = seq + 1, digest
        end += len(raw) + 1
    result.seq, result.head, result.end = seq, head, end
    result.lines = number - first_line + 1
    return result


_FIRST_LINE: Final = (
    "the first line neither starts the chain (seq 1 after genesis) nor continues a rotated "
    "file (an audit_rotated line)"
)


def _stop(
    result: Scan,
    seq: int,
    head: str,
    end: int,
    number: int,
    first_line: int,
    reason: str | None,
    had_newline: bool,
    raw: bytes,
) -> Scan:
    result.seq, result.head, result.end = seq, head, end
    result.lines = number - first_line
    result.bad_line = number
    result.reason = reason or _FIRST_LINE
    result.torn = not had_newline and len(raw) <= MAX_LINE_BYTES
    return result


def _anchor_watch(anchors: tuple[Anchor, ...], bare_seen: set[str]) -> Watch | None:
    by_seq: dict[int, str] = {}
    for anchor in anchors:
        if anchor.seq is not None:
            by_seq.setdefault(anchor.seq, anchor.digest)
            if by_seq[anchor.seq] != anchor.digest:
                raise ValueError(f"two anchors name different digests for seq {anchor.seq}")
    bare = {anchor.digest for anchor in anchors if anchor.seq is None}
    if not anchors:
        return None

    def watch(number: int, seq: int, digest: str) -> str | None:
        expected = by_seq.get(seq)
        if expected is not None and expected != digest:
            return (
                f"line seq {seq} has digest {digest} but anchor {seq}:{expected} was recorded "
                "(the log was rewritten)"
            )
        if digest in bare:
            bare_seen.add(digest)
        return None

    return watch


def _opened(
    name: str | os.PathLike[str] | IO[bytes],
) -> contextlib.AbstractContextManager[IO[bytes]]:
    if isinstance(name, str | os.PathLike):
        return Path(name).open("rb")
    return contextlib.nullcontext(name)  # a stream the caller opened, and closes


def _label(name: str | os.PathLike[str] | IO[bytes]) -> str:
    if isinstance(name, str | os.PathLike):
        return str(name)
    return str(getattr(name, "name", "<stream>"))


def verify_log(
    path: str | os.PathLike[str] | IO[bytes],
    *more: str | os.PathLike[str] | IO[bytes],
    anchors: tuple[str | Anchor, ...] = (),
) -> VerifyReport:
    """Verify one audit log file, or a rotated series in order (rules 1–2); a file is a path
    or an open binary stream."""
    parsed = tuple(a if isinstance(a, Anchor) else parse_anchor(a) for a in anchors)
    bare_seen: set[str] = set()
    watch = _anchor_watch(parsed, bare_seen)
    paths = (path, *more)
    state: tuple[int, str] | None = None
    first_seq: int | None = None
    lines = 0
    for name in paths:
        with _opened(name) as handle:
            result = scan(handle, state=state, watch=watch)
        if first_seq is None:
            first_seq = result.first_seq
        if not result.ok:
            return VerifyReport(
                False,
                lines + result.lines,
                result.head,
                result.seq,
                result.bad_line,
                result.reason,
                first_seq,
                _label(name),
                len(paths),
            )
        lines += result.lines
        if result.first_seq is not None or state is not None:
            state = (result.seq, result.head)
    seq, head = state if state is not None else (0, GENESIS)
    report = VerifyReport(True, lines, head, seq, None, None, first_seq, None, len(paths))
    for anchor in parsed:
        reason = _anchor_failure(anchor, seq, first_seq, bare_seen)
        if reason is not None:
            return attrs.evolve(report, intact=False, reason=reason)
    return report


def _anchor_failure(
    anchor: Anchor, last_seq: int, first_seq: int | None, bare_seen: set[str]
) -> str | None:
    if anchor.seq is None:
        if anchor.digest in bare_seen:
            return None
        return f"anchor {anchor} is not in the chain (the log was rewritten or truncated)"
    if anchor.seq > last_seq:
        return (
            f"anchor {anchor} names seq {anchor.seq} but the log ends at seq {last_seq} "
            "(the log was cut back or rewritten)"
        )
    if first_seq is None or anchor.seq < first_seq:
        return (
            f"anchor {anchor} precedes the first line given (seq {first_seq}): "
            "pass the earlier rotated files too"
        )
    return None


def tail(path: str | os.PathLike[str] | IO[bytes], count: int) -> list[dict[str, Any]]:
    """The last ``count`` parseable lines of the log (a path or an open binary stream), oldest
    first (unverified)."""
    window: collections.deque[bytes] = collections.deque(maxlen=max(count, 0))
    with _opened(path) as handle:
        for raw, had_newline in iter_lines(handle):
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
