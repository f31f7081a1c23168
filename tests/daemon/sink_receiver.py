"""A real decision-log receiver for the sink tests: an HTTP/1.1 server in a thread of the test
process that takes what OPA's decision-log service API takes (a POST of a gzip-compressed
JSON array), gunzips, parses and records every event, and can be told to fail or stall.

Imported as ``sink_receiver`` (conftest puts this folder on the path).
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: What the receiver does with the next POST:
#: ``ok`` records its events and answers 200; ``fail`` answers 503 and records nothing;
#: ``store_once_then_fail`` records the events, answers 500 (the acknowledgement is lost: the
#: sink sends them again) and turns to ``fail``; ``stall`` holds the request unanswered until
#: :meth:`Receiver.release` (then 503, nothing recorded).
MODES = ("ok", "fail", "store_once_then_fail", "stall")


class Receiver:
    """Start it, point a sink at :attr:`url`, read :attr:`events`; :meth:`close` at the end."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.events: list[dict[str, Any]] = []
        #: Events recorded by a POST whose answer was a failure (the sink resends them).
        self.unacknowledged: list[dict[str, Any]] = []
        self.posts = 0
        self.failed_posts = 0
        self.stalled_posts = 0
        self.authorizations: set[str | None] = set()
        self.problems: list[str] = []
        self.lock = threading.Lock()
        self._released = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver._take(self, body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        port = self.server.server_address[1]
        return f"http://127.0.0.1:{port}/v1/logs"

    def _answer(self, handler: BaseHTTPRequestHandler, status: int) -> None:
        handler.send_response(status)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def _take(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        with self.lock:
            self.posts += 1
            self.authorizations.add(handler.headers.get("Authorization"))
            mode = self.mode
            if mode == "store_once_then_fail":
                self.mode = "fail"
        if mode == "stall":
            with self.lock:
                self.stalled_posts += 1
            self._released.wait(120)
            self._answer(handler, 503)
            return
        if mode == "fail":
            with self.lock:
                self.failed_posts += 1
            self._answer(handler, 503)
            return
        if handler.headers.get("Content-Encoding") != "gzip" or not (
            handler.headers.get("Content-Type", "").startswith("application/json")
        ):
            self.problems.append(f"headers {dict(handler.headers)}")
        try:
            events = json.loads(gzip.decompress(body))
            assert isinstance(events, list)
        except (OSError, ValueError, AssertionError) as error:
            self.problems.append(f"body: {error}")
            self._answer(handler, 400)
            return
        with self.lock:
            self.events.extend(events)
            if mode == "store_once_then_fail":
                self.unacknowledged.extend(events)
                self.failed_posts += 1
        self._answer(handler, 500 if mode == "store_once_then_fail" else 200)

    def release(self) -> None:
        """End every stalled request (answered 503)."""
        self._released.set()

    def decisions(self) -> list[dict[str, Any]]:
        with self.lock:
            return [event for event in self.events if event.get("event") == "decision"]

    def wait_for(self, condition: Callable[[Receiver], bool], seconds: float = 180.0) -> None:
        """Until ``condition(self)`` holds; AssertionError (with what arrived) if it does not
        within ``seconds`` (a wait for a condition, not a measurement)."""
        deadline = time.monotonic() + seconds
        while not condition(self):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"receiver: {len(self.events)} events, {self.posts} posts, "
                    f"{self.failed_posts} failed, mode {self.mode}"
                )
            time.sleep(0.05)

    def close(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()
