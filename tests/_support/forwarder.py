"""A real TCP forwarder between a client and a daemon, for the client tests: it counts the
connections and the HTTP requests that pass, and can cut a connection the moment a chosen
request has reached the daemon, before its answer comes back.

Threads and plain sockets (no event loop), so the same forwarder serves asyncio, trio and
blocking clients. Imported as ``forwarder`` (``tests/_support`` is on the path).
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_REQUEST_LINE = re.compile(rb"(GET|POST|HEAD|PUT|DELETE) (\S+) HTTP/1\.1\r\n")


class Forwarder:
    """Listens on 127.0.0.1 (or the Unix socket ``listen_unix``) and forwards each connection
    to ``upstream``."""

    def __init__(
        self,
        upstream: tuple[str, int],
        *,
        cut_after: bytes | None = None,
        listen_unix: str | None = None,
    ) -> None:
        self.upstream = upstream
        #: Cut a connection (both ways) once this many bytes of a request containing
        #: ``cut_after`` went upstream, and the upstream had time to read them.
        self.cut_after = cut_after
        if listen_unix is None:
            self.listener = socket.create_server(("127.0.0.1", 0))
            self.address = self.listener.getsockname()[:2]
        else:
            self.listener = socket.socket(socket.AF_UNIX)
            self.listener.bind(listen_unix)
            self.listener.listen()
            self.address = (listen_unix, 0)
        self.connections = 0
        #: Every HTTP request line seen going upstream, in order: (method, path).
        self.requests: list[tuple[str, str]] = []
        #: Bytes that went upstream, over all connections.
        self.sent = b""
        self.cuts = 0
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._stop = False
        self._accept = threading.Thread(target=self._serve, daemon=True)
        self._accept.start()

    @property
    def url(self) -> str:
        return f"http://{self.address[0]}:{self.address[1]}"

    @property
    def tcp(self) -> str:
        return f"tcp://{self.address[0]}:{self.address[1]}"

    def _serve(self) -> None:
        while not self._stop:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            upstream = socket.create_connection(self.upstream)
            with self._lock:
                self._sockets += [client, upstream]
            answers_blocked = threading.Event()  # set before a cut request goes upstream
            for source, sink, up in ((client, upstream, True), (upstream, client, False)):
                thread = threading.Thread(
                    target=self._pump,
                    args=(source, sink, up, client, answers_blocked),
                    daemon=True,
                )
                thread.start()
                self._threads.append(thread)

    def _pump(
        self,
        source: socket.socket,
        sink: socket.socket,
        up: bool,
        client: socket.socket,
        answers_blocked: threading.Event,
    ) -> None:
        seen = b""
        try:
            while True:
                data = source.recv(65536)
                if not up and answers_blocked.is_set():
                    return  # the answer to a cut request: never reaches the client
                if not data:
                    sink.shutdown(socket.SHUT_WR)
                    return
                if not up:
                    sink.sendall(data)
                    continue
                seen += data
                cut = self.cut_after is not None and self.cut_after in seen
                if cut:
                    answers_blocked.set()  # before the daemon can have answered
                sink.sendall(data)
                with self._lock:
                    self.sent += data
                    self.requests += [
                        (m.group(1).decode(), m.group(2).decode())
                        for m in _REQUEST_LINE.finditer(data)
                    ]
                if cut:
                    self._cut(client)
                    return
        except OSError:
            return

    def _cut(self, client: socket.socket) -> None:
        """Drop the client's side; the daemon's stays open, so it decides and answers (into
        nothing: its answer is dropped)."""
        with self._lock:
            self.cuts += 1
        client.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._stop = True
        self.listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            sock.close()
        for thread in self._threads:
            thread.join(5)


@contextmanager
def forwarding(
    upstream: tuple[str, int], *, cut_after: bytes | None = None, listen_unix: str | None = None
) -> Iterator[Forwarder]:
    forwarder = Forwarder(upstream, cut_after=cut_after, listen_unix=listen_unix)
    try:
        yield forwarder
    finally:
        forwarder.close()
