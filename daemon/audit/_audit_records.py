"""Typed audit lines: one frozen model per line kind, one converter (``docs/audit-log.md`` §1).

Rules (the contract):

1. Every line the daemon writes is exactly one of :data:`LINE_KINDS`, chosen by its ``event``:
   :class:`DecisionLine`, :class:`RefusalLine`, :class:`DaemonStartLine`,
   :class:`DaemonStopLine`, :class:`ConfigReloadLine`, :class:`NoiseLine`,
   :class:`AuditOverflowLine`, :class:`AuditRecoveredLine`, :class:`TornTailRemovedLine`,
   :class:`AuditRotatedLine`. Each has the chain fields
   (``timestamp``, ``seq``, ``prev``, ``line_digest``) and its own, documented in §1.
2. :func:`read_record` structures a parsed line with :data:`AUDIT_LINES`
   (``forbid_extra_keys``, exact types: booleans are not integers, digests are
   ``sha256:<64 hex>``, vocabularies are closed). Anything else raises
   :class:`AuditRecordError` whose message names the first failing key by its full path,
   e.g. ``metrics.total_ns must be an integer >= 0`` or ``evidence[1]: unexpected keys
   ['bytes'], missing keys ['size']``. It checks one line's shape, never the chain (that is
   ``audit verify``).
3. :func:`record_fields` is the inverse: for every line the daemon writes,
   ``render_line(fields without line_digest)`` of ``record_fields(read_record(fields))`` is
   the line's exact bytes (tested on a real daemon's log, every kind).
4. Optional members are written only when present: a refusal's ``session``,
   ``declared_items``, ``binding_digest`` and ``mechanism_id`` (a refused submit); a
   decision's ``binding``, ``result_digest``, ``retained`` and ``store`` (a session that
   retains evidence, ``docs/retention.md``); ``daemon_start``'s ``session_config`` (absent
   in lines written before replay support), ``security`` and ``insecure_listen`` (absent
   before TLS support), ``listen.http`` (the HTTP listener is on); a ``config_reload``'s
   ``sessions`` and ``session_config`` (``APPLIED``) or ``reason`` (``REFUSED``); a Unix
   requester's ``pid``, ``uid``, ``gid`` (peer credentials); a TCP requester's
   ``protocol``, ``token`` and ``tls_client``. A refusal's ``request_id`` is always written,
   ``null`` when the frame had none. A decision's ``binding`` is read as the
   :class:`session.BoundProposition` the daemon admitted
   (:func:`daemon.wire._binding.binding_from_wire`, its refusals' words).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Final, TypeVar

import attrs
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from daemon.audit._fields import RETAIN_MODES
from daemon.wire._binding import BindingWireError, binding_from_wire
from daemon.wire._errors import PeerError
from daemon.wire._exact import Check, FieldError, Rule, exact_converter, json_list
from daemon.wire._protocol import ERROR_CODES
from session import BoundProposition

__all__ = [
    "AUDIT_LINES",
    "LINE_KINDS",
    "AuditOverflowLine",
    "AuditRecord",
    "AuditRecordError",
    "AuditRecoveredLine",
    "AuditRotatedLine",
    "Bounds",
    "DaemonStartLine",
    "DaemonStopLine",
    "DecisionLine",
    "EvidenceItem",
    "Listen",
    "MechanismDescription",
    "Metrics",
    "Provider",
    "RefusalLine",
    "SessionConfig",
    "SessionDescription",
    "TcpRequester",
    "TornTailRemovedLine",
    "UnixRequester",
    "UnknownRequester",
    "read_record",
    "record_fields",
]

T = TypeVar("T")
_DIGEST_RE: Final = re.compile(r"sha256:[0-9a-f]{64}\Z")
_BARE_HEX_RE: Final = re.compile(r"[0-9a-f]{64}\Z")


class AuditRecordError(PeerError, ValueError):
    """A line is not one of the daemon's line kinds; the message names the failing key."""


