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
"""

from __future__ import annotations

import base64
import binascii
import itertools
from collections.abc import Sequence
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
        self.server: HelloAccepted | None = None

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
