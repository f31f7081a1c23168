"""The EVD1 socket front end: one admitted connection's conversation, from hello to close.

It moves bytes between a trio socket stream and a :class:`~daemon.wire._protocol.ServerConnection`
(through the fast paths of :mod:`daemon.server._fastpath`) and hands the events to the
transport-neutral core (:class:`~daemon.server._pipeline.Pipeline`).

Rules (the contract):

1. The codec reads at most what it wants (``bytes_wanted``): the server never holds more
   than the unit it accepted. A frame already received whole is taken without a wait or a
   cancel scope; a client that sent its next request before reading an answer still gets one
   checkpoint per request.
2. Timeouts. Until its ``hello`` a connection has ``pre_hello_timeout`` (or the idle timeout
   if shorter); afterwards it must complete its next request frame within ``idle_timeout`` of
   its previous answer. Evidence must keep arriving at ``min_evidence_rate`` bytes/s after
   ``evidence_grace`` seconds (by time t after the header, at least ``rate * (t - grace)``
   bytes). Each is answered ``IDLE_TIMEOUT`` (a strike against the peer) and closes the
   connection; a connection that is idle between frames when the server drains is closed
   without an answer.
3. Dispatch: ``hello`` is answered with the chosen version, the server name and its global
   limits (``VERSION_UNSUPPORTED`` otherwise); ``list``, ``health`` and the transparency
   requests by :meth:`Pipeline.answer`; ``submit`` by :meth:`Pipeline.submit` with this
   front end's :class:`SubmitTransport`. A protocol violation is refused with its code.
4. Every ``error`` frame is followed by a half-close and a short bounded drain
   (:func:`daemon.server._fastpath.half_close_and_drain`: bytes are discarded, not buffered),
   then the connection closes, so the client reads the error rather than a reset. A
   connection broken by a reset inside a frame is audited ``TRUNCATED_FRAME`` (nothing can
   be sent).
5. One bad connection never kills the server: the handler has a catch-all that logs to
   stderr, audits ``INTERNAL`` when a request was in progress, and closes. However it ends,
   the connection leaves the server's registry and its peer's count exactly once.
6. Security of the TCP listener (:mod:`daemon.config._security`): with TLS, a TCP connection's
   handshake must complete within the pre-hello deadline (a failed handshake is closed
   unanswered and unaudited: it made no request; a timeout is also a strike); a verified
   client certificate adds ``requester.tls_client``. With a ``tokens_file``, a TCP
   connection's ``hello`` must carry one of its tokens (``UNAUTHENTICATED``, audited), and
   the token's name becomes ``requester.token`` for the connection's requests. Unix-socket
   connections keep their peer-credential identity and need no token.
"""

from __future__ import annotations

import contextlib
from typing import Any

import trio

from daemon import logs
from daemon.audit._transparency import TransparencyRequest
from daemon.config._hosting import ServerConfig
from daemon.config._security import LoadedSecurity
from daemon.config._tls import peer_identity
from daemon.server._fastpath import (
    half_close_and_drain,
    next_event,
    receive_ready,
    receive_some,
    send,
    stream_fd,
)
from daemon.server._peers import PeerLedger
from daemon.server._pipeline import Pipeline, Refused
from daemon.wire._echo import echo
from daemon.wire._protocol import (
    CLOSED,
    NEED_DATA,
    PROTOCOL_VERSION,
    Decision,
    ErrorCode,
    ErrorResponse,
    Evidence,
    HealthRequest,
    Hello,
    HelloAccepted,
    ListSessions,
    ProtocolError,
    ServerConnection,
    State,
    Submit,
)

__all__ = ["Connection", "FrontEnd"]


class Connection:
    """Per-connection bookkeeping the server needs for shutdown and fairness."""

    __slots__ = ("codec", "idle_scope", "in_request", "peer")

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


