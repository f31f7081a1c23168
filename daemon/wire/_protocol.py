"""The ``evidenced`` wire protocol, sans-IO: bytes in, events out; events in, bytes out.

Nothing here touches a socket, a clock or a file. The trio server and the client are thin
layers that move bytes between a stream and a :class:`ServerConnection` or
:class:`ClientConnection`. The frames and header records are :mod:`daemon.wire._records`
(re-exported here, where every user of the protocol imports them from); the byte format is
documented in ``docs/protocol.md``.

Rules (the contract):

1. Bounds before reads. The prefix is checked (magic, then header length against the header
   cap) before a header byte is consumed; the header is parsed and validated before an
   evidence byte is consumed; a ``submit`` header then *stops* the connection in
   :attr:`State.AWAIT_VERDICT` until the host calls :meth:`ServerConnection.accept_evidence`
   (after checking the declared item count and sizes against the session's bounds) or
   :meth:`ServerConnection.refuse`. :meth:`~ServerConnection.bytes_wanted` is never more than
   the bytes the current accepted unit still needs, so a host that reads at most that many
   bytes never buffers more than it accepted. A ``submit_batch`` header stops it the same way,
   after the server's own caps: per pair at most ``max_items`` items and ``max_frame_bytes``
   bytes, the whole frame at most :data:`MAX_BATCH_PAIRS` times ``max_frame_bytes``; its
   evidence arrives as one :class:`BatchEvidence`, the items grouped by pair.
2. Versioned handshake. The client's first frame is ``hello`` listing the protocol versions it
   speaks; the server answers ``hello`` with the one it chose (only :data:`PROTOCOL_VERSION`
   exists) or ``VERSION_UNSUPPORTED``. Any other first frame is ``HANDSHAKE_REQUIRED``.
3. One request at a time: the client sends a request and reads its answer before the next.
   Every ``error`` frame is the last frame of its connection; the server closes after it.
4. Outgoing state (:mod:`daemon.wire._protocol_state`). A connection's ``send`` refuses, with
   ``LocalProtocolError`` (our bug, not the peer's), what its side may not send now: the
   server no answer before the ``hello`` was answered, none to a request it did not receive
   (a ``decision`` only after the submit's evidence), nothing after an ``error``; the client
   nothing before ``hello``, no request before the ``hello`` was answered or while another
   awaits its answer, nothing after an ``error``. ``ServerConnection.send`` /
   ``ClientConnection.send`` called on the class only encode (frames outside a connection).
5. A batch's answer (:class:`Decisions`) holds, per pair in order, the header object a single
   submit would have been answered with (a ``decision`` or an ``error``);
   :meth:`ServerConnection.send_decisions` builds its frame from those objects already encoded
   (canonical, :func:`encode_header`), byte-identical to ``send(Decisions(...))`` without
   encoding them again. An ``error`` element is an answer, not the connection's last frame.
6. The header bound follows from the batch bound. A batch carries up to
   :data:`MAX_BATCH_PAIRS` pairs, each a single submit's ``binding`` and ``items``, so its
   header's bound is :func:`batch_header_bytes`: ``MAX_BATCH_PAIRS × max_header_bytes`` (4 MiB
   for the default 64 KiB). Every batch whose pairs would each fit a ``submit`` header of
   ``max_header_bytes`` (same ``request_id`` and ``session``) fits it: each pair's element is
   its submit header less ``,"kind":"submit","request_id":R,"session":"S"`` (43 bytes and
   ``R`` and ``S``), and the batch's envelope costs 60 bytes and ``R`` and ``S`` once, plus a
   comma per pair, so ``n`` pairs take at most the sum of their submit headers (one pair: 18
   bytes more). Every other header keeps ``max_header_bytes``. Since keys are sorted
   (canonical), a valid batch header begins with :data:`BATCH_HEADER_START`; a server
   connection past its ``hello`` admits a declared length above ``max_header_bytes`` (up to
   the batch bound), reads only those first bytes of it, and refuses a header that is no
   batch's ``HEADER_TOO_LARGE`` right there; before its ``hello`` the bound is
   ``max_header_bytes`` (only ``hello`` may come then).
"""

from __future__ import annotations

import enum
import struct
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Concatenate, Final, Generic, ParamSpec, cast

