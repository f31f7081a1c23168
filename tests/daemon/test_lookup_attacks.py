"""``GET /v1/log/entry`` under attack and across a restart (``daemon/tlog/_lookup.py``; issue
"hold under attack, third round": one absent-id lookup scanned the whole log, 0.38 s on
21 MB, and two clients asking absent ids locked every honest lookup out with ``BUSY``).

Real ``evidenced serve`` processes over HTTP, a real audit log of 30,000 lines, attackers from
their own loopback addresses (a peer is a host), with one and with two serving processes.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from daemon_testkit import bytes_binding
from http_testkit import LiveDaemon, read_answer

from daemon import SyncClient
from daemon.audit._synthetic import write_synthetic_log

ORIGIN = "test.example/evidenced/lookups"


def _config(directory: Path, key: Path, workers: int = 1) -> str:
    return (
        f'[server]\nlisten = ""\nsocket = "s"\nworkers = {workers}\nworker_processes = 1\n'
        '[http]\nlisten = "127.0.0.1:0"\n'
        f'[audit]\npath = "{directory / "audit.jsonl"}"\n'
        f'[transparency]\nkey_file = "{key}"\norigin = "{ORIGIN}"\n'
        "checkpoint_interval = 0.05\n"
        '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n'
    )


@pytest.fixture
def key(tmp_path: Path) -> Path:
    path = tmp_path / "log.key"
    subprocess.run(
        [sys.executable, "-m", "daemon.cli", "log", "keygen", "--origin", ORIGIN, "--out", path],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return path


def _ask(sock: socket.socket, query: str) -> tuple[int, Any]:
    sock.sendall(f"GET /v1/log/entry?{query} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
    answer = read_answer(sock, close_wait=0.05)
    sock.settimeout(30)
    return answer.status, answer.json()


def _found(live: LiveDaemon, query: str) -> Any:
    """The entry ``query`` names, asked again while the index is being rebuilt (``BUSY``)."""
    with live.connect(timeout=30) as sock:
        for _ in range(600):
            status, document = _ask(sock, query)
            if status != 503:
                assert status == 200, document
                return document
            trio.run(trio.sleep, 0.05)
    raise AssertionError(f"still BUSY: {document}")


def _wait_rebuilt(live: LiveDaemon) -> None:
    for _ in range(1200):
        index = live.get("/health").json()["status"]["transparency"]["lookup_index"]
        if index["rebuilt"]:
            assert index["failed"] is None, index
            return
        trio.run(trio.sleep, 0.05)
    raise AssertionError(f"the index was not rebuilt: {index}")


@pytest.fixture
def big_log(tmp_path: Path, key: Path) -> Iterator[tuple[LiveDaemon, list[dict[str, Any]]]]:
    directory = tmp_path / "log"
    directory.mkdir()
    write_synthetic_log(directory / "audit.jsonl", 30_000)
    records = [json.loads(line) for line in (directory / "audit.jsonl").read_bytes().splitlines()]
    live = LiveDaemon(config_text=_config(directory, key))
    try:
        _wait_rebuilt(live)
        yield live, [record for record in records if "decision_id" in record]
    finally:
        live.stop()
        live.cleanup()


class _Attack:
    """Eight keep-alive connections from ``source`` asking, back to back, absent decision ids
    and present ones (which hold a read slot), until :meth:`stop`; ``statuses`` they got."""

    def __init__(self, live: LiveDaemon, source: str, ids: list[str]) -> None:
        self.live, self.source, self.ids = live, source, ids
        self.statuses: list[int] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._one, args=(n,)) for n in range(8)]
        for thread in self._threads:
            thread.start()

    def _one(self, number: int) -> None:
        address = (self.source, 0)
        with socket.create_connection(self.live.http, timeout=30, source_address=address) as sock:
            while not self._stop.is_set():
                present = self.ids[(number * 977 + len(self.statuses)) % len(self.ids)]
                for query in (f"decision_id={uuid.uuid4()}", f"decision_id={present}"):
                    self.statuses.append(_ask(sock, query)[0])

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)


def test_absent_id_lookups_from_two_peers_never_lock_an_honest_lookup_out(
    big_log: tuple[LiveDaemon, list[dict[str, Any]]],
) -> None:
    live, records = big_log
    ids = [record["decision_id"] for record in records]
    attackers = [_Attack(live, source, ids) for source in ("127.0.0.2", "127.0.0.3")]
    try:
        while min(len(attack.statuses) for attack in attackers) < 50:  # both under way
            trio.run(trio.sleep, 0.02)
        honest = []
        with live.connect(timeout=30) as sock:
            for record in records[::1300][:22]:
                status, document = _ask(sock, f"decision_id={record['decision_id']}")
                honest.append(status)
                if status == 200:
                    assert json.loads(document["line"])["seq"] == record["seq"]
                    assert document["log_index"] == record["seq"] - 1
    finally:
        for attack in attackers:
            attack.stop()
    assert honest == [200] * 22
    assert {*attackers[0].statuses, *attackers[1].statuses} <= {200, 404, 503}


@pytest.mark.parametrize("workers", [1, 2])
def test_a_lookup_after_a_restart_finds_the_lines_written_before(
    tmp_path: Path, key: Path, workers: int
) -> None:
    directory = tmp_path / "log"
    directory.mkdir()
    first = LiveDaemon(config_text=_config(directory, key, workers))
    try:
        client = SyncClient(first.base, request_timeout=30)
        before = [client.submit("bytes", bytes_binding(b"%d" % n), [b"%d" % n]) for n in range(5)]
    finally:
        assert first.stop() == 0
        first.cleanup()
    second = LiveDaemon(config_text=_config(directory, key, workers))
    try:
        client = SyncClient(second.base, request_timeout=30)
        after = client.submit("bytes", bytes_binding(b"after"), [b"after"])
        for result in [*before, after]:
            assert result.log_index is not None and result.audit_line is not None
            record = json.loads(result.audit_line)
            for query in (
                f"decision_id={result.decision_id}",
                f"line_digest={record['line_digest']}",
                f"index={result.log_index}",
            ):
                document = _found(second, query)
                assert document == {"log_index": result.log_index, "line": result.audit_line}
    finally:
        assert second.stop() == 0
        second.cleanup()
