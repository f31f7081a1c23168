"""Retention in the daemon: a decision's evidence is stored before the decision is answered
(``docs/retention.md`` §6).

Rules (the contract the server relies on):

1. :meth:`Retention.running` opens one store per distinct store among the sessions that retain
   (a store that cannot be opened — an unsafe filesystem root, a malformed spec — is a
   :class:`~daemon.retention.StoreError` and the daemon does not start) and a pool of
   :data:`STORE_THREADS` threads for the writes (:class:`~daemon.retention._pool.StorePool`:
   an operation running past ``deadline`` is *stuck*, replaced by another thread, and a store
   with :data:`STORE_THREADS` stuck operations fails new ones at once); on exit it drops
   writes not yet started, abandons running ones (daemon threads: stop never waits for a hung
   store) and closes the stores.
2. :meth:`Retention.start` is called when a request's evidence has been received, before it
   is evaluated. For a session with ``retain = "all"`` it hands one write per item to the
   thread pool at once (no wait for the event loop to schedule anything), so the writes run
   while the evaluation does — even an evaluation on the event loop itself, since a store
   write spends its time in system calls and hashing that release the GIL. Otherwise it
   starts nothing. An item of at most :data:`RECENT_MAX_BYTES` whose object this process
   stored or verified less than :data:`RECENT_SECONDS` ago is taken as present without a
   write (a thread hop costs ~50-100 us of CPU here, an S3 round trip milliseconds; evidence
   repeated across decisions is common): so a present object is verified at most about once
   a minute per daemon, and every absent one is written.
3. :meth:`Pending.settle` is called with the decision, before its audit line is written. With
   ``retain = "refused"`` it starts the writes now when the outcome is not ``PASS``. It then
   waits for every write, at most ``deadline`` seconds from its start. When all succeeded it
   returns the fields of the decision line (:mod:`daemon.audit._fields`: ``binding``,
   ``result_digest``, ``retained: true``, ``store``); a decision a ``refused`` session passed
   gets ``retained: false``; a session without retention gets no field at all. When a write
   failed or did not finish in time it raises :class:`RetentionFailed` naming the store and
   the error: the server then answers ``AUDIT_FAILED`` and writes no line, exactly as when
   the audit line itself cannot be written. A decision is never answered as retained without
   its evidence stored.
4. :meth:`Retention.status` reports per store the writes, objects created and verified,
   items found in the recent memory (``recent``, rule 2), and failures; a store whose latest
   write failed is *failing* (its error and since when), which makes ``health`` say
   ``degraded``. The first successful write clears it: there is no separate recovery step,
   each request tries the store again (with the SDK's retries). A store with a *stuck*
   operation (rule 1) is failing too, while the operation runs (``stuck``, ``stuck_seconds``),
   whatever the other writes did: a hung store is never reported healthy.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from functools import partial
from typing import Any, Final, Protocol

import attrs
import trio

from daemon.audit._fields import decision_fields
from daemon.retention._open import open_store
from daemon.retention._policy import RetentionPolicy
from daemon.retention._pool import StorePool
from daemon.retention._store import PutResult, RetentionStore, StoreError, name_of
from daemon.wire import _logs as logs
from daemon.wire._errors import ServiceError
from session import BoundProposition

__all__ = [
    "RECENT_MAX_BYTES",
    "RECENT_SECONDS",
    "STORE_THREADS",
    "Pending",
    "Retention",
    "RetentionFailed",
]

#: Store writes running at once (each in a thread: fsync or an HTTP round trip).
STORE_THREADS: Final = 16
#: An object stored or verified this long ago or less is not written again (rule 2).
RECENT_SECONDS: Final = 60.0
#: Only items this small are looked up in that memory (they are hashed on the event loop).
RECENT_MAX_BYTES: Final = 65_536
_RECENT_MEMORY: Final = 65_536


class RetentionFailed(ServiceError):
    """The evidence could not be stored: the decision must not be answered as retained."""


class _Session(Protocol):
    @property
    def retention(self) -> RetentionPolicy | None: ...


@attrs.define
class _StoreState:
    """One open store and its counters (rule 4)."""

    store: RetentionStore
    writes: int = 0
    created: int = 0
    verified: int = 0
    recent: int = 0
    failures: int = 0
    failing_since: str | None = None
    last_error: str | None = None
    memory: collections.OrderedDict[str, float] = attrs.field(factory=collections.OrderedDict)

    def is_recent(self, name: str, now: float) -> bool:
        stamp = self.memory.get(name)
        if stamp is None or now - stamp > RECENT_SECONDS:
            return False
        self.recent += 1
        return True

    def remember(self, name: str, now: float) -> None:
        self.memory[name] = now
        self.memory.move_to_end(name)
        if len(self.memory) > _RECENT_MEMORY:
            self.memory.popitem(last=False)

    def status(self, stuck: tuple[int, float]) -> dict[str, Any]:
        return {
            "store": self.store.id,
            "stuck": stuck[0],
            "stuck_seconds": round(stuck[1], 3),
            "writes": self.writes,
            "created": self.created,
            "verified": self.verified,
            "recent": self.recent,
            "failures": self.failures,
            "failing": self.failing_since is not None,
            "failing_since": self.failing_since,
            "last_error": self.last_error,
        }


def _now() -> str:
    import structlog

    stamped: str = structlog.processors.TimeStamper(fmt="iso", utc=True, key="t")(None, "info", {})[
        "t"
    ]
    return stamped


class Pending:
    """One request's retention: its writes (started now or at :meth:`settle`)."""

    def __init__(
        self,
        retention: Retention,
        policy: RetentionPolicy | None,
        state: _StoreState | None,
        items: Sequence[bytes],
    ) -> None:
        self._retention = retention
        self._policy = policy
        self._state = state
        self._items = items
        self._done = trio.Event()
        self._remaining = 0
        self._error: str | None = None
        self._started_at: float | None = None
        if policy is not None and policy.retain == "all":
            self._start()

    def _start(self) -> None:
        state = self._state
        assert state is not None
        self._started_at = now = trio.current_time()
        missing = []
        for item in self._items:
            if len(item) > RECENT_MAX_BYTES or not state.is_recent(name_of(item), now):
                missing.append(item)
        self._remaining = len(missing)
        if not missing:
            self._done.set()
        for item in missing:
            self._retention._submit(self, state.store, item)

    def _completed(self, future: concurrent.futures.Future[PutResult]) -> None:
        """(event loop) One write ended."""
        try:
            result = future.result()
        except concurrent.futures.CancelledError:
            self._finished(None, "cancelled by shutdown")
        except StoreError as failure:
            self._finished(None, str(failure))
        except Exception as failure:  # never let one write take the server down
            self._finished(None, f"internal error: {type(failure).__name__}: {failure}")
        else:
            self._finished(result, None)

    def _finished(self, result: PutResult | None, error: str | None) -> None:
        state = self._state
        assert state is not None
        state.writes += 1
        if error is None and result is not None:
            state.created += result.created
            state.verified += not result.created
            state.failing_since = None
            if result.size <= RECENT_MAX_BYTES:
                state.remember(result.name, trio.current_time())
        else:
            state.failures += 1
            state.last_error = error
            if state.failing_since is None:
                state.failing_since = _now()
                message = (
                    f"evidence store {state.store.id} failed ({error}); decisions whose evidence"
                    " cannot be stored are answered AUDIT_FAILED"
                )
                logs.error("evidence_store_failed", message, store=state.store.id, error=str(error))
            if self._error is None:
                self._error = error
        self._remaining -= 1
        if self._remaining <= 0:
            self._done.set()

    async def settle(
        self, outcome: str, binding: BoundProposition, result: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Rule 3: the decision line's retention fields, or :class:`RetentionFailed`."""
        policy, state = self._policy, self._state
        if policy is None or state is None:
            return {}
        fields = decision_fields(binding, result)
        fields["store"] = state.store.id
        if self._started_at is None:
            if outcome == "PASS":  # retain = "refused": a passed decision's evidence is not kept
                return {**fields, "retained": False}
            self._start()
        assert self._started_at is not None
        with trio.move_on_at(self._started_at + self._retention.deadline):
            await self._done.wait()
        if not self._done.is_set():
            raise RetentionFailed(
                f"evidence not stored in {state.store.id} within {self._retention.deadline} s; "
                "the decision is not answered"
            )
        if self._error is not None:
            raise RetentionFailed(
                f"evidence could not be retained ({self._error}); the decision is not answered"
            )
        return {**fields, "retained": True}


class _NoRetention:
    """A session without retention: nothing to wait for, no field for the line."""

    async def settle(
        self, outcome: str, binding: BoundProposition, result: Mapping[str, Any]
    ) -> dict[str, Any]:
        return {}


_NOTHING: Final = _NoRetention()


class Retention:
    """The daemon's stores and pending writes (module rules)."""

    def __init__(self, sessions: Mapping[str, _Session], *, deadline: float) -> None:
        self.deadline = deadline
        self._policies = {
            name: session.retention
            for name, session in sessions.items()
            if session.retention is not None
        }
        self._states: dict[str, _StoreState] = {}
        self._by_session: dict[str, _StoreState] = {}
        self._executor: StorePool | None = None
        self._token: trio.lowlevel.TrioToken | None = None

    @property
    def enabled(self) -> bool:
        return bool(self._policies)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Rule 1."""
        try:
            for name, policy in self._policies.items():
                key = policy.store.id
                if key not in self._states:
                    self._states[key] = _StoreState(open_store(policy.store))
                self._by_session[name] = self._states[key]
            if self._policies:
                self._token = trio.lowlevel.current_trio_token()
                self._executor = StorePool(STORE_THREADS, self.deadline)
            yield
        finally:
            executor, self._executor = self._executor, None
            if executor is not None:
                executor.shutdown()
            for state in self._states.values():
                with contextlib.suppress(Exception):
                    state.store.close()

    def retains(self, session: str) -> bool:
        """Whether ``session``'s evidence is retained (:meth:`start` stores it)."""
        return session in self._policies

    def start(self, session: str, items: Sequence[bytes]) -> Pending | _NoRetention:
        """Rule 2."""
        policy = self._policies.get(session)
        if policy is None:
            return _NOTHING
        return Pending(self, policy, self._by_session.get(session), items)

    def _submit(self, pending: Pending, store: RetentionStore, item: bytes) -> None:
        executor, token = self._executor, self._token
        if executor is None or token is None:
            pending._finished(None, "the daemon is shutting down")
            return

        def deliver(future: concurrent.futures.Future[PutResult]) -> None:
            # (a store thread, or this one if the future is already done)
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(pending._completed, future)

        try:
            executor.submit(store.id, partial(store.put, item)).add_done_callback(deliver)
        except RuntimeError:  # the pool was shut down
            pending._finished(None, "the daemon is shutting down")

    def failure_reason(self) -> str | None:
        """Why ``health`` is degraded because of a store, or None (rule 4)."""
        stuck = self._executor.stuck() if self._executor is not None else {}
        for store, (count, seconds) in sorted(stuck.items()):
            return (
                f"evidence store {store} stuck: {count} operation(s) running for up to "
                f"{seconds:.0f} s (deadline {self.deadline:g} s); decisions needing it are "
                "answered AUDIT_FAILED"
            )
        failing = [state for state in self._states.values() if state.failing_since is not None]
        if not failing:
            return None
        state = failing[0]
        return (
            f"evidence store {state.store.id} failing since {state.failing_since}: "
            f"{state.last_error}; decisions needing it are answered AUDIT_FAILED"
        )

    def status(self) -> dict[str, Any] | None:
        if not self._policies:
            return None
        stuck = self._executor.stuck() if self._executor is not None else {}
        return {
            "sessions": {
                name: {"retain": policy.retain, "store": policy.store.id}
                for name, policy in sorted(self._policies.items())
            },
            "stores": [
                state.status(stuck.get(key, (0, 0.0)))
                for key, state in sorted(self._states.items())
            ],
        }
