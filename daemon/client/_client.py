"""The client library: the binary protocol's async trio client and its typed errors
(:func:`daemon.client._connect.open_client` connects and picks this client or the HTTP one).

Rules (the contract):

1. ``async with open_client(url | tcp=(host, port) | unix=path) as client`` connects within
   ``connect_timeout`` (the TLS handshake included) and completes the ``hello`` handshake;
   every request then has ``request_timeout`` seconds to be answered. One request at a time
   per client (a lock serialises concurrent callers). ``url`` (:mod:`daemon.client._targets`):
   ``tcp://``, ``tls://`` (the binary protocol over TLS), ``unix:``, or ``http://`` /
   ``https://`` (the HTTP/JSON API: a :class:`~daemon.client._http_client.HttpClient`, the same
   methods). TLS verifies the server against ``tls_ca`` (a PEM bundle) or the system's
   store, or uses ``ssl_context``; ``tls_cert``/``tls_key`` present a client certificate.
   ``token`` is sent in the ``hello`` (binary) or as ``Authorization: Bearer`` (HTTP).
2. Typed exceptions, all :class:`ClientError`:
   :class:`TransportError` (cannot connect, connection lost; CLI exit 69),
   :class:`ClientTimeout` (connect or request timeout; a :class:`TransportError`; exit 75),
   :class:`RejectedError` (the server answered an ``error`` frame with a peer-fault code:
   ``.code``, ``.message``, ``.decision_id``; exit 65),
   :class:`ServiceUnavailable` (an ``error`` frame with a service-fault code such as
   ``BUSY``/``SHUTTING_DOWN``; a :class:`RejectedError`; exit 75, ``AUDIT_FAILED``/
   ``INTERNAL`` exit 70),
   :class:`ServerProtocolError` (the server's bytes violate the protocol).
   After any of them the client is closed; open a new one.
3. A decision is data: :meth:`Client.submit` returns a :class:`SubmitResult` whatever the
   outcome (PASS, FAIL, UNKNOWN); it raises only when there is no decision.
4. Transparency log (``docs/spec/transparency.md §10``): :meth:`Client.checkpoint`,
   :meth:`Client.inclusion_proof`, :meth:`Client.consistency_proof` return the signed note
   and decoded proof hashes as the daemon sent them; nothing is verified here (the caller
   holds the log key: :mod:`daemon.tlog`). ``PROOF_RANGE`` and ``TRANSPARENCY_DISABLED`` are
   :class:`RejectedError`.
5. The synchronous facade (:class:`daemon.client._connect.SyncClient`) opens one connection per call
   inside ``trio.run``; it is for scripts, not for throughput. The command line's one-shot
   calls use the blocking client instead (:mod:`daemon.client._blocking`: no event loop).
6. The errors, :class:`SubmitResult` and the answer checks are :mod:`daemon.client._outcomes`'s
   (shared with the blocking client; re-exported here).
7. :meth:`Client.submit_batch` sends 1 to :data:`~daemon.wire._protocol.MAX_BATCH_PAIRS` pairs
   as one ``submit_batch`` (``docs/protocol.md`` §4.1) and returns, per pair in order, a
   :class:`SubmitResult` or the :class:`RejectedError` (:class:`ServiceUnavailable` for a
   service-fault code) of that pair's refusal: returned, not raised, and the connection goes
   on. A refusal of the whole batch is raised as for :meth:`Client.submit`. A server that
   answers ``UNKNOWN_KIND`` (it predates batches) gets the pairs one ``submit`` at a time
   instead, with the same results; a refused pair ends its connection, so the client opens a
   new one (as :func:`~daemon.client._connect.open_client` did) for the next request, and it
   remembers not to send that server a batch again. Without a way to reconnect (a client not
   made by ``open_client``) the ``UNKNOWN_KIND`` refusal is raised.
"""

from __future__ import annotations

import base64
import binascii
import itertools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from daemon.client._outcomes import (
    CLIENT_NAME,
    ClientError,
    ClientTimeout,
    RejectedError,
    ServerProtocolError,
    ServiceUnavailable,
    SubmitResult,
    TransportError,
    batch_request,
    batch_results,
    check_answer,
    decision_result,
    raise_for,
    submit_request,
)
from daemon.wire._protocol import (
    CLOSED,
    NEED_DATA,
    SUPPORTED_VERSIONS,
    CheckpointNote,
    CheckpointRequest,
    ClientConnection,
    ClientRequest,
    Closed,
    ConsistencyProof,
    ConsistencyProofRequest,
    ErrorCode,
    ErrorResponse,
    HealthReport,
    HealthRequest,
    Hello,
    HelloAccepted,
    InclusionProof,
    InclusionProofRequest,
    ListSessions,
    NeedData,
    ProtocolError,
    ServerResponse,
    SessionList,
)
from session import BoundProposition

