"""The EVD1 socket front end: one admitted connection's framing, from hello to close.

It moves bytes between a trio socket stream and a :class:`~daemon.wire._protocol.ServerConnection`
(through the fast paths of :mod:`daemon.server._fastpath`) and maps its events to the
transport-neutral core (:class:`~daemon.server._pipeline.Pipeline`). The connection itself —
TLS, authentication, deadlines, the minimum rate, strikes, refusal accounting, the catch-all —
is the connection core's (:mod:`daemon.server._connection`).

Rules (the contract):

1. The codec reads at most what it wants (``bytes_wanted``): the server never holds more
   than the unit it accepted. A frame already received whole is taken without a wait or a
   cancel scope; a client that sent its next request before reading an answer still gets one
   checkpoint per request.
2. Timeouts (core rule 5): until its ``hello`` a connection has its first deadline
   (``pre_hello_timeout``); afterwards it must complete its next request frame within
   ``idle_timeout`` of its previous answer; evidence is read under the minimum-rate rule.
   Each is answered ``IDLE_TIMEOUT`` (a strike) and closes the connection.
3. Dispatch: ``hello`` is answered with the chosen version, the server name and its global
   limits (``VERSION_UNSUPPORTED`` otherwise); every request after it is first authorised
   again by the core against the security generation in force (core rule 3: a token a reload
   removed is refused ``UNAUTHENTICATED``, as noise, and the connection closed); ``list``,
   ``health`` and the transparency requests by :meth:`Pipeline.query`; ``submit`` by
   :meth:`Pipeline.submit` with this front end's :class:`SubmitTransport`. A protocol
   violation is refused with its code.
   ``submit_batch`` (``docs/protocol.md`` §4.1): the whole batch's checks on its header — the
   session, not draining, its declared evidence at most :data:`MAX_BATCH_PAIRS` times the
   session's per-pair limit, one server slot for the batch — each refusing it with one audited
   ``error``, all before an evidence byte is read; then its evidence, read as a submit's
   (idle deadline, minimum rate, a stall a strike); then its pairs, each through the
   pipeline's stages (:func:`daemon.server._pairs.decide_pairs`, HTTP's batches' too), the
   batch's slot becoming theirs; then one ``decisions`` answer.
4. Every ``error`` frame is followed by a half-close and a short bounded drain
   (:func:`daemon.server._fastpath.half_close_and_drain`: bytes are discarded, not buffered),
   then the connection closes, so the client reads the error rather than a reset. A
   connection broken by a reset inside a frame is refused ``TRUNCATED_FRAME`` (nothing can
   be sent).
5. Refusal accounting (core rule 4): bytes that are not this protocol (``BAD_MAGIC`` before
   any ``hello``) are noise; with a ``tokens_file`` on a TCP connection, everything refused
   before a ``hello`` with a valid token (``UNAUTHENTICATED`` included) is noise too. Every
   other refusal is one audit line.
"""

from __future__ import annotations

import time
from typing import Any

import trio

from daemon.audit._transparency import TransparencyRequest
from daemon.config._hosting import ServerConfig
from daemon.config._security import LoadedSecurity
from daemon.server._connection import Connection, ConnectionCore, read_at_rate
from daemon.server._fastpath import (
    half_close_and_drain,
    next_event,
    receive_ready,
    receive_some,
    send,
    stream_fd,
)
from daemon.server._pairs import BatchSlot, Pair, decide_pairs
from daemon.server._peers import PeerLedger
from daemon.server._pipeline import Pipeline, Refused
from daemon.server._table import ConnectionTable
from daemon.wire import _logs as logs
from daemon.wire._echo import echo
from daemon.wire._protocol import (
    CLOSED,
    MAX_BATCH_PAIRS,
    NEED_DATA,
    PROTOCOL_VERSION,
    BatchEvidence,
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
    Submit,
    SubmitBatch,
    encode_header,
)

__all__ = ["Connection", "FrontEnd"]  # Connection: the core's, re-exported


