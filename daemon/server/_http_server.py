"""The HTTP/1.1 front end: one admitted connection's requests, over the same core as EVD1.

It moves bytes between a trio stream (TLS when configured) and an
:class:`~daemon.server._http_codec.HttpServerCodec`, and hands requests to the transport-neutral
core (:class:`~daemon.server._pipeline.Pipeline`): the same sessions, bounds, capacity, evaluation,
audit log and counters as the binary protocol.

Rules (the contract):

1. Endpoints (``docs/http.md``): ``POST /v1/sessions/{name}/decisions`` answers ``200`` with
   the binary protocol's ``decision`` document for every decision (PASS, FAIL and UNKNOWN
   are answers, not HTTP errors); ``GET /v1/sessions`` the ``sessions`` document; ``GET
   /health`` the ``health`` document (``200`` while the event loop runs, whatever the
   status); ``GET /ready`` ``200`` only while the server is ``serving`` (audit log
   writable, sessions hosted, not draining), else ``503`` with the reason and
   ``Retry-After``; ``GET /metrics`` the Prometheus exposition (:mod:`daemon.server._metrics`).
   Each answer's ``request_id`` is the request's number on its connection (1, 2, ...).
2. Timeouts, as the binary listener's: a new connection has ``header_timeout`` (or the idle
   timeout if shorter) for its TLS handshake and first request head; after each answer the
   next request must arrive whole (head and body) within ``idle_timeout``. A keep-alive
   connection idle past it is closed without an answer; one that started a request and
   stalls (a slow-loris head drip), or sent nothing at all, is answered ``IDLE_TIMEOUT``
   (408), which is a strike against its peer (:mod:`daemon.server._peers`). A body must keep
   arriving at ``min_evidence_rate`` bytes/s after ``evidence_grace`` seconds.
3. Submit order, each refusal audited (``requester.protocol = "http"``, with the session
   named in the path) and answered with its code: the route and method (codec); the token
   when the listener has a ``tokens_file`` (``UNAUTHENTICATED``; ``/health`` and ``/ready``
   need none); the session (``UNKNOWN_SESSION``); not draining (``SHUTTING_DOWN``); the media
   type (415); the declared ``Content-Length`` against the session's body limit
   (:func:`~daemon.server._http_body.body_limit`: ``EVIDENCE_BYTES_EXCEEDED``, 413) *before a body
   byte is read*; a body slot (``BUSY``, 503): at most ``max_in_flight`` bodies are read at
   once, at most the peer's in-flight cap for one peer, so bodies in memory are bounded as
   binary evidence is; ``100 Continue`` if asked; the body, counted as it arrives and cut at
   the limit, parsed (:mod:`daemon.server._http_body`); then the pipeline's own stages (bounds on
   the actual items, binding, capacity, evaluation, audit, answer).
4. Every refusal (:mod:`daemon.server._http_errors`) is the last answer of its connection:
   ``Connection: close``, then a half-close (plain TCP) and a short bounded drain, then
   close. A connection over a cap at accept is answered ``503`` ``BUSY`` and closed (not
   audited; on TLS listeners it is closed without an answer).
5. One bad connection never kills the server: a catch-all logs to stderr, answers ``500``
   ``INTERNAL`` (audited when a request was in progress) and closes; the connection leaves the
   server's registry and its peer's count exactly once.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import time
from collections.abc import Callable
from typing import Any, Final

import trio

from daemon.config._hosting import ServerConfig
from daemon.config._http_config import HttpConfig
from daemon.config._security import LoadedSecurity
from daemon.config._tls import peer_identity
from daemon.config._tokens import bearer_token
from daemon.server._batch import submit_batch
from daemon.server._fastpath import RECEIVE_CHUNK, half_close_and_drain, send, stream_fd
from daemon.server._frontend import Connection
from daemon.server._http_body import BodyParser, body_limit, body_parser
from daemon.server._http_codec import (
    CLOSED,
    END_OF_BODY,
    NEED_DATA,
    HttpServerCodec,
    RequestHead,
    Route,
)
from daemon.server._http_errors import HttpRefusal, error_document
from daemon.server._metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from daemon.server._metrics import ServerMetrics
from daemon.server._peers import PeerLedger
from daemon.server._pipeline import Pipeline
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

#: Routes a probe may ask without a token (they disclose a status, nothing more).
_OPEN_ROUTES: Final = frozenset({Route.HEALTH, Route.READY})


def busy_answer(message: str) -> bytes:
    """A connection refused at accept (rule 4): ``503`` ``BUSY``, closing."""
    return HttpServerCodec().refuse(HttpRefusal(ErrorCode.BUSY, message), None, message)


class HttpConnection(Connection):
    """An HTTP connection's bookkeeping (the server's registry; shutdown closes idle ones)."""

    __slots__ = ("http",)

    def __init__(self, peer: str) -> None:
        super().__init__(peer)
        self.http: HttpServerCodec | None = None

    def idle(self) -> bool:
        """No request in progress and no byte of the next one received."""
        return not self.in_request and (self.http is None or self.http.idle())


class _Ended(Exception):
    """The conversation is over (answered or closed); the handler just returns."""


class HttpFrontEnd:
    """Serves admitted HTTP connections over ``pipeline`` (module rules)."""

    def __init__(
        self,
        *,
        config: ServerConfig,
        http: HttpConfig,
        pipeline: Pipeline,
        peers: PeerLedger,
        connections: set[Connection],
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
        # Rule 3: bodies in memory are bounded as binary evidence is (server and peer caps).
        self.body_slots = trio.CapacityLimiter(config.max_in_flight)
        self.body_peers = PeerLedger(
            connection_cap=config.max_connections, in_flight_cap=config.peer_in_flight_cap()
        )

    # -- connections

    async def handle(
        self, stream: trio.SocketStream, connection: Connection, requester: dict[str, Any]
    ) -> None:
        """Serve one admitted connection until it closes (rule 5)."""
        assert isinstance(connection, HttpConnection)
        requester = {**requester, "protocol": "http"}
        transport: trio.abc.Stream = stream
        codec = HttpServerCodec(
            max_header_bytes=self.http.max_header_bytes, max_headers=self.http.max_headers
        )
        connection.http = codec
        try:
            transport, requester = await self._secure(stream, connection, requester)
            await self._converse(transport, connection, codec, requester)
        except _Ended:
            pass
        except Exception as error:  # the catch-all: one bad connection never kills the server
            sys.stderr.write(
                f"evidenced: http connection {echo(requester)} failed: "
                f"{type(error).__name__}: {echo(str(error), 256)}\n"
            )
            with contextlib.suppress(Exception):
                await self._refuse(
                    transport,
                    codec,
                    requester,
                    HttpRefusal(ErrorCode.INTERNAL, f"internal error: {type(error).__name__}"),
                    audit=connection.in_request,
                )
        finally:
            self.connections.discard(connection)
            self.peers.disconnect(connection.peer)
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await transport.aclose()

    async def refuse_connection(
        self, stream: trio.SocketStream, requester: dict[str, Any], message: str, linger: bool
    ) -> None:
        """A connection over a cap that already sent bytes (rule 4): ``BUSY``, not audited."""
        try:
            if self.security.ssl_context is None:
                codec = HttpServerCodec()
                answer = await self.pipeline.refusal(
                    requester, ErrorCode.BUSY, message, audit=False
                )
                await self._send_refusal(stream, codec, answer, linger=linger)
        except Exception as error:
            sys.stderr.write(f"evidenced: refusing a connection failed: {echo(str(error))}\n")
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await stream.aclose()

    async def _secure(
        self, stream: trio.SocketStream, connection: HttpConnection, requester: dict[str, Any]
    ) -> tuple[trio.abc.Stream, dict[str, Any]]:
        """The TLS handshake under the first-request deadline (rule 2), or the plain stream."""
        context = self.security.ssl_context
        if context is None:
            return stream, requester
        tls = trio.SSLStream(stream, context, server_side=True, https_compatible=True)
        with trio.move_on_after(self._first_timeout()) as scope:
            connection.idle_scope = scope
            try:
                await tls.do_handshake()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise _Ended from None  # no TLS, no request: nothing to answer or audit
            finally:
                connection.idle_scope = None
        if scope.cancelled_caught:
            self.peers.strike(connection.peer)
            raise _Ended
        identity = peer_identity(tls)
        if identity is not None:
            requester = {**requester, "tls_client": identity}
        return tls, requester

    def _first_timeout(self) -> float:
        return min(self.config.idle_timeout, self.http.header_timeout)

    # -- the conversation

    async def _converse(
        self,
        stream: trio.abc.Stream,
        connection: HttpConnection,
        codec: HttpServerCodec,
        requester: dict[str, Any],
    ) -> None:
        pipeline = self.pipeline
        deadline = trio.current_time() + self._first_timeout()
        number = 0
        while True:
            if pipeline.draining and connection.idle():
                return
            head = await self._next_head(stream, connection, codec, requester, deadline)
            if head is None:
                return
            started = time.perf_counter_ns()
            number += 1
            asker = requester
            try:
                asker = self._authenticate(head, requester)
                if head.route is Route.SUBMIT:
                    connection.in_request = True
                    keep = await self._submit(
                        stream, connection, codec, head, asker, number, deadline, started
                    )
                    connection.in_request = False
                elif head.route is Route.BATCH:  # many pairs, one answer (daemon.server._batch)
                    connection.in_request = True
                    keep = await submit_batch(
                        self, stream, connection, codec, head, asker, number, deadline, started
                    )
                    connection.in_request = False
                else:
                    await self._read_no_body(stream, codec, deadline)
                    keep = await self._query(stream, codec, head, number)
            except HttpRefusal as refusal:
                fields: dict[str, Any] = {"request_id": number}
                if head.session is not None:
                    fields["session"] = echo(head.session)
                await self._refuse(stream, codec, asker, refusal, **fields)
                return
            if not keep or not codec.next_cycle() or pipeline.draining:
                return
            deadline = trio.current_time() + self.config.idle_timeout

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
                with trio.CancelScope(deadline=deadline) as scope:
                    connection.idle_scope = scope
                    try:
                        await self._receive(stream, codec)
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
            await self._refuse(stream, codec, requester, refusal, **fields)
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
        if self.pipeline.draining and connection.idle():
            return
        if codec.idle() and codec.requests:
            return  # a keep-alive connection that stayed idle: closed without an answer
        self.peers.strike(connection.peer)
        seconds = self.config.idle_timeout if codec.requests else self._first_timeout()
        await self._refuse(
            stream,
            codec,
            requester,
            HttpRefusal(ErrorCode.IDLE_TIMEOUT, f"no complete request head within {seconds} s"),
            audit=not codec.idle(),
        )

    def _authenticate(self, head: RequestHead, requester: dict[str, Any]) -> dict[str, Any]:
        """The requester with its token's name (``requester.token``), or UNAUTHENTICATED."""
        tokens = self.security.tokens
        if tokens is None or head.route in _OPEN_ROUTES:
            return requester
        name = tokens.name_of(bearer_token(head.authorization))
        if name is None:
            raise HttpRefusal(
                ErrorCode.UNAUTHENTICATED,
                "this listener requires Authorization: Bearer <token> with a token of its "
                "tokens_file"
                if head.authorization is None
                else "the bearer token is not one of this listener's tokens",
            )
        return {**requester, "token": name}

    async def _read_no_body(
        self, stream: trio.abc.Stream, codec: HttpServerCodec, deadline: float
    ) -> None:
        codec.accept_body(0)
        while (event := codec.next_event()) is not END_OF_BODY:
            if event is not NEED_DATA:
                raise HttpRefusal(ErrorCode.HEADER_INVALID, "this request takes no body")
            await self._receive_by(stream, codec, deadline, "the request")

    async def _query(
        self, stream: trio.abc.Stream, codec: HttpServerCodec, head: RequestHead, number: int
    ) -> bool:
        """A ``GET`` route (rule 1); True when sent."""
        route = head.route
        if route is Route.METRICS:
            data = codec.respond(200, self.metrics.exposition(), content_type=METRICS_CONTENT_TYPE)
        elif route is Route.READY:
            status, reason = self.readiness()
            if status == "serving":
                body = {"ready": True, "status": status, "reason": None}
                data = codec.respond(200, encode_header(body))
            else:
                code = ErrorCode.SHUTTING_DOWN if status == "draining" else ErrorCode.AUDIT_FAILED
                refusal = HttpRefusal(code, f"not ready: {reason or 'the server is draining'}")
                data = codec.respond(
                    503, error_document(code.name, refusal.message, None), headers=refusal.headers
                )
        else:
            request = ListSessions(number) if route is Route.SESSIONS else HealthRequest(number)
            answer = self.pipeline.answer(request)
            data = codec.respond(200, encode_header(answer.to_header()))
        return await self._send(stream, data)

    # -- submit (rule 3)

    async def _submit(
        self,
        stream: trio.abc.Stream,
        connection: HttpConnection,
        codec: HttpServerCodec,
        head: RequestHead,
        requester: dict[str, Any],
        number: int,
        deadline: float,
        started: int,
    ) -> bool:
        config = self.config
        name = head.session
        assert name is not None
        session = self.pipeline.sessions.get(name)
        if session is None:
            raise HttpRefusal(ErrorCode.UNKNOWN_SESSION, f"no session named '{echo(name, 64)}'")
        if self.pipeline.draining:
            raise HttpRefusal(ErrorCode.SHUTTING_DOWN, "the server is shutting down")
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
            f"session '{echo(name, 64)}' admits {max_items} items of {max_bytes} bytes in "
            f"total, a body of at most {limit} bytes",
        )
        peer = connection.peer
        token = object()
        try:
            self.body_slots.acquire_on_behalf_of_nowait(token)
        except trio.WouldBlock:
            raise HttpRefusal(
                ErrorCode.BUSY, f"{config.max_in_flight} requests in flight; retry later"
            ) from None
        try:
            if not self.body_peers.start_request(peer):
                raise HttpRefusal(
                    ErrorCode.BUSY,
                    f"{self.body_peers.in_flight_cap} requests in flight from this peer; "
                    "retry later",
                )
            try:
                items = await self._read_body(stream, connection, codec, parser, deadline)
                submit = Submit(number, name, items[0], items[1])
                transport = _HttpSubmit(self, stream, codec, items[2])
                return await self.pipeline.submit(
                    submit, transport, requester, peer, started=started
                )
            finally:
                self.body_peers.end_request(peer)
        finally:
            self.body_slots.release_on_behalf_of(token)

    async def _read_body(
        self,
        stream: trio.abc.Stream,
        connection: HttpConnection,
        codec: HttpServerCodec,
        parser: BodyParser,
        deadline: float,
    ) -> tuple[dict[str, Any], tuple[int, ...], tuple[bytes, ...]]:
        """(binding, item sizes, items) of the body, read under the idle deadline and the
        minimum rate (rule 2)."""
        go_on = codec.continue_bytes()
        if go_on and not await self._send(stream, go_on):
            raise HttpRefusal(ErrorCode.TRUNCATED_FRAME, "the connection broke")
        config = self.config
        begin = trio.current_time()
        while True:
            event = codec.next_event()
            if event is END_OF_BODY:
                break
            if isinstance(event, bytes):
                parser.feed(event)
                continue
            rate_deadline = (
                begin + config.evidence_grace + codec.body_bytes / (config.min_evidence_rate)
            )
            with trio.move_on_at(min(deadline, rate_deadline)):
                await self._receive(stream, codec)
                continue
            self.peers.strike(connection.peer)
            if rate_deadline < deadline:
                raise HttpRefusal(
                    ErrorCode.IDLE_TIMEOUT,
                    f"the body arrived slower than {config.min_evidence_rate} bytes/s "
                    f"({codec.body_bytes} bytes in {trio.current_time() - begin:.1f} s)",
                )
            raise HttpRefusal(
                ErrorCode.IDLE_TIMEOUT,
                f"the request was not received within {config.idle_timeout} s",
            )
        body = parser.finish()
        return body.binding, tuple(len(item) for item in body.items), body.items

    # -- bytes

    async def _receive(self, stream: trio.abc.Stream, codec: HttpServerCodec) -> None:
        """Receive what is there (waiting for it); a broken stream is its end."""
        fd = stream_fd(stream)
        if fd >= 0:
            try:
                data = os.read(fd, RECEIVE_CHUNK)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(fd)
                try:
                    data = os.read(fd, RECEIVE_CHUNK)
                except BlockingIOError:
                    return
                except OSError as error:
                    data = _broken(error)
            except OSError as error:
                data = _broken(error)
            codec.receive_data(data)
            return
        try:
            data = bytes(await stream.receive_some(RECEIVE_CHUNK))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        codec.receive_data(data)

    async def _receive_by(
        self, stream: trio.abc.Stream, codec: HttpServerCodec, deadline: float, what: str
    ) -> None:
        with trio.move_on_at(deadline):
            await self._receive(stream, codec)
            return
        raise HttpRefusal(
            ErrorCode.IDLE_TIMEOUT, f"{what} was not received within {self.config.idle_timeout} s"
        )

    async def _send(self, stream: trio.abc.Stream, data: bytes) -> bool:
        """Send ``data`` (:func:`daemon.server._fastpath.send`); False when the peer is gone."""
        return await send(stream, data, stream_fd(stream))

    # -- refusals (rule 4)

    async def _refuse(
        self,
        stream: trio.abc.Stream,
        codec: HttpServerCodec,
        requester: dict[str, Any],
        refusal: HttpRefusal,
        *,
        audit: bool = True,
        request_id: int | None = None,
        **fields: Any,
    ) -> None:
        """Audit (``audit``) and answer ``refusal``; the connection ends after it."""
        answer = await self.pipeline.refusal(
            requester, refusal.code, refusal.message, request_id=request_id, audit=audit, **fields
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
            refusal = HttpRefusal(code, answer.message)
        data = codec.refuse(refusal, answer.decision_id, answer.message)
        if await self._send(stream, data) and linger:
            await half_close_and_drain(stream)


class _HttpSubmit:
    """The HTTP front end's side of one submit (:class:`~daemon.server._pipeline.SubmitTransport`):
    the items were read (and bounded) before the pipeline ran."""

    __slots__ = ("codec", "front", "items", "stream")

    def __init__(
        self,
        front: HttpFrontEnd,
        stream: trio.abc.Stream,
        codec: HttpServerCodec,
        items: tuple[bytes, ...],
    ) -> None:
        self.front = front
        self.stream = stream
        self.codec = codec
        self.items = items

    async def read_evidence(self) -> tuple[bytes, ...]:
        items, self.items = self.items, ()
        return items

    def encode(self, answer: Decision) -> bytes:
        return self.codec.respond(200, encode_header(answer.to_header()))

    async def send(self, data: bytes) -> bool:
        return await self.front._send(self.stream, data)

    async def refuse(self, answer: ErrorResponse) -> None:
        await self.front._send_refusal(self.stream, self.codec, answer)


def _broken(error: OSError) -> bytes:
    if error.errno in (errno.EBADF, errno.ENOTSOCK):
        raise trio.ClosedResourceError("this socket was already closed") from None
    return b""  # a reset: the end of the stream (the codec decides what it cut)
