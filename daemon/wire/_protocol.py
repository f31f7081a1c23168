"""The ``evidenced`` wire protocol, sans-IO: bytes in, events out; events in, bytes out.

Nothing here touches a socket, a clock or a file. The trio server and the client are thin
layers that move bytes between a stream and a :class:`ServerConnection` or
:class:`ClientConnection`. The byte format is documented in ``docs/protocol.md``.

Rules (the contract):

1. A frame is ``MAGIC`` (4 bytes, ``b"EVD1"``), the header length as an unsigned 32-bit
   big-endian integer, the header (canonical JSON, :func:`encode_header`), then the raw
   evidence bytes whose lengths the header declares in ``items`` (only ``submit`` and
   ``submit_batch`` frames carry evidence; the payload is the concatenation of the items, in
   order, no base64; a ``submit_batch`` declares them per pair, in ``pairs``, pair after pair).
2. Bounds before reads. The prefix is checked (magic, then header length against the header
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
3. Canonical headers. A header is a JSON object encoded by :func:`encode_header`; the decoder
   refuses invalid UTF-8, a BOM, ``NaN``/``Infinity``, then requires the canonical re-encoding
   to equal the received bytes exactly (so duplicate keys, whitespace, unsorted keys and
   escape variants are refused too). Nesting is at most :data:`MAX_HEADER_DEPTH` (254, the
   root object counting as one): the deepest value the canonical encoder (orjson) encodes, so
   a deeper header has no canonical form; it is refused as ``HEADER_INVALID`` with the message
   "header nesting deeper than 254", and :func:`encode_header` refuses such a value too.
4. Versioned handshake. The client's first frame is ``hello`` listing the protocol versions it
   speaks; the server answers ``hello`` with the one it chose (only :data:`PROTOCOL_VERSION`
   exists) or ``VERSION_UNSUPPORTED``. Any other first frame is ``HANDSHAKE_REQUIRED``.
5. One request at a time: the client sends a request and reads its answer before the next.
   Every ``error`` frame is the last frame of its connection; the server closes after it.
6. Every refusal is a :class:`ProtocolError` carrying an :class:`ErrorCode` from the closed
   vocabulary in :data:`ERROR_CODES`; the codec never raises anything else for peer bytes.
7. Outgoing state (:mod:`daemon.wire._protocol_state`). A connection's ``send`` refuses, with
   ``LocalProtocolError`` (our bug, not the peer's), what its side may not send now: the
   server no answer before the ``hello`` was answered, none to a request it did not receive
   (a ``decision`` only after the submit's evidence), nothing after an ``error``; the client
   nothing before ``hello``, no request before the ``hello`` was answered or while another
   awaits its answer, nothing after an ``error``. ``ServerConnection.send`` /
   ``ClientConnection.send`` called on the class only encode (frames outside a connection).
8. A batch's answer (:class:`Decisions`) holds, per pair in order, the header object a single
   submit would have been answered with (a ``decision`` or an ``error``);
   :meth:`ServerConnection.send_decisions` builds its frame from those objects already encoded
   (canonical, :func:`encode_header`), byte-identical to ``send(Decisions(...))`` without
   encoding them again. An ``error`` element is an answer, not the connection's last frame.
"""

from __future__ import annotations

import enum
import struct
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Concatenate, Final, Generic, ParamSpec, Self, cast

import attrs
import orjson
from cattrs.errors import ClassValidationError
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from canon import network_json
from daemon.errors import RemoteProtocolError
from daemon.wire._exact import FieldError, Rule, exact_keys, first_failure, wire_names
from daemon.wire._header_fields import (
    HEADERS,
    LINE_DIGEST_RE,
    MAX_AUDIT_SEQ,
    AuditLine,
    AuditSeq,
    BatchAnswers,
    BatchPairs,
    ItemSizes,
    JsonObject,
    LineDigest,
    LogIndex,
    OptionalRequestId,
    OptionalText,
    Proof,
    RequestId,
    Sessions,
    Size,
    Text,
    Version,
    Versions,
    batch_pairs,
)
from daemon.wire._header_fields import MAX_BATCH_PAIRS as MAX_BATCH_PAIRS
from daemon.wire._header_fields import MAX_REQUEST_ID as MAX_REQUEST_ID
from daemon.wire._header_fields import BatchPair as BatchPair
from daemon.wire._protocol_state import ClientSendState, ServerSendState
from mechanism.canonical import CanonicalError, CanonicalLimitError, scan_structure

