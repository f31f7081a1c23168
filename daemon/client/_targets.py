"""Where a client connects: daemon addresses as URLs.

Rules (the contract):

1. :func:`parse_target` reads ``tcp://HOST:PORT`` (the binary protocol), ``tls://HOST:PORT``
   (the binary protocol over TLS), ``unix:PATH`` or ``unix:///ABSOLUTE/PATH`` (a Unix
   socket), ``http://HOST[:PORT]`` and ``https://HOST[:PORT]`` (the HTTP/JSON API; ``/`` as
   the only path). A bare ``HOST:PORT`` is ``tcp://HOST:PORT``. IPv6 hosts are bracketed
   (``tcp://[::1]:7433``). Default ports: 7433 for ``tcp``/``tls``, 7434 for
   ``http``/``https``.
2. Anything else (another scheme, a path, a query, user information, a port outside
   0..65535, an empty host) is a :class:`ValueError` naming the URL.
3. ``http+unix:PATH`` (or ``http+unix:///ABSOLUTE/PATH``) is the HTTP/JSON API over a Unix
   socket: a reverse proxy or sidecar listening there (the daemon's own HTTP listener is TCP).
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

import attrs

__all__ = ["SCHEMES", "Target", "parse_target"]

SCHEMES: Final = ("tcp", "tls", "unix", "http", "https", "http+unix")
_UNIX_SCHEMES: Final = ("unix", "http+unix")
#: The daemon's default EVD1 port (``daemon.config._hosting.DEFAULT_PORT``, held equal by a
#: test): a client names it without loading the configuration room.
DEFAULT_TCP_PORT: Final = 7433
_DEFAULT_PORTS: Final = {"tcp": 7433, "tls": 7433, "http": 7434, "https": 7434}


@attrs.frozen
class Target:
    """A parsed daemon address."""

    scheme: str
    host: str | None = None
    port: int | None = None
    path: str | None = None

    @property
    def tls(self) -> bool:
        return self.scheme in ("tls", "https")

    @property
    def http(self) -> bool:
        return self.scheme in ("http", "https", "http+unix")

    def __str__(self) -> str:
        if self.scheme in _UNIX_SCHEMES:
            return f"{self.scheme}:{self.path}"
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def parse_target(url: str) -> Target:
    """The target ``url`` names (module rules)."""
    for scheme in _UNIX_SCHEMES:
        if url.startswith(f"{scheme}:"):
            path = url[len(scheme) + 1 :]
            if path.startswith("//"):
                path = path[2:]
                if not path.startswith("/"):
                    raise ValueError(
                        f"{url!r}: {scheme}:// needs an absolute path ({scheme}:///run/x.sock)"
                    )
            if not path:
                raise ValueError(f"{url!r}: no socket path")
            return Target(scheme, path=path)
    if "://" not in url:
        url = f"tcp://{url}"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise ValueError(f"{url!r} is not a daemon address: {error}") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ValueError(f"{url!r}: the scheme must be one of {', '.join(SCHEMES)}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"{url!r}: a daemon address has no path, query or fragment")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{url!r}: a daemon address has no user information (use a token)")
    if not parts.hostname:
        raise ValueError(f"{url!r}: no host")
    return Target(scheme, parts.hostname, _DEFAULT_PORTS[scheme] if port is None else port)
