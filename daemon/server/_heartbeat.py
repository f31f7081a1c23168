"""The workers' heartbeat under ``--workers N``: a worker that stops talking is killed and
restarted (``docs/operations.md``, "A hung worker").

Every worker pushes its figures to the parent every ``PUSH_INTERVAL`` (0.25 s) from its event
loop (:mod:`daemon.server._audit_client` rule 5); any frame it sends counts as a beat. Rules:

1. The parent notes when it last heard from each worker (``Link.last_heard``, set by the
   sequencer for every frame received).
2. A worker that said it serves and has been silent for more than :data:`DEADLINE` seconds
   is hung (stopped with ``SIGSTOP``, deadlocked, its event loop blocked): the parent writes
   ``evidenced: worker I (pid P) silent for N s (heartbeat deadline D s); killing it`` on
   stderr and sends it ``SIGKILL``. The kernel then closes every connection the worker held,
   so its clients fail at once (and may reconnect to the listening socket, which never
   closed) instead of waiting out their own timeouts; its stream ends and the supervisor
   restarts the slot as for any worker that died (``_supervisor`` rule 2).
3. ``health`` shows, per worker, ``silent_seconds`` and ``heartbeat_kills``; while a worker is
   silent past half the deadline, or killed and not yet serving again, :meth:`reason` is set
   and ``health`` says ``degraded`` with it.
4. Nothing is checked while the daemon drains (workers stop talking as they exit).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol

import trio

from daemon.wire import _logs as logs

__all__ = ["DEADLINE", "Heartbeat"]

#: Seconds of silence after which a serving worker is killed (40 missed pushes; a loaded
#: machine delays a push by a second or two, never by ten).
DEADLINE: Final = 10.0
_CHECK_EVERY: Final = 0.5


class _Link(Protocol):
    index: int
    pid: int
    alive: bool
    last_heard: float

    @property
    def ready(self) -> trio.Event: ...


class Heartbeat:
    """The parent's watch over its workers' beats (module rules)."""

    def __init__(self, deadline: float = DEADLINE) -> None:
        self.deadline = deadline
        self.kills: dict[int, int] = {}
        self._killed: dict[int, int] = {}  # slot -> pid killed, until a new worker serves

    def fields(self, link: _Link) -> dict[str, Any]:
        """Rule 3: this worker's entry in ``health``'s ``workers``."""
        return {
            "silent_seconds": round(max(0.0, trio.current_time() - link.last_heard), 3),
            "heartbeat_kills": self.kills.get(link.index, 0),
        }

    def reason(self, links: Sequence[_Link]) -> str | None:
        """Rule 3: why ``health`` is degraded because of a worker, or None."""
        now = trio.current_time()
        for link in links:
            if self._killed.get(link.index) is not None:
                if link.pid != self._killed[link.index] and link.ready.is_set():
                    del self._killed[link.index]
                else:
                    return (
                        f"worker {link.index} was killed after {self.deadline:g} s of silence "
                        "(heartbeat); its replacement is starting"
                    )
            silent = now - link.last_heard
            if link.alive and link.ready.is_set() and silent > self.deadline / 2:
                return (
                    f"worker {link.index} (pid {link.pid}) silent for {silent:.1f} s "
                    f"(heartbeat deadline {self.deadline:g} s)"
                )
        return None

    async def watch(
        self, links: Callable[[], Sequence[_Link]], draining: Callable[[], bool]
    ) -> None:
        """Rule 2, until cancelled."""
        while True:
            await trio.sleep(_CHECK_EVERY)
            if draining():
                continue
            now = trio.current_time()
            for link in links():
                silent = now - link.last_heard
                if not (link.alive and link.ready.is_set() and silent > self.deadline):
                    continue
                logs.error(
                    "worker_silent",
                    f"worker {link.index} (pid {link.pid}) silent for {silent:.1f} s "
                    f"(heartbeat deadline {self.deadline:g} s); killing it",
                    worker=link.index,
                    worker_pid=link.pid,
                    silent_seconds=round(silent, 1),
                )
                self.kills[link.index] = self.kills.get(link.index, 0) + 1
                self._killed[link.index] = link.pid
                link.last_heard = now  # one kill per silence
                with contextlib.suppress(ProcessLookupError):
                    os.kill(link.pid, signal.SIGKILL)
