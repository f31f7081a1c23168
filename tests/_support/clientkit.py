"""What the client tests share: the daemon they run against, a quick retry policy, the
capacity holders and the audit-log readings. Imported as ``clientkit``
(``tests/_support``); it needs the daemon testkits on the path (``tests/client/conftest.py``)."""

from __future__ import annotations

import socket
import time
from typing import Any

from daemon_testkit import HELLO, bytes_binding, frame
from http_testkit import FORMATION, LiveDaemon

from daemon import Retry, SyncClient

CONFIG = """
[server]
listen = "127.0.0.1:0"
socket = "s"
worker_processes = 1
max_in_flight = 4
max_in_flight_per_peer = 4
# A holder's evidence may take this long to come (its slot stays held, whatever the load).
evidence_grace = 60.0
idle_timeout = 60.0

[http]
listen = "127.0.0.1:0"

[audit]
path = "audit.jsonl"

[sessions.formation]
mechanisms = ["formation"]

[sessions.bytes]
mechanisms = ["bytes-sha256"]
max_evidence_items = 2
max_evidence_bytes = 4096
"""

SUBJECT = FORMATION / "atom.subject.json"
CERTIFICATE = FORMATION / "atom.certificate.json"
#: Retries fast enough for a test, bounded as always.
QUICK = Retry(attempts=8, base_delay=0.05, max_delay=0.5, total=30.0)


def decisions_of(daemon: LiveDaemon, binding_digest: str) -> list[dict[str, Any]]:
    return [
        line
        for line in daemon.audit()
        if line.get("event") == "decision" and line.get("binding_digest") == binding_digest
    ]


def busy_refusals(daemon: LiveDaemon) -> int:
    return sum(1 for line in daemon.audit() if line.get("code") == "BUSY")


class Holders:
    """``count`` submits that hold a capacity slot each: a submit header whose evidence comes
    only when :meth:`release` sends it (then each is decided: a connection cut mid-request
    would be a strike against the peer, and enough strikes refuse it)."""

    ITEM = b"h" * 16

    def __init__(self, daemon: LiveDaemon, count: int) -> None:
        self.daemon = daemon
        self.sockets: list[socket.socket] = []
        item = self.ITEM
        for _ in range(count):
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(daemon.socket)
            header = {
                "kind": "submit",
                "request_id": 1,
                "session": "bytes",
                "binding": bytes_binding(item).to_dict(),
                "items": [len(item)],
            }
            sock.sendall(HELLO + frame(header))
            self.sockets.append(sock)

    def release(self) -> None:
        for sock in self.sockets:
            sock.sendall(self.ITEM)
        for sock in self.sockets:
            sock.settimeout(10)
            with sock:
                assert sock.recv(65536)  # its decision; then an idle connection, closed
        if self.sockets:
            self.sockets.clear()
            # A slot is given back just after its answer is sent: wait until all are back,
            # so the next test starts with the daemon's whole capacity.
            with SyncClient(self.daemon.base, retry=None) as client:
                deadline = time.monotonic() + 10
                while client.health()["in_flight"] and time.monotonic() < deadline:
                    time.sleep(0.01)
