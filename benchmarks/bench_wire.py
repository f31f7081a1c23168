"""The daemon on the wire: decisions/s, latency and server CPU per decision, HTTP and EVD1.

Runs the real daemon (``evidenced serve --config``: an HTTP and a binary TCP listener on
loopback, fsync-ed audit log, session ``bytes`` with the built-in ``bytes-sha256``
mechanism) on the peer comparison's job: a 64-byte payload and its honest binding, 256
distinct pairs. The load generator is this process, as cheap as a Python one can be: raw
non-blocking sockets and one ``selectors`` loop, closed loop (``c`` keep-alive connections,
one request in flight on each), every request's bytes encoded before the clock starts, an
answer counted once its frame (EVD1: the 8-byte prefix and the header it declares; HTTP: the
head and its ``Content-Length``) is complete and says ``PASS``. Neither side's client library
runs in the measured window, so what the daemon's CPU time (``/proc``, the daemon and its live
descendants) buys is the server's work alone.

Prints, per transport and concurrency (1 and 64), the median over interleaved rounds of
decisions/s, p50 and p99 latency, and the daemon's CPU per decision (goals of the
performance issue: <= 100 us over HTTP and <= 80 us over EVD1 at c=64); then EVD1 / HTTP.

A yardstick runs in the same rounds: ``_bare_stages.py``, a bare trio server that runs only
the daemon's own code for one decision's stages over HTTP (no connection core, pipeline,
group commit, metrics ...; its docstring lists what it leaves out). The daemon's CPU per
decision over the bare server's is the share of the daemon's structure around the stages;
the bare server's own figure is what the stages' Python costs on the wire. At c=1 two more
variants of it wait, before each answer, for an empty thread hop and for a fsync in a thread:
what one decision's wait costs the serving process when nothing else is in flight.
The 2-core machine is shared with the generator: its own CPU per decision is printed too.
Never asserts on time.

Usage: ``python benchmarks/bench_wire.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import base64
import json
import selectors
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
from _harness import Report, at_most, main
from bench_daemon import cpu_seconds
from bench_http import start, stop

from session import NoOptions
from session._bytes_provider import PROVIDER

QUICK = "--quick" in sys.argv
SESSION = (
    '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\n'
    "max_evidence_items = 1\nmax_evidence_bytes = 4096\n"
)
PAIRS = 256
MAGIC = b"EVD1"


def _payloads() -> list[bytes]:
    return [n.to_bytes(4, "big") * 16 for n in range(PAIRS)]


def _frame(header: dict[str, object], evidence: bytes = b"") -> bytes:
    body = orjson.dumps(header, option=orjson.OPT_SORT_KEYS)
    return MAGIC + struct.pack(">I", len(body)) + body + evidence


def evd1_requests() -> tuple[bytes, list[bytes]]:
    """The ``hello`` frame and one ``submit`` frame per pair (request ids repeat per pair:
    the server echoes them and requires nothing more of them)."""
    hello = _frame({"kind": "hello", "versions": [1], "client": "bench_wire"})
    frames = []
    for index, payload in enumerate(_payloads()):
        binding = PROVIDER.honest_binding([payload], NoOptions()).to_dict()
        header = {
            "kind": "submit",
            "request_id": index + 1,
            "session": "bytes",
            "binding": binding,
            "items": [len(payload)],
        }
        frames.append(_frame(header, payload))
    return hello, frames


def http_requests(host: str) -> list[bytes]:
    """One keep-alive ``POST /v1/sessions/bytes/decisions`` per pair (docs/http.md)."""
    requests = []
    for payload in _payloads():
        binding = PROVIDER.honest_binding([payload], NoOptions()).to_dict()
        body = orjson.dumps(
            {
                "binding": binding,
                "evidence": [{"base64": base64.b64encode(payload).decode("ascii")}],
            }
        )
        head = (
            f"POST /v1/sessions/bytes/decisions HTTP/1.1\r\nHost: {host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        requests.append(head.encode("ascii") + body)
    return requests


def _evd1_complete(buffer: bytearray) -> int:
    """The length of the first complete answer frame in ``buffer`` (answers carry no
    evidence), or 0."""
    if len(buffer) < 8:
        return 0
    size = 8 + int.from_bytes(buffer[4:8], "big")
    return size if len(buffer) >= size else 0


def _http_complete(buffer: bytearray) -> int:
    """The length of the first complete response in ``buffer`` (``Content-Length`` framed),
    or 0."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return 0
    head = bytes(buffer[:end]).lower()
    start = head.index(b"content-length:") + len(b"content-length:")
    stop_at = head.find(b"\r\n", start)
    length = int(head[start : stop_at if stop_at >= 0 else len(head)])
    size = end + 4 + length
    return size if len(buffer) >= size else 0


