"""Clients behind a trusted proxy (daemon/server/_proxy.py), tried as an attacker would: a real
server on loopback whose ``[http] trusted_proxies`` is 127.0.0.1, "the proxy", speaking the
PROXY protocol or ``X-Forwarded-For`` over real sockets; other loopback addresses are
untrusted peers.

Before, every client behind a proxy was the proxy's address: one client's 40 wrong tokens cut
off every client of the proxy (and, with ``proxy_next_upstream http_503``, of every replica).
"""

from __future__ import annotations

import ipaddress
import socket
import struct
from pathlib import Path
from typing import Any

import pytest
import trio
from test_connection_core import (
    TOKEN,
    daemon,
    events,
    exchange,
    post,
    submit_body,
)

from daemon.server._http_server import busy_answer
from daemon.server._peers import PENALIZED
from daemon.server._proxy import (
    V2_SIGNATURE,
    ProxyHeaderError,
    TrustedProxies,
    read_proxy_header,
)

PROXY = "127.0.0.1"


def v2(source: str, *, command: int = 1, tlvs: bytes = b"") -> bytes:
    """A PROXY v2 header naming ``source`` (TCP over IPv4 or IPv6)."""
    address = ipaddress.ip_address(source)
    if address.version == 4:
        family, body = 0x11, address.packed + bytes(4) + struct.pack(">HH", 40000, 7434)
    else:
        family, body = 0x21, address.packed + bytes(16) + struct.pack(">HH", 40000, 7434)
    body += tlvs
    return V2_SIGNATURE + bytes([0x20 | command, family]) + struct.pack(">H", len(body)) + body


def v1(source: str) -> bytes:
    kind = "TCP4" if ipaddress.ip_address(source).version == 4 else "TCP6"
    other = "127.0.0.1" if kind == "TCP4" else "::1"
    return f"PROXY {kind} {source} {other} 40000 7434\r\n".encode()


def trusting(short_dir: Path) -> Any:
    """The connection core's test daemon, trusting 127.0.0.1 as its proxy."""
    return daemon(short_dir, trusted_proxies=(f"{PROXY}/32",))


def forwarded(body: bytes, client: str, token: str | None) -> bytes:
    request = post(body, token=token)
    head, _, rest = request.partition(b"\r\n\r\n")
    return head + f"\r\nX-Forwarded-For: {client}".encode() + b"\r\n\r\n" + rest


@pytest.mark.parametrize("header", [v1, v2], ids=["v1", "v2"])
async def test_one_bad_client_behind_a_proxy_protocol_proxy_locks_out_no_other(
    short_dir: Path, header: Any
) -> None:
    """40 wrong tokens from one client behind the proxy, then another client of the same
    proxy without a token: it is told 401 on its merits (not cut off), and with the token it
    is served, its audit line naming it; the bad client is cut off by its own address."""
    async with trusting(short_dir) as server:
        assert server.http_address is not None
        body = submit_body(b"evidence")
        for _ in range(40):
            await exchange(server.http_address, header("198.51.100.7") + post(body, "guess"))
        bad = await exchange(server.http_address, header("198.51.100.7") + post(body, "guess"))
        assert bad == busy_answer(PENALIZED)
        good = await exchange(server.http_address, header("198.51.100.8") + post(body, "x"))
        assert b"401 Unauthorized" in good
        good = await exchange(server.http_address, header("198.51.100.8") + post(body, TOKEN))
        assert b"200 OK" in good and b'"PASS"' in good
        health = server.health()
        assert health["peers"]["auth_failures"] == 32 + 1
    decided = [line for line in events(short_dir) if line["event"] == "decision"]
    assert [line["requester"]["client"] for line in decided] == ["198.51.100.8"]
    assert decided[0]["requester"]["peer"].startswith(f"{PROXY}:")
    (noise,) = [line for line in events(short_dir) if line["event"] == "noise"]
    assert "tcp:198.51.100.7" in noise["peers"] and f"tcp:{PROXY}" not in noise["peers"]


async def test_one_bad_client_behind_a_forwarding_proxy_locks_out_no_other(
    short_dir: Path,
) -> None:
    """The same through ``X-Forwarded-For``, the rightmost untrusted hop: the bad client's
    own forged hops to the left of the proxy's are not believed."""
    async with trusting(short_dir) as server:
        assert server.http_address is not None
        body = submit_body(b"evidence")
        for number in range(40):
            forged = f"10.9.{number}.1, 198.51.100.7"  # a new forged hop each time
            await exchange(server.http_address, forwarded(body, forged, "guess"))
        bad = await exchange(server.http_address, forwarded(body, "198.51.100.7", "guess"))
        assert bad == busy_answer(PENALIZED)
        good = await exchange(server.http_address, forwarded(body, "198.51.100.8", None))
        assert b"401 Unauthorized" in good
        good = await exchange(server.http_address, forwarded(body, "198.51.100.8", TOKEN))
        assert b"200 OK" in good
    decided = [line for line in events(short_dir) if line["event"] == "decision"]
    assert [line["requester"]["client"] for line in decided] == ["198.51.100.8"]


