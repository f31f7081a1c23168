"""The binary protocol's async transport on anyio: one kept connection, under asyncio or trio.

Rules (the contract):

1. :meth:`Evd1Connection.call` runs one :class:`~daemon.client._evd1_calls.Call`: connects if
   there is no usable connection (TCP, TLS or a Unix socket within ``connect_timeout``, the
   TLS handshake and the ``hello`` answer included; the ``hello`` carries ``token``), sends the
   request and its evidence and reads the answer, all within ``request_timeout``. One call
   at a time (a lock serialises concurrent callers).
2. The connection is kept between calls and replaced, before anything is sent on it, when it
   cannot carry the next request: it ended in a failure or an ``error`` frame (the server
   closes after one, ``docs/protocol.md`` §3), it has been idle longer than
   ``keepalive_expiry`` (the daemon's ``idle_timeout`` closes idle connections: 30 s by
   default), or the server has sent something unasked (only an ``error`` frame or the end of
   the connection can come unasked). Replacing it sends nothing of the request, so it is
   never a retry.
3. Errors (:mod:`daemon.client._outcomes`): cannot connect or the connection broke is
   :class:`TransportError`; a deadline passed :class:`ClientTimeout`; an ``error`` frame its
   :class:`RejectedError`; bytes that break the protocol :class:`ServerProtocolError`. The
   send may fail because the server refused early and closed: its ``error`` frame, when it is
   waiting, is the answer. After any of them the connection is closed (the next call opens
   a new one); after a protocol error too.
"""

from __future__ import annotations

import contextlib
import itertools
import select
import ssl
from typing import TypeVar

import anyio
import anyio.abc
from anyio.streams.tls import TLSStream

from daemon.client import _evd1_calls as calls
from daemon.client._evd1_calls import Call
from daemon.client._outcomes import (
    ClientTimeout,
    ServerProtocolError,
    TransportError,
)
from daemon.client._targets import Target
from daemon.wire._protocol import (
    CLOSED,
    NEED_DATA,
    ClientConnection,
    Closed,
    HelloAccepted,
    NeedData,
    ProtocolError,
    ServerResponse,
)

__all__ = ["Evd1Connection"]

T = TypeVar("T")
_RECEIVE = 65536
_BROKEN = (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError)


