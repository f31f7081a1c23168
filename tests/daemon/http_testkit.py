"""Shared parts of the HTTP front end's tests: a live daemon process, raw exchanges, curl.

Imported as ``http_testkit`` (conftest puts this folder on the path). The daemon is the real
``evidenced serve`` in a child process, on 127.0.0.1 port 0 (HTTP and binary) and a Unix
socket in a short temporary directory; requests go over plain sockets, curl or the client.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs
import pytest

from daemon.server._routes import TABLE, Match, Operation
from mechanism.formation import FormationPathCertificateMechanism, formation_binding

ROOT = Path(__file__).resolve().parents[2]
FORMATION = ROOT / "fixtures" / "formation"
CURL = shutil.which("curl")
needs_curl = pytest.mark.skipif(CURL is None, reason="curl is not installed (run make curl)")

CONFIG = """
[server]
listen = "127.0.0.1:0"
socket = "s"
idle_timeout = {idle}
worker_processes = 1

[http]
listen = "127.0.0.1:0"
header_timeout = {header}
{http_extra}

[audit]
path = "audit.jsonl"

[sessions.formation]
mechanisms = ["formation"]

[sessions.bytes]
mechanisms = ["bytes-sha256"]
max_evidence_items = 2
max_evidence_bytes = 4096
"""


def atom() -> tuple[bytes, bytes, dict[str, Any]]:
    """The minimal formation pair and its honest binding (wire form)."""
    subject = (FORMATION / "atom.subject.json").read_bytes()
    certificate = (FORMATION / "atom.certificate.json").read_bytes()
    digest = FormationPathCertificateMechanism().mechanism_digest
    binding = formation_binding(subject, certificate, mechanism_digest=digest).to_dict()
    return subject, certificate, binding


def json_body(binding: dict[str, Any], *items: bytes) -> bytes:
    evidence = [{"base64": base64.b64encode(item).decode()} for item in items]
    return json.dumps({"binding": binding, "evidence": evidence}).encode()


@attrs.define
class Answer:
    """One HTTP answer read off a raw socket."""

    status: int
    headers: dict[str, str]
    body: bytes
    closed: bool

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def error(self) -> dict[str, Any]:
        document = self.json()
        assert set(document) == {"error"}, document
        error: dict[str, Any] = document["error"]
        assert set(error) == {"code", "message", "fault", "decision_id"}
        return error


class LiveDaemon:
    """``evidenced serve`` in a child process (HTTP, binary TCP and a Unix socket)."""

    def __init__(
        self,
        *,
        idle: float = 5.0,
        header: float = 2.0,
        http_extra: str = "",
        config_text: str | None = None,
    ) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="evh", dir="/tmp"))
        config = self.config_path = self.directory / "daemon.toml"
        if config_text is None:
            config_text = CONFIG.format(idle=idle, header=header, http_extra=http_extra)
        config.write_text(config_text)
        self.stderr_path = self.directory / "stderr.txt"
        self._stderr = self.stderr_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "daemon.cli", "serve", "--config", str(config)],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=ROOT,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(10)
            raise RuntimeError(f"the daemon did not start: {self.stderr()}")
        self.started: dict[str, Any] = json.loads(line)
        host, port = self.started["http"].rsplit(":", 1)
        self.http = (host, int(port))
        self.base = f"http://{host}:{port}"
        self.socket = str(self.directory / "s")
        self.audit_path = self.directory / "audit.jsonl"

    def stderr(self) -> str:
        return self.stderr_path.read_text("utf-8", "replace")

    def audit(self) -> list[dict[str, Any]]:
        lines = self.audit_path.read_text("utf-8").splitlines()
        return [json.loads(line) for line in lines]

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._stderr.close()
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.process.returncode

    def cleanup(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- raw HTTP

    def connect(self, timeout: float = 10.0) -> socket.socket:
        return socket.create_connection(self.http, timeout=timeout)

    def exchange(self, data: bytes | list[bytes], *, pause: float = 0.0) -> Answer:
        """Send ``data`` (pieces ``pause`` seconds apart) on a new connection; the answer."""
        with self.connect() as sock:
            for piece in [data] if isinstance(data, bytes) else data:
                try:
                    sock.sendall(piece)
                except (BrokenPipeError, ConnectionResetError):
                    break  # refused early: read the answer
                if pause:
                    time.sleep(pause)
            return read_answer(sock)

    def get(self, path: str) -> Answer:
        return self.exchange(f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())

    def post(
        self, path: str, body: bytes, content_type: str = "application/json", extra: str = ""
    ) -> Answer:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n"
        )
        return self.exchange(head.encode() + body)


#: How long an answer that does not announce ``Connection: close`` is watched for a close
#: anyway (a server that closes without saying so is caught; a kept-alive connection does not
#: cost every request ``close_wait`` seconds).
KEEP_ALIVE_WAIT = 0.05


def read_answer(sock: socket.socket, *, close_wait: float = 2.0) -> Answer:
    """One answer (by its Content-Length), then whether the server closes: within
    ``close_wait`` seconds when the answer announces ``Connection: close``, else within
    :data:`KEEP_ALIVE_WAIT` (at most ``close_wait``)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = _recv(sock)
        if not chunk:
            raise AssertionError(f"connection closed before an answer: {data!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = _recv(sock)
        if not chunk:
            break
        rest += chunk
    announced = headers.get("connection", "").lower() == "close"
    sock.settimeout(close_wait if announced else min(close_wait, KEEP_ALIVE_WAIT))
    try:
        closed = _recv(sock) == b""
    except TimeoutError:
        closed = False
    return Answer(status, headers, rest[:length], closed)


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except ConnectionResetError:
        return b""


def curl(*args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[bytes]:
    """The real curl binary (``-sS``), its exit status not checked."""
    assert CURL is not None
    return subprocess.run(
        [CURL, "-sS", "--max-time", str(timeout), *args],
        capture_output=True,
        timeout=timeout + 5,
        check=False,
        env={**os.environ, "NO_PROXY": "*", "no_proxy": "*"},
    )


def matches(operation: Operation, path: str) -> bool:
    """Whether ``path`` is one of ``operation``'s, read from its template alone (the route
    table's rule 2), not from the codec's dispatch."""
    if operation.match is Match.EXACT:
        return path == operation.path
    head = operation.path.split("{", 1)[0]
    if operation.match is Match.PREFIX:
        return path.startswith(head)
    pattern = re.escape(operation.path).replace(re.escape("{name}"), "[^/]+")
    return re.fullmatch(pattern, path) is not None


def off_table_paths() -> list[str]:
    """Paths near the route table's (each sample cut, extended, doubled, capitalised) and a
    few others, that no template matches."""
    near = {"/", "/v1", "/v1/", "/v2/sessions", "/tile", "/v1/log", "/v1/log/", "/openapi.yaml"}
    near |= {"/docs", "/v1/sessions/", "/v1/sessions//decisions", "/v1/sessions/x/decision"}
    near |= {"/v1/sessions/formation", "/v1/sessions/a/b/decisions", "/Health", "/health/x"}
    for operation in TABLE:
        path = operation.sample.split("?", 1)[0]
        near |= {path[:-1], path + "/", path + "x", path + path, path.upper(), "/x" + path}
    found = sorted(p for p in near if not any(matches(op, p) for op in TABLE))
    assert len(found) > 40  # the walk asks something
    return found