from daemon.wire._exact import FieldError
from daemon.wire._header_fields import MAX_BATCH_PAIRS, MAX_REQUEST_ID, BatchPair, batch_pairs
from daemon.wire._protocol_state import ClientSendState, ServerSendState
from daemon.wire._records import (
    DEFAULT_MAX_FRAME_BYTES,
    DEFAULT_MAX_HEADER_BYTES,
    DEFAULT_MAX_ITEMS,
    DEFAULT_MAX_RESPONSE_HEADER_BYTES,
    ERROR_CODES,
    MAGIC,
    MAX_HEADER_DEPTH,
    PREFIX_SIZE,
    PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
    BatchEvidence,
    CheckpointNote,
    CheckpointRequest,
    ClientRequest,
    ConsistencyProof,
    ConsistencyProofRequest,
    Decision,
    Decisions,
    ErrorCode,
    ErrorCodeName,
    ErrorResponse,
    Evidence,
    Fault,
    HealthReport,
    HealthRequest,
    Hello,
    HelloAccepted,
    InclusionProof,
    InclusionProofRequest,
    ListSessions,
    ProtocolError,
    ServerResponse,
    SessionList,
    Submit,
    SubmitBatch,
    Token,
    decode_header,
    encode_frame,
    encode_header,
)

__all__ = [
    "BATCH_HEADER_START",
    "CLOSED",
    "DEFAULT_MAX_FRAME_BYTES",
    "DEFAULT_MAX_HEADER_BYTES",
    "DEFAULT_MAX_ITEMS",
    "DEFAULT_MAX_RESPONSE_HEADER_BYTES",
    "ERROR_CODES",
    "MAGIC",
    "MAX_BATCH_PAIRS",
    "MAX_HEADER_DEPTH",
    "MAX_REQUEST_ID",
    "NEED_DATA",
    "PREFIX_SIZE",
    "PROTOCOL_VERSION",
    "SUPPORTED_VERSIONS",
    "BatchEvidence",
    "BatchPair",
    "CheckpointNote",
    "CheckpointRequest",
    "ClientConnection",
    "ClientRequest",
    "Closed",
    "ConsistencyProof",
    "ConsistencyProofRequest",
    "Decision",
    "Decisions",
    "ErrorCode",
    "ErrorCodeName",
    "ErrorResponse",
    "Evidence",
    "Fault",
    "HealthReport",
    "HealthRequest",
    "Hello",
    "HelloAccepted",
    "InclusionProof",
    "InclusionProofRequest",
    "ListSessions",
    "NeedData",
    "ProtocolError",
    "ServerConnection",
    "ServerResponse",
    "SessionList",
    "State",
    "Submit",
    "SubmitBatch",
    "Token",
    "batch_header_bytes",
    "decode_header",
    "encode_frame",
    "encode_header",
]


class NeedData:
    def __repr__(self) -> str:
        return "NEED_DATA"


class Closed:
    def __repr__(self) -> str:
        return "CLOSED"


#: The first bytes of every valid ``submit_batch`` header (module rule 6): canonical keys
#: are sorted, and ``kind`` sorts before ``pairs``, ``request_id`` and ``session``.
BATCH_HEADER_START: Final = b'{"kind":"submit_batch",'


def batch_header_bytes(max_header_bytes: int) -> int:
    """The bound on a ``submit_batch`` header (module rule 6): :data:`MAX_BATCH_PAIRS` pairs,
    each within a single submit's header bound."""
    return MAX_BATCH_PAIRS * max_header_bytes


#: ``next_event()`` needs more bytes before it can produce an event.
NEED_DATA: Final = NeedData()
#: The peer closed the stream cleanly, between frames.
CLOSED: Final = Closed()


# --------------------------------------------------------------------------- frame reader


class State(enum.Enum):
    """Receive-side states. Transitions (``next_event`` unless noted):

    ======================  ==========================================  =================
    state                   input                                       next state
    ======================  ==========================================  =================
    PREFIX                  8 prefix bytes, magic ok, length <= cap     HEADER
                            (past ``hello``: the batch bound, rule 6)
    PREFIX                  EOF with no byte buffered                   CLOSED
    HEADER                  header bytes, valid, no evidence declared   PREFIX
    HEADER                  valid ``submit`` header                     AWAIT_VERDICT
    HEADER                  valid ``submit_batch`` header (server)      AWAIT_VERDICT
    AWAIT_VERDICT           ``accept_evidence()`` (host)                PAYLOAD
    AWAIT_VERDICT           ``refuse()`` (host)                         ERROR
    PAYLOAD                 all declared bytes                          PREFIX
    any                     violation                                   ERROR
    ======================  ==========================================  =================
    """

    PREFIX = "PREFIX"
    HEADER = "HEADER"
    AWAIT_VERDICT = "AWAIT_VERDICT"
    PAYLOAD = "PAYLOAD"
    CLOSED = "CLOSED"
    ERROR = "ERROR"


