"""The ``evidenced`` daemon: sans-IO protocol, trio server, client library, audit log.

Public API (everything else lives in private modules):

* Host: :func:`serve` (run until shutdown), :func:`open_server` (async context manager),
  :class:`Server`, :class:`HostedSession`, :class:`ServerConfig`, :func:`default_sessions`,
  :func:`load_config`.
* Client: :func:`open_client` (async), :class:`SyncClient`, :class:`SubmitResult`,
  :func:`fetch_receipt` (a decision's transparency-log receipt; :class:`ReceiptUnavailable`),
  and the exceptions :class:`ClientError`, :class:`TransportError`, :class:`ClientTimeout`,
  :class:`RejectedError`, :class:`ServiceUnavailable`, :class:`ServerProtocolError`.
* Audit: :class:`AuditLog`, :func:`verify_log`, :func:`tail`, :class:`VerifyReport`,
  :class:`AuditRef` (a line's ``seq`` and digest), :func:`parse_anchor`,
  :class:`AuditLogError`, :class:`AuditLogCorrupt`.
* Transparency log: :mod:`daemon.tlog` (tree, tiles, signed notes, receipts, verification).
* Protocol: the sans-IO codec, :mod:`daemon.protocol` (``docs/protocol.md``).
"""

from ._audit import (
    GENESIS,
    AuditLog,
    AuditLogCorrupt,
    AuditLogError,
    AuditRef,
    Durability,
    Overflow,
    VerifyReport,
    parse_anchor,
    tail,
    verify_log,
)
from ._client import (
    Client,
    ClientError,
    ClientTimeout,
    RejectedError,
    ServerProtocolError,
    ServiceUnavailable,
    SubmitResult,
    TransportError,
)
from ._config import ConfigError, DaemonConfig, default_sessions, load_config
from ._connect import SyncClient, open_client
from ._receipts import ReceiptUnavailable, fetch_receipt
from ._server import (
    DEADLINE_DETAILS,
    DEFAULT_PORT,
    HostedSession,
    Server,
    ServerConfig,
    open_server,
    serve,
)

__all__ = [
    "DEADLINE_DETAILS",
    "DEFAULT_PORT",
    "GENESIS",
    "AuditLog",
    "AuditLogCorrupt",
    "AuditLogError",
    "AuditRef",
    "Client",
    "ClientError",
    "ClientTimeout",
    "ConfigError",
    "DaemonConfig",
    "Durability",
    "HostedSession",
    "Overflow",
    "ReceiptUnavailable",
    "RejectedError",
    "Server",
    "ServerConfig",
    "ServerProtocolError",
    "ServiceUnavailable",
    "SubmitResult",
    "SyncClient",
    "TransportError",
    "VerifyReport",
    "default_sessions",
    "fetch_receipt",
    "load_config",
    "open_client",
    "open_server",
    "parse_anchor",
    "serve",
    "tail",
    "verify_log",
]
