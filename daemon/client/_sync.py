"""The blocking client: the async client's API for code without an event loop, on a kept
connection.

Rules (the contract):

1. ``SyncClient(url | tcp=(host, port) | unix=path, ...)`` takes the async client's keywords
   (:func:`daemon.client._client.open_client`) and has its methods, results, exceptions and
   retry rule (``daemon.client._client`` rules 2-6; :mod:`daemon.client._retry`), without
   ``async``. Nothing is connected until the first call; the connection (EVD1) or the pool
   (HTTP) is then kept for the next calls and replaced when it must be, before anything is
   sent on it (``daemon.client._blocking`` rule 3). ``with SyncClient(...) as client:``
   closes it at the end of the block, :meth:`SyncClient.close` at once; a client never
   closed is closed when it is collected.
2. The transports are blocking ones, not an event loop in a thread: the binary protocol over a
   plain socket (:mod:`daemon.client._blocking`: importing it loads no event loop, no HTTP
   client and no :mod:`ssl` until a ``tls://`` target), HTTP over ``httpx.Client``
   (:mod:`daemon.client._http_transport`, loaded for an HTTP target only). Over HTTP,
   ``request_timeout`` bounds each read and write of an exchange rather than the whole.
3. One call at a time: a ``SyncClient`` is not shared between threads (a lock would only hide
   the interleaving of two threads' retries); give each thread its own.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from daemon.client import _evd1_calls, _http_calls
from daemon.client._blocking import BlockingConnection
from daemon.client._connect import DEFAULT_KEEPALIVE_EXPIRY, settings
from daemon.client._honest import honest_binding, session_mechanism
from daemon.client._outcomes import BATCH_SIZE, ClientError, RejectedError, SubmitResult
from daemon.client._retry import DEFAULT_RETRY, BatchProgress, Retry
from daemon.wire._protocol import DEFAULT_MAX_RESPONSE_HEADER_BYTES, ErrorCode, HelloAccepted
from session import BoundProposition

if TYPE_CHECKING:
    import ssl

    from daemon.client._http_transport import BlockingHttp
    from daemon.tlog._lookup import LineQuery

__all__ = ["SyncClient"]

T = TypeVar("T")
Binding = BoundProposition | dict[str, Any]
Pair = tuple[Binding | None, Sequence[bytes]]
OnRetry = Callable[[ClientError, float], object]
StrPath = str | os.PathLike[str]


class SyncClient:
    """A blocking client of one daemon (module rules)."""

    def __init__(
        self,
        url: str | None = None,
        *,
        tcp: tuple[str, int] | None = None,
        unix: str | None = None,
        token: str | None = None,
        tls_ca: str | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        connect_timeout: float = 5.0,
        request_timeout: float = 60.0,
        keepalive_expiry: float = DEFAULT_KEEPALIVE_EXPIRY,
        max_response_header_bytes: int = DEFAULT_MAX_RESPONSE_HEADER_BYTES,
        retry: Retry | None = DEFAULT_RETRY,
        on_retry: OnRetry | None = None,
        announcement_ttl: float = 60.0,
    ) -> None:
        checked = settings(
            url,
            tcp=tcp,
            unix=unix,
            token=token,
            tls_ca=tls_ca,
            tls_cert=tls_cert,
            tls_key=tls_key,
            ssl_context=ssl_context,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            keepalive_expiry=keepalive_expiry,
            max_response_header_bytes=max_response_header_bytes,
        )
        self.target = checked.target
        self._retry = retry or Retry(attempts=1)
        self._on_retry = on_retry
        self._announcement_ttl = announcement_ttl
        #: The ``sessions`` answer honest bindings are built from, and when it was received
        #: (``None``: given by :meth:`use_sessions`, kept).
        self._announced: tuple[float | None, list[dict[str, Any]]] | None = None
        self._batches_unknown = False
        self._evd1: BlockingConnection | None = None
        self._http: BlockingHttp | None = None
        if checked.target.http:
            from daemon.client._http_transport import BlockingHttp  # httpx loads for HTTP only

            self._http = BlockingHttp(checked.target, **checked.transport_keywords())
            self._finalizer = weakref.finalize(self, self._http.close)
        else:
            self._evd1 = BlockingConnection(checked.target, **checked.transport_keywords())
            self._finalizer = weakref.finalize(self, self._evd1.close)

    @property
    def protocol(self) -> str:
        """``"evd1"`` or ``"http"``."""
        return "http" if self._http is not None else "evd1"

    @property
    def server(self) -> HelloAccepted | None:
        """The binary protocol's ``hello`` answer on the current connection, if any."""
        return self._evd1.server if self._evd1 is not None else None

    @property
    def connections_opened(self) -> int | None:
        """EVD1 connections opened so far (``None`` over HTTP, whose pool counts its own)."""
        return self._evd1.opened if self._evd1 is not None else None

    def connect(self) -> None:
        """Over EVD1, connect and say ``hello`` now; over HTTP, nothing."""
        if self._evd1 is not None:
            self._attempts(self._evd1.connect)

    # -- one call, its attempts (``daemon.client._client`` rule 3)

    def _attempts(self, attempt: Callable[[], T]) -> T:
        attempts = self._retry.start()
        while True:
            try:
                return attempt()
            except ClientError as error:
                delay = attempts.delay_after(error)
                if delay is None:
                    raise
                self._wait(error, delay)

    def _wait(self, error: ClientError, delay: float) -> None:
        if self._on_retry is not None:
            self._on_retry(error, delay)
        time.sleep(delay)

    def _call(self, name: str, *args: Any) -> Any:
        if self._http is not None:
            http, call = self._http, getattr(_http_calls, name)(*args)
            return self._attempts(lambda: http.call(call))
        assert self._evd1 is not None
        evd1, frame = self._evd1, getattr(_evd1_calls, name)(*args)
        return self._attempts(lambda: evd1.call(frame))

    def _http_only(self, method: str) -> BlockingHttp:
        if self._http is None:
            raise TypeError(f"{method} is an HTTP route: connect with an http:// URL")
        return self._http

    # -- the API (``daemon.client._client``'s, blocking)

    def list_sessions(self) -> list[dict[str, Any]]:
        """The hosted sessions: name, bounds, mechanisms (id, digest, catalog entry)."""
        hosted: list[dict[str, Any]] = self._call("sessions")
        self._announced = (time.monotonic(), hosted)
        return hosted

    def health(self) -> dict[str, Any]:
        """The server's health status and counters."""
        status: dict[str, Any] = self._call("health")
        return status

    def submit(self, session: str, binding: Binding, evidence: Sequence[bytes]) -> SubmitResult:
        """Submit ``evidence`` (raw bytes, in order) for ``binding`` in ``session``."""
        result: SubmitResult = self._call("submit", session, binding, list(evidence))
        return result

    def submit_files(
        self, session: str, *paths: StrPath, binding: Binding | None = None
    ) -> SubmitResult:
        """Submit the evidence files ``paths`` with their honest binding, or ``binding``."""
        evidence = [Path(path).read_bytes() for path in paths]
        if binding is None:
            binding = self.honest_binding(session, evidence)
        return self.submit(session, binding, evidence)

    def honest_binding(self, session: str, evidence: Sequence[bytes]) -> BoundProposition:
        """The honest binding of ``evidence`` in ``session``; nothing is submitted."""
        announced = self._announced
        if announced is None or (
            announced[0] is not None and time.monotonic() - announced[0] > self._announcement_ttl
        ):
            self.list_sessions()
            announced = self._announced
        assert announced is not None
        return honest_binding(session_mechanism(announced[1], session), evidence)

    def use_sessions(self, sessions: list[dict[str, Any]]) -> None:
        """Build honest bindings from this ``sessions`` answer (one saved by ``evidenced
        sessions``, say) instead of asking the daemon: a submit is then one request. Kept
        until the client closes; a stale answer makes bindings the daemon answers UNKNOWN."""
        self._announced = (None, list(sessions))

    def submit_batch(
        self, session: str, pairs: Sequence[Pair]
    ) -> list[SubmitResult | RejectedError]:
        """Decide ``pairs`` of ``session`` in batches of 64: per pair, in order, its decision
        or its refusal (``daemon.client._client`` rule 4)."""
        if not pairs:
            raise ValueError("a batch carries at least one pair")
        bound: list[tuple[Binding, list[bytes]]] = []
        for binding, evidence in pairs:
            items = list(evidence)
            bound.append(
                (self.honest_binding(session, items) if binding is None else binding, items)
            )
        results: list[SubmitResult | RejectedError] = []
        for start in range(0, len(bound), BATCH_SIZE):
            try:
                results += self._batch(session, bound[start : start + BATCH_SIZE])
            except ClientError as error:
                error.results = results + (error.results or [])
                raise
        return results

    def _batch(
        self, session: str, pairs: list[tuple[Binding, list[bytes]]]
    ) -> list[SubmitResult | RejectedError]:
        progress: BatchProgress[tuple[Binding, list[bytes]]]
        progress = BatchProgress(pairs)
        attempts = self._retry.start()
        while True:
            try:
                refused = progress.record(self._one_batch(session, progress.waiting()))
            except ClientError as error:  # the whole batch refused, or no answer
                delay = attempts.delay_after(error)
                if delay is None:
                    if progress.recorded:
                        error.results = progress.results()
                    raise
                self._wait(error, delay)
                continue
            delay = None if refused is None else attempts.delay_after(refused)
            if delay is None:
                return progress.results()
            assert refused is not None
            self._wait(refused, delay)

    def _one_batch(
        self, session: str, pairs: list[tuple[Binding, list[bytes]]]
    ) -> list[SubmitResult | RejectedError]:
        if self._http is not None:
            answers: list[SubmitResult | RejectedError]
            answers = self._http.call(_http_calls.submit_batch(session, pairs))
            return answers
        assert self._evd1 is not None
        if not self._batches_unknown:
            try:
                answers = self._evd1.call(_evd1_calls.submit_batch(session, pairs))
            except RejectedError as error:
                if error.code != ErrorCode.UNKNOWN_KIND.name:
                    raise
                self._batches_unknown = True  # an older server: pairs one by one
            else:
                return answers
        results: list[SubmitResult | RejectedError] = []
        for binding, evidence in pairs:
            single = _evd1_calls.submit(session, binding, evidence)
            try:
                results.append(self._evd1.call(single))
            except RejectedError as refused:
                results.append(refused)
        return results

    # -- the transparency log

    def checkpoint(self) -> bytes:
        note: bytes = self._call("checkpoint")
        return note

    def inclusion_proof(self, index: int, tree_size: int) -> list[bytes]:
        proof: list[bytes] = self._call("inclusion_proof", index, tree_size)
        return proof

    def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        proof: list[bytes] = self._call("consistency_proof", old_size, new_size)
        return proof

    # -- HTTP only

    def ready(self) -> dict[str, Any]:
        document: dict[str, Any] = self._http_only("ready").call(_http_calls.ready())
        return document

    def metrics(self) -> str:
        return self._http_only("metrics").call(_http_calls.metrics())

    def tile(self, level: int | str, index: int, width: int = 256) -> bytes:
        return self._http_only("tile").call(_http_calls.tile(level, index, width))

    def log_entry(self, query: LineQuery) -> tuple[int, bytes]:
        return self._http_only("log_entry").call(_http_calls.log_entry(query))

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
