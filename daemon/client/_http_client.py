"""The client over the HTTP/JSON API (``http://`` and ``https://`` URLs of :func:`open_client`).

Rules (the contract):

1. :class:`HttpClient` is a :class:`~daemon.client._client.Client`: the same methods, results and
   exceptions, over one HTTP/1.1 keep-alive connection framed by ``h11`` (one request at a
   time; a lock serialises callers). Each request has ``request_timeout`` seconds.
2. Requests: ``list_sessions`` is ``GET /v1/sessions``, ``health`` ``GET /health``,
   ``submit`` ``POST /v1/sessions/{name}/decisions`` with the JSON body (evidence in
   base64); :meth:`HttpClient.ready` is ``GET /ready`` and :meth:`HttpClient.metrics`
   ``GET /metrics``. With a token every request carries ``Authorization: Bearer``.
3. Answers: a ``200`` body is the binary protocol's answer document, checked as strictly
   (``Decision.from_header`` and so on); a refusal's ``{"error": {...}}`` becomes
   :class:`~daemon.client._client.RejectedError` /
   :class:`~daemon.client._client.ServiceUnavailable`
   with its code, message and ``decision_id``; anything else (not JSON, another shape, a
   body over ``max_response_bytes``) is :class:`~daemon.client._client.ServerProtocolError`. After a
   refusal, or an answer that closes the connection, the client is closed.
4. The transparency log: :meth:`HttpClient.checkpoint` is ``GET /checkpoint`` (the note's
   exact bytes), :meth:`~HttpClient.inclusion_proof` and :meth:`~HttpClient.consistency_proof`
   ``GET /v1/log/inclusion-proof`` and ``/v1/log/consistency-proof`` (the answer must be for
   exactly the sizes asked), :meth:`~HttpClient.log_entry` ``GET /v1/log/entry`` (the line
   must be the leaf it claims: its own ``seq`` is ``log_index + 1``), :meth:`~HttpClient.tile`
   ``GET /tile/...``. A refusal of these routes leaves the connection open.
5. :meth:`HttpClient.submit_batch` is ``POST /v1/sessions/{name}/decisions:batch`` (at most
   64 pairs): per pair, in order, a :class:`~daemon.client._client.SubmitResult` or the
   :class:`~daemon.client._client.RejectedError` of that pair's refusal (returned, not
   raised); a refusal of the whole batch is raised as in rule 3.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote, urlencode

import h11
import orjson
import trio

from daemon.client._client import Client, _decode_proof
from daemon.client._outcomes import (
    CLIENT_NAME,
    ClientTimeout,
    RejectedError,
    ServerProtocolError,
    SubmitResult,
    TransportError,
    check_pair_count,
    refusal_error,
    result_of,
)
from daemon.client._outcomes import raise_for as _raise_for
from daemon.wire._protocol import (
    ERROR_CODES,
    ConsistencyProof,
    Decision,
    ErrorResponse,
    HealthReport,
    InclusionProof,
    ProtocolError,
    SessionList,
)
from session import BoundProposition

if TYPE_CHECKING:  # the log room (and cryptography) loads only when used
    from daemon.tlog._lookup import LineQuery

__all__ = ["HttpClient"]

_RECEIVE: Final = 65536


class HttpClient(Client):
    """A connected HTTP client (module rules); create with :func:`~daemon.open_client` and an
    ``http://`` or ``https://`` URL."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        host: str,
        token: str | None,
        request_timeout: float,
        max_response_bytes: int,
    ) -> None:
        super().__init__(
            stream, request_timeout=request_timeout, max_response_header_bytes=max_response_bytes
        )
        self._host = host
        self._token = token
        self._max_response_bytes = max_response_bytes
        self._http = h11.Connection(h11.CLIENT)
        self._closed = False

    async def _request(
        self, method: str, target: str, body: bytes = b"", content_type: str | None = None
    ) -> tuple[int, bytes, str]:
        """(status, body, content type) of one exchange."""
        if self._closed:
            raise TransportError("the connection is closed after an earlier answer or failure")
        self._closed = True  # until the exchange completes and the connection may go on
        headers = [("Host", self._host), ("User-Agent", CLIENT_NAME)]
        if self._token is not None:
            headers.append(("Authorization", f"Bearer {self._token}"))
        if method == "POST":
            headers.append(("Content-Type", content_type or "application/json"))
            headers.append(("Content-Length", str(len(body))))
        http = self._http
        payload = http.send(h11.Request(method=method, target=target, headers=headers)) or b""
        if body:
            payload += http.send(h11.Data(data=body)) or b""
        payload += http.send(h11.EndOfMessage()) or b""
        with trio.move_on_after(self._request_timeout):
            # The server may have answered early (a refusal) and closed: read its answer.
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await self._stream.send_all(payload)
            status, content_type_seen, data = await self._read_answer()
            if http.our_state is h11.DONE and http.their_state is h11.DONE:
                http.start_next_cycle()
                self._closed = False
            return status, data, content_type_seen
        raise ClientTimeout(f"no answer within {self._request_timeout} s")

    async def _read_answer(self) -> tuple[int, str, bytes]:
        http = self._http
        status, content_type = 0, ""
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                event = http.next_event()
            except h11.RemoteProtocolError as error:
                raise ServerProtocolError(f"malformed HTTP answer: {error}") from None
            if event is h11.NEED_DATA:
                try:
                    data = await self._stream.receive_some(_RECEIVE)
                except (trio.BrokenResourceError, trio.ClosedResourceError) as error:
                    raise TransportError(f"connection lost: {error}") from None
                if not data and status == 0:  # e.g. a TLS client certificate was refused
                    raise TransportError("the server closed the connection before answering")
                http.receive_data(bytes(data))
                continue
            if isinstance(event, h11.InformationalResponse):
                continue
            if isinstance(event, h11.Response):
                status = event.status_code
                for name, value in event.headers:
                    if name == b"content-type":
                        content_type = value.decode("latin-1")
            elif isinstance(event, h11.Data):
                size += len(event.data)
                if size > self._max_response_bytes:
                    raise ServerProtocolError(f"answer body over {self._max_response_bytes} bytes")
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return status, content_type, b"".join(chunks)
            else:  # ConnectionClosed before an answer
                raise TransportError("the server closed the connection")

    async def _json(self, method: str, target: str, body: bytes = b"") -> dict[str, Any]:
        """A JSON answer document; a refusal raised as its exception (rule 3)."""
        status, data, _ = await self._request(method, target, body)
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise ServerProtocolError(f"HTTP {status} answer is not JSON") from None
        if type(document) is not dict:
            raise ServerProtocolError(f"HTTP {status} answer is not a JSON object")
        if status >= 400 or "error" in document:
            self._closed = True
            _raise_for(_refusal(status, document))
        if status != 200:
            raise ServerProtocolError(f"unexpected HTTP status {status}")
        return document

    # -- the Client API over HTTP (rule 2)

    async def list_sessions(self) -> list[dict[str, Any]]:
        async with self._lock:
            document = await self._json("GET", "/v1/sessions")
            try:
                return SessionList.from_header(document).sessions
            except ProtocolError as error:
                raise ServerProtocolError(f"unexpected answer to list: {error.message}") from None

    async def health(self) -> dict[str, Any]:
        async with self._lock:
            document = await self._json("GET", "/health")
            try:
                return HealthReport.from_header(document).status
            except ProtocolError as error:
                raise ServerProtocolError(f"unexpected answer to health: {error.message}") from None

    async def ready(self) -> dict[str, Any]:
        """``GET /ready``: the readiness document; not ready raises
        :class:`~daemon.client._client.ServiceUnavailable` with the reason."""
        async with self._lock:
            return await self._json("GET", "/ready")

    async def metrics(self) -> str:
        """``GET /metrics``: the Prometheus text exposition."""
        async with self._lock:
            status, data, _ = await self._request("GET", "/metrics")
            if status != 200:
                try:
                    document = orjson.loads(data)
                except orjson.JSONDecodeError:
                    raise ServerProtocolError(f"HTTP {status} answer is not JSON") from None
                _raise_for(_refusal(status, document))
            return data.decode("utf-8")

    async def submit(
        self,
        session: str,
        binding: BoundProposition | dict[str, Any],
        evidence: Sequence[bytes],
    ) -> SubmitResult:
        wire = binding.to_dict() if isinstance(binding, BoundProposition) else dict(binding)
        items = tuple(evidence)
        if any(type(item) is not bytes for item in items):
            raise TypeError("evidence items must be bytes")
        try:
            body = orjson.dumps(
                {
                    "binding": wire,
                    "evidence": [{"base64": base64.b64encode(item).decode()} for item in items],
                }
            )
        except TypeError as error:
            raise TypeError(f"binding cannot be sent: {error}") from None
        target = f"/v1/sessions/{quote(session, safe='')}/decisions"
        async with self._lock:
            document = await self._json("POST", target, body)
            try:
                answer = Decision.from_header(document)
            except ProtocolError as error:
                raise ServerProtocolError(f"unexpected answer to submit: {error.message}") from None
            return result_of(answer)

    async def submit_batch(
        self,
        session: str,
        pairs: Sequence[tuple[BoundProposition | dict[str, Any], Sequence[bytes]]],
    ) -> list[SubmitResult | RejectedError]:
        """Many pairs in one request (rule 5); ``ValueError`` for 0 or more than 64, unsent."""
        check_pair_count(len(pairs))
        elements = []
        for binding, evidence in pairs:
            wire = binding.to_dict() if isinstance(binding, BoundProposition) else dict(binding)
            items = tuple(evidence)
            if any(type(item) is not bytes for item in items):
                raise TypeError("evidence items must be bytes")
            encoded = [{"base64": base64.b64encode(item).decode()} for item in items]
            elements.append({"binding": wire, "evidence": encoded})
        try:
            body = orjson.dumps({"pairs": elements})
        except TypeError as error:
            raise TypeError(f"binding cannot be sent: {error}") from None
        target = f"/v1/sessions/{quote(session, safe='')}/decisions:batch"
        async with self._lock:
            document = await self._json("POST", target, body)
        answers = document.get("decisions")
        if type(answers) is not list or len(answers) != len(elements):
            raise ServerProtocolError("unexpected answer to a batch: not one decision per pair")
        results: list[SubmitResult | RejectedError] = []
        for answer in answers:
            if type(answer) is dict and "error" in answer:
                results.append(refusal_error(_refusal(200, answer)))
                continue
            try:
                decision = Decision.from_header(answer)
            except ProtocolError as error:
                raise ServerProtocolError(
                    f"unexpected answer in a batch: {error.message}"
                ) from None
            results.append(result_of(decision))
        return results

    # -- the transparency log (rule 4)

    async def _raw(self, target: str) -> bytes:
        """The body of a ``200`` answer to ``GET target``; a refusal raised (rule 3)."""
        async with self._lock:
            status, data, _ = await self._request("GET", target)
        if status == 200:
            return data
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise ServerProtocolError(f"HTTP {status} answer is not JSON") from None
        _raise_for(_refusal(status, document))
        raise AssertionError("unreachable")

    async def _log_json(self, target: str) -> dict[str, Any]:
        data = await self._raw(target)
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise ServerProtocolError("the answer is not JSON") from None
        if type(document) is not dict:
            raise ServerProtocolError("the answer is not a JSON object")
        return document

    async def checkpoint(self) -> bytes:
        """``GET /checkpoint``: the latest signed checkpoint note, exactly as signed."""
        return await self._raw("/checkpoint")

    async def tile(self, level: int | str, index: int, width: int = 256) -> bytes:
        """``GET /tile/...``: a tile or entry bundle's bytes (C2SP tlog-tiles)."""
        from daemon.tlog._tiles import tile_path  # the log room loads only when used

        return await self._raw("/" + tile_path(level, index, width))

    async def inclusion_proof(self, index: int, tree_size: int) -> list[bytes]:
        query = urlencode({"index": index, "tree_size": tree_size})
        document = await self._log_json(f"/v1/log/inclusion-proof?{query}")
        try:
            answer = InclusionProof.from_header(document)
        except ProtocolError as error:
            raise ServerProtocolError(f"unexpected inclusion proof: {error.message}") from None
        if (answer.index, answer.tree_size) != (index, tree_size):
            raise ServerProtocolError("the inclusion proof is for other sizes than asked")
        return _decode_proof(answer.proof)

    async def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        query = urlencode({"old_size": old_size, "new_size": new_size})
        document = await self._log_json(f"/v1/log/consistency-proof?{query}")
        try:
            answer = ConsistencyProof.from_header(document)
        except ProtocolError as error:
            raise ServerProtocolError(f"unexpected consistency proof: {error.message}") from None
        if (answer.old_size, answer.new_size) != (old_size, new_size):
            raise ServerProtocolError("the consistency proof is for other sizes than asked")
        return _decode_proof(answer.proof)

    async def log_entry(self, query: LineQuery) -> tuple[int, bytes]:
        """``GET /v1/log/entry``: (log index, audit line) of the line ``query`` names."""
        fields = {
            name: value
            for name, value in (
                ("index", query.index),
                ("decision_id", query.decision_id),
                ("line_digest", query.line_digest),
            )
            if value is not None
        }
        document = await self._log_json(f"/v1/log/entry?{urlencode(fields)}")
        index, line = document.get("log_index"), document.get("line")
        if (
            set(document) != {"log_index", "line"}
            or type(index) is not int
            or type(line) is not str
        ):
            raise ServerProtocolError("the entry answer is not {log_index, line}")
        try:
            seq = orjson.loads(line).get("seq")
        except (orjson.JSONDecodeError, AttributeError):
            seq = None
        if seq != index + 1 or (query.index is not None and index != query.index):
            raise ServerProtocolError("the entry answer's line is not the leaf it claims")
        return index, line.encode("utf-8")


def _refusal(status: int, document: Any) -> ErrorResponse:
    error = document.get("error") if type(document) is dict else None
    if (
        type(error) is not dict
        or type(error.get("code")) is not str
        or error["code"] not in ERROR_CODES
        or type(error.get("message")) is not str
    ):
        raise ServerProtocolError(f"HTTP {status} answer is not an error document")
    decision_id = error.get("decision_id")
    return ErrorResponse(
        None, error["code"], error["message"], decision_id if type(decision_id) is str else None
    )