__all__ = [
    "CLIENT_NAME",
    "Client",
    "ClientError",
    "ClientTimeout",
    "RejectedError",
    "ServerProtocolError",
    "ServiceUnavailable",
    "SubmitResult",
    "TransportError",
]


class Client:
    """A connected client; create with :func:`open_client`."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        request_timeout: float,
        max_response_header_bytes: int,
        token: str | None = None,
    ) -> None:
        self._token = token
        self._stream = stream
        self._conn = ClientConnection(max_header_bytes=max_response_header_bytes)
        self._request_timeout = request_timeout
        self._lock = trio.Lock()
        self._ids = itertools.count(1)
        self._broken = False
        self._max_response_header_bytes = max_response_header_bytes
        #: Opens a new stream to the same server, and the time its hello may take (rule 7).
        self._reopen: Callable[[], Awaitable[trio.abc.Stream]] | None = None
        self._handshake_timeout = request_timeout
        #: The connection ended after a refusal that was returned, not raised (rule 7): the
        #: next request opens a new one.
        self._stale = False
        #: The server answered a batch ``UNKNOWN_KIND``: pairs go one by one (rule 7).
        self._batches_unknown = False
        self.server: HelloAccepted | None = None

    def reconnect_with(
        self, reopen: Callable[[], Awaitable[trio.abc.Stream]], handshake_timeout: float
    ) -> None:
        """How to open a new connection to the same server when one must be (rule 7)."""
        self._reopen = reopen
        self._handshake_timeout = handshake_timeout

    async def _reconnect(self) -> None:
        assert self._reopen is not None
        with trio.CancelScope(shield=True):
            await self._stream.aclose()
        self._stream = await self._reopen()
        self._conn = ClientConnection(max_header_bytes=self._max_response_header_bytes)
        self._broken = self._stale = False
        saved, self._request_timeout = self._request_timeout, self._handshake_timeout
        try:
            await self._hello()
        finally:
            self._request_timeout = saved

    async def _read_response(self) -> ServerResponse:
        while True:
            try:
                event = self._conn.next_event()
            except ProtocolError as error:
                raise ServerProtocolError(f"{error.code.name}: {error.message}") from None
            if event is NEED_DATA:
                try:
                    data = await self._stream.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError) as error:
                    raise TransportError(f"connection lost: {error}") from None
                self._conn.receive_data(bytes(data))
                continue
            if event is CLOSED:
                raise TransportError("the server closed the connection")
            assert not isinstance(event, NeedData | Closed)
            return event

    async def _exchange(
        self, request: ClientRequest, evidence: tuple[bytes, ...] = ()
    ) -> ServerResponse:
        if self._broken and self._stale and self._reopen is not None:
            await self._reconnect()
        if self._broken:
            raise TransportError("the connection is closed after an earlier failure")
        try:
            payload = self._conn.send(request, evidence)
        except ValueError as error:
            raise TypeError(f"binding cannot be sent: {error}") from None
        self._broken = True  # until the exchange completes normally
        with trio.move_on_after(self._request_timeout):
            send_error: Exception | None = None
            try:
                await self._stream.send_all(payload)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as error:
                # The server may have refused early and closed; its error frame may be waiting.
                send_error = error
            try:
                response = await self._read_response()
            except TransportError:
                if send_error is not None:
                    raise TransportError(f"connection lost: {send_error}") from None
                raise
            if isinstance(response, ErrorResponse):
                raise_for(response)
            self._broken = False
            return response
        raise ClientTimeout(f"no answer within {self._request_timeout} s")

    async def _hello(self) -> HelloAccepted:
        response = await self._exchange(Hello(SUPPORTED_VERSIONS, CLIENT_NAME, self._token))
        if not isinstance(response, HelloAccepted):
            raise ServerProtocolError("the server did not answer hello")
        self.server = response
        return response

    async def list_sessions(self) -> list[dict[str, Any]]:
        """The hosted sessions: name, bounds, mechanisms (id, digest, catalog entry)."""
        async with self._lock:
            request_id = next(self._ids)
            response = await self._exchange(ListSessions(request_id))
            return check_answer(response, SessionList, request_id, "list").sessions

    async def health(self) -> dict[str, Any]:
        """The server's health status and counters."""
        async with self._lock:
            request_id = next(self._ids)
            response = await self._exchange(HealthRequest(request_id))
            return check_answer(response, HealthReport, request_id, "health").status

    async def submit(
        self,
        session: str,
        binding: BoundProposition | dict[str, Any],
        evidence: Sequence[bytes],
    ) -> SubmitResult:
        """Submit ``evidence`` (raw bytes, in order) for ``binding`` in ``session``."""
        async with self._lock:
            request_id = next(self._ids)
            request, items = submit_request(request_id, session, binding, evidence)
            return decision_result(await self._exchange(request, items), request_id)

    async def submit_batch(
        self,
        session: str,
        pairs: Sequence[tuple[BoundProposition | dict[str, Any], Sequence[bytes]]],
    ) -> list[SubmitResult | RejectedError]:
        """Decide 1 to 64 pairs (binding, evidence) of ``session`` in one request: per pair, in
        order, its :class:`SubmitResult` or its refusal, returned (rule 7)."""
        async with self._lock:
            request_id = next(self._ids)
            request, evidence = batch_request(request_id, session, pairs)
            if not self._batches_unknown:
                try:
                    response = await self._exchange(request, evidence)
                except RejectedError as error:
                    if error.code != ErrorCode.UNKNOWN_KIND.name or self._reopen is None:
                        raise
                    self._batches_unknown = self._stale = True  # an older server (rule 7)
                else:
                    return batch_results(response, request_id, len(request.pairs))
            return await self._one_by_one(session, pairs)

    async def _one_by_one(
        self,
        session: str,
        pairs: Sequence[tuple[BoundProposition | dict[str, Any], Sequence[bytes]]],
    ) -> list[SubmitResult | RejectedError]:
        """A batch as single submits, for a server without batches (rule 7)."""
        results: list[SubmitResult | RejectedError] = []
        for binding, evidence in pairs:
            request_id = next(self._ids)
            request, items = submit_request(request_id, session, binding, evidence)
            try:
                results.append(decision_result(await self._exchange(request, items), request_id))
            except RejectedError as refused:
                results.append(refused)
                self._stale = True  # the refusal ended the connection: a new one next
        return results

    # -- the transparency log (docs/spec/transparency.md §10)

    async def checkpoint(self) -> bytes:
        """The latest signed checkpoint note, exactly as the daemon signed it."""
        async with self._lock:
            request_id = next(self._ids)
            response = await self._exchange(CheckpointRequest(request_id))
            if not isinstance(response, CheckpointNote) or response.request_id != request_id:
                raise ServerProtocolError("unexpected answer to checkpoint")
            return response.note.encode("utf-8")

    async def inclusion_proof(self, index: int, tree_size: int) -> list[bytes]:
        """The RFC 9162 inclusion proof of leaf ``index`` in the tree of ``tree_size``."""
        async with self._lock:
            request_id = next(self._ids)
            request = InclusionProofRequest(request_id, index, tree_size)
            response = await self._exchange(request)
            if (
                not isinstance(response, InclusionProof)
                or response.request_id != request_id
                or (response.index, response.tree_size) != (index, tree_size)
            ):
                raise ServerProtocolError("unexpected answer to inclusion_proof")
            return _decode_proof(response.proof)

    async def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        """The RFC 9162 consistency proof from ``old_size`` to ``new_size``."""
        async with self._lock:
            request_id = next(self._ids)
            request = ConsistencyProofRequest(request_id, old_size, new_size)
            response = await self._exchange(request)
            if (
                not isinstance(response, ConsistencyProof)
                or response.request_id != request_id
                or (response.old_size, response.new_size) != (old_size, new_size)
            ):
                raise ServerProtocolError("unexpected answer to consistency_proof")
            return _decode_proof(response.proof)

    async def aclose(self) -> None:
        await self._stream.aclose()


def _decode_proof(proof: Sequence[str]) -> list[bytes]:
    try:
        return [base64.b64decode(item, validate=True) for item in proof]
    except binascii.Error:
        raise ServerProtocolError("a proof hash is not base64") from None
