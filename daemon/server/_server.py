"""The trio server: hosts named sessions over TCP (loopback by default) and Unix sockets.

The server is assembled from parts with one job each; this module is their lifecycle.

* :mod:`daemon.server._listeners`: where it listens (the Unix socket's mode and group), the accept
  loop, and admission into :mod:`daemon.server._table` (the connection table: who yields a
  slot when it is full, the Unix socket's reserve, each peer's share).
* :mod:`daemon.server._frontend`: one EVD1 connection's conversation (timeouts, dispatch, refusals
  with a drain), over :mod:`daemon.server._fastpath` (the raw-socket fast paths).
* :mod:`daemon.server._http_server`: one HTTP/1.1 connection's requests, over the same pipeline
  (``[http]``; ``docs/http.md``); :mod:`daemon.config._security`: TLS and bearer tokens of the TCP
  listeners; :mod:`daemon.server._metrics`: the server's Prometheus registry.
* :mod:`daemon.server._pipeline`: the transport-neutral core — the submit pipeline, one function per
  stage (bounds, binding, capacity, read, evaluate, retain, audit, answer), refusals, queries.
* :mod:`daemon.server._evaluation` / :mod:`daemon.server._workers`: where a pair is evaluated
  (docs/adr/0009).
* :mod:`daemon.config._hosting`: hosted sessions and :class:`ServerConfig`;
  :mod:`daemon.config._describe`:
  the ``sessions`` answer; :mod:`daemon.retention`: evidence stores.

Rules (the contract):

1. Start (:meth:`Server.run`): raise the descriptor soft limit to the hard limit and size
   ``max_connections`` to fit it with headroom (:mod:`daemon.server._resources`); remove stale
   snapshot folders of dead processes of this user (:mod:`mechanism.snapshots`); run the
   listener checks of :mod:`daemon.config._checks` on the listeners that will serve
   (inherited ones included): exposure, then the TLS and token files (a failure stops the
   start, naming it); open the
   audit log (and the transparency log, when configured); fork the evaluation workers
   before the audit writer or any connection exists; open the evidence stores of the
   sessions that retain evidence (:mod:`daemon.retention`); open the listeners; record
   ``daemon_start`` (with each TCP listener's security, and ``insecure_listen``: whether a
   listener is served exposed under ``--insecure-listen``); then report readiness
   (``task_status.started``). The service around it (readiness notification, watchdog,
   signals, reload) is assembled by :mod:`daemon.server._service`.
2. Each request gets a fresh :class:`EvidenceStore` and :class:`VerificationSession`, so
   requests share no state; every decision and every refusal of a request is audited before
   it is answered (:mod:`daemon.server._pipeline`). Every client-chosen value in a message, an audit
   field or a stderr line is echoed verbatim only when short and printable, else as an
   escaped prefix with its length and digest (:mod:`daemon.wire._echo`).
3. ``health`` reports ``serving``, ``degraded`` (the audit log cannot write, or an evidence
   store's latest write failed; its reason) or ``draining``, with the connection, capacity,
   peer, evaluation, audit, transparency and retention figures, the
   decision/refusal/outcome counters, the noise summary, and ``metrics``: the samples of
   ``/metrics`` (:meth:`daemon.server._metrics.ServerMetrics.snapshot`). ``/ready`` is 200
   exactly when the status is ``serving``.
4. Shutdown (:meth:`Server.shutdown`): stop accepting, close idle connections, let in-flight
   requests finish within ``shutdown_grace`` seconds (or until :meth:`Server.cancel_in_flight`),
   then cancel the rest (a cancelled request is still audited); write ``daemon_stop``; flush
   and fsync the audit log; stop the workers; remove the Unix socket file; return normally. A
   failed start records neither ``daemon_start`` nor ``daemon_stop``. The server itself never
   touches signals: the service assembly (:mod:`daemon.server._service`) receives them and
   calls these (:mod:`daemon.server._signals`).
"""

from __future__ import annotations

