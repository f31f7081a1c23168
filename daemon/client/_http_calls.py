"""The HTTP/JSON API's calls, as data: the route each client method asks and how its answer is
read, for both HTTP transports (:mod:`daemon.client._http_transport`, async and blocking).

Rules (the contract):

1. Routes (``docs/http.md``): ``sessions`` is ``GET /v1/sessions``, ``health`` ``GET /health``,
   ``ready`` ``GET /ready``, ``metrics`` ``GET /metrics``, ``submit`` ``POST
   /v1/sessions/{name}/decisions`` (the JSON body, evidence in base64), ``submit_batch``
   ``POST /v1/sessions/{name}/decisions:batch`` (1 to 64 pairs), ``checkpoint`` ``GET
   /checkpoint`` (the note's exact bytes), the proofs ``GET /v1/log/inclusion-proof`` and
   ``/v1/log/consistency-proof`` (the answer must be for exactly the sizes asked),
   ``log_entry`` ``GET /v1/log/entry`` (the line must be the leaf it claims: its own ``seq``
   is ``log_index + 1``), ``tile`` ``GET /tile/...``.
2. Answers: a ``200`` body is the binary protocol's answer document, checked as strictly
   (``Decision.from_header`` and so on: :mod:`daemon.client._evd1_calls` gives the same
   results); a refusal's ``{"error": {...}}`` becomes
   :class:`~daemon.client._outcomes.RejectedError` /
   :class:`~daemon.client._outcomes.ServiceUnavailable` with its code, message,
   ``decision_id`` and the ``Retry-After`` seconds of a ``503``; anything else (not JSON,
   another shape, another status) is :class:`~daemon.client._outcomes.ServerProtocolError`.
   A batch's per-pair refusals are returned in their places, not raised.
3. A body that cannot be sent (evidence that is not ``bytes``, a binding JSON cannot carry, 0
   or more than 64 pairs) fails when the call is made, before a byte is sent.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from urllib.parse import quote, urlencode

import attrs
import orjson

from daemon.client._evd1_calls import Binding, Pairs, decode_proof
from daemon.client._outcomes import (
    RejectedError,
    ServerProtocolError,
    SubmitResult,
    check_pair_count,
    refusal_error,
    result_of,
)
from daemon.client._retry import parse_retry_after
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

__all__ = ["Answer", "HttpCall"]

T = TypeVar("T")


@attrs.frozen
class Answer:
    """One HTTP answer: its status, the headers the calls read, and its body."""

    status: int
    body: bytes
    content_type: str = ""
    retry_after: str | None = None


@attrs.frozen
class HttpCall(Generic[T]):
    """One request (method, path, JSON body) and the reading of its answer (rule 1)."""

    method: str
    path: str
    read: Callable[[Answer], T]
    body: bytes = b""
    submits: bool = False


def _document(answer: Answer) -> dict[str, Any]:
    """A ``200`` JSON answer document; a refusal raised as its exception (rule 2)."""
    try:
        document = orjson.loads(answer.body)
    except orjson.JSONDecodeError:
        raise ServerProtocolError(f"HTTP {answer.status} answer is not JSON") from None
    if type(document) is not dict:
        raise ServerProtocolError(f"HTTP {answer.status} answer is not a JSON object")
    if answer.status >= 400 or "error" in document:
        raise _refusal(answer, document)
    if answer.status != 200:
        raise ServerProtocolError(f"unexpected HTTP status {answer.status}")
    return document


def _raw(answer: Answer) -> bytes:
    """The body of a ``200`` answer; a refusal raised (rule 2)."""
    if answer.status == 200:
        return answer.body
    try:
        document = orjson.loads(answer.body)
    except orjson.JSONDecodeError:
        raise ServerProtocolError(f"HTTP {answer.status} answer is not JSON") from None
    raise _refusal(answer, document)


def _refusal(answer: Answer, document: Any) -> RejectedError:
    refusal = refusal_error(_error_response(answer.status, document))
    if answer.status == 503:
        refusal.retry_after = parse_retry_after(answer.retry_after)
    return refusal


def _error_response(status: int, document: Any) -> ErrorResponse:
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


def _json_body(document: Mapping[str, Any]) -> bytes:
    try:
        return orjson.dumps(document)
    except TypeError as error:
        raise TypeError(f"binding cannot be sent: {error}") from None


def _pair(binding: Binding, evidence: Sequence[bytes]) -> dict[str, Any]:
    wire = binding.to_dict() if isinstance(binding, BoundProposition) else dict(binding)
    items = tuple(evidence)
    if any(type(item) is not bytes for item in items):
        raise TypeError("evidence items must be bytes")
    return {
        "binding": wire,
        "evidence": [{"base64": base64.b64encode(item).decode()} for item in items],
    }


def _session_path(session: str, suffix: str = "") -> str:
    return f"/v1/sessions/{quote(session, safe='')}/decisions{suffix}"


def sessions() -> HttpCall[list[dict[str, Any]]]:
    def read(answer: Answer) -> list[dict[str, Any]]:
        try:
            return SessionList.from_header(_document(answer)).sessions
        except ProtocolError as error:
            raise ServerProtocolError(f"unexpected answer to list: {error.message}") from None

    return HttpCall("GET", "/v1/sessions", read)


def health() -> HttpCall[dict[str, Any]]:
    def read(answer: Answer) -> dict[str, Any]:
        try:
            return HealthReport.from_header(_document(answer)).status
        except ProtocolError as error:
            raise ServerProtocolError(f"unexpected answer to health: {error.message}") from None

    return HttpCall("GET", "/health", read)


def ready() -> HttpCall[dict[str, Any]]:
    return HttpCall("GET", "/ready", _document)


def metrics() -> HttpCall[str]:
    return HttpCall("GET", "/metrics", lambda answer: _raw(answer).decode("utf-8"))


def _decision(document: Any, where: str) -> SubmitResult:
    try:
        return result_of(Decision.from_header(document))
    except ProtocolError as error:
        raise ServerProtocolError(f"unexpected answer {where}: {error.message}") from None


def submit(session: str, binding: Binding, evidence: Sequence[bytes]) -> HttpCall[SubmitResult]:
    body = _json_body(_pair(binding, evidence))
    return HttpCall(
        "POST",
        _session_path(session),
        lambda answer: _decision(_document(answer), "to submit"),
        body,
        submits=True,
    )


def submit_batch(session: str, pairs: Pairs) -> HttpCall[list[SubmitResult | RejectedError]]:
    check_pair_count(len(pairs))
    body = _json_body({"pairs": [_pair(binding, evidence) for binding, evidence in pairs]})
    count = len(pairs)

    def read(answer: Answer) -> list[SubmitResult | RejectedError]:
        answers = _document(answer).get("decisions")
        if type(answers) is not list or len(answers) != count:
            raise ServerProtocolError("unexpected answer to a batch: not one decision per pair")
        results: list[SubmitResult | RejectedError] = []
        for element in answers:
            if type(element) is dict and "error" in element:
                results.append(refusal_error(_error_response(200, element)))
            else:
                results.append(_decision(element, "in a batch"))
        return results

    return HttpCall("POST", _session_path(session, ":batch"), read, body, submits=True)


def checkpoint() -> HttpCall[bytes]:
    return HttpCall("GET", "/checkpoint", _raw)


def tile(level: int | str, index: int, width: int = 256) -> HttpCall[bytes]:
    from daemon.tlog._tiles import tile_path  # the log room loads only when used

    return HttpCall("GET", "/" + tile_path(level, index, width), _raw)


def _log_json(answer: Answer) -> dict[str, Any]:
    try:
        document = orjson.loads(_raw(answer))
    except orjson.JSONDecodeError:
        raise ServerProtocolError("the answer is not JSON") from None
    if type(document) is not dict:
        raise ServerProtocolError("the answer is not a JSON object")
    return document


def inclusion_proof(index: int, tree_size: int) -> HttpCall[list[bytes]]:
    def read(answer: Answer) -> list[bytes]:
        try:
            proof = InclusionProof.from_header(_log_json(answer))
        except ProtocolError as error:
            raise ServerProtocolError(f"unexpected inclusion proof: {error.message}") from None
        if (proof.index, proof.tree_size) != (index, tree_size):
            raise ServerProtocolError("the inclusion proof is for other sizes than asked")
        return decode_proof(proof.proof)

    query = urlencode({"index": index, "tree_size": tree_size})
    return HttpCall("GET", f"/v1/log/inclusion-proof?{query}", read)


def consistency_proof(old_size: int, new_size: int) -> HttpCall[list[bytes]]:
    def read(answer: Answer) -> list[bytes]:
        try:
            proof = ConsistencyProof.from_header(_log_json(answer))
        except ProtocolError as error:
            raise ServerProtocolError(f"unexpected consistency proof: {error.message}") from None
        if (proof.old_size, proof.new_size) != (old_size, new_size):
            raise ServerProtocolError("the consistency proof is for other sizes than asked")
        return decode_proof(proof.proof)

    query = urlencode({"old_size": old_size, "new_size": new_size})
    return HttpCall("GET", f"/v1/log/consistency-proof?{query}", read)


def log_entry(query: LineQuery) -> HttpCall[tuple[int, bytes]]:
    fields = {
        name: value
        for name, value in (
            ("index", query.index),
            ("decision_id", query.decision_id),
            ("line_digest", query.line_digest),
        )
        if value is not None
    }

    def read(answer: Answer) -> tuple[int, bytes]:
        document = _log_json(answer)
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

    return HttpCall("GET", f"/v1/log/entry?{urlencode(fields)}", read)
