"""Signals: the one place a running daemon receives them and the one policy it applies, for one
process, for each worker of ``--workers N`` and for their parent
(:mod:`daemon.server._service` assembles the service around it; nothing else opens a signal
receiver).

Rules (the contract):

1. Which signals (:func:`wanted`): one process and the parent of workers receive SIGINT,
   SIGTERM and SIGHUP; a worker receives SIGTERM only (its parent decides on SIGINT, and
   asks it to reload over its link, so a SIGHUP sent to a worker is ignored);
   a server started without ``handle_signals`` (the library's, embedded) receives none and
   leaves the host's handlers alone.
2. When (:func:`receive`): the receiver is opened before the service starts and obeyed once it
   serves, so a signal sent during the start is kept and applied then (and one sent right
   after readiness is ours); a signal still pending when the service ends is re-delivered to
   the handler the process had before.
3. Before a worker's event loop runs (:func:`worker_dispositions`, in the spawner and in each
   worker it forks): SIGINT and SIGHUP are ignored and SIGTERM ends the process, so a worker
   stopped before its receiver is open just ends, and a SIGHUP reaching it then is dropped.

Rules of :func:`obey`:

4. The first SIGINT or SIGTERM begins the drain: ``notify("STOPPING=1")`` (the service
   manager's), one ``shutdown`` event (``<SIGNAL> received, <what the drain is>``), then
   ``drain()``.
5. Any later SIGINT or SIGTERM hurries it: one ``shutdown_forced`` event (``second <SIGNAL>:
   ...``), then ``hurry()`` (one process: cancel the in-flight requests, whose audit lines still
   complete; the parent of workers: SIGTERM to each worker again, which does the same).
6. SIGHUP never stops the daemon: ``reload()`` asks for a reload and returns whether there is
   a configuration to reload (reloads coalesce, :mod:`daemon.server._reload`); when there is
   none, a ``reload_unavailable`` event says so. A SIGHUP during the drain is ignored.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Final

import trio

from daemon.wire import _logs as logs

__all__ = ["PROCESS", "WORKER", "obey", "receive", "wanted", "worker_dispositions"]

#: Rule 1: what one process, and the parent of workers, receives.
PROCESS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: Rule 1: what a worker of ``--workers N`` receives (SIGINT and reloads are its parent's).
WORKER: Final = (signal.SIGTERM,)


def wanted(*, handle_signals: bool, worker: bool) -> tuple[signal.Signals, ...]:
    """Rule 1."""
    if not handle_signals:
        return ()
    return WORKER if worker else PROCESS


@contextlib.contextmanager
def receive(signals: tuple[signal.Signals, ...]) -> Iterator[AsyncIterator[int] | None]:
    """Rule 2: the receiver of ``signals`` for the duration of the block (None: no signals)."""
    if not signals:
        yield None
        return
    with trio.open_signal_receiver(*signals) as receiver:
        yield receiver


def worker_dispositions() -> None:
    """Rule 3 (no event loop running: no wakeup descriptor is inherited either)."""
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


async def obey(
    signals: AsyncIterator[int],
    *,
    drain: Callable[[], None],
    hurry: Callable[[], None],
    reload: Callable[[], bool],
    notify: Callable[[str], object],
    draining: str = "shutting down",
) -> None:
    """Apply rules 4 to 6 to each signal of ``signals`` until it ends."""
    stopping = False
    async for signum in signals:
        name = signal.Signals(signum).name
        if signum == signal.SIGHUP:
            if not stopping and not reload():
                logs.warning(
                    "reload_unavailable",
                    "SIGHUP received: no configuration to reload",
                    signal="SIGHUP",
                )
            continue
        if not stopping:
            stopping = True
            notify("STOPPING=1")
            logs.info("shutdown", f"{name} received, {draining}", signal=name)
            drain()
        else:
            logs.warning(
                "shutdown_forced", f"second {name}: cancelling in-flight requests", signal=name
            )
            hurry()