import contextlib
import os
import socket as stdlib_socket
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import trio

from daemon import __version__
from daemon.audit._audit import AuditLog, AuditLogError, Durability
from daemon.audit._shipper import Shipping
from daemon.audit._transparency import attach, open_transparency
from daemon.audit._transparency import status as transparency_status
from daemon.config._checks import Checked, check_listeners
from daemon.config._describe import describe_sessions
from daemon.config._hosting import DEFAULT_PORT, HostedSession, ServerConfig
from daemon.config._http_config import HttpConfig
from daemon.config._security import LoadedSecurity
from daemon.retention._publish import PublishLoop
from daemon.retention._retainer import Retention
from daemon.server._audit_client import AuditClient
from daemon.server._evaluation import (
    DEADLINE_DETAILS,
    WORKER_FAILED_DETAILS,
    Evaluator,
    worker_job_handler,
)
from daemon.server._frontend import FrontEnd
from daemon.server._http_server import HttpConnection, HttpFrontEnd, busy_answer
from daemon.server._listeners import Acceptor, Listening, open_listeners
from daemon.server._metrics import ServerMetrics
from daemon.server._peers import PeerLedger
from daemon.server._pipeline import Pipeline
from daemon.server._proxy import TrustedProxies
from daemon.server._publishing import publish_status, start_publishing, stop_publishing
from daemon.server._resources import connection_capacity, raise_descriptor_limit
from daemon.server._shipping import shipping_status, start_shipping, stop_shipping
from daemon.server._table import ConnectionTable, unix_reserve
from daemon.server._workers import WorkerPool
from daemon.tlog import TransparencyLog
from daemon.tlog._names import DecisionIds, replica_fields
from daemon.wire import _logs as logs
from daemon.wire._protocol import PROTOCOL_VERSION, ErrorCode, ErrorResponse, ServerConnection

__all__ = [
    "DEADLINE_DETAILS",
    "DEFAULT_PORT",
    "WORKER_FAILED_DETAILS",
    "HostedSession",
    "Server",
    "ServerConfig",
]

SERVER_NAME: Final = f"evidenced/{__version__}"


@attrs.frozen
class WorkerRole:
    """The server is worker ``index`` of a multi-process daemon (:mod:`daemon.server._supervisor`):
    its audit log is ``client`` (the parent's sequencer), it records neither ``daemon_start``
    nor ``daemon_stop``, and its ``health`` aggregates the workers'."""

    client: AuditClient
    index: int