class Load:
    """``c`` connections to ``address``, closed loop, for ``seconds``."""

    def __init__(
        self, address: tuple[str, int], transport: str, hello: bytes, requests: list[bytes]
    ) -> None:
        self.address = address
        self.transport = transport
        self.hello = hello
        self.requests = requests
        self.complete = _evd1_complete if transport == "binary" else _http_complete

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(self.address)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.hello:
            sock.sendall(self.hello)
            buffer = bytearray()
            while not (size := self.complete(buffer)):
                buffer += sock.recv(65536)
            assert b'"kind":"hello"' in buffer[:size], bytes(buffer[:size])
        sock.setblocking(False)
        return sock

    def run(self, c: int, seconds: float) -> tuple[int, list[float]]:
        """(answers, latencies in seconds) of the window; every answer must be a PASS."""
        conns = [_Conn(self._connect(), number) for number in range(c)]
        selector = selectors.DefaultSelector()
        requests, count = self.requests, len(self.requests)
        latencies: list[float] = []
        try:
            for conn in conns:
                conn.sent = time.perf_counter()
                conn.sock.sendall(requests[conn.number % count])
                selector.register(conn.sock, selectors.EVENT_READ, conn)
            end = time.perf_counter() + seconds
            answered = 0
            while time.perf_counter() < end:
                for key, _ in selector.select(1.0):
                    conn = key.data
                    data = conn.sock.recv(65536)
                    if not data:
                        raise RuntimeError("the daemon closed a connection")
                    conn.buffer += data
                    size = self.complete(conn.buffer)
                    if not size:
                        continue
                    now = time.perf_counter()
                    answer = bytes(conn.buffer[:size])
                    if b'"outcome":"PASS"' not in answer:
                        raise RuntimeError(f"not a PASS: {answer[:300]!r}")
                    del conn.buffer[:size]
                    latencies.append(now - conn.sent)
                    answered += 1
                    conn.number += c
                    conn.sent = time.perf_counter()
                    conn.sock.sendall(requests[conn.number % count])
            # wait for what is in flight, so the next window starts clean
            pending = len(conns)
            deadline = time.perf_counter() + 30
            while pending and time.perf_counter() < deadline:
                for key, _ in selector.select(1.0):
                    conn = key.data
                    conn.buffer += conn.sock.recv(65536)
                    if self.complete(conn.buffer):
                        selector.unregister(conn.sock)
                        pending -= 1
            return answered, latencies
        finally:
            selector.close()
            for conn in conns:
                conn.sock.close()


class _Conn:
    """One connection's socket, bytes received, next pair and when its request left."""

    __slots__ = ("buffer", "number", "sent", "sock")

    def __init__(self, sock: socket.socket, number: int) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.number = number
        self.sent = 0.0


def _address(url: str) -> tuple[str, int]:
    host, _, port = url.split("://", 1)[1].rpartition(":")
    return host, int(port)


