"""Who may talk to a TCP listener: its TLS and its bearer tokens, and when exposure is refused.

Rules (the contract):

1. Each TCP listener (the binary protocol's ``[server] listen`` and the HTTP ``[http]
   listen``) has its own :class:`ListenerSecurity`: optional TLS (:class:`~daemon.config._tls.
   TlsConfig`: ``tls_cert``, ``tls_key``, ``tls_client_ca``) and an optional ``tokens_file``
   (:mod:`daemon.config._tokens`). The same files may serve both listeners. A Unix socket has none:
   its identity is the peer's credentials (``SO_PEERCRED``) and its file mode (0600, or
   0660 for ``socket_group``).
2. A listener is *authenticated* when it requires a bearer token (``tokens_file``) or a
   client certificate (``tls_client_ca``), and *encrypted* with TLS. A TCP listener on an
   address that is not loopback (``127.0.0.0/8``, ``::1``, ``localhost``) must be both
   (:func:`exposure_problem`): otherwise the configuration is refused, naming the listener
   and what is missing, unless ``insecure_listen`` (``serve --insecure-listen``) says the
   operator means it; the choice is written into the ``daemon_start`` audit line
   (:meth:`ListenerSecurity.describe`).
3. :meth:`ListenerSecurity.load` reads every file once, when the server starts (a missing or
   malformed file stops the start with its name: :class:`~daemon.config._tls.TlsConfigError`,
   :class:`~daemon.config._tokens.TokenFileError`), into a :class:`LoadedSecurity`: the server's
   ``ssl.SSLContext`` (or None) and the :class:`~daemon.config._tokens.TokenStore` (or None).
4. With a ``tokens_file``, every request on that listener must present a token of the file
   (the binary protocol: in its ``hello``; HTTP: ``Authorization: Bearer``), else it is
   refused ``UNAUTHENTICATED`` (audited); the token's *name* is the audit line's
   ``requester.token``. Without one, a token that is presented is ignored. A verified client
   certificate adds ``requester.tls_client`` (subject CN and DER SHA-256).
"""

from __future__ import annotations

import ipaddress
import ssl
from typing import Any

import attrs

from daemon.config._tls import TlsConfig, server_context
from daemon.config._tokens import TokenStore
from daemon.wire._errors import PeerError

__all__ = [
    "ExposureRefused",
    "ListenerSecurity",
    "LoadedSecurity",
    "exposure_problem",
    "is_loopback",
]


class ExposureRefused(PeerError, ValueError):
    """A TCP listener would be exposed without TLS and authentication (rule 2)."""


@attrs.frozen
class LoadedSecurity:
    """A listener's security, loaded (rule 3)."""

    ssl_context: ssl.SSLContext | None = None
    tokens: TokenStore | None = None


@attrs.frozen
class ListenerSecurity:
    """A TCP listener's TLS and tokens (rule 1)."""

    tls: TlsConfig | None = None
    tokens_file: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.tokens_file is not None and (
            type(self.tokens_file) is not str or not self.tokens_file
        ):
            raise ValueError("tokens_file must be a file path")

    @property
    def encrypted(self) -> bool:
        return self.tls is not None

    @property
    def authenticated(self) -> bool:
        return self.tokens_file is not None or (
            self.tls is not None and self.tls.client_ca is not None
        )

    def describe(self) -> dict[str, Any]:
        """What the ``daemon_start`` line records for this listener (rule 2)."""
        return {
            "tls": self.encrypted,
            "client_certificates": self.tls is not None and self.tls.client_ca is not None,
            "tokens": self.tokens_file is not None,
        }

    def load(self) -> LoadedSecurity:
        """Read the files (rule 3)."""
        context = None if self.tls is None else server_context(self.tls)
        tokens = None if self.tokens_file is None else TokenStore.load(self.tokens_file)
        return LoadedSecurity(context, tokens)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (rule 2): a loopback IP literal or
    ``localhost``. Any other name, or a wildcard address, is not."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def exposure_problem(listener: str, host: str, port: int, security: ListenerSecurity) -> str | None:
    """Why listening on ``host`` with ``security`` is refused (rule 2), or None."""
    if is_loopback(host):
        return None
    missing = []
    if not security.encrypted:
        missing.append("TLS (tls_cert, tls_key)")
    if not security.authenticated:
        missing.append("authentication (tokens_file or tls_client_ca)")
    if not missing:
        return None
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return (
        f"refusing to listen ({listener}) on {where}, which is not a loopback address, "
        f"without {' and '.join(missing)}; configure them, or pass --insecure-listen "
        "to do it anyway"
    )
