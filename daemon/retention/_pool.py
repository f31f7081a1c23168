"""The store threads: blocking store operations, bounded in time as far as the daemon is
concerned (``docs/retention.md`` §6).

A thread cannot be interrupted inside a system call (a read of a hung NFS mount, an ``open``
that waits) or a socket read the SDK retries, so the bound is kept around the threads, not
inside them. Rules:

1. :meth:`StorePool.submit` runs one operation on a thread and returns its
   :class:`concurrent.futures.Future`. Up to ``threads`` operations run at once; more wait in
   a queue (first in, first out).
2. An operation still running ``deadline`` seconds after it started is *stuck*. A stuck
   operation no longer counts against ``threads``: another thread is started in its place, so
   a store that hangs on one object does not starve the writes of every other object.
3. When ``threads`` operations of one store are stuck at once, further operations of that
   store fail at once with :class:`~daemon.retention._store.StoreStuck` (no new thread, no
   wait): a hung store costs a bounded number of threads and each decision needing it is
   answered within its deadline.
4. :meth:`StorePool.stuck` says, per store, how many operations are stuck and since when the
   oldest is: the retainer reports that as a failing store (``health`` ``degraded``, ``/ready``
   503) until they end.
5. Every thread is a daemon thread, and :meth:`StorePool.shutdown` never waits: queued
   operations are cancelled, running ones are abandoned, so stopping the daemon never hangs
   on a store (the process exits with the operation still blocked in the kernel).
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

import attrs

from daemon.retention._store import StoreStuck

__all__ = ["StorePool"]

T = TypeVar("T")
_IDLE_SECONDS: Final = 30.0


@attrs.define(eq=False)
class _Job:
    store: str
    run: Callable[[], Any]
    future: concurrent.futures.Future[Any]
    started: float | None = None


class StorePool:
    """Threads for blocking store operations (module rules)."""

    def __init__(self, threads: int, deadline: float, *, name: str = "evidenced-store") -> None:
        self.threads = threads
        self.deadline = deadline
        self._name = name
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queue: collections.deque[_Job] = collections.deque()
        self._running: set[_Job] = set()
        self._live = 0  # threads alive
        self._idle = 0  # threads waiting for work
        self._closed = False
        self._serial = 0

    def submit(self, store: str, run: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Rule 1; rule 3 (a future already failed); ``RuntimeError`` after shutdown."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the store pool is shut down")
            stuck = [job for job in self._stuck_jobs(time.monotonic()) if job.store == store]
            if len(stuck) >= self.threads:
                future.set_exception(
                    StoreStuck(
                        f"store {store}: STORE_STUCK: {len(stuck)} operations have not ended "
                        f"within {self.deadline:g} s; new ones fail at once until they do"
                    )
                )
                return future
            self._queue.append(_Job(store, run, future))
            working = self._live - len(self._stuck_jobs(time.monotonic()))
            if self._idle == 0 and working < self.threads:
                self._start_thread()
            else:
                self._wake.notify()
        return future

    def stuck(self) -> dict[str, tuple[int, float]]:
        """Rule 4: store -> (operations stuck, seconds the oldest has been running)."""
        now = time.monotonic()
        found: dict[str, tuple[int, float]] = {}
        with self._lock:
            for job in self._stuck_jobs(now):
                assert job.started is not None
                count, oldest = found.get(job.store, (0, 0.0))
                found[job.store] = (count + 1, max(oldest, now - job.started))
        return found

    def shutdown(self) -> None:
        """Rule 5: cancel what waits, abandon what runs, never wait."""
        with self._lock:
            self._closed = True
            queued, self._queue = list(self._queue), collections.deque()
            self._wake.notify_all()
        for job in queued:
            job.future.cancel()

    def _stuck_jobs(self, now: float) -> list[_Job]:
        return [
            job
            for job in self._running
            if job.started is not None and now - job.started > self.deadline
        ]

    def _start_thread(self) -> None:
        self._serial += 1
        self._live += 1
        thread = threading.Thread(
            target=self._work, name=f"{self._name}-{self._serial}", daemon=True
        )
        thread.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
                while not self._queue and not self._closed:
                    if not self._wake.wait(_IDLE_SECONDS) and not self._queue:
                        break
                self._idle -= 1
                working = self._live - len(self._stuck_jobs(time.monotonic()))
                if self._closed or not self._queue or working > self.threads:
                    self._live -= 1
                    return
                job = self._queue.popleft()
                if not job.future.set_running_or_notify_cancel():
                    continue
                job.started = time.monotonic()
                self._running.add(job)
            try:
                result = job.run()
            except BaseException as error:
                job.future.set_exception(error)
            else:
                job.future.set_result(result)
            finally:
                with self._lock:
                    self._running.discard(job)
