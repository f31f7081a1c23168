"""The binary protocol's blocking transport: one kept connection over a plain socket, no event
loop.

For :class:`daemon.client._sync.SyncClient` over ``unix:``, ``tcp://`` and ``tls://``, and so
for the command line's ``submit``, ``sessions`` and ``health``: importing it loads neither an
event loop nor the HTTP client (nor :mod:`ssl` until a ``tls://`` target is reached), so a
one-shot call costs the codec and the socket (docs/benchmarks.md, "The CLI's imports").

Rules (the contract):

1. The same protocol and the same meaning as the async transport
   (:mod:`daemon.client._evd1_async`): one codec
   (:class:`daemon.wire._protocol.ClientConnection`), the same ``hello`` (with ``token``), the
   same calls (:mod:`daemon.client._evd1_calls`), errors and messages. Only the binary
   protocol (``ValueError`` for an HTTP target).
2. A connection is opened within ``connect_timeout``, the TLS handshake included (stdlib
   :mod:`ssl`, the caller's context), and has ``connect_timeout`` again for the ``hello``
   answer; every request, sent and answered, has ``request_timeout``. A deadline passed is
   :class:`ClientTimeout`.
3. The connection is kept between calls and replaced, before anything is sent on it, when it
   ended in a failure or an ``error`` frame, has been idle longer than ``keepalive_expiry``,
   or the server sent something unasked (the async transport's rule 2). :meth:`close` closes
   it.
"""

from __future__ import annotations

import itertools
import select
import socket
import time
from typing import TYPE_CHECKING, Any, TypeVar

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
    DEFAULT_MAX_RESPONSE_HEADER_BYTES,
    NEED_DATA,
    ClientConnection,
    Closed,
    HelloAccepted,
    NeedData,
    ProtocolError,
    ServerResponse,
)

if TYPE_CHECKING:  # ssl loads for a tls:// target only
    import ssl

__all__ = ["BlockingConnection"]

T = TypeVar("T")
_READ_SIZE = 65536


class _Deadline:
    """A monotonic deadline; :meth:`arm` gives a socket what is left of it, or raises."""

    def __init__(self, seconds: float, message: str) -> None:
        self._at = time.monotonic() + seconds
        self.message = message

    def arm(self, sock: socket.socket) -> None:
        left = self._at - time.monotonic()
        if left <= 0:
            raise ClientTimeout(self.message)
        sock.settimeout(left)


