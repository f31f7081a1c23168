"""Listeners: where the server listens, and who it lets in.

Rules (the contract):

1. :func:`open_listeners` opens the TCP listener(s) (``config.tcp``; port 0 picks a free
   port, reported in :attr:`Listening.tcp_address`) and the Unix socket (``config.unix``),
   or none: a failure closes whatever was opened and raises.
2. The Unix socket is created mode 0600 whatever the umask (bound under umask 0177, so it is
   never more open, not even for an instant), then given to ``socket_group`` with mode 0660
   when one is configured (a name or a number; an unknown name is ``EINVAL``). A stale socket
   file (nobody listening) is replaced; a live one, or any file that is not a socket, is
   refused (``EADDRINUSE`` / ``EEXIST``). :meth:`Listening.aclose` removes the socket file.
3. :class:`Acceptor` accepts until cancelled. Running out of descriptors or memory at
   ``accept`` (``EMFILE``, ``ENFILE``, ``ENOBUFS``, ``ENOMEM``) backs off 0.1 s and is
   reported on stderr at most once per :data:`ACCEPT_FAILURE_REPORT_SECONDS` (with the count)
   and counted in ``accept_failures``; any other accept error ends the server.
4. Admission (docs/adr/0009 fairness): a connection is admitted when its peer is not
   penalized (:mod:`daemon.server._peers`) and the connection table has room for it, a
   yielding connection evicted if need be (its peer's share, the table, the Unix socket's
   reserve: :mod:`daemon.server._table`). Admitted: registered and counted
   before the next accept, then served in its own task. Refused: ``BUSY``, not audited (it
   made no request), counted as a refusal — at once and synchronously, without a task, when
   it has sent nothing yet (with the listener's own answer: an EVD1 ``error`` frame, an HTTP
   ``503``, none on a TLS listener); else through a draining refusal, at most
   :data:`MAX_LINGERING_REFUSALS` draining at a time (beyond that, answered and closed at
   once). A penalized peer's connection is admitted on probation where a valid token could
   clear the way (a TCP listener with a ``tokens_file``: :mod:`daemon.server._peers` rule 5,
   :mod:`daemon.server._connection` rule 8); elsewhere it is *cut off*: whatever it already
   sent is discarded and it gets
   the same answer, synchronously (:func:`~daemon.server._fastpath.refuse_drained`: no task,
   no TLS handshake, no parse, no answer built — the listener's answers are built once per
   message), unless it sent more than a request's worth (then the draining refusal). A cut-off
   peer still sending when it is refused may read a reset instead of the answer.

Why not ``trio.serve_listeners``: it starts a task for every accepted connection and gives no
hook before that, so an idle-connection flood would cost a task each instead of an accept, a
write and a close (rule 4); and it logs every accept failure (with a traceback, through
``logging``) where the daemon rate-limits one stderr line and counts them (rule 3).
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket as stdlib_socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import attrs
import trio

from daemon.config._hosting import ServerConfig
from daemon.server._fastpath import has_unread, refuse_at_once, refuse_drained
from daemon.server._frontend import Connection
from daemon.server._peers import PENALIZED, PeerLedger, peer_key, requester_of
from daemon.server._table import ConnectionTable
from daemon.wire import _logs as logs
from daemon.wire._protocol import ErrorCode, ErrorResponse, ServerConnection

__all__ = ["PENALIZED", "Acceptor", "Listening", "open_listeners", "open_unix_listener"]

#: Connections refused at accept that may linger (drain) at once; more are closed at once.
MAX_LINGERING_REFUSALS: Final = 256
#: ``accept`` failures are reported on stderr at most once per this many seconds.
ACCEPT_FAILURE_REPORT_SECONDS: Final = 10.0
_ACCEPT_CAPACITY_ERRORS: Final = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
)


@attrs.define
class Listening:
    """The open listeners and the addresses they are bound to."""

    listeners: list[trio.SocketListener]
    tcp_address: tuple[str, int] | None = None
    unix_path: str | None = None

    def addresses(self) -> dict[str, Any]:
        """``{"tcp": "HOST:PORT" | None, "unix": PATH | None}`` (``daemon_start``'s
        ``listen``)."""
        tcp = self.tcp_address
        return {"tcp": None if tcp is None else f"{tcp[0]}:{tcp[1]}", "unix": self.unix_path}

    async def close_listeners(self) -> None:
        """Stop listening (idempotent); the Unix socket file stays until :meth:`aclose`."""
        for listener in self.listeners:
            with contextlib.suppress(Exception):
                await listener.aclose()

    async def aclose(self) -> None:
        """Stop listening and remove the Unix socket file (rule 2)."""
        await self.close_listeners()
        if self.unix_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.unix_path)


async def open_listeners(
    config: ServerConfig, inherited: Sequence[stdlib_socket.socket] = ()
) -> Listening:
    """Open what ``config`` names (rule 1), or serve on ``inherited`` listening sockets
    instead (systemd socket activation, :mod:`daemon.server._systemd`): their Unix socket files are
    the service manager's, never unlinked here."""
    listening = Listening([])
    if inherited:
        for sock in inherited:
            listening.listeners.append(trio.SocketListener(trio.socket.from_stdlib_socket(sock)))
            if sock.family != stdlib_socket.AF_UNIX:
                bound = sock.getsockname()
                listening.tcp_address = (str(bound[0]), int(bound[1]))
        return listening
    try:
        if config.tcp is not None:
            host, port = config.tcp
            opened = await trio.open_tcp_listeners(port, host=host)
            listening.listeners.extend(opened)
            bound = opened[0].socket.getsockname()
            listening.tcp_address = (str(bound[0]), int(bound[1]))
        if config.unix is not None:
            listening.listeners.append(await open_unix_listener(config.unix, config.socket_group))
            listening.unix_path = config.unix
    except BaseException:
        await listening.close_listeners()
        raise
    return listening