# --------------------------------------------------------------------------- field rules


def _text(value: Any, _: Any = None) -> str:
    if type(value) is not str:
        raise FieldError("{key} must be a string")
    return value


def _optional_text(value: Any, _: Any = None) -> str | None:
    return None if value is None else _text(value)


def _count(value: Any, _: Any = None) -> int:
    if type(value) is not int or value < 0:
        raise FieldError("{key} must be an integer >= 0")
    return value


def _integer(value: Any, _: Any = None) -> int:
    if type(value) is not int:
        raise FieldError("{key} must be an integer")
    return value


def _seq(value: Any, _: Any = None) -> int:
    if type(value) is not int or value < 1:
        raise FieldError("{key} must be an integer >= 1")
    return value


def _optional_count(value: Any, _: Any = None) -> int | None:
    return None if value is None else _count(value)


def _digest(value: Any, _: Any = None) -> str:
    if type(value) is not str or _DIGEST_RE.match(value) is None:
        raise FieldError("{key} must be sha256:<64 hex>")
    return value


def _bare_hex(value: Any, _: Any = None) -> str:
    if type(value) is not str or _BARE_HEX_RE.match(value) is None:
        raise FieldError("{key} must be 64 lowercase hex digits")
    return value


def _one_of(vocabulary: frozenset[str]) -> Check:
    refusal = f"{{key}} must be one of {sorted(vocabulary)}"

    def check(value: Any, _: Any = None) -> str:
        if type(value) is not str or value not in vocabulary:
            raise FieldError(refusal)
        return value

    return check


def _texts(value: Any, _: Any = None) -> tuple[str, ...]:
    if type(value) is not list or any(type(item) is not str for item in value):
        raise FieldError("{key} must be an array of strings")
    return tuple(value)


def _counts(value: Any, _: Any = None) -> tuple[int, ...]:
    if type(value) is not list or any(type(item) is not int or item < 0 for item in value):
        raise FieldError("{key} must be an array of integers >= 0")
    return tuple(value)


def _optional_counts(value: Any, _: Any = None) -> tuple[int, ...] | None:
    return None if value is None else _counts(value)


def _counts_by_name(value: Any, _: Any = None) -> dict[str, int]:
    if type(value) is not dict or any(
        type(count) is not int or count < 0 for count in value.values()
    ):
        raise FieldError("{key} must be an object of integers >= 0")
    return value


def _flag(value: Any, _: Any = None) -> bool:
    if type(value) is not bool:
        raise FieldError("{key} must be true or false")
    return value


def _number(value: Any, _: Any = None) -> float | int:
    if type(value) not in (int, float) or not math.isfinite(value):
        raise FieldError("{key} must be a number")
    number: float | int = value
    return number


def _optional_flag(value: Any, _: Any = None) -> bool | None:
    return None if value is None else _flag(value)


def _optional_digest(value: Any, _: Any = None) -> str | None:
    return None if value is None else _digest(value)


def _binding(value: Any, _: Any = None) -> BoundProposition | None:
    if value is None:
        return None
    try:
        return binding_from_wire(value)
    except BindingWireError as error:
        raise FieldError(str(error), keyed=False) from None


def _binding_dump(binding: BoundProposition | None) -> Any:
    return None if binding is None else binding.to_dict()


def _texts_by_name(value: Any, _: Any = None) -> dict[str, str] | None:
    if value is None:
        return None
    if type(value) is not dict or any(type(item) is not str for item in value.values()):
        raise FieldError("{key} must be an object of strings")
    return value


def _objects_by_name(value: Any, _: Any = None) -> dict[str, dict[str, Any]]:
    if type(value) is not dict or any(type(item) is not dict for item in value.values()):
        raise FieldError("{key} must be an object of objects")
    return value


def _object_or_null(value: Any, _: Any = None) -> dict[str, Any] | None:
    if value is not None and type(value) is not dict:
        raise FieldError("{key} must be an object or null")
    return value


