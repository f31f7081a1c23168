"""Who the client is behind a trusted proxy: the PROXY protocol (v2 binary, v1 text) and
``X-Forwarded-For``, believed only from ``[http] trusted_proxies``.

Behind a proxy every client shares the proxy's address; were that address the peer, one bad
client's strikes would cut every client off (and, with ``proxy_next_upstream``, off every
replica). So the client is taken from the proxy, and from nobody else.

Rules (the contract):

1. :class:`TrustedProxies` is the list of CIDRs (``[http] trusted_proxies``; empty: none, and
   nothing below applies). A TCP peer is *trusted* when its address is in one of them (an
   IPv4-mapped IPv6 address as its IPv4 address). From a peer that is not trusted, a PROXY
   header is not HTTP (refused as any malformed head: noise) and ``X-Forwarded-For`` is
   ignored.
2. PROXY protocol (:func:`read_proxy_header`): a connection from a trusted peer may begin with
   a PROXY header — v2 (the 12-byte signature, version 2, ``PROXY`` or ``LOCAL``, TCP over
   IPv4 or IPv6, at most :data:`MAX_V2_BYTES` of addresses and TLVs, which are skipped) or v1
   (``PROXY TCP4|TCP6 <source> <destination> <port> <port>\\r\\n`` or ``PROXY UNKNOWN…``, at
   most 107 bytes). It is read before TLS, within the connection's first deadline, and never
   a byte past it (the bytes are peeked, then exactly the header is taken), so what follows is
   the client's own stream. Its source address is the connection's *client*; ``LOCAL``,
   ``UNKNOWN`` and an unspecified family name none (the proxy's own connection, a health
   check). A connection without a header is served as is. A malformed header
   (:class:`ProxyHeaderError`) closes the connection unanswered.
3. ``X-Forwarded-For`` (:meth:`TrustedProxies.client`): for a request whose immediate peer
   (the PROXY client, else the TCP peer) is trusted, the hops of the field (its lines joined
   in order) are walked from the right: each hop that is trusted is passed, and the first
   hop that is not is the client — the *rightmost untrusted hop*, since a client can write
   anything to the left of what its proxy appended. A hop that is not an IP address ends the
   walk at the trusted hop to its right. At most :data:`MAX_HOPS` hops are looked at.
4. A client named so becomes the requester's ``client`` (its address; ``peer`` stays the TCP
   peer's address and port), and its peer (:func:`daemon.server._peers.peer_key`) is what
   strikes, authentication failures, probation, noise and the in-flight share count against.
   A trusted proxy's own address is never struck nor penalized
   (:class:`~daemon.server._peers.PeerLedger`'s ``exempt``): its clients are, each by the
   address it names.
"""

from __future__ import annotations

import functools
import ipaddress
import socket as stdlib_socket
import struct
from collections.abc import Iterable
from typing import Final

import attrs
import trio

from daemon.wire._errors import PeerError

__all__ = [
    "MAX_HOPS",
    "MAX_V2_BYTES",
    "ProxyHeaderError",
    "TrustedProxies",
    "read_proxy_header",
]

#: The v2 signature (rule 2).
V2_SIGNATURE: Final = b"\r\n\r\n\x00\r\nQUIT\n"
#: A v1 header's longest form (rule 2).
MAX_V1_BYTES: Final = 107
#: The most bytes of addresses and TLVs a v2 header may declare (rule 2).
MAX_V2_BYTES: Final = 1024
#: ``X-Forwarded-For`` hops looked at, from the right (rule 3).
MAX_HOPS: Final = 64
_PARTIAL_WAIT: Final = 0.005

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class ProxyHeaderError(PeerError, ValueError):
    """A PROXY header that is not one (rule 2)."""


@functools.lru_cache(maxsize=4096)
def _address(text: str) -> Address | None:
    """An IP literal (IPv6 in brackets or not; an IPv4-mapped one as IPv4), else None."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


@attrs.frozen
class TrustedProxies:
    """``[http] trusted_proxies`` (rule 1)."""

    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, cidrs: Iterable[str]) -> TrustedProxies:
        """The CIDRs, as :class:`~daemon.config._http_config.HttpConfig` checked them (an
        address alone is its /32 or /128)."""
        return cls(tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs))

    def __bool__(self) -> bool:
        return bool(self.networks)

    def trusts(self, host: str) -> bool:
        """Whether the address ``host`` is a trusted proxy (rule 1)."""
        address = _address(host)
        return address is not None and self._trusts(address)

    def _trusts(self, address: Address) -> bool:
        return any(address in network for network in self.networks)

    def trusts_key(self, peer: str) -> bool:
        """Whether the peer key ``peer`` (``tcp:<address>``; daemon.server._peers rule 1) is a
        trusted proxy's: never struck nor penalized (rule 4)."""
        return bool(self.networks) and peer.startswith("tcp:") and self.trusts(peer[4:])

    def client(self, peer_host: str, forwarded_for: str) -> str:
        """Rule 3: the rightmost untrusted hop of ``forwarded_for`` as seen from the trusted
        peer ``peer_host`` (``peer_host`` itself when every hop is trusted, or a hop is not
        an address)."""
        current = peer_host
        hops = forwarded_for.rsplit(",", MAX_HOPS)[-MAX_HOPS:]
        for hop in reversed(hops):
            address = _address(current)
            if address is None or not self._trusts(address):
                break
            named = _address(hop)
            if named is None:
                break
            current = str(named)
        return current


