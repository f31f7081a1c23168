"""The connection table: the server's open connections, of every listener and both front ends,
and who must yield when it is full.

Rules (the contract):

1. One table for the whole server (binary protocol over TCP and the Unix socket, HTTP): at most
   ``capacity`` connections (``max_connections``, sized to the descriptor limit), of which
   TCP (both protocols) may hold at most ``capacity - unix_reserve``: the Unix socket has
   ``unix_reserve`` slots TCP cannot take (``[server] unix_reserved_connections``; none
   without a Unix socket), so no flood over the network locks out a local operator or a
   co-located client. A peer (:mod:`daemon.server._peers`) holds at most its connection
   share (``max_connections_per_peer``) of it.
2. :meth:`ConnectionTable.admit` admits a newcomer or says why not, without a task or a wait.
   When the newcomer's peer holds its whole share, the peer's own *yielding* connection
   (rule 3) that waited longest is closed to admit it; when the table is full for the
   newcomer's transport, the longest-waiting yielding connection among those it may take the
   place of (TCP for a TCP newcomer whose share is full, else any) is. Only when there is
   none is the newcomer refused ``BUSY`` (the caller answers; it made no request). So idle
   keep-alive connections, however many and whoever holds them, never lock anyone out, as
   nginx and HAProxy close idle keep-alive connections to serve a new one.
3. A connection *yields* (:meth:`Connection.yields`) when nothing of a request is in progress
   or received and it waits in a scope that can be cancelled, and either it has been answered
   at least once (an idle keep-alive connection: EVD1 after its ``hello``, HTTP after its
   first answer) or it is on probation (its peer was penalized, and it has not presented a
   valid token yet: :mod:`daemon.server._connection` rule 8). Probation connections yield
   first (the oldest first), then idle keep-alive ones (the longest idle first). A
   connection that has not been answered yet and is not on probation never yields: it is
   bounded by its first deadline, and its peer's strikes, instead. A connection mid-request
   never yields.
4. A yielding connection closed to make room is *evicted*: its slot and its peer's count are
   released at once (the newcomer takes them), its wait is cancelled, and its front end
   closes it without an answer and without a strike (it did nothing wrong); counted in
   :attr:`ConnectionTable.evicted` (``health``: ``evicted_connections``).
5. :meth:`ConnectionTable.release` releases a connection's slot and its peer's count exactly
   once, however it ends (evicted first or not).

The table is scanned for a victim only when it (or a peer's share) is full, so the hot path
of a request pays nothing for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Final

from daemon.server._connection import Connection
from daemon.server._peers import PeerLedger

__all__ = ["ConnectionTable", "unix_reserve"]

#: The Unix socket's reserved share when the configuration says 0 (rule 1): a sixteenth.
_RESERVE_DIVISOR: Final = 16


def unix_reserve(configured: int, capacity: int) -> int:
    """The Unix socket's reserved slots (rule 1): as configured, else a sixteenth of
    ``capacity`` (at least 1); TCP always keeps at least one."""
    wanted = configured or max(1, capacity // _RESERVE_DIVISOR)
    return max(0, min(wanted, capacity - 1))


class ConnectionTable:
    """The server's open connections (module rules)."""

    def __init__(self, capacity: int, peers: PeerLedger, *, unix_reserve: int = 0) -> None:
        self.capacity = capacity
        self.unix_reserve = unix_reserve
        self.peers = peers
        self._open: set[Connection] = set()
        self._tcp = 0
        #: Connections closed to make room for a newcomer (rule 4).
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._open)

    def __iter__(self) -> Iterator[Connection]:
        return iter(self._open)

    def __contains__(self, connection: object) -> bool:
        return connection in self._open

    def admit(self, peer: str, factory: Callable[[str], Connection]) -> Connection | str:
        """Rule 2: the newcomer's connection (registered, counted against ``peer``), or
        why it is refused."""
        unix = peer.startswith("unix:")
        peers = self.peers
        if not peers.has_room(peer):
            victim = _oldest(c for c in self._open if c.peer == peer and c.yields())
            if victim is not None:
                self._evict(victim)
        if not self._room(unix):
            if unix or self._tcp < self.capacity - self.unix_reserve:
                pool: Iterable[Connection] = self._open
            else:
                pool = (c for c in self._open if not c.peer.startswith("unix:"))
            victim = _oldest(c for c in pool if c.yields())
            if victim is None:
                return f"{self.capacity} connections open; retry later"
            self._evict(victim)
        if not peers.connect(peer):
            return f"{peers.connection_cap} connections open from this peer; retry later"
        connection = factory(peer)
        self._open.add(connection)
        self._tcp += not unix
        return connection

    def rekey(self, connection: Connection, peer: str) -> str | None:
        """Count ``connection`` against ``peer`` instead (the client a trusted proxy named,
        :mod:`daemon.server._proxy`): rule 2's share for ``peer``, its own yielding connection
        evicted if need be; why not (it stays counted as it was), or None."""
        peers = self.peers
        if peer == connection.peer:
            return None
        if not peers.has_room(peer):
            victim = _oldest(c for c in self._open if c.peer == peer and c.yields())
            if victim is not None:
                self._evict(victim)
        if not peers.connect(peer):
            return f"{peers.connection_cap} connections open from this peer; retry later"
        peers.disconnect(connection.peer)
        connection.peer = peer
        return None

    def release(self, connection: Connection) -> None:
        """Rule 5: ``connection``'s slot and its peer's count, once."""
        if connection in self._open:
            self._open.discard(connection)
            self._tcp -= not connection.peer.startswith("unix:")
            self.peers.disconnect(connection.peer)

    def _room(self, unix: bool) -> bool:
        if len(self._open) >= self.capacity:
            return False
        return unix or self._tcp < self.capacity - self.unix_reserve

    def _evict(self, victim: Connection) -> None:
        """Rule 4."""
        self.release(victim)
        self.evicted += 1
        victim.evict()


def _oldest(candidates: Iterable[Connection]) -> Connection | None:
    """Rule 3's order: probation first, then the longest waiting."""
    return min(candidates, key=Connection.yield_order, default=None)
