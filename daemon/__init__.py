"""The ``evidenced`` daemon: sans-IO protocol, trio server, client library, audit log.

Public API (everything else lives in private modules):

* Host: :func:`serve` (run until shutdown), :func:`open_server` (async context manager),
  :class:`Server`, :class:`HostedSession`, :class:`ServerConfig`, :func:`default_sessions`,
  :func:`load_config`.
* Client (``docs/client.md``): :func:`open_client` (async: asyncio or trio, on anyio),
  :class:`Client`, :class:`SyncClient` (blocking, on a kept connection), :class:`Retry` (what
  is retried: only what the daemon refused before admission), :class:`SubmitResult` and its
  typed :class:`Evaluation` / :class:`Observations`, :func:`fetch_receipt` (a decision's
  transparency-log receipt; :class:`ReceiptUnavailable`), and the exceptions
  :class:`ClientError`, :class:`TransportError`, :class:`ClientTimeout`,
  :class:`RejectedError`, :class:`ServiceUnavailable`, :class:`ServerProtocolError`,
  :class:`HonestBindingError`.
* Audit: :class:`AuditLog`, :func:`verify_log`, :func:`tail`, :class:`VerifyReport`,
  :class:`AuditRef` (a line's ``seq`` and digest), :func:`parse_anchor`,
  :class:`AuditLogError`, :class:`AuditLogCorrupt`.
* Transparency log: :mod:`daemon.tlog` (tree, tiles, signed notes, receipts, verification).
* Protocol: the sans-IO codec, :mod:`daemon.protocol` (``docs/protocol.md``).
* Errors: every exception the product raises on purpose (any of its packages) is an
  :class:`EvidencedError`: a :class:`CallerError`, a :class:`PeerError`
  (:class:`RemoteProtocolError`) or a :class:`ServiceError` (:class:`LocalProtocolError`, an
  :class:`EnvironmentFault`: :class:`Unavailable`, :class:`Busy`); the tree is
  :mod:`canon._errors`.
"""

from typing import TYPE_CHECKING, Any

#: The distribution's version, the one place it is written: ``pyproject.toml`` reads it
#: (``[tool.setuptools.dynamic]``), so the package metadata, ``evidenced --version`` and the
#: server's name always agree. A plain constant: naming the server costs no metadata lookup.
__version__ = "0.1.0"

#: Says this ``daemon/__init__.py`` is evidenced's: python-daemon installs the same file, and
#: every command checks this name first (``daemon/commands/_package_check.py``).
__distribution__ = "evidenced"

# Every public name is loaded on first use: importing a client never loads the server, and
# ``evidenced --help`` loads neither (tests/test_architecture.py holds both).
_LAZY: dict[str, str] = {
    "GENESIS": "daemon.audit._audit",
    "AuditLog": "daemon.audit._audit",
    "AuditLogCorrupt": "daemon.audit._audit",
    "AuditLogError": "daemon.audit._audit",
    "AuditRef": "daemon.audit._audit",
    "Durability": "daemon.audit._audit",
    "Overflow": "daemon.audit._audit",
    "VerifyReport": "daemon.audit._audit",
    "parse_anchor": "daemon.audit._audit",
    "tail": "daemon.audit._audit",
    "verify_log": "daemon.audit._audit",
    "Client": "daemon.client._client",
    "ClientError": "daemon.client._outcomes",
    "ClientTimeout": "daemon.client._outcomes",
    "Evaluation": "daemon.client._results",
    "HonestBindingError": "daemon.client._honest",
    "Observations": "daemon.client._results",
    "RejectedError": "daemon.client._outcomes",
    "Retry": "daemon.client._retry",
    "ServerProtocolError": "daemon.client._outcomes",
    "ServiceUnavailable": "daemon.client._outcomes",
    "SubmitResult": "daemon.client._outcomes",
    "TransportError": "daemon.client._outcomes",
    "ConfigError": "daemon.config._config",
    "DaemonConfig": "daemon.config._config",
    "default_sessions": "daemon.config._config",
    "load_config": "daemon.config._config",
    "SyncClient": "daemon.client._sync",
    "open_client": "daemon.client._client",
    "ReceiptUnavailable": "daemon.client._receipts",
    "fetch_receipt": "daemon.client._receipts",
    "DEADLINE_DETAILS": "daemon.server._evaluation",
    "DEFAULT_PORT": "daemon.config._hosting",
    "HostedSession": "daemon.config._hosting",
    "Server": "daemon.server._server",
    "ServerConfig": "daemon.config._hosting",
    "open_server": "daemon.server._service",
    "serve": "daemon.server._service",
    "Busy": "daemon.wire._errors",
    "CallerError": "daemon.wire._errors",
    "EnvironmentFault": "daemon.wire._errors",
    "EvidencedError": "daemon.wire._errors",
    "LocalProtocolError": "daemon.wire._errors",
    "PeerError": "daemon.wire._errors",
    "RemoteProtocolError": "daemon.wire._errors",
    "ServiceError": "daemon.wire._errors",
    "Unavailable": "daemon.wire._errors",
}

if TYPE_CHECKING:
    from daemon.audit._audit import (
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
    from daemon.client._client import Client, open_client
    from daemon.client._honest import HonestBindingError
    from daemon.client._outcomes import (
        ClientError,
        ClientTimeout,
        RejectedError,
        ServerProtocolError,
        ServiceUnavailable,
        SubmitResult,
        TransportError,
    )
    from daemon.client._receipts import ReceiptUnavailable, fetch_receipt
    from daemon.client._results import Evaluation, Observations
    from daemon.client._retry import Retry
    from daemon.client._sync import SyncClient
    from daemon.config._config import ConfigError, DaemonConfig, default_sessions, load_config
    from daemon.config._hosting import DEFAULT_PORT, HostedSession, ServerConfig
    from daemon.server._evaluation import DEADLINE_DETAILS
    from daemon.server._server import Server
    from daemon.server._service import open_server, serve
    from daemon.wire._errors import (
        Busy,
        CallerError,
        EnvironmentFault,
        EvidencedError,
        LocalProtocolError,
        PeerError,
        RemoteProtocolError,
        ServiceError,
        Unavailable,
    )


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'daemon' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DEADLINE_DETAILS",
    "DEFAULT_PORT",
    "GENESIS",
    "AuditLog",
    "AuditLogCorrupt",
    "AuditLogError",
    "AuditRef",
    "Busy",
    "CallerError",
    "Client",
    "ClientError",
    "ClientTimeout",
    "ConfigError",
    "DaemonConfig",
    "Durability",
    "EnvironmentFault",
    "Evaluation",
    "EvidencedError",
    "HonestBindingError",
    "HostedSession",
    "LocalProtocolError",
    "Observations",
    "Overflow",
    "PeerError",
    "ReceiptUnavailable",
    "RejectedError",
    "RemoteProtocolError",
    "Retry",
    "Server",
    "ServerConfig",
    "ServerProtocolError",
    "ServiceError",
    "ServiceUnavailable",
    "SubmitResult",
    "SyncClient",
    "TransportError",
    "Unavailable",
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
