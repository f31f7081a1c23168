"""Background verification of the part of the audit log start-up trusted from the sidecar
(``docs/audit-log.md`` §7.6).

Start-up verifies only the bytes after the sidecar's point (§7.3): a line edited *before*
that point (a same-length ``PASS``→``FAIL``) is not seen by a start that takes ~5 ms. So the
daemon serves at once and verifies the rest behind itself. Rules:

1. :func:`start` is called with the opened log when start-up verified from a byte offset
   ``end`` > 0. It opens the file anew (read-only, its own file offset: the writer's is never
   moved) and, in one daemon thread at the lowest CPU priority this thread may take, verifies
   the chain of bytes ``[0, end)`` from the file's first line, the same check as ``audit
   verify``, and requires it to reach exactly the ``(seq, head)`` start-up continued from.
2. While it runs, :attr:`Verification.state` is ``running``; then ``verified`` or ``broken``.
   ``broken`` sets :attr:`Verification.alarm` (the bad line and why) for good, and
   ``AuditLog.alarm`` with it: ``health`` turns ``degraded`` with that reason until the daemon
   is restarted on a repaired log (``evidenced audit verify`` names the line). New lines are
   still written and answered, and the stop is clean: refusing every decision because an old
   line was edited would hand anyone who can edit one byte a denial of service; the alarm is
   what tells the operator.
3. The moment it finds the fault it writes one alarm line to standard error
   (``evidenced: ALARM audit log … is broken at line N: reason``) — the log itself is not
   written to: its chain is what is in doubt.
4. It never raises: an I/O error reading the file is ``broken`` with that error.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from pathlib import Path

from daemon import logs
from daemon.audit._audit_verify import scan

__all__ = ["Verification", "start"]


class Verification:
    """One background verification of a log prefix (module rules)."""

    def __init__(self, path: Path, fd: int, end: int, seq: int, head: str) -> None:
        self.path = path
        self.end = end
        self.state = "running"
        self.alarm: str | None = None
        self.seconds: float | None = None
        self._expected = (seq, head)
        self._fd = fd
        self._thread = threading.Thread(
            target=self._run, name="evidenced-audit-verify", daemon=True
        )

    def status(self) -> dict[str, object]:
        return {"state": self.state, "bytes": self.end, "seconds": self.seconds}

    def join(self, timeout: float | None = None) -> None:
        """Wait for the verification (tests and benchmarks)."""
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
            os.close(self._fd)
        self.seconds = round(time.monotonic() - started, 3)
        if reason is None:
            self.state = "verified"
            return
        self.alarm = (
            f"audit log {self.path} is broken {reason} (found by the background verification "
            "of the part start-up trusted from the sidecar); lines are still written, but "
            "the chain before them is in doubt: run `evidenced audit verify`"
        )
        self.state = "broken"
        logs.error("audit_alarm", f"ALARM {self.alarm}", path=str(self.path))

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


def start(path: Path, fd: int, end: int, seq: int, head: str) -> Verification:
    """Rule 1: verify ``[0, end)`` of the file open as ``fd`` in a background thread."""
    own = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    verification = Verification(path, own, end, seq, head)
    verification._thread.start()
    return verification
