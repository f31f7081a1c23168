"""The binary protocol's calls, as data: what each client method sends over EVD1 and how its
answer is read, for both EVD1 transports (async :mod:`daemon.client._evd1_async`, blocking
:mod:`daemon.client._blocking`).

Rules (the contract):

1. A :class:`Call` is pure: :meth:`Call.build` makes the request frame (and its evidence) for a
   request id the transport chose; :meth:`Call.read` turns the answer frame into the
   method's result with :mod:`daemon.client._outcomes`' checks (an ``error`` frame raised as
   its :class:`~daemon.client._outcomes.RejectedError`, another kind or request id a
   :class:`~daemon.client._outcomes.ServerProtocolError`). Both transports run every call
   the same way, so the two clients cannot drift apart.
2. A call that cannot be sent (evidence that is not ``bytes``, 0 or more than 64 pairs) fails
   in :meth:`Call.build`, before a byte is sent.
3. The same functions exist in :mod:`daemon.client._http_calls` for the HTTP/JSON API, with the
   same results.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import attrs

from daemon.client._outcomes import (
    CLIENT_NAME,
    RejectedError,
    ServerProtocolError,
    SubmitResult,
    batch_request,
    batch_results,
    check_answer,
    decision_result,
    raise_for,
    submit_request,
)
from daemon.wire._protocol import (
    SUPPORTED_VERSIONS,
    CheckpointNote,
    CheckpointRequest,
    ClientRequest,
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
    ServerResponse,
    SessionList,
)
from session import BoundProposition

__all__ = [
    "Call",
    "checkpoint",
    "consistency_proof",
    "decode_proof",
    "health",
    "hello",
    "inclusion_proof",
    "sessions",
    "submit",
    "submit_batch",
]

T = TypeVar("T")
Binding = BoundProposition | dict[str, Any]
Pairs = Sequence[tuple[Binding, Sequence[bytes]]]


@attrs.frozen
class Call(Generic[T]):
    """One request and the reading of its answer (rule 1). ``submits`` is true for a call that
    asks for decisions (its evidence may be decided once sent)."""

    build: Callable[[int], tuple[ClientRequest, tuple[bytes, ...]]]
    read: Callable[[ServerResponse, int], T]
    submits: bool = False


def hello(token: str | None) -> Call[HelloAccepted]:
    """The handshake (its answer carries no request id); a refusal is raised."""

    def read(answer: ServerResponse, _: int) -> HelloAccepted:
        if isinstance(answer, ErrorResponse):
            raise_for(answer)
        if not isinstance(answer, HelloAccepted):
            raise ServerProtocolError("the server did not answer hello")
        return answer

    return Call(lambda _: (Hello(SUPPORTED_VERSIONS, CLIENT_NAME, token), ()), read)


def sessions() -> Call[list[dict[str, Any]]]:
    return Call(
        lambda rid: (ListSessions(rid), ()),
        lambda answer, rid: check_answer(answer, SessionList, rid, "list").sessions,
    )


def health() -> Call[dict[str, Any]]:
    return Call(
        lambda rid: (HealthRequest(rid), ()),
        lambda answer, rid: check_answer(answer, HealthReport, rid, "health").status,
    )


def submit(session: str, binding: Binding, evidence: Sequence[bytes]) -> Call[SubmitResult]:
    def build(rid: int) -> tuple[ClientRequest, tuple[bytes, ...]]:
        return submit_request(rid, session, binding, evidence)

    return Call(build, decision_result, submits=True)


def submit_batch(session: str, pairs: Pairs) -> Call[list[SubmitResult | RejectedError]]:
    def build(rid: int) -> tuple[ClientRequest, tuple[bytes, ...]]:
        return batch_request(rid, session, pairs)

    count = len(pairs)
    return Call(build, lambda answer, rid: batch_results(answer, rid, count), submits=True)


def checkpoint() -> Call[bytes]:
    def read(answer: ServerResponse, rid: int) -> bytes:
        note = check_answer(answer, CheckpointNote, rid, "checkpoint")
        return note.note.encode("utf-8")

    return Call(lambda rid: (CheckpointRequest(rid), ()), read)


def inclusion_proof(index: int, tree_size: int) -> Call[list[bytes]]:
    def read(answer: ServerResponse, rid: int) -> list[bytes]:
        proof = check_answer(answer, InclusionProof, rid, "inclusion_proof")
        if (proof.index, proof.tree_size) != (index, tree_size):
            raise ServerProtocolError("unexpected answer to inclusion_proof")
        return decode_proof(proof.proof)

    return Call(lambda rid: (InclusionProofRequest(rid, index, tree_size), ()), read)


def consistency_proof(old_size: int, new_size: int) -> Call[list[bytes]]:
    def read(answer: ServerResponse, rid: int) -> list[bytes]:
        proof = check_answer(answer, ConsistencyProof, rid, "consistency_proof")
        if (proof.old_size, proof.new_size) != (old_size, new_size):
            raise ServerProtocolError("unexpected answer to consistency_proof")
        return decode_proof(proof.proof)

    return Call(lambda rid: (ConsistencyProofRequest(rid, old_size, new_size), ()), read)


def decode_proof(proof: Sequence[str]) -> list[bytes]:
    """A proof's base64 hashes, decoded; anything else is a protocol error."""
    try:
        return [base64.b64decode(item, validate=True) for item in proof]
    except binascii.Error:
        raise ServerProtocolError("a proof hash is not base64") from None
