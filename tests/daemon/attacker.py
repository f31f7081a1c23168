"""A connection attacker, run as its own process by the fairness test (so it never shares the
test's event loop): ``python attacker.py HOST PORT IDLE SLOW SECONDS``.

* IDLE connections from 127.0.0.2 that never say anything; one the server drops is reopened at
  once (the attacker keeps the pressure on), one it refuses ``BUSY`` five seconds later.
* SLOW senders from 127.0.0.3 that say hello, send a valid ``submit`` header declaring 200,000
  evidence bytes, then drip one byte every 0.2 s; one the server cuts is reopened after 0.5 s,
  one it refuses ``BUSY`` five seconds later.

(A flood of reconnections as fast as the attacker can make them is another attack, of the
connection rate, which belongs to the firewall; this one holds descriptors and slots.)

Prints ``ready <idle open> <slow open>`` once every connection was opened once, then runs for
SECONDS (or until its stdin closes) and prints ``done <reopened>``. Plain sockets and a
selector: no trio, no daemon import beyond the frame helpers.
"""

from __future__ import annotations

import contextlib
import hashlib
import selectors
import socket
import struct
import sys
import time
from typing import Any

from daemon.wire._protocol import MAGIC, encode_header


def frame(header: dict[str, Any]) -> bytes:
    raw = encode_header(header)
    return MAGIC + struct.pack(">I", len(raw)) + raw


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


HELLO = frame({"kind": "hello", "versions": [1], "client": "attacker"})
DRIP_SECONDS = 0.2


def submit_header() -> bytes:
    subject, certificate = sha(b"never sent 1"), sha(b"never sent 2")
    binding = {
        "subject_id": subject,
        "predicate": "vstd.typed_formation.checked.0.1",
        "expected": "CHECKED",
        "mechanism_id": "vstd.typed_formation.checked.0.1",
        "mechanism_digest": sha(b"anything"),
        "evidence_refs": [subject, certificate],
        "trust_roots": [subject],
        "bounds": {"max_evidence_items": 2, "max_evidence_bytes": 200_000},
        "parameters": {},
    }
    header = {
        "kind": "submit",
        "request_id": 1,
        "session": "formation",
        "binding": binding,
        "items": [100_000, 100_000],
    }
    return HELLO + frame(header)


def connect(source: str, address: tuple[str, int]) -> socket.socket | None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((source, 0))
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            sock.connect(address)
    except OSError:
        sock.close()
        return None
    return sock


def main() -> None:
    host, port, idle_count, slow_count, seconds = sys.argv[1:6]
    address = (host, int(port))
    header = submit_header()
    selector = selectors.DefaultSelector()
    selector.register(sys.stdin, selectors.EVENT_READ, ("stdin", None))
    reopen: list[tuple[float, str]] = []  # (when, kind)
    dripping: dict[socket.socket, float] = {}
    reopened = 0

    def open_one(kind: str) -> bool:
        sock = connect("127.0.0.2" if kind == "idle" else "127.0.0.3", address)
        if sock is None:
            reopen.append((time.monotonic() + 1.0, kind))
            return False
        selector.register(sock, selectors.EVENT_READ, (kind, sock))
        if kind == "slow":
            dripping[sock] = time.monotonic()
        return True

    def drop(kind: str, sock: socket.socket, data: bytes) -> None:
        selector.unregister(sock)
        dripping.pop(sock, None)
        sock.close()
        delay = 5.0 if b'"BUSY"' in data else 0.5 if kind == "slow" else 0.0
        reopen.append((time.monotonic() + delay, kind))

    idle_open = sum(open_one("idle") for _ in range(int(idle_count)))
    slow_open = sum(open_one("slow") for _ in range(int(slow_count)))
    sent_header: set[socket.socket] = set()
    print(f"ready {idle_open} {slow_open}", flush=True)
    stop = time.monotonic() + float(seconds)
    while time.monotonic() < stop:
        for key, _ in selector.select(timeout=0.05):
            kind, sock = key.data
            if kind == "stdin":
                if not sys.stdin.readline():
                    stop = 0.0
                continue
            try:
                data = sock.recv(65536)
            except OSError:
                data = b""
            if data and b'"kind":"error"' not in data:
                continue  # the hello answer: keep dripping
            sent_header.discard(sock)  # refused, timed out or closed: reopen
            drop(kind, sock, data)
        now = time.monotonic()
        for sock, last in list(dripping.items()):
            if now - last < DRIP_SECONDS:
                continue
            try:
                if sock not in sent_header:
                    sock.send(header)
                    sent_header.add(sock)
                else:
                    sock.send(b"x")
            except (BlockingIOError, OSError):
                pass
            dripping[sock] = now
        due = [item for item in reopen if item[0] <= now]
        reopen[:] = [item for item in reopen if item[0] > now]
        for _, kind in due:
            reopened += open_one(kind)
    print(f"done {reopened}", flush=True)


if __name__ == "__main__":
    main()
