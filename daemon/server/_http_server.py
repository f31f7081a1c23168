"""The HTTP/1.1 front end: one admitted connection's requests, over the same core as EVD1.

It moves bytes between a trio stream (TLS when configured) and an
:class:`~daemon.server._http_codec.HttpServerCodec` and maps requests to pipeline calls
(:class:`~daemon.server._pipeline.Pipeline`): the same sessions, bounds, capacity, evaluation,
audit log and counters as the binary protocol. The connection itself — TLS, authentication,
deadlines, the minimum rate, strikes, refusal accounting, the catch-all — is the connection
core's (:mod:`daemon.server._connection`).

Rules (the contract):

1. Endpoints (``docs/http.md``): ``POST /v1/sessions/{name}/decisions`` answers ``200`` with
   the binary protocol's ``decision`` document for every decision (PASS, FAIL and UNKNOWN
   are answers, not HTTP errors); ``GET /v1/sessions`` the ``sessions`` document; ``GET
   /health`` the ``health`` document (``200`` while the event loop runs, whatever the
   status); ``GET /ready`` ``200`` only while the server is ``serving`` (audit log
   writable, sessions hosted, not draining), else ``503`` with the reason and
   ``Retry-After``; ``GET /metrics`` the Prometheus exposition (:mod:`daemon.server._metrics`).
   Each answer's ``request_id`` is the request's number on its connection (1, 2, ...).
2. Timeouts (core rule 5): a new connection has ``header_timeout`` (or the idle timeout if
   shorter) for its TLS handshake and first request head; after each answer the next head
   must arrive within ``idle_timeout``. A keep-alive connection idle past it is closed
   without an answer; one that started a head and stalls (a slow-loris drip), or sent
   nothing at all, is answered ``IDLE_TIMEOUT`` (408), a strike. A body is read under the
   minimum-rate rule within ``idle_timeout`` of its head — never under the head's deadline,
   so a large first request on a fresh connection is not cut at ``header_timeout``.
3. Submit: the token when the listener has a ``tokens_file`` (``UNAUTHENTICATED``; every
   request's own, against the tokens in force: core rule 3), then one
   admission by the pipeline's stages (:meth:`Pipeline.submit_body`): the session
   (``UNKNOWN_SESSION``), not draining (``SHUTTING_DOWN``) and a capacity slot, server and
   peer (``BUSY``) before a body byte is read; then the media type (415), the declared
   ``Content-Length`` against the session's body limit
   (:func:`~daemon.server._http_body.body_limit`: ``EVIDENCE_BYTES_EXCEEDED``, 413) before a
   body byte is read, ``100 Continue`` if asked, the body counted as it arrives and cut at the
   limit, parsed (:mod:`daemon.server._http_body`); then the pipeline's own stages (bounds on
   the items against the same session, binding, evaluation, audit, answer).
4. Open routes (``/health``, ``/ready``: no token needed). On a listener with a
   ``tokens_file``, a request to one without a valid token is a probe: it is answered and
   the connection closed (no keep-alive), at most
   :data:`~daemon.server._connection.OPEN_ROUTE_BUDGET` probes are served at once (more:
   ``503`` ``BUSY``), and ``/health`` answers the status only
   (``{"status": "serving" | "degraded" | "draining"}``) and ``/ready``'s ``503`` the status
   word only (``not ready: degraded``, never the reason, which may name a store, an object or
   a path); with a valid token, the full document (and the reason) and keep-alive. Idle
   probes cannot hold the connection slots.
5. Refusal accounting (core rule 4): a refusal before a request names a session (a
   malformed or stalled head, an unknown route) or an authenticated requester (no or a wrong
   token) is noise; every other refusal is one audit line (``requester.protocol = "http"``,
   with the session named in the path).
6. Every refusal (:mod:`daemon.server._http_errors`) is the last answer of its connection:
   ``Connection: close``, then a half-close (plain TCP) and a short bounded drain, then
   close. A connection over a cap at accept is answered ``503`` ``BUSY`` and closed (not
   audited; on TLS listeners it is closed without an answer). The catch-all answers ``500``
   ``INTERNAL`` (audited when a request was in progress).
7. Fair turns: one checkpoint before each request after a connection's first, so a client
   whose next request is already received (pipelined, or sent the moment it read an answer)
   cannot keep the event loop from every other connection (as rule 1 of the binary front end);
   a request the fast lane answered once its line was durable (or written) waited for the
   writer, which is that turn already.
8. The fast lane (:mod:`daemon.server._lane`): a submit its rule 1 admits is served on it,
   with the same bytes; every other one (and all of them with ``EVIDENCED_FAST_LANE=0``)
   by rule 3's stages.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable
from typing import Any, Final

import trio

from daemon.audit._audit import AuditLog, Durability
from daemon.config._hosting import HostedSession, ServerConfig
from daemon.config._http_config import HttpConfig
from daemon.config._security import LoadedSecurity
from daemon.server._batch import submit_batch
from daemon.server._connection import Connection, ConnectionCore, read_at_rate
from daemon.server._fastpath import RECEIVE_CHUNK, half_close_and_drain, send, stream_fd
from daemon.server._http_body import body_limit, body_parser
from daemon.server._http_codec import (
    CLOSED,
    END_OF_BODY,
    NEED_DATA,
    HttpServerCodec,
    RequestHead,
    Route,
)
from daemon.server._http_errors import HttpRefusal, error_document, refusal_of
from daemon.server._http_tlog import LOG_ROUTES, LogRoutes
from daemon.server._lane import FastLane
from daemon.server._lane import enabled as lane_enabled
from daemon.server._metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from daemon.server._metrics import ServerMetrics
from daemon.server._openapi import openapi_answer
from daemon.server._peers import PENALIZED, PeerLedger
from daemon.server._pipeline import Pipeline, Refused
from daemon.server._proxy import TrustedProxies
from daemon.server._routes import TABLE, Auth
from daemon.server._table import ConnectionTable
from daemon.wire import _logs as logs
from daemon.wire._echo import echo
from daemon.wire._protocol import (
    Decision,
    ErrorCode,
    ErrorResponse,
    HealthRequest,
    ListSessions,
    Submit,
    encode_header,
)

__all__ = ["HttpConnection", "HttpFrontEnd", "busy_answer"]

#: Routes a probe may ask without a token (they disclose a status, nothing more): the route
#: table's ``Auth.OPEN`` ones.
_OPEN_ROUTES: Final = frozenset(op.route for op in TABLE if op.auth is Auth.OPEN)


def busy_answer(message: str) -> bytes:
    """A connection refused at accept (rule 6): ``503`` ``BUSY`` (``429`` when its peer is
    cut off: :func:`~daemon.server._http_errors.refusal_of`), closing."""
    return HttpServerCodec().refuse(refusal_of(ErrorCode.BUSY, message), None, message)


class HttpConnection(Connection):
    """An HTTP connection's bookkeeping (the server's registry; shutdown closes idle ones)."""

    __slots__ = ("http",)

    def __init__(self, peer: str) -> None:
        super().__init__(peer)
        self.http: HttpServerCodec | None = None

    def idle(self) -> bool:
        """No request in progress and no byte of the next one received."""
        return not self.in_request and (self.http is None or self.http.idle())


class HttpFrontEnd:
    """Serves admitted HTTP connections over ``pipeline`` (module rules)."""

    def __init__(
        self,
        *,
        config: ServerConfig,
        http: HttpConfig,
        pipeline: Pipeline,
        peers: PeerLedger,
        connections: ConnectionTable,
        security: LoadedSecurity,
        metrics: ServerMetrics,
        readiness: Callable[[], tuple[str, str | None]],
    ) -> None:
        self.config = config
        self.http = http
        self.pipeline = pipeline
        self.peers = peers
        self.connections = connections
        self.security = security
        self.metrics = metrics
        self.readiness = readiness
        self.log_routes = LogRoutes(config, pipeline)  # the transparency log, docs/http.md
        #: The common submit's one path (rule 8), unless ``EVIDENCED_FAST_LANE=0``.
        self.lane = FastLane(self) if lane_enabled() else None
        #: A lane request waits for its line's durability, a turn of the scheduler: it needs
        #: no fair turn of its own (rule 7). Not so when the log answers lines as queued.
        self.lane_yields = not (
            isinstance(pipeline.audit, AuditLog) and pipeline.audit.durability is Durability.NONE
        )
        self.core = ConnectionCore(
            config=config,
            pipeline=pipeline,
            peers=peers,
            connections=connections,
            security=security,
            first_timeout=http.header_timeout,
            https=True,
            proxies=TrustedProxies.parse(http.trusted_proxies),
        )

    # -- connections

    async def handle(
        self, stream: trio.SocketStream, connection: Connection, requester: dict[str, Any]
    ) -> None:
        """Serve one admitted connection until it closes (core rule 1)."""
        assert isinstance(connection, HttpConnection)
        codec = HttpServerCodec(
            max_header_bytes=self.http.max_header_bytes, max_headers=self.http.max_headers
        )
        connection.http = codec

        async def converse(transport: trio.abc.Stream, who: dict[str, Any]) -> None:
            await self._converse(transport, connection, codec, who)

        async def fail(transport: trio.abc.Stream, who: dict[str, Any], message: str) -> None:
            await self._refuse(
                transport,
                codec,
                who,
                connection.peer,
                HttpRefusal(ErrorCode.INTERNAL, message),
                audit=connection.in_request,
            )

        await self.core.serve(stream, connection, {**requester, "protocol": "http"}, converse, fail)

    async def refuse_connection(
        self, stream: trio.SocketStream, requester: dict[str, Any], message: str, linger: bool
    ) -> None:
        """A connection over a cap that already sent bytes (rule 6): ``BUSY``, not audited."""
        try:
            if self.security.ssl_context is None:
                codec = HttpServerCodec()
                answer = await self.pipeline.refusal(
                    requester, ErrorCode.BUSY, message, audit=False
                )
                await self._send_refusal(stream, codec, answer, linger=linger)
        except Exception as error:
            logs.error(
                "refusal_failed",
                f"refusing a connection failed: {echo(str(error))}",
                listener="http",
                error=echo(str(error)),
            )
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await stream.aclose()

    # -- the conversation

    async def _converse(
        self,
        stream: trio.abc.Stream,
        connection: HttpConnection,
        codec: HttpServerCodec,
        requester: dict[str, Any],
    ) -> None:
        pipeline = self.pipeline
        core = self.core
        deadline = core.first_deadline(connection)
        number = 0
        while True:
            if pipeline.draining and connection.idle():
                return
            head = await self._next_head(stream, connection, codec, requester, deadline)
            if head is None:
                return
            started = time.perf_counter_ns()
            number += 1
            taken: bool | None = None
            # Whose request: the client a trusted proxy names for it (core rule 9).
            who, peer = core.forwarded(requester, connection.peer, head.forwarded_for)
            asker = core.authenticate_bearer(connection, who, head.authorization)
            try:
                if asker is None and self.peers.penalized(peer):  # core rule 8: no probes
                    raise refusal_of(ErrorCode.BUSY, PENALIZED)
                if head.route in _OPEN_ROUTES and asker is None:
                    await self._read_no_body(stream, codec, deadline)
                    keep = core.keeps_alive(who)  # never, for a probe (core rule 7)
                    await self._probe(stream, codec, head, number, close=not keep)
                    return
                if asker is None:
                    await core.unauthenticated(peer)
                    raise HttpRefusal(
                        ErrorCode.UNAUTHENTICATED,
                        "this listener requires Authorization: Bearer <token> with a token "
                        "of its tokens_file"
                        if head.authorization is None
                        else "the bearer token is not one of this listener's tokens",
                    )
                if head.route is Route.SUBMIT:
                    assert head.session is not None
                    lane = self.lane
                    if lane is not None:  # the common submit, on one path (rule 8)
                        taken = await lane.submit(
                            stream, connection, codec, head, asker, peer, number, started
                        )
                    if taken is None:
                        connection.in_request = True
                        transport = _HttpSubmit(self, stream, codec, number, head.session)
                        keep = await pipeline.submit_body(
                            number, head.session, transport, asker, peer, started=started
                        )
                        connection.in_request = False
                    else:
                        keep = taken
                elif head.route is Route.BATCH:  # many pairs, one answer (daemon.server._batch)
                    connection.in_request = True
                    keep = await submit_batch(
                        self, stream, connection, codec, head, asker, number, deadline, started,
                        peer,
                    )  # fmt: skip
                    connection.in_request = False
                else:
                    await self._read_no_body(stream, codec, deadline)
                    keep = await self._query(stream, codec, head, number, peer)
            except HttpRefusal as refusal:
                fields: dict[str, Any] = {"request_id": number}
                if head.session is not None:
                    fields["session"] = echo(head.session)
                await self._refuse(stream, codec, asker or who, peer, refusal, **fields)
                return
            if not keep or not codec.next_cycle() or pipeline.draining:
                return
            deadline = core.answered(connection)
            if taken is None or not self.lane_yields:
                await trio.lowlevel.checkpoint()  # a fair turn (rule 7)

    async def _next_head(
        self,
        stream: trio.abc.Stream,
        connection: HttpConnection,
        codec: HttpServerCodec,
        requester: dict[str, Any],
        deadline: float,
    ) -> RequestHead | None:
        """The next request head, or None when the connection ends quietly (rule 2)."""
        try:
            event = codec.next_event()
            while event is NEED_DATA:
                if _receive_ready(stream_fd(stream), codec):  # there already: no scope, no wait
                    event = codec.next_event()
                    continue
                with trio.CancelScope(deadline=deadline) as scope:
                    connection.idle_scope = scope
                    try:
                        await self._receive(stream, codec, tried=True)
                    finally:
                        connection.idle_scope = None
                if scope.cancelled_caught:
                    await self._head_timeout(stream, connection, codec, requester)
                    return None
                event = codec.next_event()
        except HttpRefusal as refusal:
            fields: dict[str, Any] = {}
            if codec.named_session is not None:  # it named a session: audited with it
                fields["session"] = echo(codec.named_session)
            await self._refuse(
                stream,
                codec,
                requester,
                connection.peer,
                refusal,
                noise=codec.named_session is None,  # malformed before a session: rule 5
                **fields,
            )
            return None
        if event is CLOSED:
            return None
        assert isinstance(event, RequestHead)
        return event

    async def _head_timeout(
        self,
        stream: trio.abc.Stream,
        connection: HttpConnection,
        codec: HttpServerCodec,
        requester: dict[str, Any],
    ) -> None:
        if connection.evicted or (self.pipeline.draining and connection.idle()):
            return  # core rule 6
        if codec.idle() and codec.requests:
            return  # a keep-alive connection that stayed idle: closed without an answer
        self.core.strike(connection.peer)
        seconds = self.config.idle_timeout if codec.requests else self.core.first_timeout
        fields: dict[str, Any] = {}
        if codec.named_session is not None:
            fields["session"] = echo(codec.named_session)
        await self._refuse(
            stream,
            codec,
            requester,
            connection.peer,
            HttpRefusal(ErrorCode.IDLE_TIMEOUT, f"no complete request head within {seconds} s"),
            audit=not codec.idle(),
            noise=codec.named_session is None,
            **fields,
        )

    async def _read_no_body(
        self, stream: trio.abc.Stream, codec: HttpServerCodec, deadline: float
    ) -> None:
        codec.accept_body(0)
        while (event := codec.next_event()) is not END_OF_BODY:
            if event is not NEED_DATA:
                raise HttpRefusal(ErrorCode.HEADER_INVALID, "this request takes no body")
            with trio.move_on_at(deadline):
                await self._receive(stream, codec)
                continue
            raise HttpRefusal(
                ErrorCode.IDLE_TIMEOUT,
                f"the request was not received within {self.config.idle_timeout} s",
            )

    async def _probe(
        self,
        stream: trio.abc.Stream,
        codec: HttpServerCodec,
        head: RequestHead,
        number: int,
        *,
        close: bool,
    ) -> None:
        """An open route asked without a valid token (rule 4): within the probes' budget,
        answered (``/health``: the status only) and closed."""
        try:
            with self.core.probing():
                if head.route is Route.READY:
                    data = self._ready(codec, close=close, probe=True)
                else:
                    status = {"status": self.readiness()[0]}
                    answer = HealthRequest(number)
                    document = {**self.pipeline.answer(answer).to_header(), "status": status}
                    data = codec.respond(200, encode_header(document), close=close)
                await self._send(stream, data)
        except Refused as refused:
            raise HttpRefusal(refused.code, refused.message) from None

    def _ready(self, codec: HttpServerCodec, *, close: bool = False, probe: bool = False) -> bytes:
        """``/ready`` (rule 1); a ``probe`` (rule 4) learns the status word only, never the
        reason (which may name a store, an object digest, a path or an error)."""
        status, reason = self.readiness()
        if status == "serving":
            body = {"ready": True, "status": status, "reason": None}
            return codec.respond(200, encode_header(body), close=close)
        code = ErrorCode.SHUTTING_DOWN if status == "draining" else ErrorCode.AUDIT_FAILED
        if probe:
            message = f"not ready: {status}"
        else:
            message = f"not ready: {reason or 'the server is draining'}"
        refusal = HttpRefusal(code, message)
        return codec.respond(
            503,
            error_document(code.name, refusal.message, None),
            headers=refusal.headers,
            close=close,
        )

    async def _query(
        self,
        stream: trio.abc.Stream,
        codec: HttpServerCodec,
        head: RequestHead,
        number: int,
        peer: str,
    ) -> bool:
        """A ``GET`` route (rule 1); True when sent."""
        route = head.route
        if route in LOG_ROUTES:
            answer = await self.log_routes.answer(codec, head, number, peer)
            return await self._send(stream, answer)
        if route is Route.OPENAPI:
            answer = openapi_answer(codec, self.pipeline.sessions.values())
            return await self._send(stream, answer)
        if route is Route.METRICS:
            data = codec.respond(200, self.metrics.exposition(), content_type=METRICS_CONTENT_TYPE)
        elif route is Route.READY:
            data = self._ready(codec)
        elif route is Route.SESSIONS or route is Route.HEALTH:
            request = ListSessions(number) if route is Route.SESSIONS else HealthRequest(number)
            answer = self.pipeline.answer(request)
            data = codec.respond(200, encode_header(answer.to_header()))
        else:  # a route of the table without a handler here: our bug, never another's answer
            raise AssertionError(f"no handler for {route}")
        return await self._send(stream, data)

    async def read_body(
        self,
        stream: trio.abc.Stream,
        codec: HttpServerCodec,
        feed: Callable[[bytes], None],
        deadline: float,
    ) -> None:
        """A request body accepted by the codec, to its end: ``100 Continue`` if asked, then
        every piece to ``feed``, under ``deadline`` and the minimum rate (the connection
        core's one read loop, :func:`read_at_rate`: :class:`Refused` when too slow)."""
        go_on = codec.continue_bytes()
        if go_on and not await self._send(stream, go_on):
            raise HttpRefusal(ErrorCode.TRUNCATED_FRAME, "the connection broke")

        def complete() -> bool:
            """Feed what arrived; True at the end of the body."""
            while True:
                event = codec.next_event()
                if event is END_OF_BODY:
                    return True
                if not isinstance(event, bytes):
                    return False
                feed(event)

        async def step() -> bool | None:
            await self._receive(stream, codec)
            return True if complete() else None

        if not complete():
            await read_at_rate(
                step,
                lambda: codec.body_bytes,
                config=self.config,
                deadline=deadline,
                what="the body",
            )

    def submit_transport(
        self, stream: trio.abc.Stream, codec: HttpServerCodec, number: int, name: str
    ) -> _HttpSubmit:
        """The general path's transport of one submit (the lane's refusals: its rule 4)."""
        return _HttpSubmit(self, stream, codec, number, name)

    # -- bytes

    async def _receive(
        self, stream: trio.abc.Stream, codec: HttpServerCodec, *, tried: bool = False
    ) -> None:
        """Receive what is there (waiting for it); a broken stream is its end. ``tried``: the
        caller just found nothing on the socket (:func:`_receive_ready`), so wait first."""
        fd = stream_fd(stream)
        if fd >= 0:
            if tried or not _receive_ready(fd, codec):
                await trio.lowlevel.wait_readable(fd)
                _receive_ready(fd, codec)  # nothing after a spurious wake-up: the caller asks again
            return
        try:
            data = bytes(await stream.receive_some(RECEIVE_CHUNK))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        codec.receive_data(data)

    async def _send(self, stream: trio.abc.Stream, data: bytes) -> bool:
        """Send ``data`` (:func:`daemon.server._fastpath.send`); False when the peer is gone."""
        return await send(stream, data, stream_fd(stream))

    # -- refusals (rule 6)

    async def _refuse(
        self,
        stream: trio.abc.Stream,
        codec: HttpServerCodec,
        requester: dict[str, Any],
        peer: str,
        refusal: HttpRefusal,
        *,
        audit: bool = True,
        noise: bool = False,
        request_id: int | None = None,
        **fields: Any,
    ) -> None:
        """Account (core rule 4) and answer ``refusal``; the connection ends after it."""
        answer = await self.core.refusal(
            requester,
            peer,
            refusal.code,
            refusal.message,
            request_id=request_id,
            audit=audit,
            noise=noise,
            **fields,
        )
        linger = refusal.code is not ErrorCode.TRUNCATED_FRAME
        await self._send_refusal(stream, codec, answer, linger=linger, refusal=refusal)

    async def _send_refusal(
        self,
        stream: trio.abc.Stream,
        codec: HttpServerCodec,
        answer: ErrorResponse,
        *,
        linger: bool = True,
        refusal: HttpRefusal | None = None,
    ) -> None:
        code = ErrorCode[answer.code]
        if refusal is None or refusal.code is not code:  # e.g. became AUDIT_FAILED
            refusal = refusal_of(code, answer.message)
        data = codec.refuse(refusal, answer.decision_id, answer.message)
        if await self._send(stream, data) and linger:
            await half_close_and_drain(stream)


class _HttpSubmit:
    """The HTTP front end's side of one submit (:class:`~daemon.server._pipeline.BodyTransport`):
    the body read, bounded by the admitting session, under the minimum rate (rules 2, 3)."""

    __slots__ = ("codec", "front", "name", "number", "refusal", "stream")

    def __init__(
        self,
        front: HttpFrontEnd,
        stream: trio.abc.Stream,
        codec: HttpServerCodec,
        number: int,
        name: str,
    ) -> None:
        self.front = front
        self.stream = stream
        self.codec = codec
        self.number = number
        self.name = name
        #: The HTTP refusal behind the pipeline's :class:`Refused` (its status, its headers).
        self.refusal: HttpRefusal | None = None

    async def read_request(self, session: HostedSession) -> tuple[Submit, tuple[bytes, ...]]:
        try:
            return await self._read(session)
        except HttpRefusal as refusal:
            self.refusal = refusal
            raise Refused(refusal.code, refusal.message) from None

    async def _read(self, session: HostedSession) -> tuple[Submit, tuple[bytes, ...]]:
        front, codec, stream = self.front, self.codec, self.stream
        config = front.config
        head = codec.head
        assert head is not None
        max_items = min(session.effective_items, config.max_items)
        max_bytes = min(session.effective_bytes, config.max_frame_bytes)
        parser = body_parser(
            head.content_type,
            head.boundary,
            max_items=max_items,
            max_bytes=max_bytes,
            max_binding_bytes=config.max_header_bytes,
        )
        limit = body_limit(
            max_items=max_items, max_bytes=max_bytes, max_binding_bytes=config.max_header_bytes
        )
        codec.accept_body(
            limit,
            ErrorCode.EVIDENCE_BYTES_EXCEEDED,
            f"session '{echo(self.name, 64)}' admits {max_items} items of {max_bytes} bytes in "
            f"total, a body of at most {limit} bytes",
        )
        # the deadline runs from the head, not from the connection's first deadline
        await front.read_body(stream, codec, parser.feed, front.core.idle_deadline())
        body = parser.finish()
        sizes = tuple(len(item) for item in body.items)
        return Submit(self.number, self.name, body.binding, sizes), body.items

    async def read_evidence(self) -> tuple[bytes, ...]:
        raise AssertionError("an HTTP submit is read whole by read_request")

    def encode(self, answer: Decision) -> bytes:
        return self.codec.respond(200, encode_header(answer.to_header()))

    async def send(self, data: bytes) -> bool:
        return await self.front._send(self.stream, data)

    async def refuse(self, answer: ErrorResponse) -> None:
        code = ErrorCode[answer.code]
        refusal = self.refusal if self.refusal is not None and self.refusal.code is code else None
        await self.front._send_refusal(
            self.stream,
            self.codec,
            answer,
            linger=code is not ErrorCode.TRUNCATED_FRAME,
            refusal=refusal,
        )


def _broken(error: OSError) -> bytes:
    if error.errno in (errno.EBADF, errno.ENOTSOCK):
        raise trio.ClosedResourceError("this socket was already closed") from None
    return b""  # a reset: the end of the stream (the codec decides what it cut)


def _receive_ready(fd: int, codec: HttpServerCodec) -> bool:
    """Feed ``codec`` what the socket already holds, without a wait: False when nothing was
    there (or there is no descriptor); a reset is fed as the end of the stream."""
    if fd < 0:
        return False
    try:
        data = os.read(fd, RECEIVE_CHUNK)
    except BlockingIOError:
        return False
    except OSError as error:
        data = _broken(error)
    codec.receive_data(data)
    return True