class _FrameReader:
    """Splits a byte stream into (header, payload) units, checking each bound first."""

    def __init__(
        self, *, max_header_bytes: int, max_frame_bytes: int, max_items: int, batches: bool = False
    ) -> None:
        self.max_header_bytes = max_header_bytes
        self.batches = batches
        #: Whether a header above ``max_header_bytes`` may be a batch's (module rule 6): a
        #: server connection turns it on once its ``hello`` is through.
        self.batch_headers = False
        self.max_frame_bytes = max_frame_bytes
        self.max_items = max_items
        self.state = State.PREFIX
        self._buffer = bytearray()
        self._eof = False
        self._header_size = 0
        self._header_bound = max_header_bytes
        self._unchecked_start = False  # a long header whose first bytes are not read yet
        self._item_sizes: tuple[int, ...] = ()
        self._payload_size = 0

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def receive_data(self, data: bytes) -> None:
        if self._eof and data:
            raise RuntimeError("data received after end of stream")
        if not data:
            self._eof = True
        else:
            self._buffer += data

    def bytes_wanted(self) -> int:
        """How many more bytes the current unit needs (0: none may be read now)."""
        if self.state is State.PREFIX:
            return max(0, PREFIX_SIZE - len(self._buffer))
        if self.state is State.HEADER:
            wanted = len(BATCH_HEADER_START) if self._unchecked_start else self._header_size
            return max(0, wanted - len(self._buffer))
        if self.state is State.PAYLOAD:
            return max(0, self._payload_size - len(self._buffer))
        return 0

    def _fail(self, code: ErrorCode, message: str | None = None) -> ProtocolError:
        self.state = State.ERROR
        return ProtocolError(code, message)

    def next_unit(self) -> dict[str, Any] | tuple[bytes, ...] | NeedData | Closed:
        if self.state is State.PREFIX:
            if len(self._buffer) < PREFIX_SIZE:
                if self._buffer[: len(MAGIC)] != MAGIC[: len(self._buffer[: len(MAGIC)])]:
                    raise self._fail(ErrorCode.BAD_MAGIC)
                if self._eof:
                    if not self._buffer:
                        self.state = State.CLOSED
                        return CLOSED
                    raise self._fail(ErrorCode.TRUNCATED_FRAME)
                return NEED_DATA
            if bytes(self._buffer[:4]) != MAGIC:
                raise self._fail(ErrorCode.BAD_MAGIC)
            (size,) = struct.unpack(">I", self._buffer[4:PREFIX_SIZE])
            bound = self.max_header_bytes
            if self.batch_headers and size > max(bound, len(BATCH_HEADER_START) - 1):
                bound = batch_header_bytes(bound)  # only a batch's (rule 6)
            if size > bound:
                raise self._fail(
                    ErrorCode.HEADER_TOO_LARGE, f"declared header of {size} bytes exceeds {bound}"
                )
            del self._buffer[:PREFIX_SIZE]
            self._header_size, self._header_bound = size, bound
            self._unchecked_start = size > self.max_header_bytes
            self.state = State.HEADER
        if self.state is State.HEADER:
            if self._unchecked_start:
                start = bytes(self._buffer[: len(BATCH_HEADER_START)])
                if start != BATCH_HEADER_START[: len(start)]:
                    raise self._fail(
                        ErrorCode.HEADER_TOO_LARGE,
                        f"declared header of {self._header_size} bytes exceeds "
                        f"{self.max_header_bytes}; only a submit_batch header may be longer "
                        f"(up to {self._header_bound})",
                    )
                if len(start) < len(BATCH_HEADER_START):
                    if self._eof:
                        raise self._fail(ErrorCode.TRUNCATED_FRAME)
                    return NEED_DATA
                self._unchecked_start = False
            if len(self._buffer) < self._header_size:
                if self._eof:
                    raise self._fail(ErrorCode.TRUNCATED_FRAME)
                return NEED_DATA
            with memoryview(self._buffer) as view:
                raw = bytes(view[: self._header_size])
            del self._buffer[: self._header_size]
            try:
                header = decode_header(raw, max_bytes=self._header_bound)
                kind = header.get("kind")
                if type(kind) is not str:
                    raise ProtocolError(ErrorCode.HEADER_INVALID, "header has no string kind")
                sizes = self._declared_items(header)
                if sizes is None and self.batches and kind == SubmitBatch.KIND:
                    sizes = self._declared_batch(header.get("pairs"))
            except ProtocolError as error:
                self.state = State.ERROR
                raise error from None
            self._item_sizes = sizes or ()
            self._payload_size = sum(self._item_sizes)
            self.state = State.PREFIX if sizes is None else State.AWAIT_VERDICT
            return header
        if self.state is State.PAYLOAD:
            if len(self._buffer) < self._payload_size:
                if self._eof:
                    raise self._fail(ErrorCode.TRUNCATED_FRAME)
                return NEED_DATA
            items = []
            offset = 0
            with memoryview(self._buffer) as view:  # one copy per item, none of the whole
                for size in self._item_sizes:
                    items.append(bytes(view[offset : offset + size]))
                    offset += size
            del self._buffer[: self._payload_size]
            self.state = State.PREFIX
            return tuple(items)
        if self.state is State.CLOSED:
            return CLOSED
        raise RuntimeError(f"next_unit() called in state {self.state.name}")

    def _declared_items(self, header: Mapping[str, Any]) -> tuple[int, ...] | None:
        if "items" not in header:
            return None
        items = header["items"]
        if type(items) is not list or any(type(size) is not int or size < 0 for size in items):
            raise ProtocolError(ErrorCode.HEADER_INVALID, "items must be a list of byte counts")
        if len(items) > self.max_items:
            raise ProtocolError(
                ErrorCode.EVIDENCE_ITEMS_EXCEEDED,
                f"{len(items)} evidence items declared; the server admits {self.max_items}",
            )
        total = sum(items)
        if PREFIX_SIZE + self._header_size + total > self.max_frame_bytes:
            raise ProtocolError(
                ErrorCode.FRAME_TOO_LARGE,
                f"frame of {PREFIX_SIZE + self._header_size + total} bytes declared; "
                f"the server admits {self.max_frame_bytes}",
            )
        return tuple(items)

    def _declared_batch(self, pairs: Any) -> tuple[int, ...] | None:
        """Every item size a ``submit_batch`` declares, pair after pair, within the server's
        caps (module rule 2); ``None`` when ``pairs`` is malformed (the header's own check
        then refuses it, with its words)."""
        try:
            parsed = batch_pairs(pairs)
        except FieldError:
            return None
        total = 0
        for index, pair in enumerate(parsed):
            count, size = len(pair.item_sizes), sum(pair.item_sizes)
            if count > self.max_items:
                raise ProtocolError(
                    ErrorCode.EVIDENCE_ITEMS_EXCEEDED,
                    f"pairs[{index}]: {count} evidence items declared; the server admits "
                    f"{self.max_items}",
                )
            if size > self.max_frame_bytes:
                raise ProtocolError(
                    ErrorCode.FRAME_TOO_LARGE,
                    f"pairs[{index}]: {size} evidence bytes declared; the server admits "
                    f"{self.max_frame_bytes} per pair",
                )
            total += size
        frame = PREFIX_SIZE + self._header_size + total
        if frame > MAX_BATCH_PAIRS * self.max_frame_bytes:
            raise ProtocolError(
                ErrorCode.FRAME_TOO_LARGE,
                f"batch frame of {frame} bytes declared; the server admits "
                f"{MAX_BATCH_PAIRS * self.max_frame_bytes}",
            )
        return tuple(size for pair in parsed for size in pair.item_sizes)

    def accept(self) -> None:
        if self.state is not State.AWAIT_VERDICT:
            raise RuntimeError(f"accept() called in state {self.state.name}")
        self.state = State.PAYLOAD

    def refuse(self) -> None:
        self.state = State.ERROR


