"""A minimal headless-Chromium driver over the DevTools protocol on a pipe (docs/adr/0004).

Rules (the contract):

1. :func:`find_chromium` returns Debian's ``chromium`` (``$CHROMIUM`` overrides), or ``None``.
2. :class:`Chromium` starts one browser process with ``--remote-debugging-pipe`` (commands on
   fd 3, answers on fd 4, each message JSON ended by a NUL byte), the flags that work on this
   project's machines and a fresh ``--user-data-dir`` it removes on :meth:`Chromium.close`.
   No port is opened and no Python package beyond the standard library is needed.
3. Every wait has a deadline (:data:`TIMEOUT`); a browser that dies or stays silent raises
   :class:`BrowserError`, never hangs.
4. A :class:`Page` records, from the moment it is created: console messages of type
   ``error``/``assert``, uncaught exceptions, log entries of level ``error``, and every
   network request's URL — so a test can say "no console errors, no fetch but the page".
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Final

TIMEOUT: Final = 60.0
FLAGS: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--font-render-hinting=none",
)


class BrowserError(Exception):
    """The browser died, answered with a protocol error, or did not answer in time."""


def find_chromium() -> str | None:
    override = os.environ.get("CHROMIUM")
    if override:
        return override if Path(override).exists() else None
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _high(pair: tuple[int, int]) -> tuple[int, int]:
    """The pipe's two ends moved to descriptors numbered 10 or above."""
    moved = []
    for fd in pair:
        moved.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10))
        os.close(fd)
    return moved[0], moved[1]


class Chromium:
    def __init__(self, binary: str | None = None) -> None:
        found = binary or find_chromium()
        if found is None:
            raise BrowserError("no chromium binary found")
        self._profile = tempfile.mkdtemp(prefix="evd-chromium-")
        commands_read, self._commands = _high(os.pipe())
        self._answers, answers_write = _high(os.pipe())
        # bash moves the two pipe ends to fds 3 and 4, as --remote-debugging-pipe wants (from
        # fds >= 10, so neither redirection overwrites the other's source; dash cannot).
        script = f'exec "$0" "$@" 3<&{commands_read} 4>&{answers_write}'
        self._process = subprocess.Popen(
            [
                "bash",
                "-c",
                script,
                found,
                *FLAGS,
                f"--user-data-dir={self._profile}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            pass_fds=(commands_read, answers_write),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(commands_read)
        os.close(answers_write)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        try:
            self.call("Browser.getVersion")
        except BaseException:
            self.close()
            raise

    # -- protocol

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrowserError("the browser did not answer in time")
            ready, _, _ = select.select([self._answers], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self._answers, 1 << 20)
            if not chunk:
                raise BrowserError("the browser closed its DevTools pipe (it died)")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> Any:
        self._next_id += 1
        ident = self._next_id
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode("utf-8") + b"\0")
        deadline = time.monotonic() + TIMEOUT
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == ident:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def wait_for(self, method: str, session: str) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT
        for position, event in enumerate(self.events):
            if event.get("method") == method and event.get("sessionId") == session:
                del self.events[position]
                return event
        while True:
            event = self._read_message(deadline)
            if event.get("method") == method and event.get("sessionId") == session:
                return event
            self.events.append(event)

    # -- pages

    def new_page(self, width: int = 1280, height: int = 900) -> Page:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        page = Page(self, target, session)
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=session)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        return page

    def close(self) -> None:
        try:
            if self._process.poll() is None:
                with contextlib.suppress(BrowserError, OSError):
                    self.call("Browser.close")
                try:
                    self._process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait(timeout=10)
        finally:
            for fd in (self._commands, self._answers):
                with contextlib.suppress(OSError):
                    os.close(fd)
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Page:
    def __init__(self, browser: Chromium, target: str, session: str) -> None:
        self.browser = browser
        self.target = target
        self.session = session

    def _mine(self) -> list[dict[str, Any]]:
        return [e for e in self.browser.events if e.get("sessionId") == self.session]

    def open(self, url: str) -> None:
        """Navigate and wait for the load event."""
        result = self.browser.call("Page.navigate", {"url": url}, session=self.session)
        if result.get("errorText"):
            raise BrowserError(f"navigation to {url} failed: {result['errorText']}")
        self.browser.wait_for("Page.loadEventFired", self.session)

    def evaluate(self, expression: str) -> Any:
        result = self.browser.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=self.session,
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} raised: {result['exceptionDetails']}")
        return result["result"].get("value")

    def console_errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries seen so far."""
        self.evaluate("0")  # flush events queued before this point
        errors = []
        for event in self._mine():
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append(json.dumps(params.get("args")))
            elif method == "Runtime.exceptionThrown":
                errors.append(json.dumps(params.get("exceptionDetails")))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                errors.append(json.dumps(params["entry"]))
        return errors

    def requests(self) -> list[str]:
        """URLs of every network request the page made."""
        return [
            e["params"]["request"]["url"]
            for e in self._mine()
            if e.get("method") == "Network.requestWillBeSent"
        ]

    def screenshot(self, path: Path, *, width: int = 1280, max_height: int | None = None) -> None:
        """A PNG of the page at ``width`` CSS pixels: all of it, or its top ``max_height``."""
        height = int(self.evaluate("Math.ceil(document.documentElement.scrollHeight)"))
        if max_height is not None:
            height = min(height, max_height)
        self.browser.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=self.session,
        )
        clip = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        data = self.browser.call(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True, "clip": clip},
            session=self.session,
        )["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        self.browser.call("Target.closeTarget", {"targetId": self.target})
