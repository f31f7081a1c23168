"""systemd integration without a dependency: ``sd_notify`` and socket activation.

Rules (``sd_notify(3)``, ``sd_listen_fds(3)``; docs/operations.md):

1. :func:`notify` sends one datagram of ``KEY=VALUE`` lines to ``$NOTIFY_SOCKET`` (a path, or
   ``@name`` for the abstract namespace) and returns whether it was sent. Without the variable
   it does nothing; the send never blocks, and one that fails (a full queue, no listener) is
   ignored: the service manager is not ours to crash, nor to wait for.
   ``evidenced serve`` sends ``READY=1`` (with ``MAINPID`` and a ``STATUS``) once it listens and
   its audit log is open, ``RELOADING=1`` and ``READY=1`` around a SIGHUP reload,
   ``STOPPING=1`` when a shutdown begins, and ``WATCHDOG=1`` every half
   ``$WATCHDOG_USEC`` when that is set for this process (``$WATCHDOG_PID`` absent or ours):
   :func:`watchdog`, run by the service assembly (:mod:`daemon.server._service`) in one
   process and in a ``--workers`` parent alike.
2. :func:`listen_fds` returns the listening sockets systemd passed (``$LISTEN_FDS`` descriptors
   from 3, only when ``$LISTEN_PID`` is this process), marks them close-on-exec and unsets the
   three variables so no child inherits them. The server then serves on them instead of
   binding its configured addresses (``Server.inherited``).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Final

import trio

__all__ = ["listen_fds", "notify", "watchdog", "watchdog_interval"]

LISTEN_FDS_START: Final = 3


def _address() -> str | None:
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return None
    if address.startswith("@"):
        return "\0" + address[1:]
    return address


def notify(state: str) -> bool:
    """Send ``state`` (``KEY=VALUE`` lines) to the service manager (rule 1)."""
    address = _address()
    if address is None:
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.setblocking(False)  # a manager that does not read never stalls the daemon
            sock.sendto(state.encode("utf-8"), address)
    except OSError:
        return False
    return True


def watchdog_interval() -> float | None:
    """Seconds between ``WATCHDOG=1`` pings (half the manager's timeout), or None."""
    usec = os.environ.get("WATCHDOG_USEC", "")
    pid = os.environ.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) <= 0 or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 2_000_000


def listen_fds() -> list[socket.socket]:
    """The sockets passed by socket activation (rule 2); empty when none are ours."""
    count = os.environ.get("LISTEN_FDS", "")
    pid = os.environ.get("LISTEN_PID", "")
    for name in ("LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"):
        os.environ.pop(name, None)
    if not count.isdigit() or pid != str(os.getpid()):
        return []
    sockets = []
    for fd in range(LISTEN_FDS_START, LISTEN_FDS_START + int(count)):
        os.set_inheritable(fd, False)
        sockets.append(socket.socket(fileno=fd))
    return sockets


async def watchdog(send: Callable[[str], object], interval: float) -> None:
    """``WATCHDOG=1`` every ``interval`` seconds while the event loop runs (a stuck loop
    stops the pings, and the service manager restarts the service)."""
    while True:
        send("WATCHDOG=1")
        await trio.sleep(interval)