# --------------------------------------------------------------------------- connections

_P = ParamSpec("_P")


class _Send(Generic[_P]):
    """``send`` of a connection class: on the class it only encodes (``encode``); on a
    connection it also checks and advances that connection's outgoing state (``tracked``,
    module rule 7)."""

    def __init__(
        self, encode: Callable[_P, bytes], tracked: Callable[Concatenate[Any, _P], bytes]
    ) -> None:
        self.encode = encode
        self.tracked = tracked
        self.__doc__ = tracked.__doc__

    def __get__(self, instance: object | None, owner: type | None = None) -> Callable[_P, bytes]:
        if instance is None:
            return self.encode
        return cast(Callable[_P, bytes], types.MethodType(self.tracked, instance))


_REQUEST_TYPES: Final[dict[str, Any]] = {
    cls.KIND: cls
    for cls in (
        ListSessions,
        HealthRequest,
        Submit,
        SubmitBatch,
        CheckpointRequest,
        InclusionProofRequest,
        ConsistencyProofRequest,
    )
}
_RESPONSE_TYPES: Final[dict[str, Any]] = {
    cls.KIND: cls
    for cls in (
        SessionList,
        HealthReport,
        Decision,
        Decisions,
        ErrorResponse,
        CheckpointNote,
        InclusionProof,
        ConsistencyProof,
    )
}


