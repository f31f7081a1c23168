"""What a signal does to a running daemon: one policy for one process, for each worker of
``--workers N`` and for their parent (:mod:`daemon.server._service` assembles the service
around it).

Rules (the contract) of :func:`obey`:

1. The first SIGINT or SIGTERM begins the drain: ``notify("STOPPING=1")`` (the service
   manager's), one stderr line (``<SIGNAL> received, <what the drain is>``), then ``drain()``.
2. Any later SIGINT or SIGTERM hurries it: one stderr line (``second <SIGNAL>: ...``), then
   ``hurry()`` (one process: cancel the in-flight requests, whose audit lines still
   complete; the parent of workers: SIGTERM to each worker again, which does the same).
3. SIGHUP never stops the daemon: ``reload()`` asks for a reload and returns whether there is
   a configuration to reload (reloads coalesce, :mod:`daemon.server._reload`); when there is
   none, one stderr line says so. A SIGHUP during the drain is ignored.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import AsyncIterator, Callable

__all__ = ["obey"]


def _say(line: str) -> None:
    sys.stderr.write(f"evidenced: {line}\n")


async def obey(
    signals: AsyncIterator[int],
    *,
    drain: Callable[[], None],
    hurry: Callable[[], None],
    reload: Callable[[], bool],
    notify: Callable[[str], object],
    draining: str = "shutting down",
    say: Callable[[str], None] = _say,
) -> None:
    """Apply the module rules to each signal of ``signals`` until it ends."""
    stopping = False
    async for signum in signals:
        name = signal.Signals(signum).name
        if signum == signal.SIGHUP:
            if not stopping and not reload():
                say("SIGHUP received: no configuration to reload")
            continue
        if not stopping:
            stopping = True
            notify("STOPPING=1")
            say(f"{name} received, {draining}")
            drain()
        else:
            say(f"second {name}: cancelling in-flight requests")
            hurry()