def _socket_gid(group: str) -> int | None:
    """The gid of ``socket_group`` (a name or a number), None when unset."""
    if not group:
        return None
    if group.isdigit():
        return int(group)
    import grp

    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        raise OSError(errno.EINVAL, f"socket_group {group!r} is not a known group") from None


async def open_unix_listener(path: str, group: str = "") -> trio.SocketListener:
    """Bind a Unix socket at ``path`` (rule 2)."""
    import stat

    with contextlib.suppress(FileNotFoundError):
        mode = os.stat(path).st_mode
        if not stat.S_ISSOCK(mode):
            raise OSError(errno.EEXIST, f"{path} exists and is not a socket", path)
        probe = trio.socket.socket(stdlib_socket.AF_UNIX, stdlib_socket.SOCK_STREAM)
        try:
            await probe.connect(path)
        except OSError:
            os.unlink(path)
        else:
            raise OSError(errno.EADDRINUSE, f"a server is already listening on {path}", path)
        finally:
            probe.close()
    gid = _socket_gid(group)
    sock = trio.socket.socket(stdlib_socket.AF_UNIX, stdlib_socket.SOCK_STREAM)
    try:
        previous = os.umask(0o177)
        try:
            await sock.bind(path)
        finally:
            os.umask(previous)
        os.chmod(path, 0o600)
        if gid is not None:
            os.chown(path, -1, gid)
            os.chmod(path, 0o660)
        sock.listen(512)
    except BaseException:
        sock.close()
        raise
    return trio.SocketListener(sock)


def _busy_frame(stream: trio.SocketStream, message: str) -> bytes | None:
    """The binary protocol's answer to a connection refused at accept."""
    return ServerConnection.send(ErrorResponse(None, ErrorCode.BUSY.name, message, None))


Serve = Callable[[trio.SocketStream, Connection, dict[str, Any]], Awaitable[None]]
Refuse = Callable[[trio.SocketStream, dict[str, Any], str, bool], Awaitable[None]]