def _optional_dump(dump: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def optional(value: Any) -> Any:
        return None if value is None else dump(value)

    return optional


Text = Annotated[str, Rule(_text)]
OptionalText = Annotated[str | None, Rule(_optional_text)]
Count = Annotated[int, Rule(_count)]
Integer = Annotated[int, Rule(_integer)]
Seq = Annotated[int, Rule(_seq)]
Digest = Annotated[str, Rule(_digest)]
BareHex = Annotated[str, Rule(_bare_hex)]
OptionalBareHex = Annotated[str | None, Rule(lambda v, _=None: None if v is None else _bare_hex(v))]
OptionalCount = Annotated[int | None, Rule(_optional_count)]
Texts = Annotated[tuple[str, ...], Rule(_texts, json_list)]
OptionalCounts = Annotated[tuple[int, ...] | None, Rule(_optional_counts, _optional_dump(list))]
CountsByName = Annotated[dict[str, int], Rule(_counts_by_name)]
JsonObjectOrNull = Annotated[dict[str, Any] | None, Rule(_object_or_null)]
Outcome = Annotated[str, Rule(_one_of(frozenset({"PASS", "FAIL", "UNKNOWN"})))]
ErrorCodeName = Annotated[str, Rule(_one_of(ERROR_CODES))]
FaultName = Annotated[str, Rule(_one_of(frozenset({"peer", "service"})))]
DurabilityName = Annotated[str, Rule(_one_of(frozenset({"fsync", "write", "none"})))]
RetainMode = Annotated[str, Rule(_one_of(frozenset(RETAIN_MODES)))]
OptionalFlag = Annotated[bool | None, Rule(_optional_flag)]
Flag = Annotated[bool, Rule(_flag)]
Number = Annotated[float | int, Rule(_number)]
OptionalProtocol = Annotated[
    str | None, Rule(lambda v, _=None: None if v is None else _one_of(frozenset({"http"}))(v))
]
ReloadStatus = Annotated[str, Rule(_one_of(frozenset({"APPLIED", "REFUSED"})))]
OptionalDigest = Annotated[str | None, Rule(_optional_digest)]
Binding = Annotated[BoundProposition | None, Rule(_binding, _binding_dump)]
ObjectsByName = Annotated[dict[str, dict[str, Any]], Rule(_objects_by_name)]

#: The converter of the audit-line format (rule 2).
AUDIT_LINES: Final = exact_converter()


def _model(value: Any, kind: type[T]) -> T:
    """A nested model: an exact JSON object first, then its fields."""
    if type(value) is not dict:
        raise FieldError("{key} must be an object")
    structured: T = AUDIT_LINES.structure(value, kind)
    return structured


class _AtIndex(Exception):
    """The item at ``index`` of an array failed (``error`` says how)."""

    def __init__(self, index: int, error: BaseException) -> None:
        super().__init__(index, error)
        self.index = index
        self.error = error


class _AtKey(Exception):
    """The member ``key`` of an object of models failed (``error`` says how)."""

    def __init__(self, key: str, error: BaseException) -> None:
        super().__init__(key, error)
        self.key = key
        self.error = error


def _models(kind: type[Any]) -> Check:
    def check(value: Any, _: Any = None) -> tuple[Any, ...]:
        if type(value) is not list:
            raise FieldError("{key} must be an array")
        items = []
        for index, item in enumerate(value):
            try:
                items.append(_model(item, kind))
            except (FieldError, ClassValidationError) as error:
                raise _AtIndex(index, error) from None
        return tuple(items)

    return check


def _models_dump(items: tuple[Any, ...]) -> list[Any]:
    return [AUDIT_LINES.unstructure(item) for item in items]


def _nested(kind: type[Any]) -> Rule:
    return Rule(lambda value, _=None: _model(value, kind), AUDIT_LINES.unstructure)


def _nested_or_null(kind: type[Any]) -> Rule:
    return Rule(
        lambda value, _=None: None if value is None else _model(value, kind),
        _optional_dump(AUDIT_LINES.unstructure),
    )


# --------------------------------------------------------------------------- nested models


@attrs.frozen
class EvidenceItem:
    """One evidence item of a decision: its digest and size, never its bytes."""

    digest: Digest
    size: Count


@attrs.frozen
class Metrics:
    """A decision's timers: header to last evidence byte, evaluation, header to decision."""

    receive_ns: Count
    evaluate_ns: Count
    total_ns: Count


@attrs.frozen
class TlsClient:
    """A verified client certificate: its subject's common name and the SHA-256 (hex) of its
    DER bytes."""

    subject_cn: Text
    sha256: BareHex


@attrs.frozen
class TcpRequester:
    """A TCP peer: ``host:port`` as the daemon saw it; ``protocol`` ``"http"`` for the HTTP
    listener, the ``token``'s name on a listener with a ``tokens_file``, ``tls_client`` for a
    verified client certificate (each absent otherwise)."""

    TRANSPORT: ClassVar[str] = "tcp"
    peer: Text
    protocol: OptionalProtocol = None
    token: OptionalText = None
    tls_client: Annotated[TlsClient | None, _nested_or_null(TlsClient)] = None


@attrs.frozen
class UnixRequester:
    """A Unix-socket peer and its credentials (absent where the platform has none)."""

    TRANSPORT: ClassVar[str] = "unix"
    pid: OptionalCount = None
    uid: OptionalCount = None
    gid: OptionalCount = None


@attrs.frozen
class UnknownRequester:
    """A peer whose address could not be read."""

    TRANSPORT: ClassVar[str] = "unknown"
    protocol: OptionalProtocol = None


Requester = TcpRequester | UnixRequester | UnknownRequester
_REQUESTERS: Final[dict[str, type[Requester]]] = {
    kind.TRANSPORT: kind for kind in (TcpRequester, UnixRequester, UnknownRequester)
}


def _requester(value: Any, _: Any = None) -> Requester:
    if type(value) is not dict:
        raise FieldError("{key} must be an object")
    transport = value.get("transport")
    kind = _REQUESTERS.get(transport) if type(transport) is str else None
    if kind is None:
        raise FieldError(f"{{key}}.transport must be one of {sorted(_REQUESTERS)}")
    fields = dict(value)
    del fields["transport"]
    requester: Requester = AUDIT_LINES.structure(fields, kind)
    return requester


def _requester_dump(requester: Requester) -> dict[str, Any]:
    return {"transport": requester.TRANSPORT, **AUDIT_LINES.unstructure(requester)}


RequesterField = Annotated[Requester, Rule(_requester, _requester_dump)]


@attrs.frozen
class Bounds:
    """Evidence bounds: items and bytes."""

    max_evidence_items: Count
    max_evidence_bytes: Count


@attrs.frozen
class MechanismDescription:
    """A hosted mechanism as ``list`` answers and ``daemon_start`` records it."""

    mechanism_id: Text
    mechanism_digest: Text
    accepted_bounds: Annotated[Bounds | None, _nested_or_null(Bounds)]
    catalog_entry: JsonObjectOrNull
    #: What a client must pin (``MechanismProvider.announce``); absent before it was written.
    pinned: Annotated[dict[str, str] | None, Rule(_texts_by_name)] = None


@attrs.frozen
class SessionDescription:
    """A hosted session: effective and declared bounds, and its mechanisms."""

    name: Text
    bounds: Annotated[Bounds, _nested(Bounds)]
    declared_bounds: Annotated[Bounds, _nested(Bounds)]
    mechanisms: Annotated[
        tuple[MechanismDescription, ...], Rule(_models(MechanismDescription), _models_dump)
    ]


@attrs.frozen
class Provider:
    """The installed provider entry point that built a mechanism."""

    value: Text
    distribution: OptionalText
    version: OptionalText


def _providers(value: Any, _: Any = None) -> dict[str, Provider]:
    if type(value) is not dict:
        raise FieldError("{key} must be an object")
    providers = {}
    for name, item in value.items():
        try:
            providers[name] = _model(item, Provider)
        except (FieldError, ClassValidationError) as error:
            raise _AtKey(name, error) from None
    return providers


def _providers_dump(providers: dict[str, Provider]) -> dict[str, Any]:
    return {name: AUDIT_LINES.unstructure(item) for name, item in providers.items()}


@attrs.frozen
class SessionConfig:
    """How ``daemon_start`` says a session was built from the configuration (for replay)."""

    mechanisms: Texts
    options: ObjectsByName
    providers: Annotated[dict[str, Provider], Rule(_providers, _providers_dump)]
    retain: RetainMode
    store: OptionalText


def _session_configs(value: Any, _: Any = None) -> dict[str, SessionConfig] | None:
    if value is None:
        return None
    if type(value) is not dict:
        raise FieldError("{key} must be an object")
    configs = {}
    for name, item in value.items():
        try:
            configs[name] = _model(item, SessionConfig)
        except (FieldError, ClassValidationError) as error:
            raise _AtKey(name, error) from None
    return configs


def _session_configs_dump(configs: dict[str, SessionConfig] | None) -> Any:
    if configs is None:
        return None
    return {name: AUDIT_LINES.unstructure(item) for name, item in configs.items()}


@attrs.frozen
class Listen:
    """Where the daemon listened: ``host:port`` and the socket path (``null`` when off), and
    the HTTP listener's ``host:port`` (absent when off)."""

    tcp: OptionalText
    unix: OptionalText
    http: OptionalText = None


@attrs.frozen
class ListenerSecurity:
    """One TCP listener's security as ``daemon_start`` records it."""

    tls: Flag
    client_certificates: Flag
    tokens: Flag


def _securities(value: Any, _: Any = None) -> dict[str, ListenerSecurity]:
    if type(value) is not dict:
        raise FieldError("{key} must be an object")
    described: dict[str, ListenerSecurity] = {}
    for name, item in value.items():
        if name not in ("tcp", "http"):
            raise FieldError(f"{{key}} names listener {name!r}, not tcp or http")
        try:
            described[name] = _model(item, ListenerSecurity)
        except (FieldError, ClassValidationError) as error:
            raise _AtKey(name, error) from None
    return described


def _securities_dump(value: dict[str, ListenerSecurity] | None) -> Any:
    if value is None:
        return None
    return {name: AUDIT_LINES.unstructure(item) for name, item in value.items()}


# --------------------------------------------------------------------------- line kinds


@attrs.frozen
class _Line:
    """The chain fields every line has (``docs/audit-log.md`` §1–2)."""

    EVENT: ClassVar[str]
    timestamp: Text
    seq: Seq
    prev: Digest
    line_digest: Digest


@attrs.frozen
class DecisionLine(_Line):
    """One answered submit, whatever the outcome."""

    EVENT: ClassVar[str] = "decision"
    decision_id: Text
    request_id: Count
    session: Text
    mechanism_id: Text
    mechanism_digest: Digest
    binding_digest: BareHex
    evidence: Annotated[tuple[EvidenceItem, ...], Rule(_models(EvidenceItem), _models_dump)]
    outcome: Outcome
    details: Text
    reason_codes: Texts
    observed_evidence_bytes: Count
    metrics: Annotated[Metrics, _nested(Metrics)]
    requester: RequesterField
    binding: Binding = None
    result_digest: OptionalDigest = None
    retained: OptionalFlag = None
    store: OptionalText = None


@attrs.frozen
class RefusalLine(_Line):
    """One ``error`` answer (rule 4: the submit context only for a refused submit)."""

    EVENT: ClassVar[str] = "refusal"
    decision_id: Text
    code: ErrorCodeName
    fault: FaultName
    message: Text
    request_id: OptionalCount
    requester: RequesterField
    session: OptionalText = None
    declared_items: OptionalCounts = None
    binding_digest: OptionalBareHex = None
    mechanism_id: OptionalText = None


@attrs.frozen
class DaemonStartLine(_Line):
    """The daemon started serving: who, where, and exactly what it hosts."""

    EVENT: ClassVar[str] = "daemon_start"
    server: Text
    pid: Count
    listen: Annotated[Listen, _nested(Listen)]
    sessions: Annotated[
        tuple[SessionDescription, ...], Rule(_models(SessionDescription), _models_dump)
    ]
    durability: DurabilityName
    session_config: Annotated[
        dict[str, SessionConfig] | None, Rule(_session_configs, _session_configs_dump)
    ] = None
    security: Annotated[dict[str, ListenerSecurity] | None, Rule(_securities, _securities_dump)] = (
        None
    )
    insecure_listen: OptionalFlag = None


def _optional_session_descriptions(
    value: Any, _: Any = None
) -> tuple[SessionDescription, ...] | None:
    return None if value is None else _models(SessionDescription)(value)


OptionalSessionDescriptions = Annotated[
    tuple[SessionDescription, ...] | None,
    Rule(_optional_session_descriptions, _optional_dump(_models_dump)),
]


@attrs.frozen
class ConfigReloadLine(_Line):
    """A SIGHUP reload (``docs/operations.md`` §4): ``APPLIED`` with the new sessions (as
    ``daemon_start`` has them) and their ``session_config``, or ``REFUSED`` with ``reason``."""

    EVENT: ClassVar[str] = "config_reload"
    source: Text
    status: ReloadStatus
    sessions: OptionalSessionDescriptions = None
    session_config: Annotated[
        dict[str, SessionConfig] | None, Rule(_session_configs, _session_configs_dump)
    ] = None
    reason: OptionalText = None


@attrs.frozen
class NoiseLine(_Line):
    """Connections that never spoke the protocol, summarised (``docs/audit-log.md``, Noise)."""

    EVENT: ClassVar[str] = "noise"
    count: Count
    peers: CountsByName
    other_peers: Count
    interval_s: Number


@attrs.frozen
class DaemonStopLine(_Line):
    """The daemon stopped: what it answered in that run."""

    EVENT: ClassVar[str] = "daemon_stop"
    decisions: Count
    refusals: Count


@attrs.frozen
class AuditOverflowLine(_Line):
    """The ``drop`` policy dropped lines: how many since the last such line, and in all."""

    EVENT: ClassVar[str] = "audit_overflow"
    dropped: Count
    dropped_total: Count


@attrs.frozen
class AuditRecoveredLine(_Line):
    """The first line after an outage (``docs/audit-log.md`` §5)."""

    EVENT: ClassVar[str] = "audit_recovered"
    error: Text
    failed_at: Text
    refused: Count
    lost: Count
    unrecorded: CountsByName
    attempts: Count
    truncated_bytes: Count


@attrs.frozen
class TornTailRemovedLine(_Line):
    """Start-up moved a torn final line aside (``docs/audit-log.md`` §7)."""

    EVENT: ClassVar[str] = "torn_tail_removed"
    evidence_file: Text
    offset: Count
    length: Count
    digest: Digest


@attrs.frozen
class AuditRotatedLine(_Line):
    """The first line of a file that continues a rotated one (``docs/audit-log.md`` §8)."""

    EVENT: ClassVar[str] = "audit_rotated"
    previous_file: Text
    previous_seq: Count
    previous_head: Digest


AuditRecord = (
    DecisionLine
    | RefusalLine
    | DaemonStartLine
    | DaemonStopLine
    | ConfigReloadLine
    | NoiseLine
    | AuditOverflowLine
    | AuditRecoveredLine
    | TornTailRemovedLine
    | AuditRotatedLine
)
LINE_KINDS: Final[dict[str, type[AuditRecord]]] = {
    kind.EVENT: kind
    for kind in (
        DecisionLine,
        RefusalLine,
        DaemonStartLine,
        DaemonStopLine,
        ConfigReloadLine,
        NoiseLine,
        AuditOverflowLine,
        AuditRecoveredLine,
        TornTailRemovedLine,
        AuditRotatedLine,
    )
}


def _register() -> None:
    """Every model: forbid extra keys, detailed validation; optional members are left out
    when absent (rule 4)."""
    omitted = {
        RefusalLine: ("session", "declared_items", "binding_digest", "mechanism_id"),
        DecisionLine: ("binding", "result_digest", "retained", "store"),
        DaemonStartLine: ("session_config", "security", "insecure_listen"),
        ConfigReloadLine: ("sessions", "session_config", "reason"),
        UnixRequester: ("pid", "uid", "gid"),
        TcpRequester: ("protocol", "token", "tls_client"),
        UnknownRequester: ("protocol",),
        Listen: ("http",),
        MechanismDescription: ("pinned",),
    }
    models = (
        *LINE_KINDS.values(),
        EvidenceItem,
        Metrics,
        TcpRequester,
        UnixRequester,
        UnknownRequester,
        Bounds,
        MechanismDescription,
        SessionDescription,
        Provider,
        SessionConfig,
        Listen,
        ListenerSecurity,
        TlsClient,
    )
    for model in models:
        AUDIT_LINES.register_structure_hook(
            model,
            make_dict_structure_fn(
                model,
                AUDIT_LINES,
                _cattrs_forbid_extra_keys=True,
                _cattrs_detailed_validation=True,
            ),
        )
        skips: dict[str, Any] = {
            name: override(omit_if_default=True) for name in omitted.get(model, ())
        }
        AUDIT_LINES.register_unstructure_hook(
            model, make_dict_unstructure_fn(model, AUDIT_LINES, **skips)
        )


_register()


# --------------------------------------------------------------------------- reading


def read_record(fields: Mapping[str, Any]) -> AuditRecord:
    """The typed line for a parsed audit line (rules 1–2), or :class:`AuditRecordError`."""
    if type(fields) is not dict:
        raise AuditRecordError("a line must be a JSON object")
    event = fields.get("event")
    kind = LINE_KINDS.get(event) if type(event) is str else None
    if kind is None:
        raise AuditRecordError(
            f"event must be one of {sorted(LINE_KINDS)}, not {fields.get('event')!r}"
        )
    body = dict(fields)
    del body["event"]
    try:
        record: AuditRecord = AUDIT_LINES.structure(body, kind)
    except (ClassValidationError, FieldError, _AtIndex, _AtKey) as error:
        raise AuditRecordError(_explain(error, "")) from None
    return record


def record_fields(record: AuditRecord) -> dict[str, Any]:
    """The line's fields (``line_digest`` included) for ``record`` (rule 3)."""
    fields: dict[str, Any] = AUDIT_LINES.unstructure(record)
    fields["event"] = record.EVENT
    return fields


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _explain(error: BaseException, path: str) -> str:
    """The first failure inside ``error``, named by its full key path (rule 2)."""
    if isinstance(error, FieldError):
        return error.words(path or "line")
    if isinstance(error, _AtIndex):
        return _explain(error.error, f"{path}[{error.index}]")
    if isinstance(error, _AtKey):
        return _explain(error.error, f"{path}[{error.key!r}]")
    if isinstance(error, ClassValidationError):
        failures, others = error.group_exceptions()
        extra = sorted(
            key
            for other in others
            if isinstance(other, ForbiddenExtraKeysError)
            for key in other.extra_fields
        )
        missing = sorted(note.name for failure, note in failures if isinstance(failure, KeyError))
        if extra or missing:
            return f"{path or 'line'}: unexpected keys {extra}, missing keys {missing}"
        if failures:
            failure, note = failures[0]
            return _explain(failure, _join(path, note.name))
        return f"{path or 'line'}: {others[0]}"
    return f"{path or 'line'}: {error}"
