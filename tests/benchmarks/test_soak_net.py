"""The chaos soak's forwarding proxy (``benchmarks/_soak_net.py``) names each client, as the
daemon's ``trusted_proxies`` expects: were a request let through without ``X-Forwarded-For``,
or with another client's address, the soak's ``proxied_bad_client`` fault would strike the
proxy's own address and its figures would say nothing about the daemon.

Real sockets on loopback: an upstream that records what reaches it, clients on their own
127.0.0.x addresses.
"""

from __future__ import annotations

import trio
from _soak_net import ForwardingProxy, connect_from, read_answer, request


class Upstream:
    """Answers every request ``200`` with its own head and body echoed, on keep-alive
    connections, and records the peer each came from."""

    def __init__(self) -> None:
        self.port = 0
        self.peers: list[str] = []

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._connection, listeners)

    async def _connection(self, stream: trio.SocketStream) -> None:
        self.peers.append(stream.socket.getpeername()[0])
        buffer = b""
        while True:
            while b"\r\n\r\n" not in buffer:
                data = await stream.receive_some(65536)
                if not data:
                    return
                buffer += data
            head, buffer = buffer.split(b"\r\n\r\n", 1)
            length = 0
            for field in head.split(b"\r\n")[1:]:
                name, _, value = field.partition(b":")
                if name.lower() == b"content-length":
                    length = int(value)
            while len(buffer) < length:
                data = await stream.receive_some(65536)
                if not data:
                    return
                buffer += data
            body, buffer = buffer[:length], buffer[length:]
            echo = head + b"\r\n\r\n" + body
            await stream.send_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(echo), echo)
            )


async def test_forwarding_proxy_names_each_client_on_every_request_of_a_kept_connection() -> None:
    upstream = Upstream()
    async with trio.open_nursery() as nursery:
        await nursery.start(upstream.serve)
        proxy = ForwardingProxy(lambda: ("127.0.0.1", upstream.port), "127.0.0.9")
        await nursery.start(proxy.serve)
        echoes = []
        for source in ("127.0.0.66", "127.0.0.77"):
            stream = await connect_from(source, ("127.0.0.1", proxy.port))
            for number in range(2):  # two requests on one kept connection
                body = b'{"n": %d, "from": "%s"}' % (number, source.encode())
                await stream.send_all(request("POST", "/v1/x", token="t", body=body, close=False))
                status, echo = await read_answer(stream)
                assert status == 200
                echoes.append((source, body, echo))
            await stream.aclose()
        nursery.cancel_scope.cancel()
    for source, body, echo in echoes:
        head, _, relayed = echo.partition(b"\r\n\r\n")
        assert relayed == body  # the body exactly, after its head
        forwarded = [f for f in head.split(b"\r\n") if f.lower().startswith(b"x-forwarded-for:")]
        assert forwarded == [b"X-Forwarded-For: " + source.encode()]
    assert upstream.peers == ["127.0.0.9", "127.0.0.9"]  # one upstream connection each
    assert proxy.requests == 4


async def test_forwarding_proxy_closes_a_chunked_request_unforwarded() -> None:
    upstream = Upstream()
    async with trio.open_nursery() as nursery:
        await nursery.start(upstream.serve)
        proxy = ForwardingProxy(lambda: ("127.0.0.1", upstream.port), "127.0.0.9")
        await nursery.start(proxy.serve)
        stream = await connect_from("127.0.0.66", ("127.0.0.1", proxy.port))
        await stream.send_all(
            b"POST /v1/x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3\r\nabc\r\n0\r\n\r\n"
        )
        assert await stream.receive_some(65536) == b""
        await stream.aclose()
        nursery.cancel_scope.cancel()
    assert proxy.requests == 0