MAGIC: Final = b"EVD1"
PREFIX_SIZE: Final = 8
PROTOCOL_VERSION: Final = 1
SUPPORTED_VERSIONS: Final = (PROTOCOL_VERSION,)
#: The deepest header, the root object counting as one: exactly what orjson, the canonical
#: encoder, encodes (it refuses one level more), so no deeper header has a canonical form.
#: Pinned by a test on both sides of the limit, so a change in orjson cannot move it silently.
MAX_HEADER_DEPTH: Final = 254
_TOO_DEEP: Final = f"header nesting deeper than {MAX_HEADER_DEPTH}"

#: Defaults for the global caps (the server's limits; sessions bound evidence further).
DEFAULT_MAX_HEADER_BYTES: Final = 64 * 1024
DEFAULT_MAX_FRAME_BYTES: Final = 2 * 1024 * 1024
DEFAULT_MAX_ITEMS: Final = 16
#: The client accepts larger answer headers (decisions carry mechanism reports).
DEFAULT_MAX_RESPONSE_HEADER_BYTES: Final = 16 * 1024 * 1024


class Fault(enum.Enum):
    """Who is at fault for an error: the peer that sent the bytes, or the service."""

    PEER = "peer"
    SERVICE = "service"


class ErrorCode(enum.Enum):
    """The closed vocabulary of error codes (wire value = member name)."""

    BAD_MAGIC = ("peer", "the frame does not start with the protocol magic")
    HEADER_TOO_LARGE = ("peer", "the declared header length exceeds the header cap")
    HEADER_INVALID = ("peer", "the header is not a canonical JSON object of a known shape")
    UNKNOWN_KIND = ("peer", "the header names an unknown or unexpected request kind")
    VERSION_UNSUPPORTED = ("peer", "no protocol version in common")
    HANDSHAKE_REQUIRED = ("peer", "the first frame must be hello")
    TRUNCATED_FRAME = ("peer", "the stream ended inside a frame")
    FRAME_TOO_LARGE = ("peer", "the declared evidence exceeds the global frame cap")
    UNKNOWN_SESSION = ("peer", "no session of that name is hosted")
    BINDING_INVALID = ("peer", "the bound proposition is malformed")
    EVIDENCE_ITEMS_EXCEEDED = ("peer", "more evidence items than the session admits")
    EVIDENCE_BYTES_EXCEEDED = ("peer", "more evidence bytes than the session admits")
    IDLE_TIMEOUT = ("peer", "no complete request within the idle timeout")
    UNAUTHENTICATED = ("peer", "no valid bearer token was presented")
    BUSY = ("service", "the server is at capacity; retry later")
    SHUTTING_DOWN = ("service", "the server is shutting down")
    REQUEST_TIMEOUT = ("service", "the request could not be answered within its deadline")
    AUDIT_FAILED = ("service", "the decision could not be recorded in the audit log")
    PROOF_RANGE = ("peer", "the index or tree sizes are outside the latest signed checkpoint")
    TRANSPARENCY_DISABLED = ("peer", "this daemon keeps no transparency log")
    INTERNAL = ("service", "internal server error")

    def __init__(self, fault: str, summary: str) -> None:
        self.fault = Fault(fault)
        self.summary = summary


ERROR_CODES: Final = frozenset(code.name for code in ErrorCode)


