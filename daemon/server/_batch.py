"""Batches: many evidence pairs in one HTTP request, each its own decision (``docs/http.md``).

``POST /v1/sessions/{name}/decisions:batch`` carries up to :data:`MAX_PAIRS` pairs for one
session, as ``{"pairs": [{"binding": {...}, "evidence": [{"base64": "..."}, ...]}, ...]}``
(each element exactly a single submit's JSON body), and is answered ``200`` with
``{"decisions": [...]}``: one element per pair, in order, each either the single submit's
``decision`` document or its refusal document ``{"error": {...}}``.

Rules (the contract):

1. Bounds before reads. The body limit is :data:`MAX_PAIRS` times a single submit's body limit
   for the session (:func:`~daemon.server._http_body.body_limit`, its effective bounds); a
   declared ``Content-Length`` over it is refused (``EVIDENCE_BYTES_EXCEEDED``, 413) before a
   body byte is read, and a body is cut the moment it passes it. The route, token, session,
   draining and media-type checks are a single submit's, in its order (``application/json``
   only). The body holds one server slot (``max_in_flight``) from before it is read until its
   pairs take their own (:class:`~daemon.server._pairs.BatchSlot`), so batch bodies in memory
   are bounded as single ones are, and a batch of ``n`` pairs never needs ``n + 1`` slots.
2. The document: strict JSON (a single submit's rules), an object with exactly ``pairs``, an
   array of 1 to :data:`MAX_PAIRS` elements; else the whole request is refused
   ``HEADER_INVALID`` (400) and audited once, as a single submit's malformed body is.
3. Each pair is checked as a single submit's body is (an object with exactly ``binding`` and
   ``evidence``, items within the session's bounds, canonical base64); a pair that fails is
   that element's refusal, audited with its code like a single submit's, and the other pairs
   go on.
4. Each admitted pair runs the pipeline's own stages (:meth:`Pipeline.submit`, through
   :func:`daemon.server._pairs.decide_pairs`, which the binary protocol's ``submit_batch``
   shares): its own bounds, binding, capacity slot, evaluation, audit line (and so
   transparency leaf) and answer, so a pair is decided exactly as the same pair sent alone
   would be. The pairs run concurrently:
   their lines go into the same group commit and the batch waits for one ``fsync``, not one
   per pair; each element still carries its own line's ``seq``, ``line_digest`` and (with a
   transparency log) ``log_index`` and ``audit_line``. A pair refused ``BUSY`` (the server's
   or the peer's in-flight cap) is that element's refusal. Every answer's ``request_id`` is
   the HTTP request's number on its connection.
5. The answer is sent once every pair has its answer, after every admitted line is durable.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any, Final

import trio

from daemon.server._http_body import SubmitBody, body_limit, parse_json
from daemon.server._http_errors import HttpRefusal, error_document
from daemon.server._pairs import BatchSlot, Pair, decide_pairs
from daemon.server._pipeline import Refused
from daemon.wire._echo import echo
from daemon.wire._protocol import MAX_BATCH_PAIRS, ErrorCode, ErrorResponse

if TYPE_CHECKING:
    from daemon.config._hosting import HostedSession
    from daemon.server._http_codec import HttpServerCodec, RequestHead
    from daemon.server._http_server import HttpConnection, HttpFrontEnd

__all__ = ["MAX_PAIRS", "batch_limit", "submit_batch"]

#: The most pairs one batch carries (the binary protocol's bound too).
MAX_PAIRS: Final = MAX_BATCH_PAIRS
_DOCUMENT_ALLOWANCE: Final = 64  # ``{"pairs":[`` ... ``]}`` and the commas


def batch_limit(*, max_items: int, max_bytes: int, max_binding_bytes: int) -> int:
    """The largest batch body a session can need (rule 1)."""
    single = body_limit(
        max_items=max_items, max_bytes=max_bytes, max_binding_bytes=max_binding_bytes
    )
    return MAX_PAIRS * single + _DOCUMENT_ALLOWANCE


class _BatchBody:
    """Collects the body; :meth:`pairs` checks the document (rule 2)."""

    def __init__(self) -> None:
        self._data = bytearray()

    def feed(self, chunk: bytes) -> None:
        self._data += chunk

    def pairs(self) -> list[Any]:
        document = parse_json(bytes(self._data), "the request body")
        self._data = bytearray()
        if type(document) is not dict or set(document) != {"pairs"}:
            raise HttpRefusal(
                ErrorCode.HEADER_INVALID, 'the request body must be an object with exactly "pairs"'
            )
        pairs = document["pairs"]
        if type(pairs) is not list or not 1 <= len(pairs) <= MAX_PAIRS:
            raise HttpRefusal(
                ErrorCode.HEADER_INVALID, f"pairs must be an array of 1 to {MAX_PAIRS} pairs"
            )
        return pairs


def _decoded_size(text: str) -> int:
    return len(text) // 4 * 3 - text[-2:].count("=") if text else 0


def check_pair(pair: Any, index: int, *, max_items: int, max_bytes: int) -> SubmitBody:
    """One pair as a single submit's JSON body (rule 3); :class:`HttpRefusal` naming it."""
    where = f"pairs[{index}]"
    if type(pair) is not dict or set(pair) != {"binding", "evidence"}:
        raise HttpRefusal(
            ErrorCode.HEADER_INVALID,
            f'{where} must be an object with exactly "binding" and "evidence"',
        )
    binding, evidence = pair["binding"], pair["evidence"]
    if type(binding) is not dict:
        raise HttpRefusal(ErrorCode.BINDING_INVALID, f"{where}: binding must be an object")
    if type(evidence) is not list:
        raise HttpRefusal(ErrorCode.HEADER_INVALID, f"{where}: evidence must be an array")
    texts = []
    for number, item in enumerate(evidence):
        if type(item) is not dict or set(item) != {"base64"} or type(item["base64"]) is not str:
            raise HttpRefusal(
                ErrorCode.HEADER_INVALID,
                f'{where}: evidence[{number}] must be an object with exactly "base64", a string',
            )
        texts.append(item["base64"])
    if len(texts) > max_items:
        raise HttpRefusal(
            ErrorCode.EVIDENCE_ITEMS_EXCEEDED,
            f"{where}: {len(texts)} evidence items sent; at most {max_items} admitted",
        )
    declared = sum(_decoded_size(text) for text in texts)
    if declared > max_bytes:
        raise HttpRefusal(
            ErrorCode.EVIDENCE_BYTES_EXCEEDED,
            f"{where}: {declared} evidence bytes sent; at most {max_bytes} admitted",
        )
    items = []
    for number, text in enumerate(texts):
        if len(text) % 4:
            raise HttpRefusal(
                ErrorCode.HEADER_INVALID,
                f"{where}: evidence[{number}] is not base64: length {len(text)} is not a "
                "multiple of 4",
            )
        try:
            items.append(base64.b64decode(text, validate=True))
        except (binascii.Error, ValueError) as error:
            raise HttpRefusal(
                ErrorCode.HEADER_INVALID, f"{where}: evidence[{number}] is not base64: {error}"
            ) from None
    return SubmitBody(binding, tuple(items))