class FrontEnd:
    """Serves admitted EVD1 connections over ``pipeline`` (module rules)."""

    def __init__(
        self,
        *,
        config: ServerConfig,
        pipeline: Pipeline,
        peers: PeerLedger,
        connections: ConnectionTable,
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
        self.core = ConnectionCore(
            config=config,
            pipeline=pipeline,
            peers=peers,
            connections=connections,
            security=self.security,
            first_timeout=config.pre_hello_timeout,
        )

    async def handle(
        self, stream: trio.SocketStream, connection: Connection, requester: dict[str, Any]
    ) -> None:
        """Serve one admitted connection (registered in ``connections`` and counted against
        its peer by the acceptor) until it closes (core rule 1)."""

        async def converse(transport: trio.abc.Stream, who: dict[str, Any]) -> None:
            await self._converse(transport, connection, who)

        async def fail(transport: trio.abc.Stream, who: dict[str, Any], message: str) -> None:
            await self.refuse(
                transport,
                ServerConnection(),
                who,
                connection.peer,
                ErrorCode.INTERNAL,
                message,
                audit=connection.in_request,
            )

        await self.core.serve(stream, connection, requester, converse, fail)

    async def refuse_connection(
        self, stream: trio.SocketStream, requester: dict[str, Any], message: str, linger: bool
    ) -> None:
        """A connection over a cap that already sent bytes: answered ``BUSY`` (not audited:
        it made no request), drained briefly when ``linger``, and closed (over TLS: closed,
        the handshake is not worth finishing)."""
        try:
            if self.core.tls(requester):
                return
            answer = await self.pipeline.refusal(requester, ErrorCode.BUSY, message, audit=False)
            conn = ServerConnection()
            conn.refuse()
            await _send_refusal(stream, conn, answer, linger=linger)
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
        peer: str,
        code: ErrorCode,
        message: str,
        *,
        request_id: int | None = None,
        audit: bool = True,
        noise: bool = False,
        linger: bool = True,
        **fields: Any,
    ) -> None:
        """Answer an error (accounted by the core: audited first, or noise; rule 5),
        half-close, drain briefly (``linger``; rule 4), and let the caller close. ``fields``
        must already be bounded by the caller."""
        conn.refuse()
        answer = await self.core.refusal(
            requester,
            peer,
            code,
            message,
            request_id=request_id,
            audit=audit,
            noise=noise,
            **fields,
        )
        await _send_refusal(stream, conn, answer, linger=linger)

    async def _converse(
        self, stream: trio.abc.Stream, connection: Connection, requester: dict[str, Any]
    ) -> None:
        config = self.config
        pipeline = self.pipeline
        core = self.core
        peer = connection.peer
        conn = ServerConnection(
            max_header_bytes=config.max_header_bytes,
            max_frame_bytes=config.max_frame_bytes,
            max_items=config.max_items,
        )
        connection.codec = conn
        fd = stream_fd(stream)
        deadline = core.first_deadline(connection)  # until its hello (rule 2)
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
                if connection.evicted or (pipeline.draining and connection.idle()):
                    return  # core rule 6
                core.strike(peer)
                await self.refuse(
                    stream,
                    conn,
                    requester,
                    peer,
                    ErrorCode.IDLE_TIMEOUT,
                    f"no complete request within {config.idle_timeout} s"
                    if conn.handshake_done
                    else f"no hello within {core.first_timeout} s",
                    audit=not connection.idle(),
                )
                return
            if isinstance(event, ProtocolError):
                # Bytes that never spoke this protocol: noise (rule 5).
                noise = event.code is ErrorCode.BAD_MAGIC and not conn.handshake_done
                await self.refuse(
                    stream, conn, requester, peer, event.code, event.message, noise=noise
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
                        peer,
                        ErrorCode.VERSION_UNSUPPORTED,
                        f"server speaks protocol versions {[PROTOCOL_VERSION]}",
                    )
                    return
                authenticated = core.authenticate(connection, requester, event.token)
                if authenticated is None:
                    await core.unauthenticated(peer)
                    await self.refuse(
                        stream,
                        conn,
                        requester,
                        peer,
                        ErrorCode.UNAUTHENTICATED,
                        "this listener requires a token of its tokens_file in hello"
                        if event.token is None
                        else "the hello's token is not one of this listener's tokens",
                    )
                    return
                requester = authenticated
                answer: Any = HelloAccepted(version, self.server_name, self.limits)
            elif (current := core.reauthorise(connection, requester)) is None:
                # Its hello's token was removed by a reload: refused from this request on
                # (core rule 3), as noise (no longer an authenticated requester).
                requester = {k: v for k, v in requester.items() if k != "token"}
                await core.unauthenticated(peer)
                await self.refuse(
                    stream,
                    conn,
                    requester,
                    peer,
                    ErrorCode.UNAUTHENTICATED,
                    "this connection's token is no longer one of this listener's tokens",
                    request_id=getattr(event, "request_id", None),
                )
                return
            elif isinstance(event, Submit):
                requester = current
                connection.in_request = True  # stays set if submit raises: the catch-all audits
                transport = _SocketSubmit(self, stream, conn, deadline, fd)
                keep_open = await pipeline.submit(event, transport, requester, peer)
                connection.in_request = False
                if not keep_open or pipeline.draining:
                    return
                deadline = core.answered(connection)
                continue
            elif isinstance(event, SubmitBatch):
                requester = current
                connection.in_request = True  # as for submit: the catch-all audits
                keep_open = await self._submit_batch(
                    stream, conn, connection, requester, event, deadline, fd
                )
                connection.in_request = False
                if not keep_open or pipeline.draining:
                    return
                deadline = core.answered(connection)
                continue
            elif isinstance(event, ListSessions | HealthRequest | TransparencyRequest):
                requester = current
                try:
                    answer = await pipeline.query(event)
                except Refused as refused:
                    await self.refuse(stream, conn, requester, peer, refused.code, refused.message)
                    return
            else:  # Evidence outside a submit cannot happen; the codec guarantees order
                raise AssertionError(f"unexpected event {event!r}")
            if not await send(stream, conn.send(answer), fd):
                return
            if pipeline.draining:
                return
            deadline = core.answered(connection)

    async def _submit_batch(
        self,
        stream: trio.abc.Stream,
        conn: ServerConnection,
        connection: Connection,
        requester: dict[str, Any],
        batch: SubmitBatch,
        deadline: float,
        fd: int,
    ) -> bool:
        """One ``submit_batch`` (rule 3); True when the connection may go on."""
        started = time.perf_counter_ns()
        config, pipeline, peer = self.config, self.pipeline, connection.peer
        name = batch.session
        slot = BatchSlot(pipeline.capacity)  # the batch's own server slot (rule 3)
        try:
            session = pipeline.session_named(name)
            limit = min(session.effective_bytes, config.max_frame_bytes)
            declared = sum(batch.item_sizes)
            if declared > MAX_BATCH_PAIRS * limit:
                raise Refused(
                    ErrorCode.EVIDENCE_BYTES_EXCEEDED,
                    f"{declared} evidence bytes declared in a batch; session "
                    f"'{echo(name, 64)}' admits {MAX_BATCH_PAIRS} pairs of {limit}",
                )
            if pipeline.draining:
                raise Refused(ErrorCode.SHUTTING_DOWN, "the server is shutting down")
            try:
                slot.acquire_nowait()
            except trio.WouldBlock:
                raise Refused(
                    ErrorCode.BUSY, f"{config.max_in_flight} requests in flight; retry later"
                ) from None
        except Refused as refused:
            await self.refuse(stream, conn, requester, peer, refused.code, refused.message,
                              request_id=batch.request_id, session=echo(name))  # fmt: skip
            return False
        try:
            try:
                evidence = await _read_evidence(self, stream, conn, deadline, fd)
            except Refused as refused:
                if refused.code is ErrorCode.IDLE_TIMEOUT:
                    self.peers.strike(peer)
                await self.refuse(stream, conn, requester, peer, refused.code, refused.message,
                                  request_id=batch.request_id, session=echo(name))  # fmt: skip
                return False
            assert isinstance(evidence, BatchEvidence)
            pairs: list[Pair] = [
                (pair.binding, items)
                for pair, items in zip(batch.pairs, evidence.pairs, strict=True)
            ]
            answers = await decide_pairs(pipeline, batch.request_id, name, pairs, requester,
                                         peer, started=started, refusal=_error_header,
                                         listener="evd1", slot=slot)  # fmt: skip
            return await send(stream, conn.send_decisions(batch.request_id, answers), fd)
        finally:
            slot.release()

    async def _broken_mid_frame(
        self, stream: trio.abc.Stream, connection: Connection, requester: dict[str, Any]
    ) -> None:
        """The connection broke (a reset, not an end of stream): a frame it cut is refused
        ``TRUNCATED_FRAME`` as a normal close inside a frame is (nothing can be sent)."""
        if connection.idle() or connection.codec is None:
            return
        await self.refuse(
            stream,
            connection.codec,
            requester,
            connection.peer,
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


def _error_header(answer: ErrorResponse) -> bytes:
    """A batch pair's refusal as its element: the ``error`` header a single submit's refusal
    frame carries (``docs/protocol.md`` §4.1)."""
    return encode_header(answer.to_header())


async def _read_evidence(
    front: FrontEnd, stream: trio.abc.Stream, conn: ServerConnection, deadline: float, fd: int
) -> Evidence | BatchEvidence:
    """Accept the declared evidence and read it (a submit's, or a batch's, pair by pair) under
    the idle deadline and the minimum rate (core rule 5); :class:`Refused` when the bytes
    break the protocol, the connection breaks, or they come too slowly."""
    conn.accept_evidence()
    try:
        event = receive_ready(conn, fd)
        if isinstance(event, Evidence | BatchEvidence):  # already here: no scope, no wait
            return event
        assert event is NEED_DATA

        async def step() -> Evidence | BatchEvidence | None:
            await receive_some(stream, conn, fd)
            event = receive_ready(conn, fd)
            if isinstance(event, Evidence | BatchEvidence):
                return event
            assert event is NEED_DATA
            return None

        return await read_at_rate(
            step, lambda: conn.buffered, config=front.config, deadline=deadline, what="evidence"
        )
    except ProtocolError as error:
        raise Refused(error.code, error.message) from None
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        raise Refused(ErrorCode.TRUNCATED_FRAME, "the connection broke mid-frame") from None


class _SocketSubmit:
    """The EVD1 front end's side of one submit (:class:`~daemon.server._pipeline.SubmitTransport`):
    evidence read under the idle deadline and the minimum rate (core rule 5)."""

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
        event = await _read_evidence(self.front, self.stream, self.conn, self.deadline, self.fd)
        assert isinstance(event, Evidence)
        return event.items

    def encode(self, answer: Decision) -> bytes:
        return self.conn.send(answer)

    async def send(self, data: bytes) -> bool:
        return await send(self.stream, data, self.fd)

    async def refuse(self, answer: ErrorResponse) -> None:
        self.conn.refuse()
        await _send_refusal(self.stream, self.conn, answer, linger=True)
