"""The connection core under both front ends, tried as an attacker would
(docs/operations.md "Open routes" and "Refusal accounting").

Every test runs a real server on loopback and talks to it over real sockets; several peers are
distinct loopback addresses (127.0.0.2-5), since a peer is a host.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from daemon_testkit import HELLO, bytes_binding, frame

from daemon import RejectedError, Server, ServerConfig, open_client, open_server
from daemon.audit._audit import tail
from daemon.config._hosting import HostedSession
from daemon.config._http_config import HttpConfig
from daemon.config._security import ListenerSecurity
from daemon.config._tokens import token_line
from daemon.server._fastpath import CUT_OFF_BYTES
from daemon.server._http_server import busy_answer
from daemon.server._listeners import PENALIZED
from daemon.server._peers import STRIKE_LIMIT, peer_key
from session import BytesDigestMechanism

TOKEN = "the-one-good-token-of-this-test-0123456789abcdef"
SUBMIT = "/v1/sessions/bytes/decisions"
#: The first bytes of a TLS ClientHello, sent to a plain port.
CLIENT_HELLO = bytes.fromhex("16030100a5010000a10303") + os.urandom(32) + b"\x00" * 64


def tokens_file(directory: Path) -> str:
    path = directory / "tokens"
    path.write_text(f"{token_line(TOKEN, 'good')}\n")
    os.chmod(path, 0o600)
    return str(path)


@asynccontextmanager
async def daemon(directory: Path, **options: Any) -> AsyncIterator[Server]:
    """A server with a tokens_file on its binary and HTTP listeners (both on 127.0.0.1)."""
    security = ListenerSecurity(None, tokens_file(directory))
    config = ServerConfig(
        tcp=("127.0.0.1", 0),
        audit_path=str(directory / "audit.jsonl"),
        worker_processes=1,
        security=security,
        http=HttpConfig(
            listen=("127.0.0.1", 0),
            security=security,
            header_timeout=options.pop("header", 5.0),
            trusted_proxies=options.pop("trusted_proxies", ()),
        ),
        **options,
    )
    session = HostedSession("bytes", (BytesDigestMechanism(),), 1, 1 << 20)
    async with open_server([session], config) as server:
        yield server


def events(directory: Path) -> list[dict[str, Any]]:
    return tail(str(directory / "audit.jsonl"), 100_000)


def submit_body(evidence: bytes) -> bytes:
    binding = bytes_binding(evidence).to_dict()
    return json.dumps(
        {"binding": binding, "evidence": [{"base64": base64.b64encode(evidence).decode()}]}
    ).encode()


def post(body: bytes, token: str | None = None, keep_alive: bool = False) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token is not None else ""
    close = "" if keep_alive else "Connection: close\r\n"
    return (
        f"POST {SUBMIT} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n{auth}{close}\r\n"
    ).encode() + body


async def exchange(
    address: tuple[str, int], data: bytes, *, source: str = "127.0.0.1", wait: float = 10
) -> bytes:
    """Send ``data`` from ``source`` on a new connection; everything read until it closes."""
    stream = await trio.open_tcp_stream(*address, local_address=source)
    answer = b""
    async with stream:
        try:
            await stream.send_all(data)
            with trio.move_on_after(wait):
                while chunk := await stream.receive_some(65536):
                    answer += chunk
        except trio.BrokenResourceError:
            pass
    return answer


async def test_unauthenticated_flood_buys_no_audit_lines(short_dir: Path) -> None:
    """10,878 requests without a token were 10,878 fsync'd lines; now none is a line: each
    kind of unauthenticated or not-this-protocol request, on either front end, is noise."""
    body = submit_body(b"evidence")
    flood = [
        post(body),  # no token
        post(body, token="not-a-token"),  # a wrong token
        b"GET / HTTP/1.1\r\nHost: t\r\n\r\n",  # an unknown route, no token
        b"garbage\r\n\r\n",  # not HTTP
        CLIENT_HELLO,  # TLS to a plain port
    ]
    binary = [HELLO, frame({"kind": "hello", "versions": [1], "client": "t", "token": "x"})]
    async with daemon(short_dir, header=0.5) as server:  # a ClientHello waits for it
        assert server.http_address is not None and server.tcp_address is not None
        before = len(events(short_dir))
        sent = 0
        # Spread over distinct loopback peers, each under the strike limit (one peer that
        # keeps failing is cut off at accept: the next test).
        for index in range(8):
            source = f"127.0.0.{10 + index}"
            for data in flood:
                answer = await exchange(server.http_address, data, source=source)
                assert b'"decision_id":null' in answer
                sent += 1
            for data in binary:
                answer = await exchange(server.tcp_address, data, source=source)
                assert b"UNAUTHENTICATED" in answer
                sent += 1
        lines = events(short_dir)[before:]
        assert lines == []  # not one line for the whole flood
        async with open_client(
            f"http://{server.http_address[0]}:{server.http_address[1]}", token=TOKEN
        ) as client:
            result = await client.submit("bytes", bytes_binding(b"real"), [b"real"])
            health = await client.health()
        assert result.outcome == "PASS"
        assert health["noise"]["pending"] == sent
    lines = events(short_dir)[before:]
    assert [line["event"] for line in lines] == ["decision", "noise", "daemon_stop"]
    assert lines[1]["count"] == sent and len(lines[1]["peers"]) == 8


async def test_a_peer_that_keeps_failing_authentication_is_slowed_then_cut_off(
    short_dir: Path,
) -> None:
    async with daemon(short_dir) as server:
        assert server.http_address is not None
        body = submit_body(b"evidence")
        answers = [
            await exchange(server.http_address, post(body, token="guess"), source="127.0.0.7")
            for _ in range(STRIKE_LIMIT)
        ]
        assert all(b"401 Unauthorized" in answer for answer in answers[:-1])
        # Cut off from the guess that earned it: not answered on its merits, nor delayed.
        assert answers[-1] == busy_answer(PENALIZED)
        answer = await exchange(server.http_address, post(body, token="guess"), source="127.0.0.7")
        assert answer == busy_answer(PENALIZED)
        async with open_client(tcp=server.tcp_address, token=TOKEN) as client:
            peers = (await client.health())["peers"]
        assert peers["auth_failures"] == STRIKE_LIMIT and peers["penalized_refusals"] >= 1
    assert not any(line["event"] == "refusal" for line in events(short_dir))


async def test_a_valid_token_is_never_refused_for_strikes_of_another_client_on_its_address(
    short_dir: Path,
) -> None:
    """40 wrong-token requests from one address, then a client with a valid token on the
    same address (a NAT, an office, a proxy): it was refused 0/10 (another address 10/10),
    because the penalty refused the address at accept. Now a penalized address's connections
    are on probation: a valid token is served, on both front ends; everything else from it
    gets the cut-off answer."""
    async with daemon(short_dir) as server:
        assert server.http_address is not None and server.tcp_address is not None
        body = submit_body(b"evidence")
        for _ in range(40):
            await exchange(server.http_address, post(body, token="guess"), source="127.0.0.13")
        served = 0
        for index in range(10):
            evidence = f"honest {index}".encode()
            answer = await exchange(
                server.http_address, post(submit_body(evidence), token=TOKEN), source="127.0.0.13"
            )
            served += b"200 OK" in answer and b'"PASS"' in answer
        assert served == 10
        hello = frame({"kind": "hello", "versions": [1], "client": "t", "token": TOKEN})
        submit = frame(
            {
                "kind": "submit",
                "request_id": 1,
                "session": "bytes",
                "binding": bytes_binding(b"b").to_dict(),
                "items": [1],
            },
            b"b",
        )
        evd1 = await exchange(server.tcp_address, hello + submit, source="127.0.0.13", wait=1)
        assert b'"PASS"' in evd1  # EVD1, the same address
        # The address stays penalized for whoever has no valid token.
        answer = await exchange(server.http_address, post(body, token="guess"), source="127.0.0.13")
        assert answer == busy_answer(PENALIZED)
        peers = server.health()["peers"]
        assert peers["auth_failures"] == STRIKE_LIMIT
    decided = [line for line in events(short_dir) if line["event"] == "decision"]
    assert len(decided) == 11 and all(line["requester"]["token"] == "good" for line in decided)


async def test_a_cut_off_peer_flooding_requests_gets_the_same_answer(short_dir: Path) -> None:
    """A cut-off peer's requests without a valid token each cost an answer built; they are
    answered with the same cut-off bytes (no 401 on its merits, no delay, no line), whatever
    they are; one still sending a large body reads the answer or a reset."""
    async with daemon(short_dir) as server:
        assert server.http_address is not None
        body = submit_body(b"evidence")
        for _ in range(STRIKE_LIMIT):
            await exchange(server.http_address, post(body, token="guess"), source="127.0.0.9")
        expected = busy_answer(PENALIZED)
        for data in (
            post(body),
            post(body, token="guess"),
            b"garbage\r\n\r\n",
            b"GET / HTTP/1.1\r\n\r\n",
            b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n",
        ):
            answer = await exchange(server.http_address, data, source="127.0.0.9")
            assert answer == expected, data
        large = post(submit_body(os.urandom(CUT_OFF_BYTES * 2)))
        answer = await exchange(server.http_address, large, source="127.0.0.9")
        assert answer in (b"", expected)
    assert not any(line["event"] == "refusal" for line in events(short_dir))


async def test_health_without_a_token_says_the_status_only(short_dir: Path) -> None:
    """``/health`` without a token disclosed the audit path, worker PIDs, session names and
    the store's last error; now a probe learns ``serving``/``degraded``/``draining``."""
    async with daemon(short_dir) as server:
        assert server.http_address is not None
        probe = await exchange(server.http_address, b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
        head, _, body = probe.partition(b"\r\n\r\n")
        assert b"200 OK" in head and b"Connection: close" in head
        document = json.loads(body)
        assert document["status"] == {"status": "serving"}
        assert str(short_dir) not in probe.decode() and b"bytes" not in body
        authorized = await exchange(
            server.http_address,
            f"GET /health HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Connection: close\r\n\r\n".encode(),
        )
        full = json.loads(authorized.partition(b"\r\n\r\n")[2])["status"]
        assert full["status"] == "serving" and "audit" in full and "metrics" in full


async def _hold_probe(
    address: tuple[str, int], source: str, held: list[trio.SocketStream], answers: list[bytes]
) -> None:
    stream = await trio.open_tcp_stream(*address, local_address=source)
    held.append(stream)  # the client keeps its end open: keep-alive, as the attack did
    await stream.send_all(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
    answer = b""
    with trio.move_on_after(30):
        while b"\r\n\r\n" not in answer:
            chunk = await stream.receive_some(65536)
            if not chunk:
                break
            answer += chunk
    answers.append(answer)


async def test_keep_alive_health_connections_from_four_addresses_cannot_hold_the_door(
    short_dir: Path,
) -> None:
    """4 addresses x 256 keep-alive ``GET /health`` connections held every connection slot
    (the per-peer cap is a quarter of 1,024); a client with a token got 503. Now a probe's
    connection ends with its answer, and the token-bearing client is served."""
    held: list[trio.SocketStream] = []
    answers: list[bytes] = []
    async with daemon(short_dir) as server:
        assert server.http_address is not None and server.max_connections <= 1024
        try:
            for host in range(2, 6):
                async with trio.open_nursery() as nursery:
                    for _ in range(256):
                        nursery.start_soon(
                            _hold_probe, server.http_address, f"127.0.0.{host}", held, answers
                        )
            assert len(answers) == 1024
            assert all(b"200 OK" in a and b"Connection: close" in a for a in answers)
            async with open_client(
                f"http://{server.http_address[0]}:{server.http_address[1]}", token=TOKEN
            ) as client:
                result = await client.submit("bytes", bytes_binding(b"in"), [b"in"])
            assert result.outcome == "PASS"
        finally:
            for stream in held:
                await stream.aclose()


async def test_a_large_first_body_is_read_at_the_minimum_rate_not_cut_at_the_header_timeout(
    short_dir: Path,
) -> None:
    """A 668 KB body at 100 KB/s on a fresh connection got 408 ("not received within") at the
    header timeout; the same on a warm connection was served. Scaled: a 300 KB body at about
    150 KB/s against a 0.5 s header timeout (the minimum rate is 64 KiB/s)."""
    evidence = os.urandom(220_000)
    data = post(submit_body(evidence), token=TOKEN)
    async with daemon(short_dir, header=0.5) as server:
        assert server.http_address is not None
        stream = await trio.open_tcp_stream(*server.http_address)
        answer = b""
        async with stream:
            for offset in range(0, len(data), 15_000):
                await stream.send_all(data[offset : offset + 15_000])
                await trio.sleep(0.1)
            with trio.move_on_after(30):
                while chunk := await stream.receive_some(65536):
                    answer += chunk
    assert b"200 OK" in answer and b'"PASS"' in answer, answer[:300]


async def test_binary_hello_without_a_token_is_noise_and_authenticated_refusals_keep_lines(
    short_dir: Path,
) -> None:
    async with daemon(short_dir) as server:
        assert server.tcp_address is not None
        with pytest.raises(RejectedError) as caught:
            async with open_client(tcp=server.tcp_address) as client:
                await client.health()
        assert caught.value.code == "UNAUTHENTICATED" and caught.value.decision_id is None
        async with open_client(tcp=server.tcp_address, token=TOKEN) as client:
            with pytest.raises(RejectedError) as unknown:
                await client.submit("nope", bytes_binding(b"x"), [b"x"])
        assert unknown.value.decision_id is not None  # an authenticated requester's refusal
    refusals = [line for line in events(short_dir) if line["event"] == "refusal"]
    assert [(line["code"], line["requester"]["token"]) for line in refusals] == [
        ("UNKNOWN_SESSION", "good")
    ]


@pytest.mark.parametrize(
    ("peer", "key"),
    [
        ("2001:db8:1:2:aaaa::1:443", "tcp:2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:ffff:ffff:ffff:80", "tcp:2001:db8:1:2::/64"),
        ("2001:db8:1:3::1:80", "tcp:2001:db8:1:3::/64"),
        ("::ffff:10.0.0.1:80", "tcp:10.0.0.1"),
        ("10.0.0.1:80", "tcp:10.0.0.1"),
    ],
)
def test_ipv6_hosts_of_one_64_are_one_peer(peer: str, key: str) -> None:
    """One host owns a whole /64: counted per address, it could open connections from 2**64
    peers and never meet a per-peer cap or a strike limit."""
    assert peer_key({"transport": "tcp", "peer": peer}) == key


RELOAD_CONFIG = """
[server]
listen = "127.0.0.1:0"
worker_processes = 1

[http]
listen = "127.0.0.1:0"

[audit]
path = "audit.jsonl"

[sessions.bytes]
mechanisms = ["bytes-sha256"]
max_evidence_items = 1
max_evidence_bytes = {bound}
"""


def test_an_upload_admitted_before_a_reload_lowered_its_bound_finishes_under_it() -> None:
    """SIGHUP lowered a bound while a 300 KB upload was in flight: the finished upload was
    refused 413 ("admits 1000"), because HTTP admitted it twice — its own checks against the
    old session, then the pipeline's against the new one. Now it is admitted once, and a
    request admitted under one configuration finishes under it; the next one meets the new
    bound."""
    import signal
    import socket
    import time

    from http_testkit import LiveDaemon, read_answer

    live = LiveDaemon(config_text=RELOAD_CONFIG.format(bound=400_000))
    try:
        data = post(submit_body(os.urandom(300_000)))
        with socket.create_connection(live.http, timeout=30) as sock:
            sock.sendall(data[:100_000])
            live.config_path.write_text(RELOAD_CONFIG.format(bound=1000))
            live.process.send_signal(signal.SIGHUP)
            for _ in range(300):  # until the reload is applied (a state, not a timing)
                if "configuration reloaded" in live.stderr():
                    break
                time.sleep(0.05)
            assert "configuration reloaded" in live.stderr(), live.stderr()
            sock.sendall(data[100_000:])
            answer = read_answer(sock)
        assert answer.status == 200, answer.body
        assert answer.json()["result"]["outcome"] == "PASS"
        again = live.exchange(post(submit_body(os.urandom(300_000))))
        assert again.status == 413 and "admits" in again.error["message"]
    finally:
        code = live.stop()
        live.cleanup()
    assert code == 0


async def test_a_peer_that_keeps_sending_garbage_to_a_token_listener_is_cut_off(
    short_dir: Path,
) -> None:
    """Garbage and unknown routes without a token were noise but never strikes: a flood of
    them was answered on its merits forever (each a parse, an answer and a drain). Now each
    is a strike as a failed token is, and the peer is cut off."""
    async with daemon(short_dir) as server:
        assert server.http_address is not None
        kinds = [b"garbage\r\n\r\n", b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"]
        for number in range(STRIKE_LIMIT):
            answer = await exchange(server.http_address, kinds[number % 2], source="127.0.0.11")
            assert b"400 Bad Request" in answer or b"404 Not Found" in answer
        answer = await exchange(server.http_address, kinds[0], source="127.0.0.11")
        assert answer == busy_answer(PENALIZED)
        # A probe is not noise of this kind (it is answered), and an authenticated peer's
        # unknown route is its own refusal: neither is a strike.
        for _ in range(STRIKE_LIMIT + 1):
            probe = await exchange(
                server.http_address,
                b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n",
                source="127.0.0.12",
            )
            assert b"200 OK" in probe
    assert not any(line["event"] == "refusal" for line in events(short_dir))


def test_a_cut_off_peer_that_keeps_trying_stays_cut_off() -> None:
    """The penalty lapsed STRIKE_WINDOW seconds after the first strike even while the peer kept
    hammering, so a persistent flood earned 32 refusals on their merits every 30 s. Now each
    connection refused while cut off restarts the window; a peer that stops is let back in.
    (The ledger's clock, moved by hand: the rule is about time, the test must not wait.)"""
    from daemon.server import _peers

    now = [1000.0]
    ledger = _peers.PeerLedger(connection_cap=8, in_flight_cap=8, clock=lambda: now[0])
    for _ in range(STRIKE_LIMIT):
        ledger.auth_failure("tcp:192.0.2.7")
    assert ledger.penalized("tcp:192.0.2.7")
    for _ in range(5):  # keeps trying every 20 s: 100 s, still cut off
        ledger.cut_off("tcp:192.0.2.7")  # each try refused for it
        now[0] += 20
        assert ledger.penalized("tcp:192.0.2.7")
    now[0] += _peers.STRIKE_WINDOW + 1  # stops for longer than the window
    assert not ledger.penalized("tcp:192.0.2.7")
    assert not ledger.penalized("tcp:192.0.2.8")  # another peer was never cut off
