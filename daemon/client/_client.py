"""The async client: one client for asyncio and trio applications, over EVD1 or HTTP, on anyio.

Rules (the contract):

1. ``async with open_client(url | tcp=(host, port) | unix=path, ...) as client`` makes a
   :class:`Client` (:mod:`daemon.client._connect` checks the keywords): ``tcp://``,
   ``tls://`` and ``unix:`` targets speak the binary protocol over a kept anyio connection
   (:mod:`daemon.client._evd1_async`; connected, with its ``hello``, before the block starts,
   so a refused or unreachable daemon fails there); ``http://``, ``https://`` and
   ``http+unix:`` the HTTP/JSON API through an httpx pool
   (:mod:`daemon.client._http_transport`). The same methods, results and exceptions either
   way; it runs under any event loop anyio supports (asyncio, trio). Leaving the block
   closes it; so does :meth:`Client.aclose`.
2. A decision is data: :meth:`Client.submit` returns a :class:`SubmitResult` whatever the
   outcome (its ``evaluation`` typed: :mod:`daemon.client._results`); it raises only when
   there is no decision: :class:`TransportError` (cannot connect, connection lost; CLI exit
   69), :class:`ClientTimeout` (75), :class:`RejectedError` (a peer-fault refusal: ``.code``,
   ``.message``, ``.decision_id``; 65), :class:`ServiceUnavailable` (a service-fault
   refusal; 75, ``AUDIT_FAILED``/``INTERNAL`` 70), :class:`ServerProtocolError`. After any of
   them the client may be used again: the next call opens a new connection when it must.
3. **Retries** (``retry``, default :data:`~daemon.client._retry.DEFAULT_RETRY`; ``None``
   never): a refusal the daemon made before admission — ``BUSY`` (``503`` over HTTP),
   ``SHUTTING_DOWN`` — is tried again after a bounded, jittered exponential backoff that
   honours ``Retry-After``; nothing else, ever, and in particular never a request whose
   connection broke after it was sent: it may have been decided
   (:mod:`daemon.client._retry`). ``on_retry(error, delay)``, when given, is called before
   each wait.
4. :meth:`Client.submit_batch` takes any number of pairs and sends them in batches of
   :data:`BATCH_SIZE` (``POST .../decisions:batch`` / EVD1 ``submit_batch``), one request
   each; it returns, per pair in order, its :class:`SubmitResult` or the
   :class:`RejectedError` of that pair's refusal (returned, not raised). A pair refused
   ``BUSY`` inside a batch (the server at its in-flight cap part-way through) is sent again
   with the pairs refused with it, under rule 3; the decided ones never. A pair's binding may
   be ``None``: its honest binding is built (rule 5). A refusal of a whole batch is raised as
   for :meth:`Client.submit`; when pairs before it were already answered, the exception's
   ``results`` holds their answers (those of the first ``len(results)`` pairs, in order). A
   binary-protocol server that answers ``UNKNOWN_KIND`` (it
   predates batches) gets the pairs one ``submit`` at a time, and the client remembers it.
5. :meth:`Client.submit_files` reads evidence files and submits them with their honest
   binding, built by the installed provider of the session's mechanism as the daemon
   announces it (:mod:`daemon.client._honest`, as ``evidenced submit`` does). The
   ``sessions`` answer this needs is asked once and kept for ``announcement_ttl`` seconds
   (60 by default): a client submitting many files makes one ``sessions`` request, then one
   request per pair (or per batch).
6. Transparency log (``docs/spec/transparency.md §10``): :meth:`Client.checkpoint`,
   :meth:`Client.inclusion_proof`, :meth:`Client.consistency_proof` return the signed note
   and decoded proof hashes as the daemon sent them; nothing is verified here. Over HTTP
   only, :meth:`Client.ready`, :meth:`Client.metrics`, :meth:`Client.tile` and
   :meth:`Client.log_entry` (``TypeError`` over EVD1, nothing sent).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from daemon.client import _evd1_calls, _http_calls
from daemon.client._connect import DEFAULT_KEEPALIVE_EXPIRY, Settings, settings
from daemon.client._evd1_async import Evd1Connection
from daemon.client._honest import honest_binding, session_mechanism
from daemon.client._outcomes import (
    BATCH_SIZE,
    CLIENT_NAME,
    ClientError,
    ClientTimeout,
    RejectedError,
    ServerProtocolError,
    ServiceUnavailable,
    SubmitResult,
    TransportError,
)
from daemon.client._retry import DEFAULT_RETRY, BatchProgress, Retry
from daemon.wire._protocol import DEFAULT_MAX_RESPONSE_HEADER_BYTES, ErrorCode, HelloAccepted
from session import BoundProposition

if TYPE_CHECKING:
    import ssl

    from daemon.client._http_transport import AsyncHttp
    from daemon.tlog._lookup import LineQuery

__all__ = [
    "BATCH_SIZE",
    "CLIENT_NAME",
    "Client",
    "ClientError",
    "ClientTimeout",
    "RejectedError",
    "ServerProtocolError",
    "ServiceUnavailable",
    "SubmitResult",
    "TransportError",
    "open_client",
]

T = TypeVar("T")
Binding = BoundProposition | dict[str, Any]
Pair = tuple[Binding | None, Sequence[bytes]]
OnRetry = Callable[[ClientError, float], object]
StrPath = str | os.PathLike[str]


class Client:
    """A client of one daemon (module rules); create with :func:`open_client`."""

    def __init__(
        self,
        settings: Settings,
        *,
        retry: Retry | None = DEFAULT_RETRY,
        on_retry: OnRetry | None = None,
        announcement_ttl: float = 60.0,
    ) -> None:
        self.target = settings.target
        self._retry = retry or Retry(attempts=1)
        self._on_retry = on_retry
        self._announcement_ttl = announcement_ttl
        #: The ``sessions`` answer honest bindings are built from, and when it was received
        #: (``None``: given by :meth:`use_sessions`, kept).
        self._announced: tuple[float | None, list[dict[str, Any]]] | None = None
        self._batches_unknown = False
        self._evd1: Evd1Connection | None = None
        self._http: AsyncHttp | None = None
        if settings.target.http:
            from daemon.client._http_transport import AsyncHttp  # httpx loads for HTTP only

            self._http = AsyncHttp(settings.target, **settings.transport_keywords())
        else:
            self._evd1 = Evd1Connection(settings.target, **settings.transport_keywords())

    @property
    def protocol(self) -> str:
        """``"evd1"`` or ``"http"``."""
        return "http" if self._http is not None else "evd1"

    @property
    def server(self) -> HelloAccepted | None:
        """The binary protocol's ``hello`` answer on the current connection (``None`` over
        HTTP, or between connections)."""
        return self._evd1.server if self._evd1 is not None else None

    async def connect(self) -> None:
        """Over EVD1, connect and say ``hello`` now (retried as rule 3 says); over HTTP,
        nothing (the pool connects on the first request)."""
        if self._evd1 is not None:
            evd1 = self._evd1
            await self._attempts(evd1.connect)

    # -- one call, its attempts (rule 3)

    async def _attempts(self, attempt: Callable[[], Any]) -> Any:
        attempts = self._retry.start(clock=anyio.current_time)
        while True:
            try:
                return await attempt()
            except ClientError as error:
                delay = attempts.delay_after(error)
                if delay is None:
                    raise
                await self._wait(error, delay)

    async def _wait(self, error: ClientError, delay: float) -> None:
        if self._on_retry is not None:
            self._on_retry(error, delay)
        await anyio.sleep(delay)

    async def _call(self, name: str, *args: Any) -> Any:
        """The protocol's call ``name(*args)``, attempted as rule 3 says."""
        if self._http is not None:
            http, call = self._http, getattr(_http_calls, name)(*args)
            return await self._attempts(lambda: http.call(call))
        assert self._evd1 is not None
        evd1, frame = self._evd1, getattr(_evd1_calls, name)(*args)
        return await self._attempts(lambda: evd1.call(frame))

    def _http_only(self, method: str) -> AsyncHttp:
        if self._http is None:
            raise TypeError(f"{method} is an HTTP route: connect with an http:// URL")
        return self._http

    # -- the API

    async def list_sessions(self) -> list[dict[str, Any]]:
        """The hosted sessions: name, bounds, mechanisms (id, digest, catalog entry)."""
        hosted: list[dict[str, Any]] = await self._call("sessions")
        self._announced = (anyio.current_time(), hosted)
        return hosted

    async def health(self) -> dict[str, Any]:
        """The server's health status and counters."""
        status: dict[str, Any] = await self._call("health")
        return status

    async def submit(
        self, session: str, binding: Binding, evidence: Sequence[bytes]
    ) -> SubmitResult:
        """Submit ``evidence`` (raw bytes, in order) for ``binding`` in ``session``."""
        result: SubmitResult = await self._call("submit", session, binding, list(evidence))
        return result

    async def submit_files(
        self, session: str, *paths: StrPath, binding: Binding | None = None
    ) -> SubmitResult:
        """Submit the evidence files ``paths`` (in order: a formation session's subject, then
        its certificate) with their honest binding, or ``binding`` (rule 5)."""
        evidence = [await anyio.Path(path).read_bytes() for path in paths]
        if binding is None:
            binding = await self.honest_binding(session, evidence)
        return await self.submit(session, binding, evidence)

    async def honest_binding(self, session: str, evidence: Sequence[bytes]) -> BoundProposition:
        """The honest binding of ``evidence`` in ``session`` (rule 5); nothing is submitted."""
        announced = self._announced
        if announced is None or (
            announced[0] is not None
            and anyio.current_time() - announced[0] > self._announcement_ttl
        ):
            await self.list_sessions()
            announced = self._announced
        assert announced is not None
        return honest_binding(session_mechanism(announced[1], session), evidence)

    def use_sessions(self, sessions: list[dict[str, Any]]) -> None:
        """Build honest bindings from this ``sessions`` answer (one saved by ``evidenced
        sessions``, say) instead of asking the daemon: a submit is then one request. Kept
        until the client closes; a stale answer makes bindings the daemon answers UNKNOWN."""
        self._announced = (None, list(sessions))

    async def submit_batch(
        self, session: str, pairs: Sequence[Pair]
    ) -> list[SubmitResult | RejectedError]:
        """Decide ``pairs`` (binding or ``None``, evidence) of ``session`` in batches of 64:
        per pair, in order, its decision or its refusal (rule 4)."""
        if not pairs:
            raise ValueError("a batch carries at least one pair")
        bound: list[tuple[Binding, list[bytes]]] = []
        for binding, evidence in pairs:
            items = list(evidence)
            if binding is None:
                binding = await self.honest_binding(session, items)
            bound.append((binding, items))
        results: list[SubmitResult | RejectedError] = []
        for start in range(0, len(bound), BATCH_SIZE):
            try:
                results += await self._batch(session, bound[start : start + BATCH_SIZE])
            except ClientError as error:
                error.results = results + (error.results or [])
                raise
        return results

    async def _batch(
        self, session: str, pairs: list[tuple[Binding, list[bytes]]]
    ) -> list[SubmitResult | RejectedError]:
        progress: BatchProgress[tuple[Binding, list[bytes]]]
        progress = BatchProgress(pairs)
        attempts = self._retry.start(clock=anyio.current_time)
        while True:
            try:
                refused = progress.record(await self._one_batch(session, progress.waiting()))
            except ClientError as error:  # the whole batch refused, or no answer
                delay = attempts.delay_after(error)
                if delay is None:
                    if progress.recorded:
                        error.results = progress.results()
                    raise
                await self._wait(error, delay)
                continue
            delay = None if refused is None else attempts.delay_after(refused)
            if delay is None:
                return progress.results()
            assert refused is not None
            await self._wait(refused, delay)

    async def _one_batch(
        self, session: str, pairs: list[tuple[Binding, list[bytes]]]
    ) -> list[SubmitResult | RejectedError]:
        """One batch request; one submit per pair to a server without batches (rule 4)."""
        if self._http is not None:
            answers: list[SubmitResult | RejectedError]
            answers = await self._http.call(_http_calls.submit_batch(session, pairs))
            return answers
        assert self._evd1 is not None
        if not self._batches_unknown:
            try:
                answers = await self._evd1.call(_evd1_calls.submit_batch(session, pairs))
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
                decided = await self._evd1.call(single)
            except RejectedError as refused:
                results.append(refused)  # its connection ended: the next call opens one
            else:
                results.append(decided)
        return results

    # -- the transparency log (rule 6)

    async def checkpoint(self) -> bytes:
        """The latest signed checkpoint note, exactly as the daemon signed it."""
        note: bytes = await self._call("checkpoint")
        return note

    async def inclusion_proof(self, index: int, tree_size: int) -> list[bytes]:
        """The RFC 9162 inclusion proof of leaf ``index`` in the tree of ``tree_size``."""
        proof: list[bytes] = await self._call("inclusion_proof", index, tree_size)
        return proof

    async def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        """The RFC 9162 consistency proof from ``old_size`` to ``new_size``."""
        proof: list[bytes] = await self._call("consistency_proof", old_size, new_size)
        return proof

    # -- HTTP only (rule 6)

    async def ready(self) -> dict[str, Any]:
        """``GET /ready``: the readiness document; not ready raises
        :class:`ServiceUnavailable` with the reason."""
        http = self._http_only("ready")
        document: dict[str, Any] = await http.call(_http_calls.ready())
        return document

    async def metrics(self) -> str:
        """``GET /metrics``: the Prometheus text exposition."""
        return await self._http_only("metrics").call(_http_calls.metrics())

    async def tile(self, level: int | str, index: int, width: int = 256) -> bytes:
        """``GET /tile/...``: a tile or entry bundle's bytes (C2SP tlog-tiles)."""
        return await self._http_only("tile").call(_http_calls.tile(level, index, width))

    async def log_entry(self, query: LineQuery) -> tuple[int, bytes]:
        """``GET /v1/log/entry``: (log index, audit line) of the line ``query`` names."""
        return await self._http_only("log_entry").call(_http_calls.log_entry(query))

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
        if self._evd1 is not None:
            await self._evd1.aclose()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def open_client(
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
) -> AsyncIterator[Client]:
    """Connect (rule 1), yield a :class:`Client`, close it on exit."""
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
    client = Client(checked, retry=retry, on_retry=on_retry, announcement_ttl=announcement_ttl)
    try:
        await client.connect()
        yield client
    finally:
        await client.aclose()