def _encode_response(event: ServerResponse) -> bytes:
    """An answer's frame."""
    return encode_frame(event.to_header())


class ServerConnection:
    """Server side of one connection.

    Feed received bytes with :meth:`receive_data` (``b""`` at end of stream), then call
    :meth:`next_event` until it returns :data:`NEED_DATA` or :data:`CLOSED`. Events are
    :class:`Hello`, :class:`ListSessions`, :class:`HealthRequest`, :class:`Submit` (then,
    after :meth:`accept_evidence`, :class:`Evidence`), :class:`SubmitBatch` (then
    :class:`BatchEvidence`). Peer violations raise
    :class:`ProtocolError`; afterwards the connection is in :attr:`State.ERROR` and the host
    sends the error (:meth:`send`) and closes.
    """

    def __init__(
        self,
        *,
        max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_items: int = DEFAULT_MAX_ITEMS,
    ) -> None:
        self._reader = _FrameReader(
            max_header_bytes=max_header_bytes,
            max_frame_bytes=max_frame_bytes,
            max_items=max_items,
            batches=True,
        )
        self.handshake_done = False
        self._pending_submit: Submit | SubmitBatch | None = None
        self._sending = ServerSendState()

    @property
    def state(self) -> State:
        return self._reader.state

    @property
    def buffered(self) -> int:
        """Bytes received but not yet consumed by an event."""
        return self._reader.buffered

    def bytes_wanted(self) -> int:
        return self._reader.bytes_wanted()

    def receive_data(self, data: bytes) -> None:
        self._reader.receive_data(data)

    def next_event(self) -> ClientRequest | Evidence | BatchEvidence | NeedData | Closed:
        unit = self._reader.next_unit()
        if unit is NEED_DATA or unit is CLOSED:
            return unit
        if isinstance(unit, tuple):
            submit = self._pending_submit
            assert submit is not None
            self._pending_submit = None
            self._sending.evidence_received()
            if isinstance(submit, SubmitBatch):
                return BatchEvidence(submit.request_id, _by_pair(submit.pairs, unit))
            return Evidence(submit.request_id, unit)
        assert isinstance(unit, dict)
        try:
            request = self._request(unit)
        except ProtocolError:
            self._reader.refuse()
            raise
        self._sending.received(request.KIND, getattr(request, "request_id", None))
        return request

    def _request(self, header: dict[str, Any]) -> ClientRequest:
        kind = header["kind"]
        if not self.handshake_done:
            if kind != Hello.KIND:
                raise ProtocolError(ErrorCode.HANDSHAKE_REQUIRED)
            hello = Hello.from_header(header)
            self.handshake_done = self._reader.batch_headers = True
            return hello
        cls = _REQUEST_TYPES.get(kind)
        if cls is None:
            raise ProtocolError(ErrorCode.UNKNOWN_KIND, f"unknown request kind {kind!r}")
        if "items" in header and cls is not Submit:
            raise ProtocolError(ErrorCode.HEADER_INVALID, f"{kind!r} carries no evidence")
        event: ClientRequest = cls.from_header(header)
        if isinstance(event, Submit | SubmitBatch):
            self._pending_submit = event
        return event

    def accept_evidence(self) -> None:
        """The host checked the declared sizes; read the evidence next."""
        self._reader.accept()

    def refuse(self) -> None:
        """The host refused the request: nothing more is read; send the error and close."""
        self._reader.refuse()
        self._pending_submit = None

    def _send(self, event: ServerResponse) -> bytes:
        """The event's frame, if this side may send it now (module rule 7; else
        ``LocalProtocolError``, nothing changed)."""
        kind = event.KIND
        self._sending.check(kind, getattr(event, "request_id", None))
        data = encode_frame(event.to_header())
        self._sending.sent(kind)
        return data

    send = _Send(_encode_response, _send)

    def send_decisions(self, request_id: int, answers: Sequence[bytes]) -> bytes:
        """The :class:`Decisions` frame answering batch ``request_id`` from its elements
        already encoded, each :func:`encode_header` of a ``decision`` or ``error`` header
        (module rule 8), if this side may send it now (rule 7)."""
        self._sending.check(Decisions.KIND, request_id)
        header = b"".join(
            (
                b'{"decisions":[',
                b",".join(answers),
                b'],"kind":"decisions","request_id":',
                str(request_id).encode("ascii"),
                b"}",
            )
        )
        self._sending.sent(Decisions.KIND)
        return b"".join((MAGIC, struct.pack(">I", len(header)), header))

    @staticmethod
    def choose_version(hello: Hello) -> int | None:
        common = set(hello.versions) & set(SUPPORTED_VERSIONS)
        return max(common) if common else None