async def submit_batch(
    front: HttpFrontEnd,
    stream: trio.abc.Stream,
    connection: HttpConnection,
    codec: HttpServerCodec,
    head: RequestHead,
    requester: dict[str, Any],
    number: int,
    deadline: float,
    started: int,
    peer: str,
) -> bool:
    """Read, decide and answer one batch (module rules) of ``requester`` (its peer: ``peer``,
    the connection's or the client a trusted proxy named); True when the answer was sent."""
    config = front.config
    pipeline = front.pipeline
    name = head.session
    assert name is not None
    session: HostedSession | None = pipeline.sessions.get(name)
    if session is None:
        raise HttpRefusal(ErrorCode.UNKNOWN_SESSION, f"no session named '{echo(name, 64)}'")
    if pipeline.draining:
        raise HttpRefusal(ErrorCode.SHUTTING_DOWN, "the server is shutting down")
    if head.content_type != "application/json":
        raise HttpRefusal(ErrorCode.HEADER_INVALID, "a batch body is application/json", status=415)
    max_items = min(session.effective_items, config.max_items)
    max_bytes = min(session.effective_bytes, config.max_frame_bytes)
    limit = batch_limit(
        max_items=max_items, max_bytes=max_bytes, max_binding_bytes=config.max_header_bytes
    )
    codec.accept_body(
        limit,
        ErrorCode.EVIDENCE_BYTES_EXCEEDED,
        f"session '{echo(name, 64)}' admits {MAX_PAIRS} pairs of {max_items} items of "
        f"{max_bytes} bytes in total, a batch body of at most {limit} bytes",
    )
    slot = BatchSlot(pipeline.capacity)  # the body's own server slot (rule 1)
    try:
        slot.acquire_nowait()
    except trio.WouldBlock:
        raise HttpRefusal(
            ErrorCode.BUSY, f"{config.max_in_flight} requests in flight; retry later"
        ) from None
    try:
        pairs = await _read_pairs(front, stream, peer, codec, deadline)
        checked: list[Pair] = []
        for index, pair in enumerate(pairs):
            try:
                admitted = check_pair(pair, index, max_items=max_items, max_bytes=max_bytes)
            except HttpRefusal as refusal:
                checked.append(Refused(refusal.code, refusal.message))
                continue
            checked.append((admitted.binding, admitted.items))
        answers = await decide_pairs(pipeline, number, name, checked, requester, peer,
                                     started=started, refusal=_error_document,
                                     listener="http", slot=slot)  # fmt: skip
    finally:
        slot.release()
    body = b'{"decisions":[' + b",".join(answers) + b"]}"
    return await front._send(stream, codec.respond(200, body))


async def _read_pairs(
    front: HttpFrontEnd,
    stream: trio.abc.Stream,
    peer: str,
    codec: HttpServerCodec,
    deadline: float,
) -> list[Any]:
    """The body, read as a single submit's is (under the idle deadline and the minimum rate,
    a stall a strike against the peer), then its pairs (rule 2)."""
    parser = _BatchBody()
    try:
        await front.read_body(stream, codec, parser.feed, deadline)
    except Refused as refused:
        front.peers.strike(peer)
        raise HttpRefusal(refused.code, refused.message) from None
    return parser.pairs()


def _error_document(answer: ErrorResponse) -> bytes:
    """A pair's refusal as its element: a single submit's refusal document (rule 3)."""
    return error_document(answer.code, answer.message, answer.decision_id)
