"""What a binary-protocol client call ends in, for every client of the room (trio or blocking).

Rules (the contract):

1. No I/O and no event loop: this module imports neither ``trio`` nor a socket, so the blocking
   one-shot client (:mod:`daemon.client._blocking`) and the trio client
   (:mod:`daemon.client._client`) share one definition of each error, of a decision and of
   how an answer frame is checked.
2. The typed errors (``daemon.client._client`` rule 2 states their meaning; every one is a
   :class:`ClientError`, hence a :class:`daemon.wire._errors.EvidencedError`).
3. :func:`check_answer` turns one answer frame into the call's result: an ``error`` frame is
   raised as :class:`ServiceUnavailable` (a service-fault code) or :class:`RejectedError`; an
   answer of another kind, or to another request id, is a :class:`ServerProtocolError`
   naming the call. :func:`submit_request` builds a ``submit`` (``TypeError`` for evidence
   that is not ``bytes``) and :func:`decision_result` reads its answer.
4. A batch (``docs/protocol.md`` §4.1): :func:`batch_request` builds a ``submit_batch`` of 1
   to :data:`~daemon.wire._protocol.MAX_BATCH_PAIRS` pairs (``ValueError`` otherwise) and
   :func:`batch_results` reads its ``decisions`` answer: per pair, in order, a
   :class:`SubmitResult` or the refusal (:func:`refusal_error`) of that pair, returned, not
   raised; a ``decisions`` answer to another request, of another length, or with an element
   that is not a well-formed ``decision`` or ``error`` of this request is a
   :class:`ServerProtocolError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, TypeVar

import attrs

from daemon.client._results import Evaluation, evaluation_of
from daemon.wire._errors import Busy, EvidencedError, PeerError, RemoteProtocolError, Unavailable
from daemon.wire._protocol import (
    MAX_BATCH_PAIRS,
    BatchPair,
    Decision,
    Decisions,
    ErrorCode,
    ErrorResponse,
    Fault,
    ProtocolError,
    ServerResponse,
    Submit,
    SubmitBatch,
)
from session import BoundProposition

__all__ = [
    "BATCH_SIZE",
    "CLIENT_NAME",
    "ClientError",
    "ClientTimeout",
    "RejectedError",
    "ServerProtocolError",
    "ServiceUnavailable",
    "SubmitResult",
    "TransportError",
    "batch_request",
    "batch_results",
    "check_answer",
    "check_pair_count",
    "decision_result",
    "refusal_error",
    "result_of",
    "submit_request",
]

CLIENT_NAME = "evidenced-client/0.1.0"
#: Pairs per batch request: the daemon's most, on either protocol (``docs/protocol.md`` §4.1).
BATCH_SIZE: Final = MAX_BATCH_PAIRS


class ClientError(EvidencedError):
    """Root of every client failure."""

    #: For a batch that failed part-way: the answers of its first ``len(results)`` pairs.
    results: list[Any] | None = None


class TransportError(ClientError, Unavailable):
    """The daemon could not be reached or the connection broke."""


class ClientTimeout(TransportError, Busy):
    """Connecting or answering took longer than the client allows."""


class ServerProtocolError(ClientError, RemoteProtocolError):
    """The server's bytes do not follow the protocol."""


class RejectedError(ClientError, PeerError):
    """The server refused the request with an error frame."""

    def __init__(self, response: ErrorResponse, *, retry_after: float | None = None) -> None:
        super().__init__(f"{response.code}: {response.message}")
        self.code = response.code
        self.message = response.message
        self.decision_id = response.decision_id
        self.request_id = response.request_id
        #: Seconds the answer's ``Retry-After`` asked for (HTTP), else ``None``.
        self.retry_after = retry_after


class ServiceUnavailable(RejectedError, Busy):
    """Refused for a service-side reason (busy, shutting down, audit failure, internal)."""


@attrs.frozen
class SubmitResult:
    """A decision: ``result`` is the session's ``EvaluatedProposition`` as a dict, exactly as
    sent, and ``evaluation`` the same typed (:class:`daemon.client._results.Evaluation`:
    outcome, details, observations with their reports and residual obligations); ``seq`` and
    ``line_digest`` place its audit line in the hash chain (``None`` only when the server's
    ``drop`` overflow policy dropped the line)."""

    decision_id: str
    session: str
    result: dict[str, Any]
    seq: int | None = None
    line_digest: str | None = None
    #: The line's leaf index in the transparency log (``seq - 1``) and its exact text, or
    #: ``None`` when the daemon keeps no transparency log (``docs/spec/transparency.md §10.1``).
    log_index: int | None = None
    audit_line: str | None = None
    evaluation: Evaluation | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def outcome(self) -> str:
        """``PASS``, ``FAIL`` or ``UNKNOWN`` (typed: ``evaluation.outcome``)."""
        return str(self.result["outcome"])

    @property
    def anchor(self) -> str | None:
        """``SEQ:DIGEST``: proof, for ``evidenced audit verify --anchor``, that this decision's
        line must stay in the log."""
        return None if self.seq is None else f"{self.seq}:{self.line_digest}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision_id": self.decision_id,
            "session": self.session,
            **self.result,
            "seq": self.seq,
            "line_digest": self.line_digest,
            "log_index": self.log_index,
        }