class ProtocolError(RemoteProtocolError):
    """The bytes received violate the protocol. ``code`` says how; ``fault`` says whose."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.summary)
        self.code = code
        self.message = message or code.summary

    @property
    def fault(self) -> Fault:
        return self.code.fault


# --------------------------------------------------------------------------- header codec


def encode_header(value: Mapping[str, Any]) -> bytes:
    """The canonical header bytes: sorted keys, no whitespace, UTF-8, no NaN/Infinity.

    The network variant of the canonical-JSON family (:func:`canon.network_json`: orjson,
    byte-identical to ``json.dumps(value, ensure_ascii=False, sort_keys=True,
    separators=(",", ":"))`` for float-free values, property-tested).
    """
    try:
        return network_json(value)
    except (TypeError, ValueError, RecursionError) as error:
        raise ValueError(f"value cannot be encoded as a header: {error}") from None


def _too_deep(data: bytes) -> bool:
    """Whether ``data`` nests deeper than :data:`MAX_HEADER_DEPTH` outside strings (only
    asked once a header has been refused, to name the reason; linear in ``len(data)``)."""
    try:
        scan_structure(data, max_depth=MAX_HEADER_DEPTH, max_containers=len(data) + 1)
    except CanonicalLimitError:
        return True
    except CanonicalError:  # a closer without an opener: too shallow, not too deep
        return False
    return False


def decode_header(data: bytes, *, max_bytes: int) -> dict[str, Any]:
    """Admit header bytes: size, strict UTF-8 JSON (no NaN/Infinity, no BOM), then byte
    equality with the canonical re-encoding (which also refuses duplicate keys, whitespace,
    unsorted keys, escape variants, non-canonical numbers, and nesting deeper than
    :data:`MAX_HEADER_DEPTH`, reported as such)."""
    if len(data) > max_bytes:
        raise ProtocolError(ErrorCode.HEADER_TOO_LARGE)
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        message = _TOO_DEEP if _too_deep(data) else f"header is not JSON: {error}"
        raise ProtocolError(ErrorCode.HEADER_INVALID, message) from None
    if type(value) is not dict:
        raise ProtocolError(ErrorCode.HEADER_INVALID, "header is not a JSON object")
    try:
        canonical = orjson.dumps(value, option=orjson.OPT_SORT_KEYS) == data
    except (TypeError, ValueError):  # orjson's recursion limit: nothing else fails here
        canonical = False
    if not canonical:
        message = _TOO_DEEP if _too_deep(data) else "header is not in canonical form"
        raise ProtocolError(ErrorCode.HEADER_INVALID, message)
    return value


def encode_frame(header: Mapping[str, Any], items: tuple[bytes, ...] = ()) -> bytes:
    """One frame: prefix, canonical header, then the raw items (sizes must be in the header)."""
    raw = encode_header(header)
    return b"".join((MAGIC, struct.pack(">I", len(raw)), raw, *items))


# --------------------------------------------------------------------------- events
#
# Each event is a frozen attrs class whose fields are the header's keys (``kind`` aside, the
# class's ``KIND``), typed with the exact field types of :mod:`daemon.wire._header_fields`. The
# header converter (:data:`HEADERS`) structures and unstructures them; :class:`_Header` gives
# every event ``to_header()`` and ``from_header(header)``, which checks, in this order: the
# exact key set (one refusal naming unexpected and missing keys), the class's cross-field rule
# (:class:`Decision` only), then each field's type (when several fail, the first in the
# class's ``CHECK_ORDER``, then in field order, is reported). Every refusal is
# ``HEADER_INVALID``.


class _Header:
    """The wire form of an event: its fields through :data:`HEADERS`, plus ``kind``."""

    __slots__ = ()
    KIND: ClassVar[str]
    #: Fields whose refusal is reported first when several fail (then field order).
    CHECK_ORDER: ClassVar[tuple[str, ...]] = ()
    #: Header keys other than ``kind`` whose wire name differs from the field's name.
    RENAMES: ClassVar[Mapping[str, str]] = {}

    def to_header(self) -> dict[str, Any]:
        header: dict[str, Any] = _unstructure(self)
        header["kind"] = self.KIND
        return header

    @classmethod
    def from_header(cls, header: Mapping[str, Any]) -> Self:
        plan = _plan(cls)
        wrong = exact_keys(header, cls._expected_keys(header, plan.keys))
        if wrong is not None:
            raise ProtocolError(
                ErrorCode.HEADER_INVALID,
                f"{header.get('kind')!r} header: unexpected keys {wrong[0]}, "
                f"missing keys {wrong[1]}",
            )
        cls._check_header(header)
        fields = dict(header)
        del fields["kind"]
        try:
            event: Self = plan.structure(fields, cls)
        except ClassValidationError as error:
            key, failure = first_failure(error, plan.names, cls.CHECK_ORDER)
            if key is None or not isinstance(failure, FieldError):
                raise failure from None  # our bug: a field rule raised something else
            raise ProtocolError(ErrorCode.HEADER_INVALID, failure.words(key)) from None
        return event

    @classmethod
    def _expected_keys(cls, header: Mapping[str, Any], keys: frozenset[str]) -> frozenset[str]:
        return keys

    @classmethod
    def _check_header(cls, header: Mapping[str, Any]) -> None:
        """A rule across fields, checked after the keys and before the fields' own rules."""