def _by_pair(
    pairs: tuple[BatchPair, ...], items: tuple[bytes, ...]
) -> tuple[tuple[bytes, ...], ...]:
    """A batch's items grouped by pair, in order."""
    grouped = []
    offset = 0
    for pair in pairs:
        count = len(pair.item_sizes)
        grouped.append(items[offset : offset + count])
        offset += count
    return tuple(grouped)


def _encode_request(request: ClientRequest, evidence: tuple[bytes, ...] = ()) -> bytes:
    """A request's frame; ``ValueError`` when ``evidence`` does not fit the request (a
    ``submit_batch`` takes every pair's items, pair after pair)."""
    if isinstance(request, Submit | SubmitBatch):
        if tuple(len(item) for item in evidence) != request.item_sizes:
            raise ValueError("evidence does not match the declared item sizes")
        return encode_frame(request.to_header(), evidence)
    if evidence:
        raise ValueError(f"{request.KIND!r} carries no evidence")
    return encode_frame(request.to_header())


class ClientConnection:
    """Client side: :meth:`send` requests (submit with its evidence), feed answer bytes, and
    read :class:`HelloAccepted` then answers with :meth:`next_event`. Server violations raise
    :class:`ProtocolError` (here the *server* is the peer at fault)."""

    def __init__(self, *, max_header_bytes: int = DEFAULT_MAX_RESPONSE_HEADER_BYTES) -> None:
        self._reader = _FrameReader(
            max_header_bytes=max_header_bytes, max_frame_bytes=2**62, max_items=0
        )
        self.handshake_done = False
        self._sending = ClientSendState()

    def receive_data(self, data: bytes) -> None:
        self._reader.receive_data(data)

    def bytes_wanted(self) -> int:
        return self._reader.bytes_wanted()

    def _send(self, request: ClientRequest, evidence: tuple[bytes, ...] = ()) -> bytes:
        """The request's frame (a ``submit`` with its evidence), if this side may send it now
        (module rule 7; else ``LocalProtocolError``, nothing changed)."""
        self._sending.check(request.KIND)
        data = _encode_request(request, evidence)
        self._sending.sent(request.KIND)
        return data

    send = _Send(_encode_request, _send)

    def next_event(self) -> ServerResponse | NeedData | Closed:
        unit = self._reader.next_unit()
        if unit is NEED_DATA or unit is CLOSED:
            return unit
        assert isinstance(unit, dict)
        response = self._response(unit)
        self._sending.received(response.KIND)
        return response

    def _response(self, unit: dict[str, Any]) -> ServerResponse:
        kind = unit["kind"]
        if kind == ErrorResponse.KIND:
            return ErrorResponse.from_header(unit)
        if not self.handshake_done:
            if kind != HelloAccepted.KIND:
                raise ProtocolError(ErrorCode.HANDSHAKE_REQUIRED, "server did not answer hello")
            self.handshake_done = True
            return HelloAccepted.from_header(unit)
        cls = _RESPONSE_TYPES.get(kind)
        if cls is None:
            raise ProtocolError(ErrorCode.UNKNOWN_KIND, f"unknown answer kind {kind!r}")
        response: ServerResponse = cls.from_header(unit)
        return response
