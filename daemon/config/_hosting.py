"""What a host configures: hosted sessions (with bounds clamped to their mechanisms) and the
server's settings.

Rules (the contract):

1. A :class:`HostedSession` has a non-empty name, mechanism instances that a
   :class:`~session.VerificationSession` accepts (non-empty id, digest form, no substitution),
   and *declared* evidence bounds: non-negative exact integers.
2. Mechanism bounds. A mechanism may state the most evidence one evaluation can accept with an
   optional ``accepted_bounds`` attribute — a :class:`session.EvidenceBounds`, or a
   zero-argument method returning one (part of the mechanism provider contract, read by
   :func:`session.accepted_bounds`). A mechanism without it accepts any size. A value of any
   other type, or one that raises, is a host error (``ValueError`` when the session is built),
   never silently ignored.
3. Clamp. The session's *effective* bounds (:meth:`HostedSession.bounds`) are, field by field,
   the declared bound lowered to the largest bound any of its mechanisms accepts (a binding
   selects one of them, so the session cannot refuse what one of them would read). The server
   checks declared sizes against the effective bounds before reading any evidence byte, so it
   never reads a pair every mechanism of the session must refuse. A clamped session says so in
   the ``sessions`` answer (``declared_bounds`` beside ``bounds``).
4. :class:`ServerConfig` validates every setting when built (``ValueError`` naming it). ``0``
   means "derive it" for the per-peer caps (:meth:`ServerConfig.peer_connection_cap`,
   :meth:`ServerConfig.peer_in_flight_cap`) and for ``worker_processes`` (the CPU count).
   A TCP listener (``tcp`` with ``security``, ``http``) on an address that is not loopback
   without TLS and authentication is refused when the server starts, unless
   ``insecure_listen`` (:mod:`daemon.config._checks`, on the listeners that will serve,
   inherited ones included; :mod:`daemon.config._security`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Final

import attrs

from daemon.audit._audit import Durability, Overflow
from daemon.audit._shipping_config import SinkConfig, check_sinks
from daemon.audit._transparency import TransparencyConfig
from daemon.config._http_config import HttpConfig
from daemon.config._security import ListenerSecurity
from daemon.retention._policy import RetentionPolicy
from daemon.schema._tables import (
    RULE,
    AuditTable,
    ServerTable,
    SessionTable,
    check_range,
    default_of,
    rule_of,
)
from session import (
    EvidenceStore,
    VerificationMechanism,
    VerificationSession,
    accepted_bounds,
)

_SERVER: Final = ServerTable()
_AUDIT: Final = AuditTable()
#: ``[server] listen``'s default, as (host, port).
_LISTEN_HOST, _, _LISTEN_PORT = _SERVER.listen.rpartition(":")
DEFAULT_PORT: Final = int(_LISTEN_PORT)
#: A session's declared bounds: ``[sessions.<name>]`` keys, their defaults and rule the schema's.
_BOUNDS: Final = ("max_evidence_items", "max_evidence_bytes")


@attrs.frozen
class HostedSession:
    """A named session: its mechanism instances and the host's *declared* evidence bounds,
    clamped to what the mechanisms accept (module rule 3) and enforced on the declared sizes
    before any evidence byte is read."""

    name: str
    mechanisms: tuple[VerificationMechanism, ...]
    max_evidence_items: int = default_of(SessionTable, "max_evidence_items")
    max_evidence_bytes: int = default_of(SessionTable, "max_evidence_bytes")
    #: How the configuration built the session (``daemon_start``'s ``session_config`` entry,
    #: which ``evidenced replay`` rebuilds it from; None for a host-built session), and what
    #: it retains (``docs/retention.md``; None: nothing).
    recipe: Mapping[str, Any] | None = attrs.field(default=None, eq=False, kw_only=True)
    retention: RetentionPolicy | None = attrs.field(default=None, eq=False, kw_only=True)
    _effective: tuple[int, int] = attrs.field(init=False, default=(0, 0), eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not self.name:
            raise ValueError("a session needs a name")
        for key in _BOUNDS:
            rule = rule_of(SessionTable, key)
            if rule is not None and not rule.holds(getattr(self, key)):
                raise ValueError("session bounds must be non-negative integers")
        # The session's own registration rules (non-empty id, digest form, no substitution).
        probe = VerificationSession(EvidenceStore())
        for mechanism in self.mechanisms:
            probe.register(mechanism)
        stated = [accepted_bounds(mechanism) for mechanism in self.mechanisms]
        items, size = self.max_evidence_items, self.max_evidence_bytes
        if stated and all(bound is not None for bound in stated):
            items = min(items, max(b.max_evidence_items for b in stated if b is not None))
            size = min(size, max(b.max_evidence_bytes for b in stated if b is not None))
        object.__setattr__(self, "_effective", (items, size))

    @property
    def effective_items(self) -> int:
        return self._effective[0]

    @property
    def effective_bytes(self) -> int:
        return self._effective[1]

    @property
    def clamped(self) -> bool:
        return self._effective != (self.max_evidence_items, self.max_evidence_bytes)

    def bounds(self) -> dict[str, int]:
        """The effective bounds (what the server enforces)."""
        return {"max_evidence_items": self._effective[0], "max_evidence_bytes": self._effective[1]}

    def declared_bounds(self) -> dict[str, int]:
        """The bounds the host declared, before the clamp."""
        return {
            "max_evidence_items": self.max_evidence_items,
            "max_evidence_bytes": self.max_evidence_bytes,
        }


@attrs.frozen
class ServerConfig:
    """Everything the server needs besides its sessions (all times in seconds, rates in
    bytes per second). A field named as a ``[server]`` key, or as an ``[audit]`` key after
    ``audit_``, is that key: its default and its range rule are the schema's
    (:mod:`daemon.config._config_schema`, :func:`schema_fields`), declared once there."""

    tcp: tuple[str, int] | None = (_LISTEN_HOST, DEFAULT_PORT)
    unix: str | None = None
    socket_group: str = _SERVER.socket_group
    audit_path: str = _AUDIT.path
    audit_durability: str = _AUDIT.durability
    audit_overflow: str = _AUDIT.overflow
    audit_max_pending: int = _AUDIT.max_pending
    audit_rotate_bytes: int = _AUDIT.rotate_bytes
    #: The transparency log (``docs/spec/transparency.md §6``); ``None``: not kept.
    transparency: TransparencyConfig | None = None
    idle_timeout: float = _SERVER.idle_timeout
    pre_hello_timeout: float = _SERVER.pre_hello_timeout
    request_deadline: float = _SERVER.request_deadline
    min_evidence_rate: int = _SERVER.min_evidence_rate
    evidence_grace: float = _SERVER.evidence_grace
    max_in_flight: int = _SERVER.max_in_flight
    max_in_flight_per_peer: int = _SERVER.max_in_flight_per_peer
    max_connections: int = _SERVER.max_connections
    max_connections_per_peer: int = _SERVER.max_connections_per_peer
    unix_reserved_connections: int = _SERVER.unix_reserved_connections
    #: Serving processes (``--workers``; ``"auto"``: one per CPU; ``daemon.server._supervisor``).
    workers: int | str = _SERVER.workers
    worker_processes: int = _SERVER.worker_processes
    inline_max_bytes: int = _SERVER.inline_max_bytes
    shutdown_grace: float = _SERVER.shutdown_grace
    max_header_bytes: int = _SERVER.max_header_bytes
    max_frame_bytes: int = _SERVER.max_frame_bytes
    max_items: int = _SERVER.max_items
    handle_signals: bool = False
    #: The binary protocol's TCP listener's TLS and tokens (``docs/http.md``).
    security: ListenerSecurity = attrs.field(factory=ListenerSecurity)
    #: The HTTP/1.1 listener (``docs/http.md``); ``None``: no HTTP.
    http: HttpConfig | None = None
    #: Listen on a non-loopback address without TLS and authentication all the same.
    insecure_listen: bool = False
    #: ``[[audit.sinks]]``: where the committed audit lines are shipped
    #: (:mod:`daemon.audit._shipping_config`); restart-only, as every ``[audit]`` key.
    sinks: tuple[SinkConfig, ...] = ()

    def __attrs_post_init__(self) -> None:
        if self.tcp is None and self.unix is None and self.http is None:
            raise ValueError("the server needs a TCP address, a Unix socket path or [http]")
        if type(self.insecure_listen) is not bool:
            raise ValueError("insecure_listen must be true or false")
        if type(self.socket_group) is not str:
            raise ValueError("socket_group must be a group name or number (a string)")
        Durability(self.audit_durability)
        Overflow(self.audit_overflow)
        for name, key in schema_fields().items():
            check_range(name, key.metadata.get(RULE), getattr(self, name))
        if type(self.sinks) is not tuple or not all(
            isinstance(sink, SinkConfig) for sink in self.sinks
        ):
            raise ValueError("sinks must be a tuple of SinkConfig")
        check_sinks(self.sinks)

    def serving_count(self) -> int:
        """Serving processes: as configured, one per CPU for ``"auto"``."""
        if self.workers == "auto":
            return max(1, os.cpu_count() or 1)
        return int(self.workers)

    def peer_connection_cap(self, max_connections: int) -> int:
        """Connections one peer may hold: as configured, else a quarter of ``max_connections``
        (the effective one, after descriptor sizing) but at least 64; never more than
        ``max_connections``."""
        if self.max_connections_per_peer:
            return min(self.max_connections_per_peer, max_connections)
        return min(max_connections, max(64, max_connections // 4))

    def peer_in_flight_cap(self) -> int:
        """Requests one peer may have in flight: as configured, else ``max_in_flight`` less an
        eighth kept for everyone else, at least 1."""
        if self.max_in_flight_per_peer:
            return min(self.max_in_flight_per_peer, self.max_in_flight)
        return max(1, self.max_in_flight - self.max_in_flight // 8)

    def worker_count(self) -> int:
        """Evaluation worker processes: as configured, else one per CPU."""
        return self.worker_processes or max(1, os.cpu_count() or 1)


def schema_fields() -> dict[str, attrs.Attribute[Any]]:
    """The :class:`ServerConfig` fields that are schema keys: name -> the schema's field
    (``[server]`` keys by their name, ``[audit]`` keys as ``audit_<key>``)."""
    names = {field.name for field in attrs.fields(ServerConfig)}
    found: dict[str, attrs.Attribute[Any]] = {}
    for field in attrs.fields(ServerTable):
        if field.name in names:
            found[field.name] = field
    for field in attrs.fields(AuditTable):
        if f"audit_{field.name}" in names:
            found[f"audit_{field.name}"] = field
    return found