class Evd1Connection:
    """The kept EVD1 connection of an async client (module rules)."""

    def __init__(
        self,
        target: Target,
        *,
        ssl_context: ssl.SSLContext | None,
        token: str | None,
        connect_timeout: float,
        request_timeout: float,
        keepalive_expiry: float,
        max_response_header_bytes: int,
    ) -> None:
        self._target = target
        self._ssl_context = ssl_context
        self._token = token
        self._connect_timeout = connect_timeout
        self._request_timeout = request_timeout
        self._keepalive_expiry = keepalive_expiry
        self._max_header_bytes = max_response_header_bytes
        self._stream: anyio.abc.ByteStream | None = None
        self._conn = ClientConnection(max_header_bytes=max_response_header_bytes)
        self._ids = itertools.count(1)
        self._idle_since = 0.0
        self._lock = anyio.Lock()
        #: The server's ``hello`` answer on the current connection.
        self.server: HelloAccepted | None = None
        #: Connections opened so far (a test reads it).
        self.opened = 0

    async def call(self, call: Call[T]) -> T:
        """The result of ``call`` (rules 1-3)."""
        async with self._lock:
            await self._usable()
            return await self._exchange(call, self._request_timeout)

    async def connect(self) -> HelloAccepted:
        """Connect now (rule 1) unless a usable connection is open; the ``hello`` answer."""
        async with self._lock:
            await self._usable()
            assert self.server is not None
            return self.server

    async def _usable(self) -> None:
        if self._stream is not None and (
            anyio.current_time() - self._idle_since > self._keepalive_expiry
            or _has_unasked_bytes(self._stream)
        ):
            await self.aclose()  # rule 2: nothing of the next request was sent on it
        if self._stream is None:
            await self._open()

    async def _open(self) -> None:
        with anyio.move_on_after(self._connect_timeout):
            self._stream = await self._connect()
        if self._stream is None:
            raise ClientTimeout(f"no connection within {self._connect_timeout} s")
        self.opened += 1
        self._conn = ClientConnection(max_header_bytes=self._max_header_bytes)
        try:
            hello = calls.hello(self._token)
            self.server = await self._exchange(hello, self._connect_timeout, hello=True)
        except BaseException:
            await self.aclose()
            raise

    async def _connect(self) -> anyio.abc.ByteStream:
        target = self._target
        try:
            if target.scheme == "unix":
                assert target.path is not None
                return await anyio.connect_unix(target.path)
            assert target.host is not None and target.port is not None
            stream: anyio.abc.ByteStream = await anyio.connect_tcp(target.host, target.port)
        except OSError as error:
            raise TransportError(f"cannot connect to {target}: {error.strerror or error}") from None
        if self._ssl_context is None:
            return stream
        try:
            return await TLSStream.wrap(
                stream,
                hostname=target.host,
                ssl_context=self._ssl_context,
                standard_compatible=True,
            )
        except (ssl.SSLError, *_BROKEN) as error:
            await anyio.aclose_forcefully(stream)
            raise TransportError(f"TLS handshake with {target} failed: {error}") from None

    async def _exchange(self, call: Call[T], seconds: float, *, hello: bool = False) -> T:
        assert self._stream is not None
        request_id = 0 if hello else next(self._ids)
        request, evidence = call.build(request_id)
        try:
            payload = self._conn.send(request, evidence)
        except ValueError as error:
            raise TypeError(f"binding cannot be sent: {error}") from None
        stream = self._stream
        self._stream = None  # until the exchange completes normally (rule 2)
        try:
            with anyio.fail_after(seconds):
                response = await self._send_and_read(stream, payload)
        except TimeoutError:
            await anyio.aclose_forcefully(stream)
            raise ClientTimeout(f"no answer within {seconds} s") from None
        except BaseException:
            await anyio.aclose_forcefully(stream)
            raise
        try:
            result = call.read(response, request_id)
        except BaseException:  # an error frame (its connection's last) or a wrong answer
            await anyio.aclose_forcefully(stream)
            raise
        self._stream = stream
        self._idle_since = anyio.current_time()
        return result

    async def _send_and_read(self, stream: anyio.abc.ByteStream, payload: bytes) -> ServerResponse:
        send_error: BaseException | None = None
        try:
            await stream.send(payload)
        except _BROKEN as error:
            # The server may have refused early and closed; its error frame may be waiting.
            send_error = error
        try:
            return await self._read_response(stream)
        except TransportError:
            if send_error is not None:
                raise TransportError(f"connection lost: {send_error}") from None
            raise

    async def _read_response(self, stream: anyio.abc.ByteStream) -> ServerResponse:
        while True:
            try:
                event = self._conn.next_event()
            except ProtocolError as error:
                raise ServerProtocolError(f"{error.code.name}: {error.message}") from None
            if event is NEED_DATA:
                try:
                    data = await stream.receive(_RECEIVE)
                except anyio.EndOfStream:
                    data = b""
                except _BROKEN as error:
                    raise TransportError(f"connection lost: {error}") from None
                self._conn.receive_data(bytes(data))
                continue
            if event is CLOSED:
                raise TransportError("the server closed the connection")
            assert not isinstance(event, NeedData | Closed)
            return event

    async def aclose(self) -> None:
        stream, self._stream = self._stream, None
        self.server = None
        if stream is not None:
            with anyio.CancelScope(shield=True), contextlib.suppress(*_BROKEN):
                await stream.aclose()


def _has_unasked_bytes(stream: anyio.abc.ByteStream) -> bool:
    """Whether the server sent something (or closed) while the connection was idle (rule 2)."""
    raw = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
    if raw is None:
        return False
    try:
        readable, _, _ = select.select([raw], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
