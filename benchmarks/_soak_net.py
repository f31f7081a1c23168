"""The chaos soak's network pieces on real sockets (``benchmarks/soak.py``).

1. :class:`S3Proxy`: a fault-injecting TCP proxy in front of the S3 endpoint (``pass``,
   ``stall``, ``error``).
2. :class:`ForwardingProxy`: an HTTP forwarding proxy in front of the daemon, as nginx with
   ``proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for`` is: each client connection
   gets an upstream connection of its own from one source address (the one ``[http]
   trusted_proxies`` names), and each request's head gets ``X-Forwarded-For: <the client's
   address>`` appended; answers are relayed as they come. Requests carry ``Content-Length``
   (the soak's clients do); a chunked one closes the connection.
3. :func:`connect_from` opens a TCP connection from a chosen loopback address (127.0.0.x: every
   one of them is this host), :func:`request` writes one HTTP/1.1 request and
   :func:`read_answer` reads one answer (status and body, by ``Content-Length``), so a fault
   can speak as many distinct clients as it needs.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import Callable
from typing import Final

import trio

__all__ = ["ForwardingProxy", "S3Proxy", "connect_from", "read_answer", "request"]

#: The longest request or answer head either side reads.
MAX_HEAD: Final = 65536


async def connect_from(source: str, address: tuple[str, int]) -> trio.SocketStream:
    """A TCP connection to ``address`` from ``source`` (an IPv4 address of this host)."""
    sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        await sock.bind((source, 0))
        await sock.connect(address)
    except BaseException:
        sock.close()
        raise
    return trio.SocketStream(sock)


def request(
    method: str,
    path: str,
    *,
    token: str | None = None,
    body: bytes = b"",
    close: bool = True,
) -> bytes:
    """One HTTP/1.1 request (``Connection: close`` unless ``close`` is false)."""
    head = f"{method} {path} HTTP/1.1\r\nHost: soak\r\n"
    if token is not None:
        head += f"Authorization: Bearer {token}\r\n"
    if body or method == "POST":
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    if close:
        head += "Connection: close\r\n"
    return head.encode() + b"\r\n" + body


async def read_answer(stream: trio.SocketStream) -> tuple[int, bytes]:
    """One answer's status and body (by ``Content-Length``; else to the end of the
    stream). Raises ``trio.BrokenResourceError`` when the stream ends before a head."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(MAX_HEAD)
        if not chunk or len(data) > MAX_HEAD:
            raise trio.BrokenResourceError("the connection ended before an answer")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = _content_length(lines[1:])
    while length is None or len(body) < length:
        chunk = await stream.receive_some(MAX_HEAD)
        if not chunk:
            break
        body += chunk
    return status, body if length is None else body[:length]


def _content_length(fields: list[bytes]) -> int | None:
    for field in fields:
        name, _, value = field.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return None


async def _pump(source: trio.SocketStream, sink: trio.SocketStream) -> None:
    """Relay ``source`` to ``sink`` until ``source`` ends, then end ``sink``'s side."""
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        while data := await source.receive_some(65536):
            await sink.send_all(data)
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        await sink.send_eof()


class S3Proxy:
    """A TCP proxy in front of moto, switched between ``pass`` (relay both ways), ``stall``
    (accept, read, never answer) and ``error`` (answer each request ``503`` or reset the
    connection, alternately). Switching closes every connection of the mode before (the
    SDK's pooled keep-alive connections included), so the new mode applies to the next
    request at once."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.mode = "pass"
        self.port = 0
        self.connections = 0
        self._changed = trio.Event()
        self._errors = 0

    def switch(self, mode: str) -> None:
        self.mode = mode
        self._changed.set()
        self._changed = trio.Event()

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._connection, listeners)

    async def _connection(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        changed = self._changed
        async with trio.open_nursery() as nursery:

            async def until_switched() -> None:
                await changed.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(until_switched)
            try:
                if self.mode == "pass":
                    await self._relay(stream)
                elif self.mode == "stall":
                    while await stream.receive_some(65536):
                        pass  # read and never answer
                else:
                    await self._error(stream)
            except (trio.BrokenResourceError, OSError):
                pass
            nursery.cancel_scope.cancel()
        with contextlib.suppress(trio.BrokenResourceError, OSError):
            await stream.aclose()

    async def _relay(self, stream: trio.SocketStream) -> None:
        upstream = await trio.open_tcp_stream(*self.upstream)
        try:
            async with trio.open_nursery() as pumps:
                pumps.start_soon(_pump, stream, upstream)
                pumps.start_soon(_pump, upstream, stream)
        finally:
            with contextlib.suppress(trio.BrokenResourceError, OSError):
                await upstream.aclose()

    async def _error(self, stream: trio.SocketStream) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            data = await stream.receive_some(65536)
            if not data:
                return
            head += data
        self._errors += 1
        if self._errors % 2:
            body = b"<Error><Code>ServiceUnavailable</Code><Message>soak</Message></Error>"
            await stream.send_all(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n"
                b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
            )
        else:  # a reset: linger 0, then close
            stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


class ForwardingProxy:
    """An HTTP forwarding proxy that names each client in ``X-Forwarded-For`` (module rule
    2). ``upstream`` is called for each connection (the daemon's address changes when it is
    restarted); ``source`` is the address the proxy connects from."""

    def __init__(self, upstream: Callable[[], tuple[str, int]], source: str) -> None:
        self.upstream = upstream
        self.source = source
        self.port = 0
        self.connections = 0
        self.requests = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._connection, listeners)

    async def _connection(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        client = stream.socket.getpeername()[0]
        try:
            upstream = await connect_from(self.source, self.upstream())
        except OSError:
            await stream.aclose()
            return
        try:
            async with trio.open_nursery() as nursery:

                async def requests() -> None:
                    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                        await self._requests(stream, upstream, client)
                    nursery.cancel_scope.cancel()

                async def answers() -> None:
                    await _pump(upstream, stream)
                    nursery.cancel_scope.cancel()

                nursery.start_soon(requests)
                nursery.start_soon(answers)
        finally:
            for side in (upstream, stream):
                with contextlib.suppress(trio.BrokenResourceError, OSError):
                    await side.aclose()

    async def _requests(
        self, stream: trio.SocketStream, upstream: trio.SocketStream, client: str
    ) -> None:
        """Each request of the connection: its head with the client appended, its body."""
        buffer = b""
        while True:
            while b"\r\n\r\n" not in buffer:
                data = await stream.receive_some(65536)
                if not data or len(buffer) > MAX_HEAD:
                    return
                buffer += data
            head, buffer = buffer.split(b"\r\n\r\n", 1)
            fields = head.split(b"\r\n")[1:]
            if any(f.partition(b":")[0].strip().lower() == b"transfer-encoding" for f in fields):
                return  # not for this proxy (module rule 2)
            length = _content_length(fields) or 0
            forwarded = b"\r\nX-Forwarded-For: " + client.encode() + b"\r\n\r\n"
            body, buffer = buffer[:length], buffer[length:]
            await upstream.send_all(head + forwarded + body)
            remaining = length - len(body)
            while remaining > 0:
                data = await stream.receive_some(min(65536, remaining))
                if not data:
                    return
                await upstream.send_all(data)
                remaining -= len(data)
            self.requests += 1