class Acceptor:
    """Accepts connections and admits them against the caps (rules 3 and 4); admitted
    connections run ``serve``, over-cap ones that sent bytes run ``refuse``, both in
    ``handlers``."""

    def __init__(
        self,
        *,
        connections: ConnectionTable,
        peers: PeerLedger,
        counters: Counter[str],
        handlers: trio.Nursery,
        serve: Serve,
        refuse: Refuse,
        connection_factory: Callable[[str], Connection] = Connection,
        refusal_bytes: Callable[[trio.SocketStream, str], bytes | None] | None = None,
        probation: Callable[[dict[str, Any]], bool] = lambda requester: False,
    ) -> None:
        #: Whether a penalized peer's connection may clear the way with a valid token (then
        #: it is admitted on probation, daemon.server._peers rule 5) rather than cut off.
        self.probation = probation
        self.connection_factory = connection_factory
        self.refusal_bytes = refusal_bytes or _busy_frame
        self.connections = connections
        self.peers = peers
        self.counters = counters
        self.handlers = handlers
        self.serve = serve
        self.refuse = refuse
        self._lingering = 0
        self._accept_failures = 0
        self._accept_reported_at = -ACCEPT_FAILURE_REPORT_SECONDS
        self._answers: dict[tuple[int, str], bytes | None] = {}

    async def accept_loop(self, listener: trio.SocketListener) -> None:
        """Accept from ``listener`` until cancelled (rule 3)."""
        while True:
            try:
                stream = await listener.accept()
            except OSError as error:
                if error.errno in _ACCEPT_CAPACITY_ERRORS:
                    self._report_accept_failure(error)
                    await trio.sleep(0.1)
                    continue
                raise
            self.admit(stream)

    def admit(self, stream: trio.SocketStream) -> None:
        """Count a new connection against the caps and start its handler, or refuse it
        ``BUSY`` (rule 4)."""
        requester = requester_of(stream)
        peer = peer_key(requester)
        cut_off = False
        penalized = self.peers.penalized(peer)
        if penalized and not self.probation(requester):
            self.peers.cut_off(peer)
            refusal, cut_off = PENALIZED, True
        else:
            admitted = self.connections.admit(peer, self.connection_factory, probation=penalized)
            if not isinstance(admitted, str):
                self.handlers.start_soon(self.serve, stream, admitted, requester)
                return
            refusal = admitted
        if cut_off and refuse_drained(stream, self._answer(stream, refusal)):
            self._count_busy()
            return
        if has_unread(stream):
            self.handlers.start_soon(self._refuse_lingering, stream, requester, refusal)
            return
        self._count_busy()
        refuse_at_once(stream, self._answer(stream, refusal))

    def _count_busy(self) -> None:
        self.counters["refusals"] += 1
        self.counters["refusal:BUSY"] += 1

    def _answer(self, stream: trio.SocketStream, message: str) -> bytes | None:
        """The listener's answer to a connection refused at accept, built once per message
        and kind of socket (the caps' messages are few and fixed)."""
        key = (stream.socket.family, message)
        try:
            return self._answers[key]
        except KeyError:
            pass
        if len(self._answers) >= 64:
            self._answers.clear()
        answer = self._answers[key] = self.refusal_bytes(stream, message)
        return answer

    async def _refuse_lingering(
        self, stream: trio.SocketStream, requester: dict[str, Any], message: str
    ) -> None:
        linger = self._lingering < MAX_LINGERING_REFUSALS
        self._lingering += linger
        try:
            await self.refuse(stream, requester, message, linger)
        finally:
            self._lingering -= linger

    def _report_accept_failure(self, error: OSError) -> None:
        """One stderr line per :data:`ACCEPT_FAILURE_REPORT_SECONDS`, with the count."""
        self._accept_failures += 1
        self.counters["accept_failures"] += 1
        now = time.monotonic()
        if now - self._accept_reported_at >= ACCEPT_FAILURE_REPORT_SECONDS:
            message = f"accept failed {self._accept_failures} time(s) ({error.strerror or error})"
            logs.warning(
                "accept_failed",
                f"{message}; backing off",
                count=self._accept_failures,
                error=str(error.strerror or error),
            )
            self._accept_reported_at = now
            self._accept_failures = 0
