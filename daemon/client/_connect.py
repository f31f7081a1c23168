"""Where and how a client connects: the keywords both clients take, checked once.

:func:`settings` turns ``open_client``'s and ``SyncClient``'s keywords (``url`` or
``tcp=(host, port)`` or ``unix=path``, ``token``, TLS files or an ``ssl_context``, timeouts,
``keepalive_expiry``, the response cap) into one :class:`Settings`: the
:class:`~daemon.client._targets.Target` (``daemon.client._targets`` rules) and the TLS context
(:func:`daemon.config._tls.client_context`: the system's store or ``tls_ca``, a client
certificate from ``tls_cert``/``tls_key``; built for ``tls://`` and ``https://`` only, so a
plain client never loads :mod:`ssl`). Exactly one address, finite positive timeouts and a
positive cap, else :class:`ValueError`, before anything is connected.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import attrs

from daemon.client._targets import Target, parse_target
from daemon.wire._protocol import DEFAULT_MAX_RESPONSE_HEADER_BYTES

if TYPE_CHECKING:
    import ssl

__all__ = ["DEFAULT_KEEPALIVE_EXPIRY", "Settings", "settings"]

#: Seconds an idle kept connection is trusted (httpx's default too); well under the daemon's
#: ``idle_timeout`` (30 s by default), after which it closes an idle connection.
DEFAULT_KEEPALIVE_EXPIRY = 5.0


@attrs.frozen
class Settings:
    """A client's checked connection settings."""

    target: Target
    ssl_context: ssl.SSLContext | None
    token: str | None
    connect_timeout: float
    request_timeout: float
    keepalive_expiry: float
    max_response_bytes: int

    def transport_keywords(self) -> dict[str, Any]:
        keywords = attrs.asdict(self, recurse=False)
        del keywords["target"]
        if not self.target.http:
            keywords["max_response_header_bytes"] = keywords.pop("max_response_bytes")
        return keywords


def settings(
    url: str | None = None,
    *,
    tcp: tuple[str, int] | None = None,
    unix: str | None = None,
    token: str | None = None,
    tls_ca: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    ssl_context: ssl.SSLContext | None = None,
    connect_timeout: float = 5.0,
    request_timeout: float = 60.0,
    keepalive_expiry: float = DEFAULT_KEEPALIVE_EXPIRY,
    max_response_header_bytes: int = DEFAULT_MAX_RESPONSE_HEADER_BYTES,
) -> Settings:
    """The :class:`Settings` of these keywords (module docstring)."""
    if sum(value is not None for value in (url, tcp, unix)) != 1:
        raise ValueError("give exactly one of url, tcp=(host, port) or unix=path")
    for value in (connect_timeout, request_timeout):
        if not math.isfinite(value) or value <= 0:
            raise ValueError("timeouts must be positive numbers of seconds")
    if not math.isfinite(keepalive_expiry) or keepalive_expiry < 0:
        raise ValueError("keepalive_expiry must be a number of seconds >= 0")
    if type(max_response_header_bytes) is not int or max_response_header_bytes <= 0:
        raise ValueError("max_response_header_bytes must be a positive integer")
    if url is not None:
        target = parse_target(url)
    elif tcp is not None:
        target = Target("tcp", tcp[0], tcp[1])
    else:
        assert unix is not None
        target = Target("unix", path=unix)
    if target.tls and ssl_context is None:
        from daemon.config._tls import client_context  # ssl loads for TLS targets only

        ssl_context = client_context(ca=tls_ca, cert=tls_cert, key=tls_key)
    return Settings(
        target,
        ssl_context,
        token,
        connect_timeout,
        request_timeout,
        keepalive_expiry,
        max_response_header_bytes,
    )