def start_bare(folder: Path, wait: str = "none") -> tuple[subprocess.Popen[str], tuple[str, int]]:
    """The bare stages server (``_bare_stages.py``) waiting for ``wait``, and its address."""
    script = Path(__file__).with_name("_bare_stages.py")
    process = subprocess.Popen(
        [sys.executable, str(script), str(folder), wait],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    return process, _address("http://" + json.loads(process.stdout.readline())["http"])


#: The bare stages server's variants: what each request waits for, and the concurrencies
#: it is loaded at (the waits matter where every decision waits alone: c=1).
BARE = {"bare": ("none", (1, 64)), "bare-hop": ("hop", (1,)), "bare-fsync": ("fsync", (1,))}
BARE_NAMES = {
    "bare": "bare stages server",
    "bare-hop": "bare stages server + an empty thread hop",
    "bare-fsync": "bare stages server + a fsync in a thread",
}


def run(report: Report, args: argparse.Namespace) -> None:
    rounds = 3 if QUICK else 5
    seconds = 2.0 if QUICK else 5.0
    bares: list[subprocess.Popen[str]] = []
    with tempfile.TemporaryDirectory(prefix="evdwire") as folder:
        process, urls = start(Path(folder), "wire", SESSION)
        try:
            hello, frames = evd1_requests()
            http = _address(urls["http"])
            loads = {
                "binary": Load(_address(urls["binary"]), "binary", hello, frames),
                "http": Load(http, "http", b"", http_requests("{}:{}".format(*http))),
            }
            servers = {"binary": process.pid, "http": process.pid}
            cells = [(t, c) for c in (1, 64) for t in ("http", "binary")]
            for name, (wait, concurrencies) in BARE.items():
                (Path(folder) / name).mkdir()
                bare, address = start_bare(Path(folder) / name, wait)
                bares.append(bare)
                requests = http_requests("{}:{}".format(*address))
                loads[name] = Load(address, "http", b"", requests)
                servers[name] = bare.pid
                cells += [(name, c) for c in concurrencies]
            for load in loads.values():  # warm-up
                load.run(16, 1.0)
            figures: dict[tuple[str, int], dict[str, list[float]]] = {}
            for round_number in range(rounds):
                shift = round_number % len(cells)
                for transport, c in cells[shift:] + cells[:shift]:  # rotating order
                    server = servers[transport]
                    cpu_before, own_before = cpu_seconds(server), time.process_time()
                    begin = time.perf_counter()
                    answered, latencies = loads[transport].run(c, seconds)
                    elapsed = time.perf_counter() - begin
                    cpu = cpu_seconds(server) - cpu_before
                    own = time.process_time() - own_before
                    latencies.sort()
                    cell = figures.setdefault((transport, c), {})
                    for key, value in (
                        ("rate", answered / elapsed),
                        ("p50", latencies[len(latencies) // 2]),
                        ("p99", latencies[int(len(latencies) * 0.99)]),
                        ("cpu", cpu / answered),
                        ("own", own / answered),
                    ):
                        cell.setdefault(key, []).append(value)
        finally:
            for bare in bares:
                stop(bare)
            stop(process)
    for (transport, c), cell in sorted(figures.items()):
        if transport in BARE:
            report.value(
                f"{BARE_NAMES[transport]}: CPU per decision, HTTP, c={c}",
                statistics.median(cell["cpu"]),
                "s",
                spread=cell["cpu"],
            )
            continue
        label = f"{'EVD1' if transport == 'binary' else 'HTTP'}, fsync, c={c}"
        goal = None
        if c == 64:
            goal = at_most(80e-6) if transport == "binary" else at_most(100e-6)
        for key, name, unit, bound in (
            ("rate", "decisions/s", "/s", None),
            ("p50", "p50 latency", "s", None),
            ("p99", "p99 latency", "s", None),
            ("cpu", "daemon CPU per decision", "s", goal),
            ("own", "load generator CPU per decision", "s", None),
        ):
            values = cell[key]
            report.value(
                f"{name}, {label}", statistics.median(values), unit, goal=bound, spread=values
            )
    for numerator, denominator, c in (
        ("binary", "http", 1),
        ("binary", "http", 64),
        ("http", "bare", 1),
        ("http", "bare", 64),
        ("http", "bare-fsync", 1),
    ):
        over = "HTTP" if denominator == "http" else BARE_NAMES[denominator]
        name = f"{'EVD1' if numerator == 'binary' else 'HTTP'} / {over}"
        report.paired_ratio(
            f"daemon CPU per decision, {name}, c={c}",
            figures[(numerator, c)]["cpu"],
            figures[(denominator, c)]["cpu"],
        )


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
