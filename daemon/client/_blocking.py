"""The blocking one-shot client: the binary protocol over a plain socket, no event loop.

For a command line that makes one or two calls and exits (``evidenced submit``, ``sessions``,
``health``): importing it loads neither ``trio`` nor the HTTP client, so a one-shot call costs
the codec and the socket, not an event loop's start-up (docs/benchmarks.md, "The CLI's
imports").

Rules (the contract):

1. The same protocol and the same meaning as the trio client (``daemon.client._client``
   rules 1-3): one codec (:class:`daemon.wire._protocol.ClientConnection`), the same ``hello``
   (with ``token``), the same typed errors, results and answer checks
   (:mod:`daemon.client._outcomes`) with the same messages. Only the binary protocol:
   ``unix:``, ``tcp://`` and ``tls://`` targets (``ValueError`` for ``http``/``https``: the
   trio clients speak HTTP).
2. :func:`open_blocking_client` connects within ``connect_timeout``, the TLS handshake included
   (stdlib :mod:`ssl`, the context of :func:`daemon.config._tls.client_context` or
   ``ssl_context``), and has ``connect_timeout`` again for the ``hello`` answer (as the trio
   client); every later request, sent and answered, has ``request_timeout``. A deadline passed
   is :class:`ClientTimeout`.
3. After any error the client is closed for further calls; leaving the ``with`` block closes
   the socket.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import socket
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from daemon.client._outcomes import (
    CLIENT_NAME,
    ClientTimeout,
    ServerProtocolError,
    SubmitResult,
    TransportError,
    check_answer,
    decision_result,
    raise_for,
    submit_request,
)
from daemon.client._targets import Target
from daemon.wire._protocol import (
    CLOSED,
    DEFAULT_MAX_RESPONSE_HEADER_BYTES,
    NEED_DATA,
    SUPPORTED_VERSIONS,
    ClientConnection,
    ClientRequest,
    Closed,
    ErrorResponse,
    HealthReport,
    HealthRequest,
    Hello,
    HelloAccepted,
    ListSessions,
    NeedData,
    ProtocolError,
    ServerResponse,
    SessionList,
)
from session import BoundProposition

if TYPE_CHECKING:  # ssl loads for a tls:// target only
    import ssl

__all__ = ["BlockingClient", "open_blocking_client"]

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


class BlockingClient:
    """A connected blocking client; create with :func:`open_blocking_client`."""

    def __init__(
        self,
        sock: socket.socket,
        *,
        request_timeout: float,
        max_response_header_bytes: int = DEFAULT_MAX_RESPONSE_HEADER_BYTES,
        token: str | None = None,
    ) -> None:
        self._sock = sock
        self._conn = ClientConnection(max_header_bytes=max_response_header_bytes)
        self._request_timeout = request_timeout
        self._token = token
        self._ids = itertools.count(1)
        self._broken = False
        self.server: HelloAccepted | None = None

    def _read_response(self, deadline: _Deadline) -> ServerResponse:
        while True:
            try:
                event = self._conn.next_event()
            except ProtocolError as error:
                raise ServerProtocolError(f"{error.code.name}: {error.message}") from None
            if event is NEED_DATA:
                deadline.arm(self._sock)
                try:
                    data = self._sock.recv(_READ_SIZE)
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

    def _exchange(
        self, request: ClientRequest, evidence: tuple[bytes, ...] = (), *, seconds: float = 0.0
    ) -> ServerResponse:
        if self._broken:
            raise TransportError("the connection is closed after an earlier failure")
        try:
            payload = self._conn.send(request, evidence)
        except ValueError as error:
            raise TypeError(f"binding cannot be sent: {error}") from None
        self._broken = True  # until the exchange completes normally
        seconds = seconds or self._request_timeout
        deadline = _Deadline(seconds, f"no answer within {seconds} s")
        send_error: OSError | None = None
        try:
            deadline.arm(self._sock)
            self._sock.sendall(payload)
        except TimeoutError:
            raise ClientTimeout(deadline.message) from None
        except OSError as error:
            # The server may have refused early and closed; its error frame may be waiting.
            send_error = error
        try:
            response = self._read_response(deadline)
        except TransportError as error:
            if send_error is not None and not isinstance(error, ClientTimeout):
                raise TransportError(_lost(send_error)) from None
            raise
        if isinstance(response, ErrorResponse):
            raise_for(response)
        self._broken = False
        return response

    def hello(self, seconds: float) -> HelloAccepted:
        """The handshake, answered within ``seconds`` (the connect timeout)."""
        hello = Hello(SUPPORTED_VERSIONS, CLIENT_NAME, self._token)
        response = self._exchange(hello, seconds=seconds)
        if not isinstance(response, HelloAccepted):
            raise ServerProtocolError("the server did not answer hello")
        self.server = response
        return response

    def list_sessions(self) -> list[dict[str, Any]]:
        """The hosted sessions: name, bounds, mechanisms (id, digest, catalog entry)."""
        request_id = next(self._ids)
        response = self._exchange(ListSessions(request_id))
        return check_answer(response, SessionList, request_id, "list").sessions

    def health(self) -> dict[str, Any]:
        """The server's health status and counters."""
        request_id = next(self._ids)
        response = self._exchange(HealthRequest(request_id))
        return check_answer(response, HealthReport, request_id, "health").status

    def submit(
        self, session: str, binding: BoundProposition | dict[str, Any], evidence: Sequence[bytes]
    ) -> SubmitResult:
        """Submit ``evidence`` (raw bytes, in order) for ``binding`` in ``session``."""
        request_id = next(self._ids)
        request, items = submit_request(request_id, session, binding, evidence)
        return decision_result(self._exchange(request, items), request_id)

    def close(self) -> None:
        self._sock.close()


def _lost(error: OSError) -> str:
    # The trio client's words for a broken stream, so both clients print the same error.
    return f"connection lost: socket connection broken: {error}"


@contextlib.contextmanager
def open_blocking_client(
    target: Target,
    *,
    token: str | None = None,
    tls_ca: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    ssl_context: ssl.SSLContext | None = None,
    connect_timeout: float = 5.0,
    request_timeout: float = 60.0,
    max_response_header_bytes: int = DEFAULT_MAX_RESPONSE_HEADER_BYTES,
) -> Iterator[BlockingClient]:
    """Connect (rule 2), handshake, yield a :class:`BlockingClient`, close on exit."""
    if target.http:
        raise ValueError(f"{target}: the blocking client speaks the binary protocol only")
    for value in (connect_timeout, request_timeout):
        if not math.isfinite(value) or value <= 0:
            raise ValueError("timeouts must be positive numbers of seconds")
    if target.tls and ssl_context is None:
        from daemon.config._tls import client_context

        ssl_context = client_context(ca=tls_ca, cert=tls_cert, key=tls_key)
    deadline = _Deadline(connect_timeout, f"no connection within {connect_timeout} s")
    sock = _connect(target, ssl_context, deadline)
    client = BlockingClient(
        sock,
        request_timeout=request_timeout,
        max_response_header_bytes=max_response_header_bytes,
        token=token,
    )
    try:
        client.hello(connect_timeout)
        yield client
    finally:
        client.close()


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
