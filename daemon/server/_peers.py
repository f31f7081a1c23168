"""Per-peer accounting: who a connection is, and how much of the server one peer may hold.

Rules (the contract):

1. A connection's *peer* is its uid on a Unix socket (``SO_PEERCRED``; ``unix:?`` where the
   platform cannot tell) and its remote address on TCP (``tcp:<address>``, the port ignored),
   so one local user or one remote host is one peer however many connections it opens
   (behind a trusted proxy, the client it names: :mod:`daemon.server._proxy` rule 4). An
   IPv6 address counts as its /64 network (``tcp:2001:db8:1:2::/64``): one host is handed a
   whole /64, and must not become 2**64 peers; an IPv4-mapped IPv6 address is its IPv4
   address.
2. A peer may hold at most ``connection_cap`` open connections and at most ``in_flight_cap``
   submits between their accepted header and their answer. :meth:`PeerLedger.connect` and
   :meth:`PeerLedger.start_request` answer False instead of exceeding a cap (the server then
   answers ``BUSY``); every successful call is undone exactly once by
   :meth:`PeerLedger.disconnect` / :meth:`PeerLedger.end_request`. A peer whose counts are
   back to zero is forgotten, so the ledger holds only peers with open connections.
3. Strikes. Each connection of a peer cut for idleness or slowness (``IDLE_TIMEOUT``: no hello
   in time, no request in time, evidence under the minimum rate) is a strike
   (:meth:`PeerLedger.strike`). A peer with :data:`STRIKE_LIMIT` strikes within
   :data:`STRIKE_WINDOW` seconds is *penalized* (:meth:`PeerLedger.penalized`) until it has
   tried nothing for :data:`STRIKE_WINDOW` seconds: each of its requests refused for it
   (:meth:`PeerLedger.cut_off`) restarts the window, so a peer that keeps trying stays
   penalized. What the penalty costs a penalized peer is rule 5's. A well-behaved peer is
   never cut, so never penalized; at most :data:`MAX_STRIKE_ENTRIES` peers are remembered
   (expired windows are dropped first). A peer the ledger is told to ``exempt`` (a trusted
   proxy, :mod:`daemon.server._proxy` rule 4) is never struck nor penalized.
4. Authentication failures (:meth:`PeerLedger.auth_failure`: no or a wrong token) are strikes
   too, so a peer that keeps failing is penalized like a slow one; from its
   :data:`AUTH_SLOW_AFTER`-th failure within the window, each further refusal is first
   delayed :data:`AUTH_DELAY_SECONDS` (slowed, then penalized).
5. A valid token is never refused for someone else's strikes. A peer is an address, and one
   address may be many people (a NAT, an office, a proxy that does not say who its clients
   are): one of them failing 32 times must not lock the others out. The penalty therefore
   shapes what a requester *without* a valid token costs, never whether a valid token is
   heard. Where a token can clear the way (a TCP listener with a ``tokens_file``), a penalized
   peer's new connection is admitted *on probation* (:mod:`daemon.server._connection` rule 8):
   it has a short first deadline (:data:`PROBATION_SECONDS`, its TLS handshake included) to
   present a valid token; a request that does not — no or a wrong token, a probe, garbage, a
   stall — gets the same ``BUSY`` answer a cut-off peer always got, at once (no delay, no
   audit line, no strike: it restarts the window), and the connection closes. A valid token
   lifts the probation for that connection only: the address stays penalized for everyone
   else, so the attacker gains nothing from sharing it. Where no token can clear the way (a
   Unix socket, a listener without a ``tokens_file``), a penalized peer is cut off at accept as
   before (:mod:`daemon.server._listeners` rule 4): nothing it could send would be heard.
   Against an attacker who then floods from the shared address: each probation connection
   costs an accept, a task, at most one request head (bounded by the head limits) read
   within :data:`PROBATION_SECONDS`, one SHA-256 and constant-time compare, and a fixed
   answer — as much as any unauthenticated request, never an fsync, never an audit line.
   How many it holds at once is bounded by its peer's connection share, and holding them
   cannot lock out the honest client beside it: connections on probation yield their slot to
   a newcomer first, the oldest first (:mod:`daemon.server._table` rule 3), so the honest
   client's connection is admitted and has the time its own first bytes take to present its
   token; to evict it the attacker must open a share's worth of connections within that
   time, a connection-rate flood, which belongs below the daemon (docs/operations.md,
   "Refusal accounting": an nftables meter). The price is that a penalized peer on a token
   listener now costs a task (and a TLS handshake) per connection instead of a synchronous
   accept, write and close: a bounded cost, paid so a shared address is not a shared fate.
"""

