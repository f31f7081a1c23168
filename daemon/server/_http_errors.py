"""HTTP refusals: the binary protocol's error codes, carried by an HTTP status and a JSON body.

Rules (the contract):

1. The HTTP front end refuses with the same closed vocabulary as the binary protocol
   (:class:`~daemon.wire._protocol.ErrorCode`); nothing is invented for HTTP. Each code has one
   status (:data:`STATUS_OF`); a refusal may name another only where HTTP needs a finer word
   than the code (``405`` for a known path asked with the wrong method, ``415`` for a body
   that is neither JSON nor ``multipart/form-data``, ``429`` for a requester without a valid
   token whose peer is penalized for its own strikes — :func:`refusal_of`: the ``BUSY`` of a
   client that must slow down, not of a server at capacity, so a load balancer that takes a
   replica out on a ``503`` does not take it out for everyone because one client misbehaves).
2. Every refusal's body is the JSON document
   ``{"error": {"code", "message", "fault", "decision_id"}}`` — ``fault`` is ``"peer"`` or
   ``"service"``, ``decision_id`` names the refusal's audit line (``null`` when none was
   written) — sent with ``Content-Type: application/json`` and ``Connection: close``: an
   HTTP refusal, like an ``error`` frame, is the last answer of its connection.
3. ``BUSY`` and ``SHUTTING_DOWN`` (``503``, or ``429``) carry ``Retry-After`` (whole seconds);
   ``UNAUTHENTICATED`` (``401``) carries ``WWW-Authenticate: Bearer``; ``405`` carries
   ``Allow``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import orjson

from daemon.server._peers import PENALIZED
from daemon.wire._errors import EvidencedError
from daemon.wire._protocol import ErrorCode, Fault

__all__ = ["RETRY_AFTER_SECONDS", "STATUS_OF", "HttpRefusal", "error_document", "refusal_of"]

#: ``Retry-After`` on a ``503`` (seconds): long enough for a burst to pass, short for a probe.
RETRY_AFTER_SECONDS: Final = 1

#: The HTTP status of each error code (rule 1).
STATUS_OF: Final[dict[ErrorCode, int]] = {
    ErrorCode.BAD_MAGIC: 400,
    ErrorCode.HEADER_TOO_LARGE: 431,
    ErrorCode.HEADER_INVALID: 400,
    ErrorCode.UNKNOWN_KIND: 404,
    ErrorCode.VERSION_UNSUPPORTED: 505,
    ErrorCode.HANDSHAKE_REQUIRED: 400,
    ErrorCode.TRUNCATED_FRAME: 400,
    ErrorCode.FRAME_TOO_LARGE: 413,
    ErrorCode.UNKNOWN_SESSION: 404,
    ErrorCode.BINDING_INVALID: 422,
    ErrorCode.EVIDENCE_ITEMS_EXCEEDED: 413,
    ErrorCode.EVIDENCE_BYTES_EXCEEDED: 413,
    ErrorCode.IDLE_TIMEOUT: 408,
    ErrorCode.UNAUTHENTICATED: 401,
    ErrorCode.BUSY: 503,
    ErrorCode.SHUTTING_DOWN: 503,
    ErrorCode.REQUEST_TIMEOUT: 504,
    ErrorCode.AUDIT_FAILED: 500,
    ErrorCode.PROOF_RANGE: 400,
    ErrorCode.TRANSPARENCY_DISABLED: 404,
    ErrorCode.INTERNAL: 500,
}


class HttpRefusal(EvidencedError):
    """A request refused with ``code``; ``status`` defaults to :data:`STATUS_OF` (rule 1)
    and ``headers`` are extra response headers (rule 3 adds its own)."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        status: int | None = None,
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = STATUS_OF[code] if status is None else status
        extra = list(headers)
        if code in (ErrorCode.BUSY, ErrorCode.SHUTTING_DOWN):
            extra.append(("Retry-After", str(RETRY_AFTER_SECONDS)))
        elif code is ErrorCode.UNAUTHENTICATED:
            extra.append(("WWW-Authenticate", 'Bearer realm="evidenced"'))
        self.headers: tuple[tuple[str, str], ...] = tuple(extra)

    @property
    def fault(self) -> Fault:
        """Whose fault the refusal is (its code's)."""
        return self.code.fault


def refusal_of(code: ErrorCode, message: str) -> HttpRefusal:
    """The HTTP refusal of ``code`` with ``message`` (rule 1): ``429`` for the cut-off
    answer of a penalized peer (:data:`~daemon.server._peers.PENALIZED`)."""
    status = 429 if code is ErrorCode.BUSY and message == PENALIZED else None
    return HttpRefusal(code, message, status=status)


def error_document(code: str, message: str, decision_id: str | None) -> bytes:
    """The body of a refusal (rule 2)."""
    document: dict[str, Any] = {
        "error": {
            "code": code,
            "message": message,
            "fault": ErrorCode[code].fault.value,
            "decision_id": decision_id,
        }
    }
    return orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
