"""TLS for the TCP listeners and the client: context construction, and who a peer is.

Rules (the contract):

1. A listener's TLS (:class:`TlsConfig`): ``cert`` (PEM chain) and ``key`` (PEM) are both
   given or both absent; ``client_ca`` (PEM bundle) is optional and needs them. Every file
   is loaded when the server starts, so a missing or malformed file stops the start with a
   :class:`TlsConfigError` naming it, never a first handshake.
2. :func:`server_context`: TLS 1.2 or newer only (a TLS 1.0/1.1 hello fails the handshake),
   on ``ssl.PROTOCOL_TLS_SERVER`` with the library's cipher list, no compression and the
   server's cipher preference. With ``client_ca`` a client
   certificate signed by that bundle is *required* (``CERT_REQUIRED``): a client without one
   fails the handshake and never reaches the protocol.
3. :func:`client_context`: TLS 1.2 or newer, the server's certificate verified against
   ``ca`` (a PEM bundle) or the system's store, host name checked; ``cert``/``key`` present
   a client certificate.
4. :func:`peer_identity`: after the handshake, the peer certificate's subject common name and
   the SHA-256 of its DER bytes (``{"subject_cn", "sha256"}``, or None without a client
   certificate) for the audit line's ``requester.tls_client``.
5. The handshake runs under the listener's first-request deadline (the connection's
   ``pre_hello_timeout`` or HTTP header timeout), so a client that opens a connection and
   never completes the handshake costs what an idle connection costs and is cut the same way.
"""

from __future__ import annotations

import hashlib
import ssl
from typing import Any

import attrs

from daemon.wire._errors import PeerError

__all__ = ["TlsConfig", "TlsConfigError", "client_context", "peer_identity", "server_context"]


class TlsConfigError(PeerError, ValueError):
    """A TLS file is missing or unusable; the message names it."""


@attrs.frozen
class TlsConfig:
    """A TCP listener's TLS files (rule 1)."""

    cert: str
    key: str
    client_ca: str | None = None

    def __attrs_post_init__(self) -> None:
        for name in ("cert", "key"):
            value = getattr(self, name)
            if type(value) is not str or not value:
                raise ValueError(f"tls_{name} must be a file path")
        if self.client_ca is not None and (type(self.client_ca) is not str or not self.client_ca):
            raise ValueError("tls_client_ca must be a file path")


def server_context(config: TlsConfig) -> ssl.SSLContext:
    """The server side of a TLS listener (rule 2)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    try:
        context.load_cert_chain(config.cert, config.key)
    except (OSError, ssl.SSLError) as error:
        raise TlsConfigError(
            f"cannot load tls_cert {config.cert} / tls_key {config.key}: {_why(error)}"
        ) from None
    if config.client_ca is not None:
        try:
            context.load_verify_locations(cafile=config.client_ca)
        except (OSError, ssl.SSLError) as error:
            raise TlsConfigError(
                f"cannot load tls_client_ca {config.client_ca}: {_why(error)}"
            ) from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def client_context(
    *, ca: str | None = None, cert: str | None = None, key: str | None = None
) -> ssl.SSLContext:
    """The client side (rule 3)."""
    context = ssl.create_default_context(cafile=ca)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert is not None:
        try:
            context.load_cert_chain(cert, key)
        except (OSError, ssl.SSLError) as error:
            raise TlsConfigError(f"cannot load client certificate {cert}: {_why(error)}") from None
    return context


def peer_identity(ssl_object: Any) -> dict[str, str] | None:
    """The client certificate's subject CN and DER SHA-256 (rule 4), or None."""
    try:
        der = ssl_object.getpeercert(binary_form=True)
        parsed = ssl_object.getpeercert()
    except (ValueError, AttributeError, ssl.SSLError):
        return None
    if not der:
        return None
    common_name = ""
    for rdn in (parsed or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                common_name = str(value)
    return {"subject_cn": common_name, "sha256": hashlib.sha256(der).hexdigest()}


def _why(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__