@attrs.frozen
class _Plan:
    """How one event class is (un)structured: its hook, wire names and expected keys."""

    structure: Any
    names: dict[str, str]
    keys: frozenset[str]


_PLANS: Final[dict[type, _Plan]] = {}


def _plan(cls: type[_Header]) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        names = wire_names(cls, cls.RENAMES)
        if cls.RENAMES:
            renames: dict[str, Any] = {
                name: override(rename=wire) for name, wire in cls.RENAMES.items()
            }
            HEADERS.register_structure_hook(
                cls,
                make_dict_structure_fn(
                    cls,
                    HEADERS,
                    _cattrs_forbid_extra_keys=True,
                    _cattrs_detailed_validation=True,
                    **renames,
                ),
            )
            HEADERS.register_unstructure_hook(
                cls, make_dict_unstructure_fn(cls, HEADERS, **renames)
            )
        plan = _Plan(HEADERS.get_structure_hook(cls), names, frozenset({"kind", *names.values()}))
        _PLANS[cls] = plan
    return plan


def _unstructure(event: _Header) -> dict[str, Any]:
    _plan(type(event))
    header: dict[str, Any] = HEADERS.unstructure(event)
    return header


def _token(value: Any, _: Any = None) -> str | None:
    if type(value) is not str:
        raise FieldError("{key} must be a string")
    if not 1 <= len(value) <= 4096:
        raise FieldError("{key} must be 1..4096 characters")
    return value


Token = Annotated[str | None, Rule(_token)]


@attrs.frozen
class Hello(_Header):
    """Client → server, first frame. ``versions``: the protocol versions the client speaks
    (1 to 16 integers 0..65535); ``client``: its name; ``token``: a bearer token for a
    listener with a ``tokens_file`` (``docs/http.md``), the key absent when there is none."""

    KIND: ClassVar[str] = "hello"
    CHECK_ORDER: ClassVar[tuple[str, ...]] = ("versions", "token")
    versions: Versions
    client: Text
    token: Token = None

    def to_header(self) -> dict[str, Any]:
        header = super().to_header()
        if self.token is None:
            del header["token"]
        return header

    @classmethod
    def _expected_keys(cls, header: Mapping[str, Any], keys: frozenset[str]) -> frozenset[str]:
        """``token`` is sent only when there is one (an older client's hello is unchanged)."""
        return keys if "token" in header else keys - {"token"}


@attrs.frozen
class HelloAccepted(_Header):
    """Server → client: the chosen ``version``, the ``server`` name and its global ``limits``."""

    KIND: ClassVar[str] = "hello"
    version: Version
    server: Text
    limits: JsonObject


@attrs.frozen
class ListSessions(_Header):
    """Client → server: which sessions are hosted, with their mechanisms and bounds."""

    KIND: ClassVar[str] = "list"
    request_id: RequestId


@attrs.frozen
class SessionList(_Header):
    """Server → client: ``sessions`` is a list of session descriptions (see docs)."""

    KIND: ClassVar[str] = "sessions"
    CHECK_ORDER: ClassVar[tuple[str, ...]] = ("sessions",)
    request_id: RequestId
    sessions: Sessions


@attrs.frozen
class HealthRequest(_Header):
    """Client → server: liveness and counters."""

    KIND: ClassVar[str] = "health"
    request_id: RequestId


@attrs.frozen
class HealthReport(_Header):
    """Server → client: ``status`` is an object of counters (see docs)."""

    KIND: ClassVar[str] = "health"
    request_id: RequestId
    status: JsonObject


@attrs.frozen
class Submit(_Header):
    """Client → server: evaluate ``binding`` in ``session`` over evidence of ``item_sizes``.

    ``binding`` is the wire form of a bound proposition (``BoundProposition.to_dict()``);
    the evidence items follow the header as raw bytes, ``item_sizes[i]`` bytes each (the
    header's ``items``).
    """

    KIND: ClassVar[str] = "submit"
    CHECK_ORDER: ClassVar[tuple[str, ...]] = ("item_sizes",)
    RENAMES: ClassVar[Mapping[str, str]] = {"item_sizes": "items"}
    request_id: RequestId
    session: Text
    binding: JsonObject
    item_sizes: ItemSizes


