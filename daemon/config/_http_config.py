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
4. Every value is validated when built (``ValueError`` naming it). Each default and range
   rule is the schema's ``[http]`` key of the same name (:class:`~daemon.schema._tables.
   HttpTable`), read from it, never restated here.
"""

from __future__ import annotations

import ipaddress
from typing import Final

import attrs

from daemon.config._security import ListenerSecurity
from daemon.schema._tables import HttpTable, check_ranges

__all__ = ["DEFAULT_HTTP_PORT", "DEFAULT_MAX_HEADERS", "DEFAULT_MAX_HEADER_BYTES", "HttpConfig"]

_HTTP: Final = HttpTable()
_HOST, _, _PORT = _HTTP.listen.rpartition(":")
DEFAULT_HTTP_PORT: Final = int(_PORT)
# The HTTP head bounds (a request line and header fields, and how many fields).
DEFAULT_MAX_HEADER_BYTES: Final = _HTTP.max_header_bytes
DEFAULT_MAX_HEADERS: Final = _HTTP.max_headers
#: The fields that are ``[http]`` keys of the same name, each checked by its schema rule.
_RANGED: Final = ("max_header_bytes", "max_headers", "header_timeout")


@attrs.frozen
class HttpConfig:
    """The HTTP listener (module rules)."""

    listen: tuple[str, int] = (_HOST, DEFAULT_HTTP_PORT)
    security: ListenerSecurity = attrs.field(factory=ListenerSecurity)
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    max_headers: int = DEFAULT_MAX_HEADERS
    header_timeout: float = _HTTP.header_timeout
    trusted_proxies: tuple[str, ...] = _HTTP.trusted_proxies

    def __attrs_post_init__(self) -> None:
        host, port = self.listen
        if type(host) is not str or type(port) is not int or not 0 <= port <= 65535:
            raise ValueError("http listen must be (host, port)")
        check_ranges(HttpTable, self, _RANGED, prefix="http ")
        if type(self.trusted_proxies) is not tuple:
            raise ValueError("http trusted_proxies must be a list of addresses or CIDRs")
        for cidr in self.trusted_proxies:
            try:
                ipaddress.ip_network(cidr, strict=False)
            except (TypeError, ValueError):
                raise ValueError(
                    f"http trusted_proxies: {cidr!r} is not an address or a CIDR"
                ) from None
