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

The table keeps its connections in the order they last waited from (admitted, or answered:
:meth:`ConnectionTable.answered`, two dictionary operations a request), probation ones apart,
so a victim is the first yielding one met from the front: a full table's newcomer costs what
it skips (connections mid-request), not a scan of the table.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
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
        #: Every open connection, the one that waited longest first (rule 3's order).
        self._open: dict[Connection, None] = {}
        #: Those admitted on probation, oldest first.
        self._probation: dict[Connection, None] = {}
        self._tcp = 0
        #: Connections closed to make room for a newcomer (rule 4).
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._open)

    def __iter__(self) -> Iterator[Connection]:
        return iter(self._open)

    def __contains__(self, connection: object) -> bool:
        return connection in self._open

    def admit(
        self, peer: str, factory: Callable[[str], Connection], *, probation: bool = False
    ) -> Connection | str:
        """Rule 2: the newcomer's connection (registered, counted against ``peer``; on
        ``probation`` when its peer is penalized), or why it is refused."""
        unix = peer.startswith("unix:")
        peers = self.peers
        if not peers.has_room(peer):
            self._evict_first(lambda c: c.peer == peer)
        if not self._room(unix):
            if unix or self._tcp < self.capacity - self.unix_reserve:
                evicted = self._evict_first(lambda c: True)
            else:
                evicted = self._evict_first(lambda c: not c.peer.startswith("unix:"))
            if not evicted:
                return f"{self.capacity} connections open; retry later"
        if not peers.connect(peer):
            return f"{peers.connection_cap} connections open from this peer; retry later"
        connection = factory(peer)
        connection.probation = probation
        self._open[connection] = None
        if probation:
            self._probation[connection] = None
        self._tcp += not unix
        return connection

    def answered(self, connection: Connection) -> None:
        """``connection`` waits for its next request from now: the back of rule 3's order."""
        if self._open.pop(connection, 0) is None:
            self._open[connection] = None
        self._probation.pop(connection, None)

    def rekey(self, connection: Connection, peer: str, *, probation: bool = False) -> str | None:
        """Count ``connection`` against ``peer`` instead (the client a trusted proxy named,
        :mod:`daemon.server._proxy`; on ``probation`` when it is penalized): rule 2's share for
        ``peer``, its own yielding connection evicted if need be; why not (it stays counted as
        it was), or None."""
        peers = self.peers
        if peer == connection.peer:
            return None
        if not peers.has_room(peer):
            self._evict_first(lambda c: c.peer == peer)
        if not peers.connect(peer):
            return f"{peers.connection_cap} connections open from this peer; retry later"
        peers.disconnect(connection.peer)
        connection.peer = peer
        if probation:
            connection.probation = True
            self._probation[connection] = None
        return None

    def release(self, connection: Connection) -> None:
        """Rule 5: ``connection``'s slot and its peer's count, once."""
        if self._open.pop(connection, 0) is None:
            self._probation.pop(connection, None)
            self._tcp -= not connection.peer.startswith("unix:")
            self.peers.disconnect(connection.peer)

    def _room(self, unix: bool) -> bool:
        if len(self._open) >= self.capacity:
            return False
        return unix or self._tcp < self.capacity - self.unix_reserve

    def _evict_first(self, among: Callable[[Connection], bool]) -> bool:
        """Rules 3 and 4: evict the first yielding connection ``among`` those in rule 3's
        order (probation first, then the longest waiting); False when none yields."""
        for candidate in itertools.chain(self._probation, self._open):
            if among(candidate) and candidate.yields():
                self.release(candidate)
                self.evicted += 1
                candidate.evict()
                return True
        return False