@attrs.frozen
class SubmitBatch(_Header):
    """Client → server: evaluate each pair of ``pairs`` (1 to :data:`MAX_BATCH_PAIRS`
    :class:`BatchPair`: a binding's wire form and its item sizes) in ``session``, each as its
    own submit. The evidence follows the header raw, every pair's items, pair after pair
    (``docs/protocol.md`` §4.1)."""

    KIND: ClassVar[str] = "submit_batch"
    CHECK_ORDER: ClassVar[tuple[str, ...]] = ("pairs",)
    request_id: RequestId
    session: Text
    pairs: BatchPairs

    @property
    def item_sizes(self) -> tuple[int, ...]:
        """Every pair's item sizes, pair after pair: the frame's evidence."""
        return tuple(size for pair in self.pairs for size in pair.item_sizes)


@attrs.frozen
class Evidence:
    """Server-side event after :meth:`ServerConnection.accept_evidence`: the raw items."""

    request_id: int
    items: tuple[bytes, ...]


@attrs.frozen
class BatchEvidence:
    """Server-side event after :meth:`ServerConnection.accept_evidence` for a
    :class:`SubmitBatch`: each pair's raw items, in pair order."""

    request_id: int
    pairs: tuple[tuple[bytes, ...], ...]


@attrs.frozen
class Decision(_Header):
    """Server → client: ``result`` is ``EvaluatedProposition.to_dict()``; ``decision_id`` is
    the key of its audit line; ``seq`` and ``line_digest`` are that line's place in the hash
    chain (``seq:line_digest`` is an anchor for ``audit verify``). Both are ``None`` only when
    the line was dropped by the ``drop`` overflow policy; a header without the two keys (an
    older server) is read as both ``None``.

    ``log_index`` (``seq - 1``) and ``audit_line`` (the line's exact text, without its
    newline) place the line in the transparency log's tree (``docs/spec/transparency.md
    §10.1``): both ``None`` when the daemon keeps no transparency log or the line was
    dropped; a header without the two keys is read as both ``None``."""

    KIND: ClassVar[str] = "decision"
    request_id: RequestId
    decision_id: Text
    session: Text
    result: JsonObject
    seq: AuditSeq = None
    line_digest: LineDigest = None
    log_index: LogIndex = None
    audit_line: AuditLine = None

    @classmethod
    def _expected_keys(cls, header: Mapping[str, Any], keys: frozenset[str]) -> frozenset[str]:
        """Each pair of chain keys is sent together or not at all (an older server)."""
        expected = _DECISION_KEYS
        if "seq" in header or "line_digest" in header:
            expected = expected | {"seq", "line_digest"}
        if "log_index" in header or "audit_line" in header:
            expected = expected | {"log_index", "audit_line"}
        return expected

    @classmethod
    def _check_header(cls, header: Mapping[str, Any]) -> None:
        seq, line_digest = header.get("seq"), header.get("line_digest")
        if (seq is None) != (line_digest is None) or (
            seq is not None
            and (
                type(seq) is not int
                or not 1 <= seq <= MAX_AUDIT_SEQ
                or type(line_digest) is not str
                or LINE_DIGEST_RE.match(line_digest) is None
            )
        ):
            raise ProtocolError(
                ErrorCode.HEADER_INVALID,
                "seq and line_digest must both be null, or a positive integer and sha256:<64 hex>",
            )
        log_index, audit_line = header.get("log_index"), header.get("audit_line")
        if (log_index is None) != (audit_line is None) or (
            log_index is not None
            and (
                type(log_index) is not int
                or type(audit_line) is not str
                or seq is None
                or log_index != seq - 1
            )
        ):
            raise ProtocolError(
                ErrorCode.HEADER_INVALID,
                "log_index and audit_line must both be null, or seq - 1 and the line's text",
            )


_DECISION_KEYS: Final = frozenset({"kind", "request_id", "decision_id", "session", "result"})


@attrs.frozen
class Decisions(_Header):
    """Server → client: the answer to a :class:`SubmitBatch`. ``decisions`` holds one header
    object per pair, in order: the ``decision`` or the ``error`` a single submit of that pair
    would have been answered with (module rule 8; read each with :meth:`Decision.from_header`
    or :meth:`ErrorResponse.from_header`)."""

    KIND: ClassVar[str] = "decisions"
    CHECK_ORDER: ClassVar[tuple[str, ...]] = ("decisions",)
    request_id: RequestId
    decisions: BatchAnswers


