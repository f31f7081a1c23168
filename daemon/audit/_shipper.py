"""Shipping the committed audit lines to the configured sinks (``[[audit.sinks]]``;
``docs/audit-log.md`` "Shipping decision logs").

Rules (the contract):

1. The durable local log is the source of truth and the only queue. One :class:`Shipper`
   per sink runs in a thread of its own and reads the lines from the files
   (:class:`daemon.audit._follow.Follower`) up to the durable ``seq`` the writer publishes
   (``durable()``, read without a lock): nothing is handed to it on the request path or in
   the writer's group commit, so a slow, failing or stalled sink never delays, refuses or
   holds a decision; it only falls behind. It holds at most one batch (``batch_lines``
   events, ``batch_bytes`` of JSON), so a sink that never keeps up does not grow: what it has
   not shipped stays in the file.
2. Which lines: those whose ``event`` is in ``events`` (default ``decision``; ``["*"]``:
   every line); the others are passed over (they count as settled).
3. A batch is sent until it is acknowledged: after a failure it is sent again, unchanged,
   after a wait that starts at ``backoff_min`` seconds and doubles up to ``backoff_max``,
   each drawn uniformly from its upper half (jitter, so a fleet does not retry in step).
   Only once it is acknowledged is the cursor (``LOG.sink-<name>.cursor``) written, after
   its last line: a restart resumes after the last acknowledged batch, so nothing is lost
   and a line is shipped twice only when a batch reached the receiver but its
   acknowledgement did not reach the daemon (or the daemon stopped between the two): at
   most one batch per such incident (at least once). Passed-over lines move the cursor too,
   written once caught up.
4. The start: a sink with a cursor resumes from it; one without starts at ``start_at``:
   ``oldest`` (before the first line of the oldest file beside the log) or ``now`` (after
   the durable line, the cursor written at once). A cursor that cannot be read, or a log
   that does not continue it (:class:`~daemon.audit._follow.FollowError`), *stalls* the
   sink: nothing more is shipped, ``health`` and one ``audit_sink_stalled`` error say why,
   and decisions go on. Removed rotated files are passed over (``skipped``, one
   ``audit_sink_gap`` error).
5. :meth:`Shipper.status` (``health``'s ``audit.sinks``, ``/metrics``): ``state``
   (``starting``, ``caught_up``, ``shipping``, ``retrying``, ``stalled``, ``stopped``),
   ``cursor_seq``, ``durable_seq``, ``lag_lines``, ``lag_seconds`` (the age of the oldest line
   not shipped yet, 0 when caught up), ``shipped`` and ``batches`` (acknowledged),
   ``failures``, ``consecutive_failures``, ``last_error`` and ``last_error_at``,
   ``last_success_at`` (RFC 3339), ``skipped``. Operators also see ``audit_sink_failed``
   (the first failure of a stretch, then at most once a minute) and ``audit_sink_recovered``.
6. The stop (:meth:`Shipping.stop`, after the audit log is closed): each sink ships what is
   left within ``timeout`` seconds (a failure ends it at once, with no wait), writes its
   cursor and ends; one still behind says so (``audit_sink_behind``) and resumes from its
   cursor at the next start.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from daemon.audit._audit import iso_utc
from daemon.audit._follow import (
    Chunk,
    CursorError,
    Follower,
    FollowError,
    Position,
    end_of,
    read_cursor,
    start_of,
    write_cursor,
)
from daemon.audit._shipping_config import SinkConfig
from daemon.audit._sinks import Sink, SinkFailed, event_of, open_sink
from daemon.wire import _logs as logs

__all__ = ["Shipper", "Shipping"]

#: At most one ``audit_sink_failed`` warning per this many seconds while a sink keeps failing.
WARNING_INTERVAL: Final = 60.0


def _rfc3339(seconds: float | None) -> str | None:
    return None if seconds is None else iso_utc(int(seconds * 1e6))


class Shipper:
    """One sink's thread (module rules). ``durable()`` is the log's durable ``seq``."""

    def __init__(
        self,
        config: SinkConfig,
        log: Path,
        durable: Callable[[], int],
        labels: dict[str, str],
        *,
        sink: Sink,
    ) -> None:
        self.config = config
        self.log = log
        self.cursor_path = config.cursor_path(log)
        self._durable = durable
        self._labels = labels
        self._sink = sink
        self._selected = None if config.ships_everything else frozenset(config.events)
        self._wake = threading.Event()
        self._stopping = False
        self._deadline = float("inf")
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._run, name=f"evidenced-sink-{config.name}", daemon=True
        )
        # The figures of rule 5, written by the thread, read under the lock.
        self._state = "starting"
        self._acked: Position | None = None
        self._dirty = False
        self._oldest: float | None = None
        self._caught_up_at: float | None = None
        self.shipped = 0
        self.batches = 0
        self.failures = 0
        self._consecutive = 0
        self._last_error: str | None = None
        self._last_error_at: float | None = None
        self._last_success_at: float | None = None
        self._warned_at = -float("inf")
        self._stall: str | None = None
        self._follower: Follower | None = None
        #: The batch being sent (rule 1: the only one held); for tests and ``status``.
        self.in_flight: Chunk | None = None

    # -- control

    def start(self) -> None:
        self._thread.start()

    def stop(self, deadline: float) -> None:
        """Rule 6: ship what is left until ``deadline`` (``time.monotonic``), then end."""
        self._deadline = deadline
        self._stopping = True
        self._wake.set()

    def join(self, timeout: float) -> bool:
        self._thread.join(max(0.0, timeout))
        return not self._thread.is_alive()

    # -- status (rule 5)

    def status(self) -> dict[str, Any]:
        durable = self._durable()
        now = time.time()
        with self._lock:
            acked = self._acked
            cursor = None if acked is None else acked.seq
            lag = 0 if cursor is None else max(0, durable - cursor)
            if lag == 0:
                age = 0.0
            elif self._oldest is not None:
                age = max(0.0, now - self._oldest)
            elif self._caught_up_at is not None:
                age = max(0.0, now - self._caught_up_at)
            else:
                age = 0.0
            return {
                "name": self.config.name,
                "type": self.config.type,
                "target": self.config.target,
                "events": list(self.config.events),
                "state": self._state,
                "cursor_seq": cursor,
                "durable_seq": durable,
                "lag_lines": lag if cursor is not None else durable,
                "lag_seconds": round(age, 3),
                "shipped": self.shipped,
                "batches": self.batches,
                "failures": self.failures,
                "consecutive_failures": self._consecutive,
                "last_error": self._last_error,
                "last_error_at": _rfc3339(self._last_error_at),
                "last_success_at": _rfc3339(self._last_success_at),
                "skipped": 0 if self._follower is None else self._follower.skipped,
                "cursor_file": str(self.cursor_path),
            }

    # -- the thread

    def _run(self) -> None:
        try:
            position = self._start_position()
        except (CursorError, FollowError, OSError) as error:
            self._stalled(str(error))
            return
        follower = self._follower = Follower(self.log, position, on_gap=self._gap)
        with self._lock:
            self._acked = position
        try:
            self._loop(follower)
        except FollowError as error:
            self._stalled(str(error))
        except Exception as error:  # never out of the thread silently: the sink stalls
            self._stalled(f"{type(error).__name__}: {error}")
        finally:
            follower.close()
            self._sink.close()
            if self._dirty:
                self._save()
            with self._lock:
                if self._state != "stalled":
                    self._state = "stopped"
            self._report_stop()

    def _start_position(self) -> Position:
        """Rule 4."""
        saved = read_cursor(self.cursor_path, self.config.name)
        if saved is not None:
            return saved
        if self.config.start_at == "now":
            position = end_of(self.log, self._durable())
            write_cursor(self.cursor_path, self.config.name, position)
            return position
        return start_of(self.log)

    def _select(self, line: bytes, fields: dict[str, Any]) -> bytes | None:
        """Rule 2."""
        if self._selected is not None and fields.get("event") not in self._selected:
            return None
        return event_of(line, fields, self._labels)

    def _loop(self, follower: Follower) -> None:
        config = self.config
        backoff = config.backoff_min
        chunk: Chunk | None = None
        while True:
            if self._stopping and time.monotonic() >= self._deadline:
                return
            if chunk is None:
                upto = self._durable()
                if upto <= follower.position.seq:
                    self._caught_up()
                    if self._stopping:
                        return
                    self._wake.wait(config.flush_interval)
                    self._wake.clear()
                    continue
                chunk = follower.read(
                    upto,
                    self._select,
                    max_events=config.batch_lines,
                    max_bytes=config.batch_bytes,
                )
                if not chunk.events:  # only passed-over lines: settled (rule 2)
                    self._settle(chunk, save=False)
                    chunk = None
                    continue
                with self._lock:
                    self.in_flight = chunk
                    if self._oldest is None:
                        self._oldest = chunk.first_time
                    if self._state != "retrying":
                        self._state = "shipping"
            try:
                self._sink.send(chunk.events)
            except SinkFailed as error:
                self._failed(str(error))
                if self._stopping:
                    return
                self._wake.wait(random.uniform(backoff / 2, backoff))
                self._wake.clear()
                backoff = min(backoff * 2, config.backoff_max)
                continue
            self._settle(chunk, save=True)
            chunk = None
            backoff = config.backoff_min

    def _settle(self, chunk: Chunk, *, save: bool) -> None:
        """Rule 3: the chunk's lines are settled; an acknowledged batch writes the cursor."""
        now = time.time()
        with self._lock:
            self._acked = chunk.end
            self._dirty = True
            self.in_flight = None
            self._oldest = None
            if save:
                recovered = self._consecutive
                self.shipped += len(chunk.events)
                self.batches += 1
                self._consecutive = 0
                self._last_success_at = now
                self._state = "shipping"
        if save:
            self._save()
            if recovered:
                logs.info(
                    "audit_sink_recovered",
                    f"sink {self.config.name} ({self.config.target}) ships again after "
                    f"{recovered} failed attempts",
                    sink=self.config.name,
                    attempts=recovered,
                )

    def _save(self) -> None:
        acked = self._acked
        if acked is None:
            return
        try:
            write_cursor(self.cursor_path, self.config.name, acked)
        except OSError as error:  # at least once still holds; a restart resends more
            with self._lock:
                self._last_error = f"cursor {self.cursor_path}: {error.strerror or error}"
                self._last_error_at = time.time()
            return
        self._dirty = False

    def _caught_up(self) -> None:
        if self._dirty:
            self._save()
        with self._lock:
            self._state = "caught_up"
            self._caught_up_at = time.time()

    def _failed(self, error: str) -> None:
        now = time.time()
        with self._lock:
            self.failures += 1
            self._consecutive += 1
            self._last_error = error
            self._last_error_at = now
            self._state = "retrying"
            attempts = self._consecutive
            due = attempts == 1 or time.monotonic() - self._warned_at >= WARNING_INTERVAL
            if due:
                self._warned_at = time.monotonic()
        if due:
            logs.warning(
                "audit_sink_failed",
                f"sink {self.config.name}: {error}; retrying with backoff ({attempts} failed "
                "attempts so far). Decisions are not affected: the sink falls behind and "
                "ships from the audit log once it can",
                sink=self.config.name,
                error=error,
                attempts=attempts,
            )

    def _stalled(self, reason: str) -> None:
        with self._lock:
            self._state = "stalled"
            self._stall = reason
            self._last_error = reason
            self._last_error_at = time.time()
        logs.error(
            "audit_sink_stalled",
            f"sink {self.config.name} stopped shipping: {reason}. Decisions go on; to ship "
            f"from the log's first line instead, stop the daemon and remove {self.cursor_path}",
            sink=self.config.name,
            error=reason,
        )

    def _gap(self, first: int, last: int, file: str) -> None:
        logs.error(
            "audit_sink_gap",
            f"sink {self.config.name}: audit lines seq {first}-{last} are in no file beside "
            f"{self.log} (rotated files removed before they were shipped): passed over",
            sink=self.config.name,
            first_seq=first,
            last_seq=last,
        )

    def _report_stop(self) -> None:
        status = self.status()
        if status["lag_lines"] and status["state"] != "stalled":
            logs.warning(
                "audit_sink_behind",
                f"sink {self.config.name} stopped {status['lag_lines']} lines behind (cursor "
                f"seq {status['cursor_seq']}); it resumes from its cursor at the next start",
                sink=self.config.name,
                lag_lines=status["lag_lines"],
            )


class Shipping:
    """Every sink of one audit log (module rules)."""

    def __init__(self, shippers: Sequence[Shipper]) -> None:
        self.shippers = list(shippers)

    @classmethod
    def start(
        cls,
        sinks: Sequence[SinkConfig],
        log: Path,
        durable: Callable[[], int],
        labels_of: Callable[[SinkConfig], dict[str, str]],
        user_agent: str,
    ) -> Shipping:
        shippers = [
            Shipper(sink, log, durable, labels_of(sink), sink=open_sink(sink, user_agent))
            for sink in sinks
        ]
        for shipper in shippers:
            shipper.start()
        return cls(shippers)

    def status(self) -> list[dict[str, Any]]:
        return [shipper.status() for shipper in self.shippers]

    def stop(self) -> None:
        """Rule 6 (blocks until every sink ended, or its timeout passed)."""
        now = time.monotonic()
        for shipper in self.shippers:
            shipper.stop(now + shipper.config.timeout)
        for shipper in self.shippers:
            shipper.join(now + shipper.config.timeout + 1.0 - time.monotonic())
