"""The ``evidenced`` wire protocol's frames and header records (``docs/protocol.md``).

What travels: the frame layout, the canonical header encoding, the closed vocabulary of error
codes, and one typed record per header kind (each checks its own fields, exactly). The
sans-IO connections that read and write these frames in order are
:mod:`daemon.wire._protocol`.

Rules (the contract):

1. A frame is ``MAGIC`` (4 bytes, ``b"EVD1"``), the header length as an unsigned 32-bit
   big-endian integer, the header (canonical JSON, :func:`encode_header`), then the raw
   evidence bytes whose lengths the header declares in ``items`` (only ``submit`` and
   ``submit_batch`` frames carry evidence; the payload is the concatenation of the items, in
   order, no base64; a ``submit_batch`` declares them per pair, in ``pairs``, pair after pair).
2. Canonical headers. A header is a JSON object encoded by :func:`encode_header`; the decoder
   refuses invalid UTF-8, a BOM, ``NaN``/``Infinity``, then requires the canonical re-encoding
   to equal the received bytes exactly (so duplicate keys, whitespace, unsorted keys and
   escape variants are refused too). Nesting is at most :data:`MAX_HEADER_DEPTH` (254, the
   root object counting as one): the deepest value the canonical encoder (orjson) encodes, so
   a deeper header has no canonical form; it is refused as ``HEADER_INVALID`` with the message
   "header nesting deeper than 254", and :func:`encode_header` refuses such a value too.
3. Every refusal is a :class:`ProtocolError` carrying an :class:`ErrorCode` from the closed
   vocabulary in :data:`ERROR_CODES`; the codec never raises anything else for peer bytes.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Final, Self

import attrs
import orjson
from cattrs.errors import ClassValidationError
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from daemon.wire._errors import RemoteProtocolError
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
)
from daemon.wire._header_fields import MAX_BATCH_PAIRS as MAX_BATCH_PAIRS
from daemon.wire._header_fields import MAX_REQUEST_ID as MAX_REQUEST_ID
from daemon.wire._header_fields import BatchPair as BatchPair
from session.canon import network_json

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
    # The canonical scanner loads with the first refused header, not with every client.
    from mechanism.canonical import CanonicalError, CanonicalLimitError, scan_structure

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