def _error_code(value: Any, _: Any = None) -> str:
    if type(value) is not str:
        raise FieldError("{key} must be a string")
    if value not in ERROR_CODES:
        raise FieldError(f"unknown error code {value!r}", keyed=False)
    return value


ErrorCodeName = Annotated[str, Rule(_error_code)]


@attrs.frozen
class ErrorResponse(_Header):
    """Server → client, always the last frame of the connection. ``request_id`` is ``None``
    when the failing frame had none (or could not be parsed); ``code`` is a member of
    :data:`ERROR_CODES`; ``decision_id`` names the refusal's audit line when one was written
    (else ``None``)."""

    KIND: ClassVar[str] = "error"
    CHECK_ORDER: ClassVar[tuple[str, ...]] = ("request_id", "code", "decision_id")
    request_id: OptionalRequestId
    code: ErrorCodeName
    message: Text
    decision_id: OptionalText = None

    @property
    def fault(self) -> Fault:
        return ErrorCode[self.code].fault


# Transparency-log requests (docs/spec/transparency.md §10). Proof hashes travel as standard
# base64 strings; the checkpoint as its exact note text.


@attrs.frozen
class CheckpointRequest(_Header):
    """Client → server: the latest signed checkpoint."""

    KIND: ClassVar[str] = "checkpoint"
    request_id: RequestId


@attrs.frozen
class CheckpointNote(_Header):
    """Server → client: ``note`` is the signed checkpoint's exact text."""

    KIND: ClassVar[str] = "checkpoint"
    request_id: RequestId
    note: Text


@attrs.frozen
class InclusionProofRequest(_Header):
    """Client → server: the inclusion proof of leaf ``index`` in the tree of ``tree_size``."""

    KIND: ClassVar[str] = "inclusion_proof"
    request_id: RequestId
    index: Size
    tree_size: Size


@attrs.frozen
class InclusionProof(_Header):
    """Server → client: RFC 9162 inclusion proof hashes (base64), leaf sibling first."""

    KIND: ClassVar[str] = "inclusion_proof"
    request_id: RequestId
    index: Size
    tree_size: Size
    proof: Proof


@attrs.frozen
class ConsistencyProofRequest(_Header):
    """Client → server: the consistency proof from ``old_size`` to ``new_size``."""

    KIND: ClassVar[str] = "consistency_proof"
    request_id: RequestId
    old_size: Size
    new_size: Size


@attrs.frozen
class ConsistencyProof(_Header):
    """Server → client: RFC 9162 consistency proof hashes (base64)."""

    KIND: ClassVar[str] = "consistency_proof"
    request_id: RequestId
    old_size: Size
    new_size: Size
    proof: Proof


ClientRequest = (
    Hello
    | ListSessions
    | HealthRequest
    | Submit
    | SubmitBatch
    | CheckpointRequest
    | InclusionProofRequest
    | ConsistencyProofRequest
)
ServerResponse = (
    HelloAccepted
    | SessionList
    | HealthReport
    | Decision
    | Decisions
    | ErrorResponse
    | CheckpointNote
    | InclusionProof
    | ConsistencyProof
)


class NeedData:
    def __repr__(self) -> str:
        return "NEED_DATA"


class Closed:
    def __repr__(self) -> str:
        return "CLOSED"


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
        self.max_frame_bytes = max_frame_bytes
        self.max_items = max_items
        self.state = State.PREFIX
        self._buffer = bytearray()
        self._eof = False
        self._header_size = 0
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
            return max(0, self._header_size - len(self._buffer))
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
            if size > self.max_header_bytes:
                raise self._fail(
                    ErrorCode.HEADER_TOO_LARGE,
                    f"declared header of {size} bytes exceeds {self.max_header_bytes}",
                )
            del self._buffer[:PREFIX_SIZE]
            self._header_size = size
            self.state = State.HEADER
        if self.state is State.HEADER:
            if len(self._buffer) < self._header_size:
                if self._eof:
                    raise self._fail(ErrorCode.TRUNCATED_FRAME)
                return NEED_DATA
            with memoryview(self._buffer) as view:
                raw = bytes(view[: self._header_size])
            del self._buffer[: self._header_size]
            try:
                header = decode_header(raw, max_bytes=self.max_header_bytes)
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
            self.handshake_done = True
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
