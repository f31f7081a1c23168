"""Connection slots under a flood of idle connections (daemon/server/_table.py), tried as an
attacker would: real servers on loopback, real sockets, several peers as distinct loopback
addresses (127.0.0.2-5), since a peer is a host.

Each test failed on the code before the connection table: a full table refused every
newcomer ``BUSY`` whatever the connections holding it were doing, TCP could take every slot
the Unix socket needed, and a peer at its share was refused even when its own connections
sat idle.
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from daemon_testkit import bytes_binding

from daemon import Server, ServerConfig, open_client, open_server
from daemon.config._hosting import HostedSession
from daemon.config._http_config import HttpConfig
from daemon.config._security import ListenerSecurity
from daemon.config._tokens import token_line
from session import BytesDigestMechanism

TOKEN = "the-one-good-token-of-this-test-0123456789abcdef"


@asynccontextmanager
async def daemon(directory: Path, **options: Any) -> AsyncIterator[Server]:
    """A server with a tokens_file on its HTTP listener, a binary TCP listener and a Unix
    socket."""
    tokens = directory / "tokens"
    tokens.write_text(f"{token_line(TOKEN, 'good')}\n")
    os.chmod(tokens, 0o600)
    security = ListenerSecurity(None, str(tokens))
    config = ServerConfig(
        tcp=("127.0.0.1", 0),
        unix=str(directory / "sock"),
        audit_path=str(directory / "audit.jsonl"),
        worker_processes=1,
        security=security,
        http=HttpConfig(listen=("127.0.0.1", 0), security=security),
        **options,
    )
    session = HostedSession("bytes", (BytesDigestMechanism(),), 1, 1 << 20)
    async with open_server([session], config) as server:
        yield server


def sessions_request(token: str = TOKEN) -> bytes:
    return f"GET /v1/sessions HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {token}\r\n\r\n".encode()


async def read_head(stream: trio.SocketStream) -> bytes:
    """One answer's head and body (by Content-Length); b"" if the server closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += await stream.receive_some(65536)
    return head


async def idle_keep_alive(address: tuple[str, int], source: str) -> trio.SocketStream:
    """A connection that made one request with the valid token and then sits idle, kept
    alive (the attack holds it open)."""
    stream = await trio.open_tcp_stream(*address, local_address=source)
    await stream.send_all(sessions_request())
    head = await read_head(stream)
    assert head.startswith(b"HTTP/1.1 200"), head
    return stream


async def wait_for_connections(server: Server, count: int) -> None:
    with trio.fail_after(20):
        while server.health()["connections"] < count:
            await trio.sleep(0.01)


async def test_idle_keep_alive_flood_from_four_addresses_locks_out_no_http_client_nor_unix(
    short_dir: Path,
) -> None:
    """4 addresses x 32 idle keep-alive connections with a valid token held all 128 slots:
    honest HTTP clients 0/99, the Unix socket 0/20. Now a newcomer takes the place of the
    connection idle longest, and every honest client is answered."""
    async with daemon(short_dir, max_connections=128) as server:
        assert server.http_address is not None and server.max_connections == 128
        flood: list[trio.SocketStream] = []
        for host in range(2, 6):
            for _ in range(32):
                flood.append(await idle_keep_alive(server.http_address, f"127.0.0.{host}"))
        # TCP holds its whole share (the table less the Unix socket's reserve: 120)
        await wait_for_connections(
            server, 128 - server.health().get("unix_reserved_connections", 0)
        )
        base = f"http://{server.http_address[0]}:{server.http_address[1]}"
        answered = 0
        for index in range(20):  # honest HTTP clients, each a new connection
            async with open_client(base, token=TOKEN) as client:
                evidence = f"honest {index}".encode()
                result = await client.submit("bytes", bytes_binding(evidence), [evidence])
                answered += result.outcome == "PASS"
        for _ in range(20):  # and the Unix socket
            async with open_client(unix=server.unix_path) as client:
                answered += (await client.health())["status"] == "serving"
        health = server.health()
        assert answered == 40
        assert health["evicted_connections"] >= 1 and health["peers"]["strikes"] == 0
        for stream in flood:
            await stream.aclose()


async def test_the_unix_socket_keeps_slots_tcp_cannot_take(short_dir: Path) -> None:
    """TCP connections that cannot be closed for a newcomer (fresh, not answered yet) filled
    every slot, the Unix socket's too. Now TCP stops at its share and the Unix socket is
    served."""
    async with daemon(short_dir, max_connections=16, unix_reserved_connections=4) as server:
        assert server.tcp_address is not None
        silent = []
        for index in range(12):  # the whole TCP share: 16 - 4
            sock = socket.create_connection(
                server.tcp_address, source_address=(f"127.0.0.{2 + index % 4}", 0)
            )
            silent.append(sock)
        await wait_for_connections(server, 12)
        refused = await trio.to_thread.run_sync(_exchange_tcp, server.tcp_address)
        assert b'"BUSY"' in refused
        async with (
            open_client(unix=server.unix_path) as one,
            open_client(unix=server.unix_path) as two,
        ):
            assert (await one.health())["unix_reserved_connections"] == 4
            assert (await two.submit("bytes", bytes_binding(b"ok"), [b"ok"])).outcome == "PASS"
        for sock in silent:
            sock.close()


def _exchange_tcp(address: tuple[str, int]) -> bytes:
    with socket.create_connection(address, source_address=("127.0.0.9", 0), timeout=10) as sock:
        sock.sendall(b"EVD1")
        return sock.recv(65536)


async def test_a_peer_at_its_share_takes_the_place_of_its_own_idle_connection(
    short_dir: Path,
) -> None:
    """A peer at its share (a NAT's address, say) whose connections sit idle was refused a
    new one; now its own longest-idle connection makes room, and no other peer's does."""
    async with daemon(short_dir, max_connections_per_peer=4) as server:
        assert server.http_address is not None
        other = await idle_keep_alive(server.http_address, "127.0.0.3")
        mine = [await idle_keep_alive(server.http_address, "127.0.0.2") for _ in range(4)]
        newcomer = await idle_keep_alive(server.http_address, "127.0.0.2")
        with trio.fail_after(10):
            assert await mine[0].receive_some(1) == b""  # the oldest of its own: closed
        await other.send_all(sessions_request())  # the other peer's: untouched
        assert (await read_head(other)).startswith(b"HTTP/1.1 200")
        for stream in (*mine[1:], newcomer):
            await stream.send_all(sessions_request())
            assert (await read_head(stream)).startswith(b"HTTP/1.1 200")
        assert server.health()["evicted_connections"] == 1
        for stream in (other, *mine, newcomer):
            await stream.aclose()
