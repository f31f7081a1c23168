"""Where shipped audit lines go: the event every sink ships, the HTTP sink and the console
sink (``docs/audit-log.md`` "Shipping decision logs").

Rules (the contract):

1. One event per shipped line (:func:`event_of`): a JSON object with sorted keys, no
   whitespace, rendered with the audit line's escapes of terminal-hostile code points:
   ``labels`` (:func:`daemon.audit._shipping_config.instance_labels`), the line's ``event``,
   ``seq``, ``timestamp`` and, when it has one, ``decision_id`` (copies, for a receiver's
   index and de-duplication), and ``line``: the audit line's exact text without its newline.
   Only ``line`` is the record: its SHA-256 body digest is its ``line_digest``, its ``prev``
   chains it, and it is leaf ``seq - 1`` of the transparency log, so a receiver verifies
   what it got without trusting the sink.
2. :class:`HttpSink` POSTs one batch as a JSON array of events, gzip-compressed
   (``Content-Encoding: gzip``, ``Content-Type: application/json``, as OPA's decision-log
   service API takes it), with ``Authorization: Bearer`` and the token file's first line
   read at each upload when configured (a batch sent again is compressed once), through one
   ``httpx`` client (kept connections; the CA bundle of ``tls_ca``, else the system's;
   ``timeout`` seconds per phase; no proxy or ``.netrc`` from the environment; redirects not
   followed). A ``2xx`` answer acknowledges the batch; anything else, or no answer, is
   :class:`SinkFailed` naming it.
3. :class:`ConsoleSink` writes one event per line to standard output (file descriptor 1), a
   batch with one ``write(2)`` loop; a failed write is :class:`SinkFailed`. Nothing else of
   ``serve`` writes there while it has one (``docs/operations.md`` §11).
"""

from __future__ import annotations

import gzip
import os
import ssl
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

import orjson

from daemon.audit._audit_format import escape_hostile
from daemon.audit._shipping_config import SinkConfig, read_token
from daemon.wire._errors import ServiceError

__all__ = ["ConsoleSink", "HttpSink", "Sink", "SinkFailed", "event_of", "open_sink"]

#: gzip level of a batch: most of level 9's ratio on JSON lines for a fraction of its time.
GZIP_LEVEL: Final = 6
STDOUT: Final = 1


class SinkFailed(ServiceError):
    """A batch was not acknowledged; the message says why (the batch is sent again)."""


class Sink(Protocol):
    def send(self, events: Sequence[bytes]) -> None: ...

    def close(self) -> None: ...


def event_of(line: bytes, fields: Mapping[str, Any], labels: Mapping[str, str]) -> bytes:
    """Rule 1: the event of one audit ``line`` (without its newline), ``fields`` parsed."""
    event: dict[str, Any] = {
        "labels": labels,
        "event": fields.get("event"),
        "seq": fields.get("seq"),
        "timestamp": fields.get("timestamp"),
        "line": line.decode("utf-8"),
    }
    decision_id = fields.get("decision_id")
    if decision_id is not None:
        event["decision_id"] = decision_id
    return escape_hostile(orjson.dumps(event, option=orjson.OPT_SORT_KEYS))


def batch_body(events: Sequence[bytes]) -> bytes:
    """Rule 2: the gzip-compressed JSON array of ``events``."""
    return gzip.compress(b"[" + b",".join(events) + b"]", compresslevel=GZIP_LEVEL, mtime=0)


class HttpSink:
    """Rule 2."""

    def __init__(self, config: SinkConfig, user_agent: str) -> None:
        import httpx

        assert config.url is not None
        self.url = config.url
        self.target = config.target
        self.token_file = config.token_file
        verify: ssl.SSLContext | bool = True
        if config.tls_ca is not None:
            verify = ssl.create_default_context(cafile=config.tls_ca)
        self._client = httpx.Client(
            verify=verify,
            timeout=config.timeout,
            trust_env=False,
            follow_redirects=False,
            headers={"User-Agent": user_agent},
        )
        self._errors = (httpx.HTTPError, httpx.InvalidURL, OSError)
        #: The last batch and its body: a batch sent again after a failure is the same
        #: sequence (``daemon.audit._shipper`` rule 3), so it is compressed once.
        self._body: tuple[Sequence[bytes], bytes] | None = None

    def send(self, events: Sequence[bytes]) -> None:
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        if self.token_file is not None:
            try:
                headers["Authorization"] = f"Bearer {read_token(self.token_file)}"
            except (OSError, ValueError) as error:
                reason = getattr(error, "strerror", None) or str(error)
                raise SinkFailed(f"token_file {self.token_file}: {reason}") from None
        if self._body is None or self._body[0] is not events:
            self._body = (events, batch_body(events))
        try:
            answer = self._client.post(self.url, content=self._body[1], headers=headers)
        except self._errors as error:
            raise SinkFailed(f"POST {self.target}: {type(error).__name__}: {error}") from None
        if not 200 <= answer.status_code < 300:
            said = answer.text[:160].strip()
            raise SinkFailed(
                f"POST {self.target}: HTTP {answer.status_code} {answer.reason_phrase}"
                + (f": {said!a}" if said else "")
            )

    def close(self) -> None:
        self._client.close()


class ConsoleSink:
    """Rule 3."""

    target = "stdout"

    def send(self, events: Sequence[bytes]) -> None:
        view = memoryview(b"\n".join(events) + b"\n")
        try:
            while view:
                view = view[os.write(STDOUT, view) :]
        except OSError as error:
            raise SinkFailed(f"stdout: {error.strerror or error}") from None

    def close(self) -> None:
        pass


def open_sink(config: SinkConfig, user_agent: str) -> Sink:
    """The sink ``config`` describes."""
    if config.type == "console":
        return ConsoleSink()
    return HttpSink(config, user_agent)
