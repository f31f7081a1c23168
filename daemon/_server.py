"""The trio server: hosts named sessions over TCP (loopback by default) and Unix sockets.

Rules (the contract):

1. Each connection speaks the sans-IO protocol of :mod:`daemon._protocol`. The server reads
   at most :meth:`ServerConnection.bytes_wanted` bytes at a time, so it never holds more than
   the unit it accepted (bytes already on the socket are read without waiting; only a read
   that would block parks the task, under the idle or request deadline). A ``submit``
   header is checked, in this order, before any evidence byte is read: session exists
   (``UNKNOWN_SESSION``), declared item count and total bytes within the session's
   *effective* bounds — its declared bounds clamped to what its mechanisms accept
   (``EVIDENCE_ITEMS_EXCEEDED``/``EVIDENCE_BYTES_EXCEEDED``; :mod:`daemon._hosting`), binding
   well formed (``BINDING_INVALID``), not shutting down (``SHUTTING_DOWN``), a free capacity
   slot and the peer under its in-flight cap (``BUSY``: ``acquire_nowait``, never an
   unbounded queue).
2. Timeouts. ``pre_hello_timeout``: a new connection must complete its ``hello`` within this
   many seconds (much less than the idle timeout, so idle connections cost little).
   ``idle_timeout``: a connection must complete its next request frame (header and evidence)
   within this many seconds of its previous answer. Evidence must keep arriving at
   ``min_evidence_rate`` bytes/s after ``evidence_grace`` seconds (by time t after the header,
   at least ``rate * (t - grace)`` bytes), else the in-flight slot is released. Each is
   answered ``IDLE_TIMEOUT`` and closes the connection (a slow-drip client cannot hold a
   slot). ``request_deadline``: from the complete frame to the answer; an overrun is the
   ``UNKNOWN`` decision :data:`DEADLINE_DETAILS`, still audited.
3. Evaluation (:mod:`daemon._evaluation`, docs/adr/0009): pairs of at most
   ``inline_max_bytes`` on the event loop, every other pair in one of ``worker_processes``
   forked worker processes, killed at the deadline. Each request gets a fresh
   :class:`EvidenceStore` and :class:`VerificationSession`, so requests share no state.
4. Audit before answer: a decision or refusal is answered only after its audit line met the
   log's durability policy; if its line cannot be written, the answer is ``AUDIT_FAILED``
   (``decision_id`` null, no line) instead, and ``health`` says ``degraded`` until the log
   recovers. A decision answer carries its line's ``seq`` and ``line_digest``.
   A request frame cut by a connection reset is audited as ``TRUNCATED_FRAME``, exactly as
   one cut by a normal close.
5. Bounded echo (:mod:`daemon._echo`): every client-chosen value in a message, an audit field
   or a stderr line is echoed verbatim only when short and printable, else as an escaped
   prefix with its length and digest; every message is bounded as a whole. A refusal line is
   therefore small (under 2 KiB) whatever the request.
6. Every ``error`` frame is followed by a half-close and a short bounded drain (bytes are
   discarded, not buffered), then the connection closes, so the client reads the error
   rather than a reset.
7. One bad connection never kills the server: each handler has a catch-all that logs to
   stderr, audits ``INTERNAL`` when a request was in progress, and closes.
8. Shutdown (:meth:`Server.shutdown`, or SIGINT/SIGTERM when ``handle_signals``): stop
   accepting, close idle connections, let in-flight requests finish within
   ``shutdown_grace`` seconds (a second signal: at once), then cancel the rest; write
   ``daemon_stop``; flush and fsync the audit log; stop the workers; return normally.
9. Fair connections (:mod:`daemon._peers`, :mod:`daemon._resources`): at start the server
   raises its descriptor soft limit to the hard limit and serves at most ``max_connections``
   connections, lowered to fit that limit with headroom, so ``accept`` does not run out of
   descriptors first. One peer (a uid on a Unix socket, an address on TCP) holds at most
   ``max_connections_per_peer`` of them, and a peer whose connections keep being cut for
   idleness or slowness is refused for a while. A connection over a cap is answered ``BUSY``
   (not audited: it made no request) and closed — at once, without a task, when it has sent
   nothing yet.
10. Files: the Unix socket is created mode 0600 (0660 with ``socket_group``, owned by that
   group) whatever the umask; stale snapshot folders of dead processes of this user are
   removed at start (:mod:`mechanism.snapshots`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import signal
import socket as stdlib_socket
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import trio

from session import (
    BoundProposition,
    EvidenceStore,
    VerificationMechanism,
    VerificationSession,
    accepted_bounds,
)

from ._audit import AuditLog, AuditLogError, AuditRef, Durability
from ._binding import BindingWireError, binding_from_wire
from ._echo import bounded_message, echo
from ._evaluation import DEADLINE_DETAILS, WORKER_FAILED_DETAILS, Evaluator, worker_job_handler
from ._hosting import DEFAULT_PORT, HostedSession, ServerConfig
from ._peers import PeerLedger, peer_key, requester_of
from ._protocol import (
    CLOSED,
    NEED_DATA,
    PROTOCOL_VERSION,
    Decision,
    ErrorCode,
    ErrorResponse,
    Evidence,
    HealthReport,
    HealthRequest,
    Hello,
    HelloAccepted,
    ListSessions,
    ProtocolError,
    ServerConnection,
    SessionList,
    State,
    Submit,
    encode_header,
)
from ._resources import connection_capacity, raise_descriptor_limit, trim_heap
from ._transparency import RequestRefused, TransparencyRequest, open_transparency
from ._transparency import answer as transparency_answer
from ._transparency import status as transparency_status
from ._version import __version__
from ._workers import WorkerPool
from .retention._retainer import Retention, RetentionFailed
from .tlog import TransparencyLog

__all__ = [
    "DEADLINE_DETAILS",
    "DEFAULT_PORT",
    "WORKER_FAILED_DETAILS",
    "HostedSession",
    "Server",
    "ServerConfig",
    "open_server",
    "serve",
]

SERVER_NAME: Final = f"evidenced/{__version__}"
_RECEIVE_CHUNK: Final = 256 * 1024
_SEND_TIMEOUT: Final = 5.0
_LINGER_SECONDS: Final = 1.0
_LINGER_BYTES: Final = 8 * 1024 * 1024
#: Connections refused at accept that may linger (drain) at once; more are closed at once.
_MAX_LINGERING_REFUSALS: Final = 256
#: ``accept`` failures are reported on stderr at most once per this many seconds.
_ACCEPT_FAILURE_REPORT_SECONDS: Final = 10.0
#: Received evidence bytes after which an idle moment (nothing in flight) trims the heap.
_TRIM_AFTER_BYTES: Final = 16 * 1024 * 1024


def _catalog_entry(mechanism_id: str) -> dict[str, Any] | None:
    """The catalog's description of the mechanism, or None when no catalog is installed."""
    try:
        from catalog import entry_for_mechanism
    except ImportError:
        return None
    try:
        entry = entry_for_mechanism(mechanism_id)
        if entry is None:
            return None
        encode_header({"entry": entry})
        return dict(entry)
    except Exception:
        return None