async def test_an_untrusted_peer_cannot_name_another_client(short_dir: Path) -> None:
    """From a peer that is not a trusted proxy, ``X-Forwarded-For`` is ignored (its strikes
    are its own, whatever it forges) and a PROXY header is not HTTP."""
    async with trusting(short_dir) as server:
        assert server.http_address is not None
        body = submit_body(b"evidence")
        for number in range(32):
            data = forwarded(body, f"203.0.113.{number}", "guess")
            await exchange(server.http_address, data, source="127.0.0.3")
        cut = await exchange(server.http_address, post(body, "guess"), source="127.0.0.3")
        assert cut == busy_answer(PENALIZED)
        refused = await exchange(
            server.http_address, v2("198.51.100.9") + post(body, TOKEN), source="127.0.0.4"
        )
        assert b"400 Bad Request" in refused
        served = await exchange(
            server.http_address, forwarded(body, "203.0.113.1", TOKEN), source="127.0.0.4"
        )
        assert b"200 OK" in served
    decided = [line for line in events(short_dir) if line["event"] == "decision"]
    assert ["client" in line["requester"] for line in decided] == [False]


def test_the_client_is_the_rightmost_untrusted_hop() -> None:
    proxies = TrustedProxies.parse(["10.0.0.0/8", "2001:db8::/32"])
    assert proxies.client("10.0.0.2", "198.51.100.1") == "198.51.100.1"
    assert proxies.client("10.0.0.2", "6.6.6.6, 198.51.100.1") == "198.51.100.1"
    assert proxies.client("10.0.0.2", "198.51.100.1, 10.1.1.1") == "198.51.100.1"
    assert proxies.client("10.0.0.2", "10.1.1.1,10.1.1.2") == "10.1.1.1"  # all trusted
    assert proxies.client("10.0.0.2", "not-an-address, 10.1.1.1") == "10.1.1.1"
    assert proxies.client("10.0.0.2", "[2001:db9::1], 2001:db8::5") == "2001:db9::1"
    assert proxies.client("192.0.2.1", "198.51.100.1") == "192.0.2.1"  # untrusted peer
    assert proxies.trusts("::ffff:10.0.0.9") and not proxies.trusts("11.0.0.1")
    assert proxies.trusts_key("tcp:10.1.2.3") and not proxies.trusts_key("unix:1000")


async def _parsed(data: bytes) -> tuple[tuple[bool, str | None] | Exception, bytes]:
    """What :func:`read_proxy_header` makes of ``data``, and what is left unread after it."""
    ours, theirs = trio.socket.socketpair()
    with ours, theirs:
        await theirs.send(data)
        theirs.shutdown(socket.SHUT_WR)
        result: tuple[bool, str | None] | Exception = TimeoutError("waits for the rest")
        # A header cut short waits for its rest: the connection's first deadline ends it.
        with trio.move_on_after(1):
            try:
                result = await read_proxy_header(ours)
            except ProxyHeaderError as error:
                result = error
        rest = b""
        while chunk := await ours.recv(65536):
            rest += chunk
    return result, rest


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (v2("192.0.2.7") + b"GET /", ((True, "192.0.2.7"), b"GET /")),
        (
            v2("2001:db8::7", tlvs=b"\x04\x00\x01x") + b"\x16\x03",
            ((True, "2001:db8::7"), b"\x16\x03"),
        ),
        (v2("192.0.2.7", command=0) + b"GET /", ((True, None), b"GET /")),  # LOCAL
        (v1("192.0.2.7") + b"GET /", ((True, "192.0.2.7"), b"GET /")),
        (v1("2001:db8::7") + b"x", ((True, "2001:db8::7"), b"x")),
        (b"PROXY UNKNOWN\r\nGET /", ((True, None), b"GET /")),
        (b"GET / HTTP/1.1\r\n", ((False, None), b"GET / HTTP/1.1\r\n")),  # none: untouched
    ],
)
async def test_a_proxy_header_is_read_exactly_and_never_a_byte_past_it(
    data: bytes, expected: Any
) -> None:
    assert await _parsed(data) == expected


@pytest.mark.parametrize(
    "data",
    [
        V2_SIGNATURE + b"\x21\x11\xff\xff",  # declares 65,535 bytes
        V2_SIGNATURE + b"\x31\x11\x00\x0c" + bytes(12),  # version 3
        V2_SIGNATURE + b"\x21\x11\x00\x0c" + bytes(4),  # cut short
        V2_SIGNATURE + b"\x21\x12\x00\x0c" + bytes(12),  # UDP
        b"PROXY TCP4 192.0.2.7 192.0.2.8 1 2",  # no line end
        b"PROXY TCP4 " + b"9" * 200 + b"\r\n",  # too long
        b"PROXY TCP4 2001:db8::1 192.0.2.8 1 2\r\n",  # not IPv4
        b"PROXY TCP4 192.0.2.7 192.0.2.8 1 99999\r\n",  # not a port
    ],
)
async def test_a_malformed_proxy_header_is_refused(data: bytes) -> None:
    result, _ = await _parsed(data)
    assert isinstance(result, ProxyHeaderError | TimeoutError), result