class BlockingConnection:
    """The kept EVD1 connection of a blocking client (module rules)."""

    def __init__(
        self,
        target: Target,
        *,
        ssl_context: ssl.SSLContext | None = None,
        token: str | None = None,
        connect_timeout: float = 5.0,
        request_timeout: float = 60.0,
        keepalive_expiry: float = 5.0,
        max_response_header_bytes: int = DEFAULT_MAX_RESPONSE_HEADER_BYTES,
    ) -> None:
        if target.http:
            raise ValueError(f"{target}: the blocking connection speaks the binary protocol")
        self._target = target
        self._ssl_context = ssl_context
        self._token = token
        self._connect_timeout = connect_timeout
        self._request_timeout = request_timeout
        self._keepalive_expiry = keepalive_expiry
        self._max_header_bytes = max_response_header_bytes
        self._sock: socket.socket | None = None
        self._conn = ClientConnection(max_header_bytes=max_response_header_bytes)
        self._ids = itertools.count(1)
        self._idle_since = 0.0
        #: The server's ``hello`` answer on the current connection.
        self.server: HelloAccepted | None = None
        #: Connections opened so far (a test reads it).
        self.opened = 0

    def call(self, call: Call[T]) -> T:
        """The result of ``call`` (rules 1-3)."""
        self._usable()
        return self._exchange(call, self._request_timeout)

    def connect(self) -> HelloAccepted:
        """Connect now (rule 2) unless a usable connection is open; the ``hello`` answer."""
        self._usable()
        assert self.server is not None
        return self.server

    def _usable(self) -> None:
        sock = self._sock
        if sock is not None and (
            time.monotonic() - self._idle_since > self._keepalive_expiry or _unasked(sock)
        ):
            self.close()  # rule 3: nothing of the next request was sent on it
        if self._sock is None:
            self._open()

    def _open(self) -> None:
        deadline = _Deadline(
            self._connect_timeout, f"no connection within {self._connect_timeout} s"
        )
        self._sock = _connect(self._target, self._ssl_context, deadline)
        self.opened += 1
        self._conn = ClientConnection(max_header_bytes=self._max_header_bytes)
        try:
            self.server = self._exchange(
                calls.hello(self._token), self._connect_timeout, hello=True
            )
        except BaseException:
            self.close()
            raise

    def _read_response(self, sock: socket.socket, deadline: _Deadline) -> ServerResponse:
        while True:
            try:
                event = self._conn.next_event()
            except ProtocolError as error:
                raise ServerProtocolError(f"{error.code.name}: {error.message}") from None
            if event is NEED_DATA:
                deadline.arm(sock)
                try:
                    data = sock.recv(_READ_SIZE)
                except TimeoutError:
                    raise ClientTimeout(deadline.message) from None
                except OSError as error:
                    raise TransportError(_lost(error)) from None
                self._conn.receive_data(data)
                continue
            if event is CLOSED:
                raise TransportError("the server closed the connection")
            assert not isinstance(event, NeedData | Closed)
            return event

    def _exchange(self, call: Call[T], seconds: float, *, hello: bool = False) -> T:
        assert self._sock is not None
        request_id = 0 if hello else next(self._ids)
        request, evidence = call.build(request_id)
        try:
            payload = self._conn.send(request, evidence)
        except ValueError as error:
            raise TypeError(f"binding cannot be sent: {error}") from None
        sock, self._sock = self._sock, None  # until the exchange completes normally (rule 3)
        try:
            response = self._send_and_read(sock, payload, seconds)
            result = call.read(response, request_id)
        except BaseException:  # a failure, an error frame (its connection's last), a bad answer
            sock.close()
            raise
        self._sock = sock
        self._idle_since = time.monotonic()
        return result

    def _send_and_read(self, sock: socket.socket, payload: bytes, seconds: float) -> ServerResponse:
        deadline = _Deadline(seconds, f"no answer within {seconds} s")
        send_error: OSError | None = None
        try:
            deadline.arm(sock)
            sock.sendall(payload)
        except TimeoutError:
            raise ClientTimeout(deadline.message) from None
        except OSError as error:
            # The server may have refused early and closed; its error frame may be waiting.
            send_error = error
        try:
            return self._read_response(sock, deadline)
        except TransportError as error:
            if send_error is not None and not isinstance(error, ClientTimeout):
                raise TransportError(_lost(send_error)) from None
            raise

    def close(self) -> None:
        sock, self._sock = self._sock, None
        self.server = None
        if sock is not None:
            sock.close()


def _unasked(sock: socket.socket) -> bool:
    """Whether the server sent something (or closed) while the connection was idle (rule 3)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _lost(error: OSError) -> str:
    # The trio client's words for a broken stream, so both clients print the same error.
    return f"connection lost: socket connection broken: {error}"


def _connect(target: Target, context: ssl.SSLContext | None, deadline: _Deadline) -> socket.socket:
    """The connected (and, for TLS, handshaken) socket to ``target``."""
    if target.scheme == "unix":
        assert target.path is not None
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        _connect_one(unix, target.path, target, deadline)
        return unix
    assert target.host is not None and target.port is not None
    try:
        found = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except OSError as error:
        raise TransportError(f"cannot connect to {target}: {error.strerror or error}") from None
    sock: socket.socket | None = None
    for family, kind, protocol, _, address in found:
        candidate = socket.socket(family, kind, protocol)
        try:
            _connect_one(candidate, address, target, deadline)
        except ClientTimeout:
            raise
        except TransportError:
            continue
        sock = candidate
        break
    if sock is None:
        # trio's words when every address refused (the trio client prints the same).
        host = f"[{target.host}]" if ":" in target.host else target.host
        message = f"all attempts to connect to {host}:{target.port} failed"
        raise TransportError(f"cannot connect to {target}: {message}")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if context is None:
        return sock
    try:
        deadline.arm(sock)
        tls = context.wrap_socket(sock, server_hostname=target.host)
    except TimeoutError:
        sock.close()
        raise ClientTimeout(deadline.message) from None
    except OSError as error:
        sock.close()
        raise TransportError(f"TLS handshake with {target} failed: {error}") from None
    return tls


def _connect_one(sock: socket.socket, address: Any, target: Target, deadline: _Deadline) -> None:
    try:
        deadline.arm(sock)
        sock.connect(address)
    except TimeoutError:
        sock.close()
        raise ClientTimeout(deadline.message) from None
    except OSError as error:
        sock.close()
        raise TransportError(f"cannot connect to {target}: {error.strerror or error}") from None
    except BaseException:
        sock.close()
        raise
