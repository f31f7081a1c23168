"""What a signal does to a running daemon: one policy for one process, for each worker of
``--workers N`` and for their parent (:mod:`daemon.server._service` assembles the service
around it).

Rules (the contract) of :func:`obey`:

1. The first SIGINT or SIGTERM begins the drain: ``notify("STOPPING=1")`` (the service
   manager's), one ``shutdown`` event (``<SIGNAL> received, <what the drain is>``), then
   ``drain()``.
2. Any later SIGINT or SIGTERM hurries it: one ``shutdown_forced`` event (``second <SIGNAL>:
   ...``), then ``hurry()`` (one process: cancel the in-flight requests, whose audit lines still
   complete; the parent of workers: SIGTERM to each worker again, which does the same).
3. SIGHUP never stops the daemon: ``reload()`` asks for a reload and returns whether there is
   a configuration to reload (reloads coalesce, :mod:`daemon.server._reload`); when there is
   none, a ``reload_unavailable`` event says so. A SIGHUP during the drain is ignored.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Callable

from daemon import logs

__all__ = ["obey"]


async def obey(
    signals: AsyncIterator[int],
    *,
    drain: Callable[[], None],
    hurry: Callable[[], None],
    reload: Callable[[], bool],
    notify: Callable[[str], object],
    draining: str = "shutting down",
) -> None:
    """Apply the module rules to each signal of ``signals`` until it ends."""
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