def refusal_error(response: ErrorResponse) -> RejectedError:
    """The exception a refusal is: :class:`ServiceUnavailable` for a service-fault code."""
    if ErrorCode[response.code].fault is Fault.SERVICE:
        return ServiceUnavailable(response)
    return RejectedError(response)


def raise_for(response: ErrorResponse) -> None:
    """Raise the refusal an ``error`` frame is (rule 3)."""
    raise refusal_error(response)


_Answer = TypeVar("_Answer")


def check_answer(
    response: ServerResponse, kind: type[_Answer], request_id: int, call: str
) -> _Answer:
    """``response`` when it is the ``kind`` answer to ``request_id`` (rule 3)."""
    if isinstance(response, ErrorResponse):
        raise_for(response)
    if not isinstance(response, kind) or getattr(response, "request_id", None) != request_id:
        raise ServerProtocolError(f"unexpected answer to {call}")
    return response


def submit_request(
    request_id: int,
    session: str,
    binding: BoundProposition | dict[str, Any],
    evidence: Sequence[bytes],
) -> tuple[Submit, tuple[bytes, ...]]:
    """The ``submit`` request for ``evidence`` (raw bytes, in order) and its items."""
    wire = binding.to_dict() if isinstance(binding, BoundProposition) else dict(binding)
    items = tuple(evidence)
    if any(type(item) is not bytes for item in items):
        raise TypeError("evidence items must be bytes")
    return Submit(request_id, session, wire, tuple(len(item) for item in items)), items


def decision_result(response: ServerResponse, request_id: int) -> SubmitResult:
    """The :class:`SubmitResult` a ``decision`` answer to ``request_id`` carries."""
    return result_of(check_answer(response, Decision, request_id, "submit"))


def check_pair_count(count: int) -> None:
    """A batch of ``count`` pairs may be sent (1 to ``MAX_BATCH_PAIRS``); ``ValueError``."""
    if not 1 <= count <= MAX_BATCH_PAIRS:
        raise ValueError(f"a batch carries 1 to {MAX_BATCH_PAIRS} pairs, not {count}")


def batch_request(
    request_id: int,
    session: str,
    pairs: Sequence[tuple[BoundProposition | dict[str, Any], Sequence[bytes]]],
) -> tuple[SubmitBatch, tuple[bytes, ...]]:
    """The ``submit_batch`` request for ``pairs`` (binding, evidence) and every pair's items,
    pair after pair (rule 4)."""
    check_pair_count(len(pairs))
    batch: list[BatchPair] = []
    evidence: list[bytes] = []
    for binding, items in pairs:
        submit, admitted = submit_request(request_id, session, binding, items)
        batch.append(BatchPair(submit.binding, submit.item_sizes))
        evidence.extend(admitted)
    return SubmitBatch(request_id, session, tuple(batch)), tuple(evidence)


def batch_results(
    response: ServerResponse, request_id: int, count: int
) -> list[SubmitResult | RejectedError]:
    """Per pair, in order, its decision or its refusal (rule 4)."""
    answer = check_answer(response, Decisions, request_id, "submit_batch")
    if len(answer.decisions) != count:
        raise ServerProtocolError("unexpected answer to submit_batch: not one answer per pair")
    results: list[SubmitResult | RejectedError] = []
    for element in answer.decisions:
        result: SubmitResult | RejectedError
        try:
            if element["kind"] == ErrorResponse.KIND:
                refusal = ErrorResponse.from_header(element)
                answered, result = refusal.request_id, refusal_error(refusal)
            else:
                decision = Decision.from_header(element)
                answered, result = decision.request_id, result_of(decision)
        except ProtocolError as error:
            raise ServerProtocolError(f"unexpected answer in a batch: {error.message}") from None
        if answered != request_id:
            raise ServerProtocolError("unexpected answer in a batch: another request's")
        results.append(result)
    return results


def result_of(decision: Decision) -> SubmitResult:
    """The :class:`SubmitResult` a ``decision`` header carries; a ``result`` that is not an
    evaluated proposition is a :class:`ServerProtocolError`."""
    try:
        evaluation = evaluation_of(decision.result)
    except ValueError as error:
        raise ServerProtocolError(f"unexpected decision result: {error}") from None
    return SubmitResult(
        decision.decision_id,
        decision.session,
        decision.result,
        decision.seq,
        decision.line_digest,
        decision.log_index,
        decision.audit_line,
        evaluation,
    )
