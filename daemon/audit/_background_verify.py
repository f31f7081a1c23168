"""Background verification (``docs/audit-log.md`` §7.6): the part of the audit log start-up
trusted from the sidecar, and the whole transparency tree against the log's lines.

Start-up verifies only the bytes after the sidecar's point (§7.3): a line edited *before*
that point (a same-length ``PASS``→``FAIL``) is not seen by a start that takes ~5 ms. The
transparency log's start-up checks only its signed tail (``daemon.tlog._log`` rule 4): a full
tile edited on disk is not seen either, and proofs are served from those tiles. So the daemon
serves at once and verifies the rest behind itself. Rules:

1. :func:`start` is called with the opened log when start-up verified from a byte offset
   ``end`` > 0. It opens the file anew (read-only, its own file offset: the writer's is never
   moved) and, in one daemon thread at the lowest CPU priority this thread may take, verifies
   the chain of bytes ``[0, end)`` from the file's first line, the same check as ``audit
   verify``, and requires it to reach exactly the ``(seq, head)`` start-up continued from.
2. :func:`start_tree` is called when the daemon runs with a transparency log. In its own
   thread at the same priority it first waits for the chain's verification (rule 1), if any
   (one core at most, never two passes over the same bytes at once), then runs the check
   ``evidenced log verify`` runs, :func:`daemon.tlog.verify_directory`, over the log's files
   (rotated ones first) under the log's own verifier key: every tile and entry bundle the
   lines complete, the partial tiles and root of the checkpoint it reads when it begins.
   Lines written meanwhile are taken as they come (their tiles are checked when they exist:
   a tile file appears whole, by ``rename``). A failure while the files were rotated under
   it (the list of files changed, or one could not be read) is verified once more on the
   new list before it counts. A log whose rotated files are
   not all beside it (``LOG_UNAVAILABLE``: the first line is not ``seq`` 1) cannot be
   verified here: state ``unverifiable``, one warning (``audit_tree_unverifiable``), no
   alarm.
3. While a verification runs, :attr:`Verification.state` is ``running``; then ``verified``,
   ``broken`` or (rule 2) ``unverifiable``. ``broken`` sets :attr:`Verification.alarm` (what
   is wrong, where) for good, and ``AuditLog.alarm`` with it: ``health`` turns ``degraded``
   with that reason until the daemon is restarted on repaired files (``evidenced audit
   verify`` names the line, ``evidenced log verify`` the tile). New lines are still written,
   signed and answered, and the stop is clean: refusing every decision because an old line
   or tile was edited would hand anyone who can edit one byte a denial of service; the alarm
   is what tells the operator.
4. The moment it finds the fault it writes one ``audit_alarm`` event to standard error
   (``ALARM audit log … is broken at line N: reason``, ``ALARM transparency log … does not
   match …: TILES_EDITED: …``) — neither the log nor the tiles are written to: they are what
   is in doubt.
5. It never raises: an I/O error reading a file is ``broken`` with that error.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from daemon.audit._audit_verify import scan
from daemon.tlog import VerifierKey, verify_directory
from daemon.wire import _logs as logs

__all__ = ["TreeVerification", "Verification", "start", "start_tree"]


class _Background:
    """One verification in one daemon thread at nice 19 (rules 3-5); subclasses say what
    they verify (``_verify``: None or the reason it failed) and how the alarm reads."""

    state: str
    alarm: str | None
    seconds: float | None

    def __init__(self, path: Path, name: str) -> None:
        self.path = path
        self.state = "running"
        self.alarm = None
        self.seconds = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def join(self, timeout: float | None = None) -> None:
        """Wait for the verification (tests, benchmarks, and rule 2's order)."""
        self._thread.join(timeout)

    def _run(self) -> None:
        started = time.monotonic()
        if sys.platform == "linux":  # a thread's own nice value (Linux: per thread)
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        try:
            reason = self._verify()
        except OSError as error:
            reason = f"cannot be read for verification: {error.strerror or error}"
        finally:
            self._release()
        self.seconds = round(time.monotonic() - started, 3)
        if reason is None:
            if self.state == "running":
                self.state = "verified"
            return
        alarm = self._alarm(reason)  # on stderr before health can say it (rule 4)
        logs.error("audit_alarm", f"ALARM {alarm}", path=str(self.path))
        self.alarm = alarm
        self.state = "broken"

    def _verify(self) -> str | None:
        raise NotImplementedError

    def _alarm(self, reason: str) -> str:
        raise NotImplementedError

    def _release(self) -> None:
        """Close what the verification opened (after it, whatever happened)."""


class Verification(_Background):
    """One background verification of a log prefix (rule 1)."""

    def __init__(self, path: Path, fd: int, end: int, seq: int, head: str) -> None:
        super().__init__(path, "evidenced-audit-verify")
        self.end = end
        self._expected = (seq, head)
        self._fd = fd

    def status(self) -> dict[str, object]:
        return {"state": self.state, "bytes": self.end, "seconds": self.seconds}

    def _release(self) -> None:
        os.close(self._fd)

    def _alarm(self, reason: str) -> str:
        return (
            f"audit log {self.path} is broken {reason} (found by the background verification "
            "of the part start-up trusted from the sidecar); lines are still written, but "
            "the chain before them is in doubt: run `evidenced audit verify`"
        )

    def _verify(self) -> str | None:
        seq, head = self._expected

        def stop_at_start_point(number: int, line_seq: int, digest: str) -> str | None:
            if line_seq < seq:
                return None
            return _REACHED if digest == head else f"at line {number}: not the sidecar's head"

        with os.fdopen(os.dup(self._fd), "rb") as handle:
            found = scan(handle, watch=stop_at_start_point)
        if found.reason == _REACHED:
            return None
        if not found.ok:
            return f"at line {found.bad_line}: {found.reason}"
        return (
            f"before byte {self.end}: its chain ends at seq {found.seq}, before the sidecar's "
            f"seq {seq}"
        )


_REACHED = "reached the point start-up continued from"


class TreeVerification(_Background):
    """One background verification of the transparency tree against the log (rule 2)."""

    def __init__(
        self,
        log: Path,
        directory: Path,
        files: Callable[[], Sequence[Path]],
        key: VerifierKey,
        after: _Background | None,
    ) -> None:
        super().__init__(log, "evidenced-tree-verify")
        self.directory = directory
        self.lines: int | None = None
        self.tiles: int | None = None
        self._files = files
        self._key = key
        self._after = after

    def status(self) -> dict[str, object]:
        return {
            "state": self.state,
            "lines": self.lines,
            "tiles": self.tiles,
            "seconds": self.seconds,
        }

    def _alarm(self, reason: str) -> str:
        return (
            f"transparency log {self.directory} does not match audit log {self.path}: "
            f"{reason} (found by the background verification of the whole tree); lines are "
            "still written and signed, but the tiles that proofs are built from are in doubt: "
            "run `evidenced log verify`"
        )

    def _verify(self) -> str | None:
        if self._after is not None:
            self._after.join()
        files = list(self._files())
        try:
            report = verify_directory(self.directory, files, self._key)
        except OSError:  # a file gone while it read: rotated under it, or a real fault
            report = None
        if report is None or not report.verified:
            again = list(self._files())
            if report is None or again != files:  # rule 2: once more, on the new list
                report = verify_directory(self.directory, again, self._key)
        self.lines, self.tiles = report.lines, report.tiles_checked
        if report.verified:
            return None
        if report.code == "LOG_UNAVAILABLE":
            self.state = "unverifiable"
            logs.warning(
                "audit_tree_unverifiable",
                f"transparency log {self.directory} cannot be verified in the background: "
                f"{report.message}",
                path=str(self.path),
            )
            return None
        return f"{report.code}: {report.message}"


def start(path: Path, fd: int, end: int, seq: int, head: str) -> Verification:
    """Rule 1: verify ``[0, end)`` of the file open as ``fd`` in a background thread."""
    own = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    verification = Verification(path, own, end, seq, head)
    verification._thread.start()
    return verification


def start_tree(
    log: Path,
    directory: Path,
    files: Callable[[], Sequence[Path]],
    key: VerifierKey,
    *,
    after: _Background | None = None,
) -> TreeVerification:
    """Rule 2: verify the tiles in ``directory`` against the lines of ``files()`` (oldest
    first) in a background thread, after ``after`` ends."""
    verification = TreeVerification(log, directory, files, key, after)
    verification._thread.start()
    return verification