class Server:
    """Serves ``sessions`` with ``config``. Use :meth:`run` in a nursery (``await
    nursery.start(server.run)``) or :func:`serve`; stop with :meth:`shutdown`."""

    def __init__(self, sessions: Sequence[HostedSession], config: ServerConfig) -> None:
        names = [session.name for session in sessions]
        if len(set(names)) != len(names):
            raise ValueError("session names must be unique")
        self.sessions: dict[str, HostedSession] = {s.name: s for s in sessions}
        self.config = config
        self.audit: AuditLog | AuditClient | None = None
        #: Set when this server is one worker of a multi-process daemon (:class:`WorkerRole`).
        self.role: WorkerRole | None = None
        self.transparency: TransparencyLog | None = None
        #: The replica's name: its transparency log's origin (``None`` without one), which its
        #: decision ids carry as a tag (:mod:`daemon.tlog._names`).
        self.origin = (
            None
            if config.transparency is None
            else config.transparency.origin_for(Path(config.audit_path))
        )
        self.publisher: PublishLoop | None = None
        #: The decision-log sinks (``[[audit.sinks]]``; ``daemon.server._shipping``), once
        #: running in this process (never in a worker: its parent ships).
        self.shipping: Shipping | None = None
        self.tcp_address: tuple[str, int] | None = None
        self.unix_path: str | None = None
        #: The HTTP listener's address, once listening (``config.http``).
        self.http_address: tuple[str, int] | None = None
        self._security = LoadedSecurity()
        self._http_security = LoadedSecurity()
        #: The listeners served exposed (non-loopback, no TLS or auth) under insecure_listen.
        self.exposed: tuple[str, ...] = ()
        #: Configuration generations applied by reloads since start (docs/operations.md).
        self.generation = 0
        self._front: FrontEnd | None = None
        self._http_front: HttpFrontEnd | None = None
        self._capacity = trio.CapacityLimiter(config.max_in_flight)
        # Sized for real in run(), once the descriptor limit is known.
        self.max_connections = config.max_connections
        self._peers = PeerLedger(
            connection_cap=config.peer_connection_cap(config.max_connections),
            in_flight_cap=config.peer_in_flight_cap(),
            # A trusted proxy is never struck nor penalized: its clients are (_proxy rule 4).
            exempt=TrustedProxies.parse(
                () if config.http is None else config.http.trusted_proxies
            ).trusts_key,
        )
        self._evaluator: Evaluator | None = None
        self._pipeline: Pipeline | None = None
        self._shutdown = trio.Event()
        self._handlers_scope: trio.CancelScope | None = None
        #: Every open connection, both front ends (daemon.server._table); sized in run().
        self._connections = ConnectionTable(config.max_connections, self._peers)
        self._started_ns = time.monotonic_ns()
        self._start_recorded = False
        self.counters: Counter[str] = Counter()
        #: Listening sockets inherited from systemd (``LISTEN_FDS``), used instead of binding.
        self.inherited: list[stdlib_socket.socket] = []
        #: Listening sockets of the HTTP listener bound by a parent (``--workers``).
        self.inherited_http: list[stdlib_socket.socket] = []
        self._session_list = describe_sessions(self.sessions)
        self._retention = Retention(self.sessions, deadline=config.request_deadline)
        self.metrics = ServerMetrics(
            self.sessions,
            in_flight=lambda: self._capacity.borrowed_tokens,
            connections={"binary": self._binary_connections, "http": self._http_connections},
            audit_pending=lambda: self.audit.pending if self.audit is not None else 0,
            counters=self.counters,
            deadline=config.request_deadline,
            sinks=[sink.name for sink in config.sinks],
        )
        self.metrics.sink_status = self._sink_status

    # -- introspection

    @property
    def draining(self) -> bool:
        """Whether the server has stopped accepting (rule 4)."""
        return self._pipeline is not None and self._pipeline.draining

    def _http_connections(self) -> int:
        return sum(1 for connection in self._connections if isinstance(connection, HttpConnection))

    def _binary_connections(self) -> int:
        return len(self._connections) - self._http_connections()

    def readiness(self) -> tuple[str, str | None]:
        """(``serving`` | ``degraded`` | ``draining``, the reason) (rule 3)."""
        reason = self.audit.failure_reason if self.audit is not None else None
        reason = reason or getattr(self.audit, "alarm", None) or self._retention.failure_reason()
        if self.draining:
            return "draining", reason
        return ("degraded", reason) if reason else ("serving", None)

    def health(self) -> dict[str, Any]:
        status, reason = self.readiness()
        report = {
            "status": status,
            "reason": reason,
            "server": SERVER_NAME,
            "protocol_version": PROTOCOL_VERSION,
            "uptime_ns": time.monotonic_ns() - self._started_ns,
            "connections": len(self._connections),
            "max_connections": self.max_connections,
            "unix_reserved_connections": self._connections.unix_reserve,
            "evicted_connections": self._connections.evicted,
            "in_flight": self._capacity.borrowed_tokens,
            "max_in_flight": self.config.max_in_flight,
            "peers": self._peers.status(),
            "evaluation": self._evaluator.status() if self._evaluator is not None else None,
            "decisions": self.counters["decisions"],
            "refusals": self.counters["refusals"],
            "outcomes": {
                key: self.counters[f"outcome:{key}"] for key in ("PASS", "FAIL", "UNKNOWN")
            },
            "audit": shipping_status(
                self.audit.status() if self.audit is not None else None, self.shipping
            ),
            "transparency": publish_status(
                transparency_status(
                    self.transparency,
                    self.audit.line_index if isinstance(self.audit, AuditLog) else None,
                ),
                self.publisher,
            ),
            "retention": self._retention.status(),
            "noise": self._pipeline.noise.status() if self._pipeline is not None else None,
            "metrics": self.metrics.snapshot(),
        }
        return report if self.role is None else _aggregate(report, self.role, self.figures())

    def _sink_status(self) -> list[dict[str, Any]]:
        """The sinks' state for ``/metrics``: this process's, or a worker's sequencer's."""
        if self.role is not None:
            audit = self.role.client.cluster.get("audit") or {}
            return list(audit.get("sinks") or [])
        return [] if self.shipping is None else self.shipping.status()

    def figures(self) -> dict[str, Any]:
        """This server's own figures, as a worker reports them to the sequencer."""
        return {
            "pid": os.getpid(),
            "generation": self.generation,
            "status": self.readiness()[0],
            "connections": len(self._connections),
            "in_flight": self._capacity.borrowed_tokens,
            "decisions": self.counters["decisions"],
            "refusals": self.counters["refusals"],
            "outcomes": {
                key: self.counters[f"outcome:{key}"] for key in ("PASS", "FAIL", "UNKNOWN")
            },
        }

    def limits(self) -> dict[str, Any]:
        return {
            "max_header_bytes": self.config.max_header_bytes,
            "max_frame_bytes": self.config.max_frame_bytes,
            "max_items": self.config.max_items,
            "idle_timeout_ms": int(self.config.idle_timeout * 1000),
            "request_deadline_ms": int(self.config.request_deadline * 1000),
        }

    def apply_security(self, checked: Checked) -> None:
        """Serve with ``checked``'s TLS contexts and tokens from now on (a reload,
        :mod:`daemon.server._reload`): a connection accepted after this call gets the new
        certificates, and every request from now on, on every connection, is authorised
        against the new tokens (a new generation of each connection core,
        :mod:`daemon.server._connection` rule 3)."""
        self._security, self._http_security = checked.binary, checked.http
        self.exposed = checked.exposed
        if self._front is not None:  # the front end and its connection core
            self._front.security = checked.binary
            self._front.core.apply(checked.binary)
        if self._http_front is not None:
            self._http_front.security = checked.http
            self._http_front.core.apply(checked.http)

    # -- lifecycle

    def shutdown(self) -> None:
        """Begin a graceful shutdown (idempotent; safe from any task in the server's run)."""
        self._shutdown.set()

    @property
    def stopping(self) -> bool:
        """Whether :meth:`shutdown` was called."""
        return self._shutdown.is_set()

    def cancel_in_flight(self) -> None:
        """Hurry a shutdown: cancel the requests in flight now (each is still audited)."""
        if self._handlers_scope is not None:
            self._handlers_scope.cancel()

    async def run(self, *, task_status: trio.TaskStatus[Server] = trio.TASK_STATUS_IGNORED) -> None:
        """Size resources, open the audit log, fork the workers, open the listeners, serve
        until :meth:`shutdown`, then drain (rules 1 and 4)."""
        config = self.config
        workers = config.worker_count()
        self.max_connections = connection_capacity(
            config.max_connections, raise_descriptor_limit(), workers
        )
        self._peers.connection_cap = config.peer_connection_cap(self.max_connections)
        self._connections.capacity = self.max_connections
        # The same checks as config check, serve --check and a reload (daemon.config._checks),
        # on the listeners that will serve (inherited ones included).
        checked = check_listeners(config, self.inherited)
        self._security, self._http_security = checked.binary, checked.http
        self.exposed = checked.exposed
        _remove_stale_snapshots()
        audit: AuditLog | AuditClient
        if self.role is not None:  # a worker: the parent's sequencer keeps the logs
            audit = self.role.client
            audit.on_gone = self.shutdown
            audit.stats = self.figures
        else:
            audit = AuditLog.open(
                config.audit_path,
                durability=config.audit_durability,
                overflow=config.audit_overflow,
                max_pending=config.audit_max_pending,
                rotate_bytes=config.audit_rotate_bytes,
            )
        self.audit = audit
        if config.transparency is not None and isinstance(audit, AuditLog):
            try:
                self.transparency = open_transparency(
                    config.transparency,
                    Path(config.audit_path),
                    audit.durable.seq,
                    sync=audit.durability is Durability.FSYNC,
                )
            except BaseException:
                audit.close_sync()
                raise
            attach(audit, self.transparency)
            self.publisher = start_publishing(config.transparency, self.transparency)
            if self.publisher is not None:
                self.metrics.publish_status = self.publisher.status
        pool = WorkerPool(
            workers,
            worker_job_handler(self.sessions),
            on_reaped=lambda pid: _remove_stale_snapshots(pid),
        )
        try:
            # Forked before the audit writer or any connection exists (docs/adr/0009).
            pool.start()
            self._evaluator = Evaluator(
                pool, inline_max_bytes=config.inline_max_bytes, deadline=config.request_deadline
            )
            self._pipeline = Pipeline(
                sessions=self.sessions,
                audit=audit,
                transparency=self.transparency,
                evaluator=self._evaluator,
                retention=self._retention,
                capacity=self._capacity,
                peers=self._peers,
                counters=self.counters,
                session_list=self._session_list,
                health=self.health,
                decision_ids=DecisionIds(self.origin),
            )
            self._pipeline.on_decision = self.metrics.on_decision
            if self.role is not None:
                self._pipeline.remote_transparency = self.role.client.transparency_answer
                if config.transparency is not None:
                    self._pipeline.line_lookup = self.role.client.find_line
            audit.on_batch = self.metrics.observe_audit_batch
            async with self._retention.running():  # opens the evidence stores
                await self._run_with_audit(audit, self._pipeline, task_status)
        finally:
            pool.close()
            audit.close_sync()

    async def _run_with_audit(
        self,
        audit: AuditLog | AuditClient,
        pipeline: Pipeline,
        task_status: trio.TaskStatus[Server],
    ) -> None:
        if isinstance(audit, AuditLog):  # the workers are forked by now (_shipping rule 1)
            self.shipping = start_shipping(self.config, audit)
        try:
            async with trio.open_nursery() as audit_nursery:
                await audit_nursery.start(audit.run)
                try:
                    await self._serve(audit, pipeline, task_status)
                finally:
                    with trio.CancelScope(shield=True):
                        if self._start_recorded:  # a failed start records neither
                            # Bounded: if the writer task was cancelled with the server,
                            # close() below writes the pending line itself.
                            with contextlib.suppress(AuditLogError), trio.move_on_after(2):
                                await audit.recover()  # one last try during an outage
                                await pipeline.noise.flush(audit.record)
                                if self.role is None:  # a worker's parent writes it
                                    await audit.record(
                                        "daemon_stop",
                                        decisions=self.counters["decisions"],
                                        refusals=self.counters["refusals"],
                                    )
                        await audit.close()
        finally:
            audit.close_sync()
            stop_publishing(self.publisher)  # the last checkpoint too (rule 3 of _publishing)
            await stop_shipping(self.shipping)  # what is left, once every line is durable

    async def _serve(
        self,
        audit: AuditLog | AuditClient,
        pipeline: Pipeline,
        task_status: trio.TaskStatus[Server],
    ) -> None:
        listening = await open_listeners(self.config, self.inherited)
        self.tcp_address, self.unix_path = listening.tcp_address, listening.unix_path
        if any(listener.socket.family == stdlib_socket.AF_UNIX for listener in listening.listeners):
            # The Unix socket's slots TCP cannot take (daemon.server._table rule 1).
            self._connections.unix_reserve = unix_reserve(
                self.config.unix_reserved_connections, self.max_connections
            )
        http_listeners: list[trio.SocketListener] = []
        try:
            http = self.config.http
            if self.inherited_http:
                http_listeners = [
                    trio.SocketListener(trio.socket.from_stdlib_socket(sock))
                    for sock in self.inherited_http
                ]
            elif http is not None:
                http_listeners = await trio.open_tcp_listeners(http.listen[1], host=http.listen[0])
            if http_listeners:
                bound = http_listeners[0].socket.getsockname()
                self.http_address = (str(bound[0]), int(bound[1]))
            if self.role is None:
                await self._record_start(audit, listening)
            self._start_recorded = True
            task_status.started(self)
            await self._serve_until_shutdown(listening, http_listeners, pipeline)
        finally:
            for listener in http_listeners:
                with contextlib.suppress(Exception):
                    await listener.aclose()
            await listening.aclose()

    async def _record_start(self, audit: AuditLog | AuditClient, listening: Listening) -> None:
        """Rule 1's ``daemon_start``."""
        await audit.record("daemon_start", **self.start_fields(self._listen_addresses(listening)))

    def start_fields(self, listen: Mapping[str, str | None]) -> dict[str, Any]:
        """``daemon_start``'s fields for a daemon listening at ``listen``."""
        return {
            "server": SERVER_NAME,
            "pid": os.getpid(),
            **replica_fields(self.origin),
            "listen": dict(listen),
            "security": self._describe_security(),
            # True exactly when a listener is served exposed (daemon.config._checks rule 2).
            "insecure_listen": bool(self.exposed),
            "sessions": self._session_list,
            "session_config": {
                name: dict(session.recipe)
                for name, session in sorted(self.sessions.items())
                if session.recipe is not None
            },
            "durability": Durability(self.config.audit_durability).value,
        }

    def _listen_addresses(self, listening: Listening) -> dict[str, str | None]:
        """``daemon_start``'s ``listen``: ``tcp`` and ``unix`` (null when off), and ``http``
        only when the HTTP listener is on."""
        addresses: dict[str, str | None] = dict(listening.addresses())
        if self.http_address is not None:
            addresses["http"] = f"{self.http_address[0]}:{self.http_address[1]}"
        return addresses

    def _describe_security(self) -> dict[str, Any]:
        """Each TCP listener's TLS and authentication, for ``daemon_start`` (rule 1)."""
        config = self.config
        described: dict[str, Any] = {}
        if config.tcp is not None:
            described["tcp"] = config.security.describe()
        if config.http is not None:
            described["http"] = config.http.security.describe()
        return described

    async def _serve_until_shutdown(
        self,
        listening: Listening,
        http_listeners: list[trio.SocketListener],
        pipeline: Pipeline,
    ) -> None:
        front = self._front = FrontEnd(
            config=self.config,
            pipeline=pipeline,
            peers=self._peers,
            connections=self._connections,
            server_name=SERVER_NAME,
            limits=self.limits(),
            security=self._security,
        )
        async with trio.open_nursery() as watchers:
            watchers.start_soon(self._summarise_noise, pipeline)
            async with trio.open_nursery() as handlers:
                self._handlers_scope = handlers.cancel_scope
                acceptor = Acceptor(
                    connections=self._connections,
                    peers=self._peers,
                    counters=self.counters,
                    handlers=handlers,
                    serve=front.handle,
                    refuse=front.refuse_connection,
                    refusal_bytes=self._binary_refusal,
                    probation=front.core.requires_token,
                )
                http_acceptor = self._http_acceptor(pipeline, handlers)
                async with trio.open_nursery() as acceptors:
                    for listener in listening.listeners:
                        acceptors.start_soon(acceptor.accept_loop, listener)
                    for listener in http_listeners:
                        acceptors.start_soon(http_acceptor.accept_loop, listener)
                    await self._shutdown.wait()
                    acceptors.cancel_scope.cancel()
                pipeline.draining = True
                await listening.close_listeners()
                for listener in http_listeners:
                    with contextlib.suppress(Exception):
                        await listener.aclose()
                for connection in list(self._connections):
                    if connection.idle() and connection.idle_scope is not None:
                        connection.idle_scope.cancel()
                handlers.cancel_scope.deadline = trio.current_time() + self.config.shutdown_grace
            watchers.cancel_scope.cancel()

    async def _summarise_noise(self, pipeline: Pipeline) -> None:
        """One ``noise`` line per interval in which noise arrived (:mod:`daemon.server._noise`)."""
        # An audit fault is the log's to report; noise is not worth more than that.
        with contextlib.suppress(AuditLogError):
            await pipeline.noise.run(pipeline.audit.record)

    def _binary_refusal(self, stream: trio.SocketStream, message: str) -> bytes | None:
        """A binary connection refused at accept: an ``error`` frame, none over TLS."""
        if self._security.ssl_context is not None and stream.socket.family != stdlib_socket.AF_UNIX:
            return None
        return ServerConnection.send(ErrorResponse(None, ErrorCode.BUSY.name, message, None))

    def _http_acceptor(self, pipeline: Pipeline, handlers: trio.Nursery) -> Acceptor:
        """The HTTP listener's acceptor: the same connection registry and caps as the
        binary protocol's."""
        http = self.config.http or HttpConfig()
        front = self._http_front = HttpFrontEnd(
            config=self.config,
            http=http,
            pipeline=pipeline,
            peers=self._peers,
            connections=self._connections,
            security=self._http_security,
            metrics=self.metrics,
            readiness=self.readiness,
        )
        tls = self._http_security.ssl_context is not None
        return Acceptor(
            connections=self._connections,
            peers=self._peers,
            counters=self.counters,
            handlers=handlers,
            serve=front.handle,
            refuse=front.refuse_connection,
            connection_factory=HttpConnection,
            refusal_bytes=lambda stream, message: None if tls else busy_answer(message),
            probation=front.core.requires_token,
        )