async def _peek(sock: trio.socket.SocketType, size: int, least: int | None = None) -> bytes:
    """Up to ``size`` bytes the peer sent, at least ``least`` (default: ``size``; fewer at its
    end), left unread."""
    least = size if least is None else least
    while True:
        data = await sock.recv(size, stdlib_socket.MSG_PEEK)
        if len(data) >= least or not data:
            return data
        await trio.sleep(_PARTIAL_WAIT)  # a header in several segments: wait for the rest


async def _take(sock: trio.socket.SocketType, size: int) -> None:
    """Read exactly ``size`` bytes already peeked."""
    while size > 0:
        data = await sock.recv(size)
        if not data:
            raise ProxyHeaderError("the connection ended inside the PROXY header")
        size -= len(data)


async def read_proxy_header(sock: trio.socket.SocketType) -> tuple[bool, str | None]:
    """Rule 2: (whether a PROXY header was there, the client's address or None). Nothing is
    consumed when there is none; exactly the header when there is."""
    start = await _peek(sock, 6)
    if start.startswith(b"PROXY "):
        return True, await _v1(sock)
    if len(start) >= 6 and V2_SIGNATURE.startswith(start[:6]):
        return True, await _v2(sock)
    return False, None


async def _v1(sock: trio.socket.SocketType) -> str | None:
    data = b""
    while b"\r\n" not in data:
        if len(data) >= MAX_V1_BYTES:
            raise ProxyHeaderError(f"a PROXY v1 header longer than {MAX_V1_BYTES} bytes")
        more = await _peek(sock, MAX_V1_BYTES, len(data) + 1)
        if len(more) <= len(data):
            raise ProxyHeaderError("the connection ended inside the PROXY header")
        data = more
    line = data[: data.index(b"\r\n")]
    await _take(sock, len(line) + 2)
    parts = line.decode("ascii", "replace").split(" ")
    if len(parts) >= 2 and parts[1] == "UNKNOWN":
        return None
    if len(parts) != 6 or parts[1] not in ("TCP4", "TCP6"):
        raise ProxyHeaderError("a PROXY v1 header is not TCP4, TCP6 or UNKNOWN")
    source = _address(parts[2])
    version = 4 if parts[1] == "TCP4" else 6
    if source is None or source.version != version or _address(parts[3]) is None:
        raise ProxyHeaderError("a PROXY v1 header names no valid addresses")
    if not all(part.isdigit() and int(part) <= 65535 for part in parts[4:]):
        raise ProxyHeaderError("a PROXY v1 header names no valid ports")
    return str(source)


async def _v2(sock: trio.socket.SocketType) -> str | None:
    head = await _peek(sock, 16)
    if len(head) < 16 or head[:12] != V2_SIGNATURE:
        raise ProxyHeaderError("not a PROXY v2 header")
    version_command, family = head[12], head[13]
    (length,) = struct.unpack(">H", head[14:16])
    if version_command >> 4 != 2 or version_command & 0x0F not in (0, 1):
        raise ProxyHeaderError("a PROXY v2 header of another version or command")
    if length > MAX_V2_BYTES:
        raise ProxyHeaderError(f"a PROXY v2 header declaring {length} bytes")
    whole = await _peek(sock, 16 + length)
    if len(whole) < 16 + length:
        raise ProxyHeaderError("the connection ended inside the PROXY header")
    await _take(sock, 16 + length)
    body = whole[16:]
    if version_command & 0x0F == 0 or family >> 4 == 0:  # LOCAL, or an unspecified family
        return None
    if family == 0x11 and length >= 12:  # TCP over IPv4
        return str(_address(str(ipaddress.IPv4Address(body[:4]))))
    if family == 0x21 and length >= 36:  # TCP over IPv6
        return str(_address(str(ipaddress.IPv6Address(body[:16]))))
    raise ProxyHeaderError("a PROXY v2 header that is not TCP over IPv4 or IPv6")