class FrontEnd:
    """Serves admitted EVD1 connections over ``pipeline`` (module rules)."""

    def __init__(
        self,
        *,
        config: ServerConfig,
        pipeline: Pipeline,
        peers: PeerLedger,
        connections: set[Connection],
        server_name: str,
        limits: dict[str, Any],
        security: LoadedSecurity | None = None,
    ) -> None:
        self.security = security or LoadedSecurity()
        self.config = config
        self.pipeline = pipeline
        self.peers = peers
        self.connections = connections
        self.server_name = server_name
        self.limits = limits

    async def handle(
        self, stream: trio.SocketStream, connection: Connection, requester: dict[str, Any]
    ) -> None:
        """Serve one admitted connection (registered in ``connections`` and counted against
        its peer by the acceptor) until it closes (rule 5)."""
        transport: trio.abc.Stream = stream
        try:
            secured = await self._secure(stream, connection, requester)
            if secured is None:
                return
            transport = secured
            await self._converse(transport, connection, requester)
        except Exception as error:  # the catch-all: one bad connection never kills the server
            detail = f"{type(error).__name__}: {echo(str(error), 256)}"
            logs.error(
                "connection_failed",
                f"connection {echo(requester)} failed: {detail}",
                listener="evd1",
                requester=requester,
                error=detail,
            )
            with contextlib.suppress(Exception):
                await self.refuse(
                    transport,
                    ServerConnection(),
                    requester,
                    ErrorCode.INTERNAL,
                    f"internal error: {type(error).__name__}",
                    audit=connection.in_request,
                )
        finally:
            self.connections.discard(connection)
            self.peers.disconnect(connection.peer)
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await transport.aclose()

    async def _secure(
        self, stream: trio.SocketStream, connection: Connection, requester: dict[str, Any]
    ) -> trio.abc.Stream | None:
        """Rule 6: the TLS handshake of a TCP connection under the pre-hello deadline (None:
        it failed or timed out; nothing to answer or audit), or the stream as it is."""
        context = self.security.ssl_context
        if context is None or requester.get("transport") != "tcp":
            return stream
        tls = trio.SSLStream(stream, context, server_side=True)
        timeout = min(self.config.idle_timeout, self.config.pre_hello_timeout)
        with trio.move_on_after(timeout) as scope:
            connection.idle_scope = scope  # shutdown may close it meanwhile
            try:
                await tls.do_handshake()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return None
            finally:
                connection.idle_scope = None
            identity = peer_identity(tls)
            if identity is not None:
                requester["tls_client"] = identity
            return tls
        if not self.pipeline.draining:
            self.peers.strike(connection.peer)
        return None

    async def refuse_connection(
        self, stream: trio.SocketStream, requester: dict[str, Any], message: str, linger: bool
    ) -> None:
        """A connection over a cap that already sent bytes: answered ``BUSY`` (not audited:
        it made no request), drained briefly when ``linger``, and closed (over TLS: closed,
        the handshake is not worth finishing)."""
        try:
            if self.security.ssl_context is not None and requester.get("transport") == "tcp":
                return
            await self.refuse(
                stream,
                ServerConnection(),
                requester,
                ErrorCode.BUSY,
                message,
                audit=False,
                linger=linger,
            )
        except Exception as error:
            logs.error(
                "refusal_failed",
                f"refusing a connection failed: {echo(str(error))}",
                listener="evd1",
                error=echo(str(error)),
            )
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await stream.aclose()

    async def refuse(
        self,
        stream: trio.abc.Stream,
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
        """Answer an error (audited first unless ``audit`` is false), half-close, drain
        briefly (``linger``; rule 4), and let the caller close. ``fields`` must already be
        bounded by the caller."""
        conn.refuse()
        answer = await self.pipeline.refusal(
            requester, code, message, request_id=request_id, audit=audit, **fields
        )
        await _send_refusal(stream, conn, answer, linger=linger)

    async def _converse(
        self, stream: trio.abc.Stream, connection: Connection, requester: dict[str, Any]
    ) -> None:
        config = self.config
        pipeline = self.pipeline
        conn = ServerConnection(
            max_header_bytes=config.max_header_bytes,
            max_frame_bytes=config.max_frame_bytes,
            max_items=config.max_items,
        )
        connection.codec = conn
        fd = stream_fd(stream)
        # Until its hello, a connection has the (much shorter) pre-hello timeout.
        deadline = trio.current_time() + min(config.idle_timeout, config.pre_hello_timeout)
        while True:
            if pipeline.draining and connection.idle():
                return
            # A frame already received whole is taken without a scope (rule 1).
            try:
                event = receive_ready(conn, fd)
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
                        event = await next_event(stream, conn, fd)
                    except ProtocolError as error:
                        event = error
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        await self._broken_mid_frame(stream, connection, requester)
                        return
                    finally:
                        connection.idle_scope = None
            if scope is not None and scope.cancelled_caught:
                if pipeline.draining and connection.idle():
                    return
                self.peers.strike(connection.peer)
                await self.refuse(
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
                # Bytes that never spoke this protocol: counted, summarised, no line each
                # (daemon/server/_noise.py).
                noise = event.code is ErrorCode.BAD_MAGIC and not conn.handshake_done
                if noise:
                    pipeline.noise.record(connection.peer)
                await self.refuse(
                    stream, conn, requester, event.code, event.message, audit=not noise
                )
                return
            if event is CLOSED:
                return
            if isinstance(event, Hello):
                version = ServerConnection.choose_version(event)
                if version is None:
                    await self.refuse(
                        stream,
                        conn,
                        requester,
                        ErrorCode.VERSION_UNSUPPORTED,
                        f"server speaks protocol versions {[PROTOCOL_VERSION]}",
                    )
                    return
                tokens = self.security.tokens
                if tokens is not None and requester.get("transport") == "tcp":
                    name = tokens.name_of(event.token)
                    if name is None:
                        await self.refuse(
                            stream,
                            conn,
                            requester,
                            ErrorCode.UNAUTHENTICATED,
                            "this listener requires a token of its tokens_file in hello"
                            if event.token is None
                            else "the hello's token is not one of this listener's tokens",
                        )
                        return
                    requester = {**requester, "token": name}
                answer: Any = HelloAccepted(version, self.server_name, self.limits)
            elif isinstance(event, Submit):
                connection.in_request = True  # stays set if submit raises: the catch-all audits
                transport = _SocketSubmit(self, stream, conn, deadline, fd)
                keep_open = await pipeline.submit(event, transport, requester, connection.peer)
                connection.in_request = False
                if not keep_open or pipeline.draining:
                    return
                deadline = trio.current_time() + config.idle_timeout
                continue
            elif isinstance(event, ListSessions | HealthRequest | TransparencyRequest):
                try:
                    answer = await pipeline.query(event)
                except Refused as refused:
                    await self.refuse(stream, conn, requester, refused.code, refused.message)
                    return
            else:  # Evidence outside a submit cannot happen; the codec guarantees order
                raise AssertionError(f"unexpected event {event!r}")
            if not await send(stream, conn.send(answer), fd):
                return
            if pipeline.draining:
                return
            deadline = trio.current_time() + config.idle_timeout

    async def _broken_mid_frame(
        self, stream: trio.abc.Stream, connection: Connection, requester: dict[str, Any]
    ) -> None:
        """The connection broke (a reset, not an end of stream): a frame it cut is audited
        ``TRUNCATED_FRAME`` as a normal close inside a frame is (nothing can be sent)."""
        if connection.idle() or connection.codec is None:
            return
        await self.refuse(
            stream,
            connection.codec,
            requester,
            ErrorCode.TRUNCATED_FRAME,
            "the connection was reset inside a frame",
            linger=False,
        )


async def _send_refusal(
    stream: trio.abc.Stream, conn: ServerConnection, answer: ErrorResponse, *, linger: bool
) -> None:
    """Send an error frame, then (``linger``) half-close and drain briefly (rule 4)."""
    if await send(stream, conn.send(answer)) and linger:
        await half_close_and_drain(stream)


class _SocketSubmit:
    """The EVD1 front end's side of one submit (:class:`~daemon.server._pipeline.SubmitTransport`):
    evidence read under the idle deadline and the minimum rate (rule 2)."""

    __slots__ = ("conn", "deadline", "fd", "front", "stream")

    def __init__(
        self,
        front: FrontEnd,
        stream: trio.abc.Stream,
        conn: ServerConnection,
        deadline: float,
        fd: int,
    ) -> None:
        self.front = front
        self.stream = stream
        self.conn = conn
        self.deadline = deadline
        self.fd = fd

    async def read_evidence(self) -> tuple[bytes, ...]:
        conn, fd, deadline = self.conn, self.fd, self.deadline
        conn.accept_evidence()
        try:
            event = receive_ready(conn, fd)
            if isinstance(event, Evidence):  # already here: no scope, no wait
                return event.items
            assert event is NEED_DATA
            config = self.front.config
            begin = trio.current_time()
            while True:
                rate_deadline = (
                    begin + config.evidence_grace + conn.buffered / config.min_evidence_rate
                )
                with trio.move_on_at(min(deadline, rate_deadline)):
                    await receive_some(self.stream, conn, fd)
                    event = receive_ready(conn, fd)
                    if isinstance(event, Evidence):
                        return event.items
                    assert event is NEED_DATA
                    continue
                if rate_deadline < deadline:
                    raise Refused(
                        ErrorCode.IDLE_TIMEOUT,
                        f"evidence arrived slower than {config.min_evidence_rate} bytes/s "
                        f"({conn.buffered} bytes in {trio.current_time() - begin:.1f} s)",
                    )
                raise Refused(
                    ErrorCode.IDLE_TIMEOUT,
                    f"evidence not received within {config.idle_timeout} s",
                )
        except ProtocolError as error:
            raise Refused(error.code, error.message) from None
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise Refused(ErrorCode.TRUNCATED_FRAME, "the connection broke mid-frame") from None

    def encode(self, answer: Decision) -> bytes:
        return self.conn.send(answer)

    async def send(self, data: bytes) -> bool:
        return await send(self.stream, data, self.fd)

    async def refuse(self, answer: ErrorResponse) -> None:
        self.conn.refuse()
        await _send_refusal(self.stream, self.conn, answer, linger=True)