def _aggregate(report: dict[str, Any], role: WorkerRole, own: dict[str, Any]) -> dict[str, Any]:
    """A worker's ``health``: the sequencer's audit and transparency status, the counters
    and connection figures summed over every worker (this one's live, the others' as last
    pushed), and ``workers`` (daemon.server._supervisor rule 5)."""
    cluster = role.client.cluster
    workers: list[dict[str, Any]] = []
    for entry in cluster.get("workers", []):
        if entry.get("index") == role.index:
            entry = {**entry, **own, "alive": True}
        workers.append(entry)
    if not any(entry.get("index") == role.index for entry in workers):
        workers.append({"index": role.index, "alive": True, "restarts": 0, **own})
    live = [entry for entry in workers if entry.get("alive")]
    for key in ("connections", "in_flight", "decisions", "refusals"):
        report[key] = sum(int(entry.get(key, 0)) for entry in live)
    report["outcomes"] = {
        key: sum(int(entry.get("outcomes", {}).get(key, 0)) for entry in live)
        for key in ("PASS", "FAIL", "UNKNOWN")
    }
    report["max_connections"] *= len(workers)
    report["max_in_flight"] *= len(workers)
    if "audit" in cluster:
        report["audit"] = cluster["audit"]
        report["transparency"] = cluster.get("transparency")
    report["worker"] = role.index
    report["workers"] = sorted(workers, key=lambda entry: int(entry.get("index", 0)))
    return report


def _remove_stale_snapshots(pid: int | None = None) -> None:
    """Rule 1: snapshot folders left by dead processes of this user (at start), or by one
    killed worker (``pid``, once reaped)."""
    try:
        from mechanism.snapshots import remove_stale_snapshots
    except ImportError:
        return
    removed = remove_stale_snapshots(pid=pid)
    if removed:
        logs.info(
            "stale_snapshots_removed",
            f"removed {len(removed)} stale snapshot folder(s)",
            count=len(removed),
        )
