"""The ``[http]`` listener's settings.

Rules (the contract):

1. :class:`HttpConfig` is the HTTP/1.1 listener's address (``listen``), its security
   (:class:`~daemon.config._security.ListenerSecurity`: TLS, tokens) and the limits HTTP adds to the
   server's (which it shares: sessions and their bounds, ``max_connections`` and the
   per-peer caps, ``max_in_flight``, ``idle_timeout``, ``min_evidence_rate``,
   ``evidence_grace``, ``request_deadline``, ``shutdown_grace``, the audit log).
2. ``max_header_bytes`` bounds one request head (request line and header fields) and
   ``max_headers`` its header fields; ``header_timeout`` is the time a new connection has to
   complete its TLS handshake and first request head (as ``pre_hello_timeout`` bounds a
   binary connection's ``hello``). After that, each next request must arrive whole within
   the server's ``idle_timeout``.
3. ``trusted_proxies``: the addresses or CIDRs of the proxies whose PROXY protocol header or
   ``X-Forwarded-For`` names the client (:mod:`daemon.server._proxy`); from any other peer
   both are ignored. Empty: none.
4. Every value is validated when built (``ValueError`` naming it).
"""

from __future__ import annotations

import ipaddress
import math
from typing import Final

import attrs

from daemon.config._security import ListenerSecurity

__all__ = ["DEFAULT_HTTP_PORT", "HttpConfig"]

DEFAULT_HTTP_PORT: Final = 7434
# The HTTP head bounds (a request line and header fields, and how many fields).
DEFAULT_MAX_HEADER_BYTES: Final = 16 * 1024
DEFAULT_MAX_HEADERS: Final = 100


@attrs.frozen
class HttpConfig:
    """The HTTP listener (module rules)."""

    listen: tuple[str, int] = ("127.0.0.1", DEFAULT_HTTP_PORT)
    security: ListenerSecurity = attrs.field(factory=ListenerSecurity)
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    max_headers: int = DEFAULT_MAX_HEADERS
    header_timeout: float = 5.0
    trusted_proxies: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        host, port = self.listen
        if type(host) is not str or type(port) is not int or not 0 <= port <= 65535:
            raise ValueError("http listen must be (host, port)")
        for name in ("max_header_bytes", "max_headers"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"http {name} must be a positive integer")
        value = self.header_timeout
        if type(value) not in (int, float) or not math.isfinite(value) or value <= 0:
            raise ValueError("http header_timeout must be a positive number of seconds")
        if type(self.trusted_proxies) is not tuple:
            raise ValueError("http trusted_proxies must be a list of addresses or CIDRs")
        for cidr in self.trusted_proxies:
            try:
                ipaddress.ip_network(cidr, strict=False)
            except (TypeError, ValueError):
                raise ValueError(
                    f"http trusted_proxies: {cidr!r} is not an address or a CIDR"
                ) from None
