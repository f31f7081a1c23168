"""Per-peer accounting: who a connection is, and how much of the server one peer may hold.

Rules (the contract):

1. A connection's *peer* is its uid on a Unix socket (``SO_PEERCRED``; ``unix:?`` where the
   platform cannot tell) and its remote address on TCP (``tcp:<address>``, the port ignored),
   so one local user or one remote host is one peer however many connections it opens.
2. A peer may hold at most ``connection_cap`` open connections and at most ``in_flight_cap``
   submits between their accepted header and their answer. :meth:`PeerLedger.connect` and
   :meth:`PeerLedger.start_request` answer False instead of exceeding a cap (the server then
   answers ``BUSY``); every successful call is undone exactly once by
   :meth:`PeerLedger.disconnect` / :meth:`PeerLedger.end_request`. A peer whose counts are
   back to zero is forgotten, so the ledger holds only peers with open connections.
"""

from __future__ import annotations

import socket as stdlib_socket
import struct
from collections import Counter
from typing import Any

import trio


def requester_of(stream: trio.SocketStream) -> dict[str, Any]:
    """Who is on the other end, for the audit line's ``requester``."""
    sock = stream.socket
    try:
        if sock.family == stdlib_socket.AF_UNIX:
            who: dict[str, Any] = {"transport": "unix"}
            so_peercred = getattr(stdlib_socket, "SO_PEERCRED", None)
            if so_peercred is not None:
                raw = sock.getsockopt(stdlib_socket.SOL_SOCKET, so_peercred, 12)
                pid, uid, gid = struct.unpack("3i", raw)
                who.update({"pid": pid, "uid": uid, "gid": gid})
            return who
        host, port = sock.getpeername()[:2]
        return {"transport": "tcp", "peer": f"{host}:{port}"}
    except OSError:
        return {"transport": "unknown"}


def peer_key(requester: dict[str, Any]) -> str:
    """The peer a connection counts against (rule 1)."""
    transport = requester.get("transport")
    if transport == "unix":
        uid = requester.get("uid")
        return f"unix:{uid if uid is not None else '?'}"
    if transport == "tcp":
        host = str(requester.get("peer", "?")).rsplit(":", 1)[0]
        return f"tcp:{host}"
    return "unknown"


class PeerLedger:
    """Open connections and requests in flight, per peer (rule 2)."""

    def __init__(self, *, connection_cap: int, in_flight_cap: int) -> None:
        self.connection_cap = connection_cap
        self.in_flight_cap = in_flight_cap
        self._connections: Counter[str] = Counter()
        self._in_flight: Counter[str] = Counter()
        self.refused_connections = 0
        self.refused_requests = 0

    def connect(self, peer: str) -> bool:
        if self._connections[peer] >= self.connection_cap:
            self.refused_connections += 1
            return False
        self._connections[peer] += 1
        return True

    def disconnect(self, peer: str) -> None:
        self._connections[peer] -= 1
        if self._connections[peer] <= 0:
            del self._connections[peer]

    def start_request(self, peer: str) -> bool:
        if self._in_flight[peer] >= self.in_flight_cap:
            self.refused_requests += 1
            return False
        self._in_flight[peer] += 1
        return True

    def end_request(self, peer: str) -> None:
        self._in_flight[peer] -= 1
        if self._in_flight[peer] <= 0:
            del self._in_flight[peer]

    def status(self) -> dict[str, Any]:
        return {
            "peers": len(self._connections),
            "max_connections_per_peer": self.connection_cap,
            "max_in_flight_per_peer": self.in_flight_cap,
            "refused_connections": self.refused_connections,
            "refused_requests": self.refused_requests,
        }