class _Connection:
    """Per-connection bookkeeping the server needs for shutdown and fairness."""

    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.idle_scope: trio.CancelScope | None = None
        self.in_request = False
        self.codec: ServerConnection | None = None

    def idle(self) -> bool:
        """No request in progress and no byte of the next frame received."""
        codec = self.codec
        return not self.in_request and (
            codec is None or (codec.buffered == 0 and codec.state is State.PREFIX)
        )


class Server:
    """Serves ``sessions`` with ``config``. Use :meth:`run` in a nursery (``await
    nursery.start(server.run)``) or :func:`serve`; stop with :meth:`shutdown`."""

    def __init__(self, sessions: Sequence[HostedSession], config: ServerConfig) -> None:
        names = [session.name for session in sessions]
        if len(set(names)) != len(names):
            raise ValueError("session names must be unique")
        self.sessions: dict[str, HostedSession] = {s.name: s for s in sessions}
        self.config = config
        self.audit: AuditLog | None = None
        self.transparency: TransparencyLog | None = None
        self.tcp_address: tuple[str, int] | None = None
        self.unix_path: str | None = None
        self._capacity = trio.CapacityLimiter(config.max_in_flight)
        # Sized for real in run(), once the descriptor limit is known.
        self.max_connections = config.max_connections
        self._peers = PeerLedger(
            connection_cap=config.peer_connection_cap(config.max_connections),
            in_flight_cap=config.peer_in_flight_cap(),
        )
        self._evaluator: Evaluator | None = None
        self._lingering = 0
        self._accept_failures = 0
        self._accept_reported_at = -_ACCEPT_FAILURE_REPORT_SECONDS
        self._received_since_trim = 0
        self._shutdown = trio.Event()
        self._handlers_scope: trio.CancelScope | None = None
        self._draining = False
        self._connections: set[_Connection] = set()
        self._started_ns = time.monotonic_ns()
        self._start_recorded = False
        self.counters: Counter[str] = Counter()
        self._session_list = self._describe_sessions()
        self._retention = Retention(self.sessions, deadline=config.request_deadline)

    # -- introspection

    def _describe_sessions(self) -> list[dict[str, Any]]:
        described = []
        for name in sorted(self.sessions):
            session = self.sessions[name]
            probe = VerificationSession(EvidenceStore())
            for mechanism in session.mechanisms:
                probe.register(mechanism)
            mechanisms = []
            for mechanism in probe.registered_mechanisms():
                accepted = accepted_bounds(mechanism)
                mechanisms.append(
                    {
                        "mechanism_id": mechanism.mechanism_id,
                        "mechanism_digest": mechanism.mechanism_digest,
                        "accepted_bounds": None if accepted is None else accepted.to_dict(),
                        "catalog_entry": _catalog_entry(mechanism.mechanism_id),
                    }
                )
            described.append(
                {
                    "name": name,
                    "bounds": session.bounds(),
                    "declared_bounds": session.declared_bounds(),
                    "mechanisms": mechanisms,
                }
            )
        return described

    def health(self) -> dict[str, Any]:
        reason = self.audit.failure_reason if self.audit is not None else None
        reason = reason or self._retention.failure_reason()
        return {
            "status": "draining" if self._draining else "degraded" if reason else "serving",
            "reason": reason,
            "server": SERVER_NAME,
            "protocol_version": PROTOCOL_VERSION,
            "uptime_ns": time.monotonic_ns() - self._started_ns,
            "connections": len(self._connections),
            "max_connections": self.max_connections,
            "in_flight": self._capacity.borrowed_tokens,
            "max_in_flight": self.config.max_in_flight,
            "peers": self._peers.status(),
            "evaluation": self._evaluator.status() if self._evaluator is not None else None,
            "decisions": self.counters["decisions"],
            "refusals": self.counters["refusals"],
            "outcomes": {
                key: self.counters[f"outcome:{key}"] for key in ("PASS", "FAIL", "UNKNOWN")
            },
            "audit": self.audit.status() if self.audit is not None else None,
            "transparency": transparency_status(self.transparency),
            "retention": self._retention.status(),
        }

    def limits(self) -> dict[str, Any]:
        return {
            "max_header_bytes": self.config.max_header_bytes,
            "max_frame_bytes": self.config.max_frame_bytes,
            "max_items": self.config.max_items,
            "idle_timeout_ms": int(self.config.idle_timeout * 1000),
            "request_deadline_ms": int(self.config.request_deadline * 1000),
        }

    # -- lifecycle

    def shutdown(self) -> None:
        """Begin a graceful shutdown (idempotent; safe from any task in the server's run)."""
        self._shutdown.set()

    async def run(self, *, task_status: trio.TaskStatus[Server] = trio.TASK_STATUS_IGNORED) -> None:
        """Size resources, open the audit log, fork the workers, open the listeners, serve
        until :meth:`shutdown`, then drain."""
        config = self.config
        workers = config.worker_count()
        self.max_connections = connection_capacity(
            config.max_connections, raise_descriptor_limit(), workers
        )
        self._peers.connection_cap = config.peer_connection_cap(self.max_connections)
        _remove_stale_snapshots()
        audit = AuditLog.open(
            config.audit_path,
            durability=config.audit_durability,
            overflow=config.audit_overflow,
            max_pending=max(1, config.audit_max_pending),
            rotate_bytes=config.audit_rotate_bytes,
        )
        self.audit = audit
        if config.transparency is not None:
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
            audit.transparency = self.transparency
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
            async with self._retention.running():  # opens the evidence stores
                await self._run_with_audit(audit, task_status)
        finally:
            pool.close()
            audit.close_sync()

    async def _run_with_audit(self, audit: AuditLog, task_status: trio.TaskStatus[Server]) -> None:
        try:
            async with trio.open_nursery() as audit_nursery:
                await audit_nursery.start(audit.run)
                try:
                    await self._serve(audit, task_status)
                finally:
                    with trio.CancelScope(shield=True):
                        if self._start_recorded:  # a failed start records neither
                            # Bounded: if the writer task was cancelled with the server,
                            # close() below writes the pending line itself.
                            with contextlib.suppress(AuditLogError), trio.move_on_after(2):
                                await audit.recover()  # one last try during an outage
                                await audit.record(
                                    "daemon_stop",
                                    decisions=self.counters["decisions"],
                                    refusals=self.counters["refusals"],
                                )
                        await audit.close()
        finally:
            audit.close_sync()

    async def _serve(self, audit: AuditLog, task_status: trio.TaskStatus[Server]) -> None:
        listeners = await self._open_listeners()
        try:
            await audit.record(
                "daemon_start",
                server=SERVER_NAME,
                pid=os.getpid(),
                listen=self._addresses(),
                sessions=self._session_list,
                session_config={
                    name: dict(session.recipe)
                    for name, session in sorted(self.sessions.items())
                    if session.recipe is not None
                },
                durability=audit.durability.value,
            )
            self._start_recorded = True
            with contextlib.ExitStack() as stack:
                # Installed before ``started`` so a signal sent right after readiness is ours.
                signals = (
                    stack.enter_context(trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM))
                    if self.config.handle_signals
                    else None
                )
                task_status.started(self)
                await self._serve_until_shutdown(listeners, signals)
        finally:
            for listener in listeners:
                with contextlib.suppress(Exception):
                    await listener.aclose()
            if self.unix_path is not None:
                with contextlib.suppress(OSError):
                    os.unlink(self.unix_path)

    async def _serve_until_shutdown(
        self, listeners: list[trio.SocketListener], signals: AsyncIterator[int] | None
    ) -> None:
        async with trio.open_nursery() as watchers:
            if signals is not None:
                watchers.start_soon(self._watch_signals, signals)
            async with trio.open_nursery() as handlers:
                self._handlers_scope = handlers.cancel_scope
                async with trio.open_nursery() as acceptors:
                    for listener in listeners:
                        acceptors.start_soon(self._accept_loop, listener, handlers)
                    await self._shutdown.wait()
                    acceptors.cancel_scope.cancel()
                self._draining = True
                for listener in listeners:
                    with contextlib.suppress(Exception):
                        await listener.aclose()
                for connection in list(self._connections):
                    if connection.idle() and connection.idle_scope is not None:
                        connection.idle_scope.cancel()
                handlers.cancel_scope.deadline = trio.current_time() + self.config.shutdown_grace
            watchers.cancel_scope.cancel()

    def _addresses(self) -> dict[str, Any]:
        return {
            "tcp": None
            if self.tcp_address is None
            else f"{self.tcp_address[0]}:{self.tcp_address[1]}",
            "unix": self.unix_path,
        }

    async def _open_listeners(self) -> list[trio.SocketListener]:
        listeners: list[trio.SocketListener] = []
        try:
            if self.config.tcp is not None:
                host, port = self.config.tcp
                opened = await trio.open_tcp_listeners(port, host=host)
                listeners.extend(opened)
                bound = opened[0].socket.getsockname()
                self.tcp_address = (str(bound[0]), int(bound[1]))
            if self.config.unix is not None:
                listeners.append(
                    await _open_unix_listener(self.config.unix, self.config.socket_group)
                )
                self.unix_path = self.config.unix
        except BaseException:
            for listener in listeners:
                with contextlib.suppress(Exception):
                    await listener.aclose()
            raise
        return listeners

    async def _watch_signals(self, signals: AsyncIterator[int]) -> None:
        """First SIGINT/SIGTERM: graceful shutdown. A second one: cancel in-flight requests
        now (their audit lines, if being written, still complete)."""
        async for signum in signals:
            name = signal.Signals(signum).name
            if not self._shutdown.is_set():
                sys.stderr.write(f"evidenced: {name} received, shutting down\n")
                self.shutdown()
            else:
                sys.stderr.write(f"evidenced: second {name}: cancelling in-flight requests\n")
                if self._handlers_scope is not None:
                    self._handlers_scope.cancel()

    async def _accept_loop(self, listener: trio.SocketListener, handlers: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as error:
                if error.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    self._report_accept_failure(error)
                    await trio.sleep(0.1)
                    continue
                raise
            self._admit(stream, handlers)

    def _admit(self, stream: trio.SocketStream, handlers: trio.Nursery) -> None:
        """Count a new connection against the caps (module rule 9) and start its handler, or
        refuse it ``BUSY``: at once and synchronously when it has sent nothing yet (an idle
        flood costs an accept, a write and a close), else through a draining refusal."""
        requester = requester_of(stream)
        peer = peer_key(requester)
        if len(self._connections) >= self.max_connections:
            refusal = f"{self.max_connections} connections open; retry later"
        elif self._peers.penalized(peer):
            refusal = "too many idle or slow connections from this peer; retry later"
        elif not self._peers.connect(peer):
            refusal = f"{self._peers.connection_cap} connections open from this peer; retry later"
        else:
            connection = _Connection(peer)
            self._connections.add(connection)
            handlers.start_soon(self._handle, stream, connection, requester)
            return
        if _has_unread(stream):
            handlers.start_soon(self._refuse_connection, stream, requester, refusal)
            return
        self.counters["refusals"] += 1
        self.counters["refusal:BUSY"] += 1
        frame = ServerConnection.send(ErrorResponse(None, ErrorCode.BUSY.name, refusal, None))
        fd = _stream_fd(stream)
        with contextlib.suppress(OSError):
            if fd >= 0:
                os.write(fd, frame)
        stream.socket.close()

    def _report_accept_failure(self, error: OSError) -> None:
        """One stderr line per :data:`_ACCEPT_FAILURE_REPORT_SECONDS`, with the count."""
        self._accept_failures += 1
        self.counters["accept_failures"] += 1
        now = time.monotonic()
        if now - self._accept_reported_at >= _ACCEPT_FAILURE_REPORT_SECONDS:
            sys.stderr.write(
                f"evidenced: accept failed {self._accept_failures} time(s) "
                f"({error.strerror or error}); backing off\n"
            )
            self._accept_reported_at = now
            self._accept_failures = 0

    # -- one connection

    async def _handle(
        self, stream: trio.SocketStream, connection: _Connection, requester: dict[str, Any]
    ) -> None:
        """Serve one admitted connection (counted by :meth:`_admit`) until it closes."""
        peer = connection.peer
        try:
            await self._converse(stream, connection, requester)
        except Exception as error:  # the catch-all: one bad connection never kills the server
            sys.stderr.write(
                f"evidenced: connection {echo(requester)} failed: {type(error).__name__}: "
                f"{echo(str(error), 256)}\n"
            )
            with contextlib.suppress(Exception):
                await self._refuse(
                    stream,
                    ServerConnection(),
                    requester,
                    ErrorCode.INTERNAL,
                    f"internal error: {type(error).__name__}",
                    audit=connection.in_request,
                )
        finally:
            self._connections.discard(connection)
            self._peers.disconnect(peer)
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await stream.aclose()

    async def _refuse_connection(
        self, stream: trio.SocketStream, requester: dict[str, Any], message: str
    ) -> None:
        """Over a connection cap, with bytes already sent: answered ``BUSY`` (not audited)
        and drained briefly so the peer reads the answer. At most
        :data:`_MAX_LINGERING_REFUSALS` such connections drain at a time; beyond that the
        answer is sent and the connection closed without draining."""
        linger = self._lingering < _MAX_LINGERING_REFUSALS
        self._lingering += linger
        try:
            await self._refuse(
                stream,
                ServerConnection(),
                requester,
                ErrorCode.BUSY,
                message,
                audit=False,
                linger=linger,
            )
        except Exception as error:
            sys.stderr.write(f"evidenced: refusing a connection failed: {echo(str(error))}\n")
        finally:
            self._lingering -= linger
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await stream.aclose()

    async def _next_request(
        self, stream: trio.SocketStream, conn: ServerConnection, fd: int
    ) -> Any:
        """The next event, receiving at most what the codec wants (never more). Called when
        the codec needs bytes the socket does not have yet: waits first."""
        while True:
            if fd >= 0:
                await trio.lowlevel.wait_readable(fd)
            else:
                data = await stream.receive_some(max(1, min(conn.bytes_wanted(), _RECEIVE_CHUNK)))
                conn.receive_data(data)
            event = _receive_ready(conn, fd)
            if event is not NEED_DATA:
                return event

    async def _converse(
        self, stream: trio.SocketStream, connection: _Connection, requester: dict[str, Any]
    ) -> None:
        config = self.config
        conn = ServerConnection(
            max_header_bytes=config.max_header_bytes,
            max_frame_bytes=config.max_frame_bytes,
            max_items=config.max_items,
        )
        connection.codec = conn
        fd = _stream_fd(stream)
        # Until its hello, a connection has the (much shorter) pre-hello timeout.
        deadline = trio.current_time() + min(config.idle_timeout, config.pre_hello_timeout)
        while True:
            if self._draining and connection.idle():
                return
            # A frame already received whole is taken without a scope; a client that sent
            # its next request before reading an answer still gets one checkpoint per request.
            try:
                event = _receive_ready(conn, fd)
            except ProtocolError as error:
                event = error
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                await self._broken_mid_frame(stream, connection, requester)
                return
            if event is not NEED_DATA:
                await trio.lowlevel.checkpoint()
                scope = None
            else:
                # One scope per request frame that must wait: the idle deadline, and (while
                # no byte of a frame is buffered) the handle shutdown uses to close idle
                # connections.
                with trio.CancelScope(deadline=deadline) as scope:
                    connection.idle_scope = scope
                    try:
                        event = await self._next_request(stream, conn, fd)
                    except ProtocolError as error:
                        event = error
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        await self._broken_mid_frame(stream, connection, requester)
                        return
                    finally:
                        connection.idle_scope = None
            if scope is not None and scope.cancelled_caught:
                if self._draining and connection.idle():
                    return
                self._peers.strike(connection.peer)
                await self._refuse(
                    stream,
                    conn,
                    requester,
                    ErrorCode.IDLE_TIMEOUT,
                    f"no complete request within {config.idle_timeout} s"
                    if conn.handshake_done
                    else f"no hello within {min(config.idle_timeout, config.pre_hello_timeout)} s",
                    audit=not connection.idle(),
                )
                return
            if isinstance(event, ProtocolError):
                await self._refuse(stream, conn, requester, event.code, event.message)
                return
            if event is CLOSED:
                return
            if isinstance(event, Hello):
                version = ServerConnection.choose_version(event)
                if version is None:
                    await self._refuse(
                        stream,
                        conn,
                        requester,
                        ErrorCode.VERSION_UNSUPPORTED,
                        f"server speaks protocol versions {[PROTOCOL_VERSION]}",
                    )
                    return
                answer: Any = HelloAccepted(version, SERVER_NAME, self.limits())
            elif isinstance(event, ListSessions):
                answer = SessionList(event.request_id, self._session_list)
            elif isinstance(event, HealthRequest):
                answer = HealthReport(event.request_id, self.health())
            elif isinstance(event, TransparencyRequest):
                try:
                    answer = transparency_answer(self.transparency, event)
                except RequestRefused as refused:
                    code = ErrorCode[refused.code]
                    await self._refuse(stream, conn, requester, code, str(refused))
                    return
            elif isinstance(event, Submit):
                connection.in_request = True  # stays set if _submit raises: the catch-all audits
                keep_open = await self._submit(
                    stream, conn, event, requester, deadline, fd, connection.peer
                )
                connection.in_request = False
                if not keep_open or self._draining:
                    return
                deadline = trio.current_time() + config.idle_timeout
                continue
            else:  # Evidence outside a submit cannot happen; the codec guarantees order
                raise AssertionError(f"unexpected event {event!r}")
            if not await self._send(stream, ServerConnection.send(answer), fd):
                return
            if self._draining:
                return
            deadline = trio.current_time() + config.idle_timeout

    async def _broken_mid_frame(
        self, stream: trio.SocketStream, connection: _Connection, requester: dict[str, Any]
    ) -> None:
        """The connection broke (a reset, not an end of stream): a frame it cut is audited
        ``TRUNCATED_FRAME`` as a normal close inside a frame is (nothing can be sent)."""
        if connection.idle() or connection.codec is None:
            return
        await self._refuse(
            stream,
            connection.codec,
            requester,
            ErrorCode.TRUNCATED_FRAME,
            "the connection was reset inside a frame",
            linger=False,
        )

    async def _send(self, stream: trio.SocketStream, data: bytes, fd: int = -1) -> bool:
        if fd >= 0:  # what the socket takes at once needs no scope and no wait
            try:
                sent = os.write(fd, data)
            except BlockingIOError:
                sent = 0
            except OSError:
                return False
            if sent == len(data):
                return True
            data = data[sent:]
        with trio.move_on_after(_SEND_TIMEOUT):
            try:
                await stream.send_all(data)
                return True
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return False
        return False

    async def _refuse(
        self,
        stream: trio.SocketStream,
        conn: ServerConnection,
        requester: dict[str, Any],
        code: ErrorCode,
        message: str,
        *,
        request_id: int | None = None,
        audit: bool = True,
        linger: bool = True,
        **fields: Any,
    ) -> None:
        """Answer an error (audited first), half-close, drain briefly (``linger``), and let the
        caller close. ``message`` is bounded here (module rule 5); ``fields`` must already be
        bounded by the caller."""
        message = bounded_message(message)
        conn.refuse()
        self.counters["refusals"] += 1
        decision_id: str | None = None
        # AUDIT_FAILED answers a request whose line could not be written: no line for it.
        if audit and self.audit is not None and code is not ErrorCode.AUDIT_FAILED:
            decision_id = _decision_id()
            try:
                with trio.CancelScope(shield=True):
                    await self.audit.record(
                        "refusal",
                        decision_id=decision_id,
                        code=code.name,
                        fault=code.fault.value,
                        message=message,
                        request_id=request_id,
                        requester=requester,
                        **fields,
                    )
            except AuditLogError as error:
                # Never an unrecorded refusal that looks recorded: the answer says why.
                message = f"the {code.name} refusal could not be recorded: {error}"
                code, decision_id = ErrorCode.AUDIT_FAILED, None
        self.counters[f"refusal:{code.name}"] += 1
        frame = ServerConnection.send(ErrorResponse(request_id, code.name, message, decision_id))
        if not await self._send(stream, frame) or not linger:
            return
        with trio.move_on_after(_LINGER_SECONDS):
            try:
                await stream.send_eof()
                drained = 0
                while drained < _LINGER_BYTES:
                    data = await stream.receive_some(_RECEIVE_CHUNK)
                    if not data:
                        break
                    drained += len(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError):
                pass

    async def _submit(
        self,
        stream: trio.SocketStream,
        conn: ServerConnection,
        submit: Submit,
        requester: dict[str, Any],
        deadline: float,
        fd: int = -1,
        peer: str = "unknown",
    ) -> bool:
        """Handle one submit; True when the connection may carry another request."""
        started = time.perf_counter_ns()
        declared = list(submit.item_sizes)
        context: dict[str, Any] = {"session": echo(submit.session), "declared_items": declared}
        parsed: list[BoundProposition] = []

        async def refuse(code: ErrorCode, message: str, **extra: Any) -> bool:
            if parsed:  # digested only when a refusal needs it (a decision carries its own)
                context["binding_digest"] = parsed[0].digest()
                context["mechanism_id"] = echo(parsed[0].mechanism_id)
            await self._refuse(
                stream,
                conn,
                requester,
                code,
                message,
                request_id=submit.request_id,
                **context,
                **extra,
            )
            return False

        session = self.sessions.get(submit.session)
        if session is None:
            return await refuse(
                ErrorCode.UNKNOWN_SESSION, f"no session named '{echo(submit.session, 64)}'"
            )
        if len(declared) > session.effective_items:
            return await refuse(
                ErrorCode.EVIDENCE_ITEMS_EXCEEDED,
                f"{len(declared)} evidence items declared; session '{echo(session.name, 64)}' "
                f"admits {session.effective_items}{_clamp_note(session)}",
            )
        if sum(declared) > session.effective_bytes:
            return await refuse(
                ErrorCode.EVIDENCE_BYTES_EXCEEDED,
                f"{sum(declared)} evidence bytes declared; session '{echo(session.name, 64)}' "
                f"admits {session.effective_bytes}{_clamp_note(session)}",
            )
        try:
            binding = binding_from_wire(submit.binding)
        except BindingWireError as error:
            return await refuse(ErrorCode.BINDING_INVALID, str(error))
        parsed.append(binding)
        if self._draining:
            return await refuse(ErrorCode.SHUTTING_DOWN, "the server is shutting down")
        token = object()
        try:
            self._capacity.acquire_on_behalf_of_nowait(token)
        except trio.WouldBlock:
            return await refuse(
                ErrorCode.BUSY, f"{self.config.max_in_flight} requests in flight; retry later"
            )
        if not self._peers.start_request(peer):
            self._capacity.release_on_behalf_of(token)
            return await refuse(
                ErrorCode.BUSY,
                f"{self._peers.in_flight_cap} requests in flight from this peer; retry later",
            )
        try:
            conn.accept_evidence()
            try:
                items = await self._read_evidence(stream, conn, deadline, fd)
            except ProtocolError as error:
                return await refuse(error.code, error.message)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return await refuse(ErrorCode.TRUNCATED_FRAME, "the connection broke mid-frame")
            if isinstance(items, str):
                self._peers.strike(peer)
                return await refuse(ErrorCode.IDLE_TIMEOUT, items)
            received = time.perf_counter_ns()
            self._received_since_trim += sum(declared)
            assert self._evaluator is not None
            retaining = self._retention.start(session.name, items)  # stores while evaluating
            result, evaluate_ns, refs = await self._evaluator.evaluate(session, binding, items)
            wire_result = result.to_dict()
            try:  # evidence stored before the answer, or no answer but AUDIT_FAILED
                retained = await retaining.settle(wire_result["outcome"], binding, wire_result)
            except RetentionFailed as error:
                return await refuse(ErrorCode.AUDIT_FAILED, str(error))
            metrics = {
                "receive_ns": received - started,
                "evaluate_ns": evaluate_ns,
                "total_ns": time.perf_counter_ns() - started,
            }
            decision_id = _decision_id()
            observations = wire_result["observations"]
            codes = observations.get("reason_codes") if isinstance(observations, dict) else None
            if not isinstance(codes, list) or any(type(c) is not str for c in codes):
                codes = []

            audit = self.audit
            assert audit is not None
            writer = audit
            in_tree = self.transparency is not None

            def answer(line: AuditRef | None) -> bytes:
                # Encoded once, right after the line is rendered and before it is written:
                # an unencodable decision is withdrawn from the log (ValueError below).
                return ServerConnection.send(
                    Decision(
                        submit.request_id,
                        decision_id,
                        session.name,
                        wire_result,
                        None if line is None else line.seq,
                        None if line is None else line.line_digest,
                        # the transparency log's leaf (docs/spec/transparency.md §10.1)
                        None if line is None or not in_tree else line.seq - 1,
                        None if line is None or not in_tree else writer.last_rendered,
                    )
                )

            try:
                _, frame = await audit.record_answer(
                    "decision",
                    answer,
                    decision_id=decision_id,
                    request_id=submit.request_id,
                    session=session.name,
                    mechanism_id=echo(result.mechanism_id),
                    mechanism_digest=echo(wire_result["mechanism_digest"]),
                    binding_digest=result.binding_digest,
                    evidence=[
                        {"digest": ref, "size": len(item)}
                        for ref, item in zip(refs, items, strict=True)
                    ],
                    outcome=wire_result["outcome"],
                    details=bounded_message(result.details),
                    reason_codes=codes,
                    observed_evidence_bytes=result.observed_evidence_bytes,
                    metrics=metrics,
                    requester=requester,
                    **retained,
                )
            except ValueError as error:
                return await refuse(
                    ErrorCode.INTERNAL, f"the mechanism's decision cannot be encoded: {error}"
                )
            except AuditLogError as error:
                return await refuse(ErrorCode.AUDIT_FAILED, str(error))
            self.counters["decisions"] += 1
            self.counters[f"outcome:{wire_result['outcome']}"] += 1
            return await self._send(stream, frame, fd)
        except trio.Cancelled:
            # Forced shutdown (grace expired or a second signal) before an answer: the
            # request is still recorded, as a refusal, before the cancellation proceeds.
            if self.audit is not None:
                with (
                    trio.CancelScope(shield=True),
                    trio.move_on_after(2),
                    contextlib.suppress(AuditLogError),
                ):
                    await self.audit.record(
                        "refusal",
                        decision_id=_decision_id(),
                        code=ErrorCode.SHUTTING_DOWN.name,
                        fault=ErrorCode.SHUTTING_DOWN.fault.value,
                        message="cancelled by shutdown before a decision was answered",
                        request_id=submit.request_id,
                        requester=requester,
                        **context,
                    )
            raise
        finally:
            self._capacity.release_on_behalf_of(token)
            self._peers.end_request(peer)
            if self._capacity.borrowed_tokens == 0 and self._received_since_trim:
                self._trim_after_burst()

    def _trim_after_burst(self) -> None:
        """Nothing in flight after many evidence bytes: return free heap pages to the OS."""
        if self._received_since_trim >= _TRIM_AFTER_BYTES:
            self._received_since_trim = 0
            trim_heap()

    async def _read_evidence(
        self, stream: trio.SocketStream, conn: ServerConnection, deadline: float, fd: int = -1
    ) -> tuple[bytes, ...] | str:
        """The evidence items, or why they did not arrive in time (module rule 2): the idle
        deadline, or the minimum rate (``rate * (t - grace)`` bytes by time t)."""
        event = _receive_ready(conn, fd)
        if isinstance(event, Evidence):  # already here: no scope, no wait
            return event.items
        assert event is NEED_DATA
        config = self.config
        begin = trio.current_time()
        while True:
            rate_deadline = begin + config.evidence_grace + conn.buffered / config.min_evidence_rate
            with trio.move_on_at(min(deadline, rate_deadline)):
                if fd >= 0:
                    await trio.lowlevel.wait_readable(fd)
                else:
                    data = await stream.receive_some(
                        max(1, min(conn.bytes_wanted(), _RECEIVE_CHUNK))
                    )
                    conn.receive_data(data)
                event = _receive_ready(conn, fd)
                if isinstance(event, Evidence):
                    return event.items
                assert event is NEED_DATA
                continue
            if rate_deadline < deadline:
                return (
                    f"evidence arrived slower than {config.min_evidence_rate} bytes/s "
                    f"({conn.buffered} bytes in {trio.current_time() - begin:.1f} s)"
                )
            return f"evidence not received within {config.idle_timeout} s"


def _has_unread(stream: trio.SocketStream) -> bool:
    """Whether the peer sent bytes not read yet (a refusal then drains them before closing,
    so the peer reads the answer rather than a reset)."""
    fd = _stream_fd(stream)
    if fd < 0:
        return True
    probe = stdlib_socket.socket(fileno=fd)
    try:
        return bool(probe.recv(1, stdlib_socket.MSG_PEEK | stdlib_socket.MSG_DONTWAIT))
    except BlockingIOError:
        return False
    except OSError:
        return False
    finally:
        probe.detach()


def _stream_fd(stream: trio.SocketStream) -> int:
    """The stream's socket descriptor for the synchronous fast paths (-1: none)."""
    try:
        return int(stream.socket.fileno())
    except (AttributeError, OSError, ValueError):
        return -1


def _receive_ready(conn: ServerConnection, fd: int) -> Any:
    """The codec's next event, reading (never more than it wants) only bytes that are already
    on the socket: :data:`NEED_DATA` when it would have to wait. Errors as trio's stream
    reports them (``BrokenResourceError`` / ``ClosedResourceError``)."""
    while True:
        event = conn.next_event()
        if event is not NEED_DATA or fd < 0:
            return event
        try:
            data = os.read(fd, max(1, min(conn.bytes_wanted(), _RECEIVE_CHUNK)))
        except BlockingIOError:
            return NEED_DATA
        except OSError as error:
            if error.errno in (errno.EBADF, errno.ENOTSOCK):
                raise trio.ClosedResourceError("this socket was already closed") from None
            raise trio.BrokenResourceError(f"socket connection broken: {error}") from error
        conn.receive_data(data)


_ID_RANDOM = random.Random()  # seeded once from os.urandom; ids need uniqueness, not secrecy


_UUID4_CLEAR: Final = ~((0xC000 << 48) | (0xF000 << 64))
_UUID4_SET: Final = (0x8000 << 48) | (4 << 76)


def _decision_id() -> str:
    """A random (version 4) UUID without a getrandom(2) call per decision: on some hosts
    ``uuid.uuid4()`` costs ~200 us, more than a minimal formation check. Formatted as
    ``str(uuid.UUID(int=bits, version=4))`` would, without building the object."""
    value = "%032x" % (_ID_RANDOM.getrandbits(128) & _UUID4_CLEAR | _UUID4_SET)
    return f"{value[:8]}-{value[8:12]}-{value[12:16]}-{value[16:20]}-{value[20:]}"


def _clamp_note(session: HostedSession) -> str:
    if not session.clamped:
        return ""
    return " (its declared bounds, clamped to what its mechanisms accept)"


def _remove_stale_snapshots(pid: int | None = None) -> None:
    """Module rule 10: snapshot folders left by dead processes of this user (at start), or by
    one killed worker (``pid``, once reaped)."""
    try:
        from mechanism.snapshots import remove_stale_snapshots
    except ImportError:
        return
    removed = remove_stale_snapshots(pid=pid)
    if removed:
        sys.stderr.write(f"evidenced: removed {len(removed)} stale snapshot folder(s)\n")


def _socket_gid(group: str) -> int | None:
    """The gid of ``socket_group`` (a name or a number), None when unset."""
    if not group:
        return None
    if group.isdigit():
        return int(group)
    import grp

    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        raise OSError(errno.EINVAL, f"socket_group {group!r} is not a known group") from None


async def _open_unix_listener(path: str, group: str = "") -> trio.SocketListener:
    """Bind a Unix socket at ``path``; a stale socket file (nobody listening) is replaced,
    a live one or any non-socket file is refused. The socket is created mode 0600 whatever
    the umask (bound under umask 0177, so it is never more open, not even for an instant),
    then given to ``group`` with mode 0660 when one is configured."""
    import stat

    with contextlib.suppress(FileNotFoundError):
        mode = os.stat(path).st_mode
        if not stat.S_ISSOCK(mode):
            raise OSError(errno.EEXIST, f"{path} exists and is not a socket", path)
        probe = trio.socket.socket(stdlib_socket.AF_UNIX, stdlib_socket.SOCK_STREAM)
        try:
            await probe.connect(path)
        except OSError:
            os.unlink(path)
        else:
            raise OSError(errno.EADDRINUSE, f"a server is already listening on {path}", path)
        finally:
            probe.close()
    gid = _socket_gid(group)
    sock = trio.socket.socket(stdlib_socket.AF_UNIX, stdlib_socket.SOCK_STREAM)
    try:
        previous = os.umask(0o177)
        try:
            await sock.bind(path)
        finally:
            os.umask(previous)
        os.chmod(path, 0o600)
        if gid is not None:
            os.chown(path, -1, gid)
            os.chmod(path, 0o660)
        sock.listen(512)
    except BaseException:
        sock.close()
        raise
    return trio.SocketListener(sock)


async def serve(
    sessions: Sequence[HostedSession] | Mapping[str, Sequence[VerificationMechanism]],
    config: ServerConfig | None = None,
    *,
    task_status: trio.TaskStatus[Server] = trio.TASK_STATUS_IGNORED,
    **options: Any,
) -> None:
    """The host API: serve ``sessions`` until shutdown.

    ``sessions`` is a list of :class:`HostedSession` or a mapping ``name -> mechanisms``
    (then each session admits 2 items / 524,288 bytes). ``config`` or keyword ``options``
    (fields of :class:`ServerConfig`) say where and how. ``task_status.started`` receives the
    :class:`Server` (its ``tcp_address``/``unix_path`` and ``shutdown()``).
    """
    hosted = _hosted(sessions)
    if config is None:
        config = ServerConfig(**options)
    elif options:
        config = attrs.evolve(config, **options)
    server = Server(hosted, config)
    await server.run(task_status=task_status)


def _hosted(
    sessions: Sequence[HostedSession] | Mapping[str, Sequence[VerificationMechanism]],
) -> list[HostedSession]:
    if isinstance(sessions, Mapping):
        return [HostedSession(name, tuple(mechs)) for name, mechs in sessions.items()]
    return list(sessions)


@contextlib.asynccontextmanager
async def open_server(
    sessions: Sequence[HostedSession] | Mapping[str, Sequence[VerificationMechanism]],
    config: ServerConfig | None = None,
    **options: Any,
) -> AsyncIterator[Server]:
    """Run a server for the duration of the block (tests, embedding); shuts down on exit,
    gracefully also when the block raises (the error is re-raised once the server stopped)."""
    failure: Exception | None = None
    async with trio.open_nursery() as nursery:
        server: Server = await nursery.start(_run_server, _hosted(sessions), config, options)
        try:
            yield server
        except Exception as error:  # let the server drain instead of cancelling it
            failure = error
        finally:
            server.shutdown()
    if failure is not None:
        raise failure


async def _run_server(
    sessions: list[HostedSession],
    config: ServerConfig | None,
    options: dict[str, Any],
    *,
    task_status: trio.TaskStatus[Server] = trio.TASK_STATUS_IGNORED,
) -> None:
    await serve(sessions, config, task_status=task_status, **options)


Runner = Callable[..., Any]