from __future__ import annotations

import functools
import ipaddress
import socket as stdlib_socket
import struct
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Final

import trio

STRIKE_LIMIT: Final = 32
STRIKE_WINDOW: Final = 30.0
MAX_STRIKE_ENTRIES: Final = 4096
#: Failed authentications within the strike window after which each refusal is delayed.
AUTH_SLOW_AFTER: Final = 8
AUTH_DELAY_SECONDS: Final = 0.25
#: Rule 5: the first deadline of a penalized peer's connection on probation.
PROBATION_SECONDS: Final = 2.0
#: What a penalized peer is told, at accept or on probation (rule 5).
PENALIZED: Final = "too many idle, slow or unauthenticated connections from this peer; retry later"


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
        client = requester.get("client")  # named by a trusted proxy (daemon.server._proxy)
        host = str(requester.get("peer", "?")).rsplit(":", 1)[0] if client is None else client
        return f"tcp:{_host_key(str(host))}"
    return "unknown"


@functools.lru_cache(maxsize=4096)
def _host_key(host: str) -> str:
    """An IPv6 host as its /64 network, an IPv4-mapped one as IPv4, anything else as is
    (remembered: a flood comes from few addresses, each parsed once)."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return host


class PeerLedger:
    """Open connections and requests in flight, per peer (rule 2)."""

    def __init__(
        self,
        *,
        connection_cap: int,
        in_flight_cap: int,
        clock: Callable[[], float] = time.monotonic,
        exempt: Callable[[str], bool] = lambda peer: False,
    ) -> None:
        #: Rule 3: peers never struck nor penalized (trusted proxies).
        self.exempt = exempt
        #: Seconds, monotonic: when strikes happened and penalties end (rule 3).
        self._clock = clock
        self.connection_cap = connection_cap
        self.in_flight_cap = in_flight_cap
        self._connections: Counter[str] = Counter()
        self._in_flight: Counter[str] = Counter()
        self._strikes: dict[str, tuple[float, int]] = {}  # peer -> (window start, strikes)
        self.refused_connections = 0
        self.refused_requests = 0
        self.strikes = 0
        self.penalized_refusals = 0
        self.auth_failures = 0

    def strike(self, peer: str) -> None:
        """One of ``peer``'s connections was cut for idleness or slowness (rule 3)."""
        if self.exempt(peer):
            return
        self.strikes += 1
        now = self._clock()
        start, count = self._strikes.get(peer, (now, 0))
        if now - start > STRIKE_WINDOW:
            start, count = now, 0
        if peer not in self._strikes and len(self._strikes) >= MAX_STRIKE_ENTRIES:
            for key in [k for k, (t, _) in self._strikes.items() if now - t > STRIKE_WINDOW]:
                del self._strikes[key]
            if len(self._strikes) >= MAX_STRIKE_ENTRIES:
                return
        self._strikes[peer] = (start, count + 1)

    def auth_failure(self, peer: str) -> float:
        """``peer`` failed to authenticate: a strike; the seconds to delay its refusal
        (rule 4)."""
        self.auth_failures += 1
        self.strike(peer)
        entry = self._strikes.get(peer)
        return AUTH_DELAY_SECONDS if entry is not None and entry[1] > AUTH_SLOW_AFTER else 0.0

    def penalized(self, peer: str) -> bool:
        """Whether ``peer`` is penalized now (rule 3); an expired window is forgotten."""
        entry = self._strikes.get(peer)
        if entry is None:
            return False
        start, count = entry
        if self._clock() - start > STRIKE_WINDOW:
            del self._strikes[peer]
            return False
        return count >= STRIKE_LIMIT

    def cut_off(self, peer: str) -> None:
        """A request of the penalized ``peer`` was refused for it: counted, and its window
        restarts (rule 3: a peer that keeps trying stays penalized)."""
        entry = self._strikes.get(peer)
        self.penalized_refusals += 1
        if entry is not None:
            self._strikes[peer] = (self._clock(), entry[1])

    def has_room(self, peer: str) -> bool:
        """Whether ``peer`` holds fewer connections than its cap (rule 2)."""
        return self._connections.get(peer, 0) < self.connection_cap

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
            "strikes": self.strikes,
            "penalized_refusals": self.penalized_refusals,
            "auth_failures": self.auth_failures,
        }
