"""Value types of the evidence-bound session protocol (``docs/spec/formation.md`` §1.1).

Rules:

* ``BoundProposition`` normalises at construction, in this order: non-empty ``subject_id``,
  ``predicate`` and ``mechanism_id``; ``mechanism_digest`` must match
  ``(sha256:)?<64 lowercase hex>`` and is stored *as given*; ``evidence_refs`` non-empty, each
  normalised to ``sha256:<hex>``, duplicates after normalisation refused, order kept;
  ``trust_roots`` non-empty with no empty item, then sorted and de-duplicated; ``parameters``
  copied into a plain dict sorted by key.
* ``BoundProposition.digest()`` and ``EvaluatedProposition.binding_digest`` are **bare hex**
  SHA-256 over the ASCII-escaped *core* codec (``json.dumps(..., sort_keys=True,
  separators=(",", ":"), ensure_ascii=True, allow_nan=False)``), not the network codec.
* ``EvidenceBounds`` refuses only negative values; it does not type-check (mechanisms that need
  exact integers refuse other types themselves).
* A decision is data: mechanisms return ``MechanismDecision``; they do not raise for bad input.
* The four value classes are frozen attrs classes that also answer the standard-library
  dataclass API the reference's frozen dataclasses offer: ``dataclasses.replace`` (which
  re-runs construction, so normalisation and validation apply), ``dataclasses.fields``,
  ``dataclasses.asdict`` and ``dataclasses.is_dataclass``; assigning or deleting a field
  raises :class:`FrozenInstanceError`, which is both ``dataclasses.FrozenInstanceError`` and
  ``attrs.exceptions.FrozenInstanceError``. ``attrs.evolve`` works as well.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol, runtime_checkable

import attrs
import orjson

from session.canon import CallerError, core_digest

__all__ = [
    "BoundProposition",
    "EvaluatedProposition",
    "EvidenceBindingError",
    "EvidenceBounds",
    "FrozenInstanceError",
    "MechanismDecision",
    "MechanismOutcome",
    "VerificationMechanism",
    "core_digest",
    "normalise_digest",
]

_DIGEST_RE: Final = re.compile(r"(?:sha256:)?([0-9a-f]{64})")


class EvidenceBindingError(CallerError, ValueError):
    """A binding, reference or evidence item cannot be bound as declared."""


class FrozenInstanceError(
    dataclasses.FrozenInstanceError, attrs.exceptions.FrozenInstanceError, CallerError
):
    """Assigning to or deleting a field of a frozen session value."""

    def __init__(self, name: str) -> None:
        AttributeError.__init__(self, f"cannot assign to field {name!r}")


def _refuse_assignment(self: object, name: str, value: object = None) -> None:
    raise FrozenInstanceError(name)


def _refuse_deletion(self: object, name: str) -> None:
    raise FrozenInstanceError(name)


_DATACLASS_METADATA: Final = ("__dataclass_fields__", "__dataclass_params__")


class _DataclassMetadata:
    """``__dataclass_fields__`` or ``__dataclass_params__`` of ``cls``: those of an equivalent
    frozen dataclass, made the first time either is read (making one compiles its methods,
    which an importer that never asks should not pay), then stored on ``cls`` in its place.
    Read through a subclass, it is still ``cls``'s, as an inherited attribute is."""

    def __init__(self, cls: type[Any], name: str) -> None:
        self._cls = cls
        self._name = name

    def __get__(self, instance: object, owner: type[Any] | None = None) -> Any:
        cls = self._cls
        shadow = dataclasses.make_dataclass(
            cls.__name__,
            [(field.name, field.type or Any) for field in attrs.fields(cls)],
            frozen=True,
        )
        for name in _DATACLASS_METADATA:
            setattr(cls, name, getattr(shadow, name))
        return getattr(shadow, self._name)


def _dataclass_compatible(cls: type[Any]) -> type[Any]:
    """Give a frozen attrs class the dataclass metadata of an equivalent frozen dataclass
    (made on first use: :class:`_DataclassMetadata`)."""
    for name in _DATACLASS_METADATA:
        setattr(cls, name, _DataclassMetadata(cls, name))
    setattr(cls, "__setattr__", _refuse_assignment)  # noqa: B010 - mypy refuses a method assignment
    setattr(cls, "__delattr__", _refuse_deletion)  # noqa: B010
    return cls


def _copy_field(value: Any, memo: dict[int, Any]) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is tuple and all(type(item) is str for item in value):
        return value
    if kind is dict and all(type(k) is str and type(v) is str for k, v in value.items()):
        return dict(value)
    if (
        kind is EvidenceBounds
        and type(value.max_evidence_items) is int
        and type(value.max_evidence_bytes) is int
    ):
        return value
    return copy.deepcopy(value, memo)


class MechanismOutcome(enum.StrEnum):
    """The three outcomes of a bound proposition; UNKNOWN is never a refutation."""

    PASS = "PASS"
    FAIL = "FAIL"
    UNKNOWN = "UNKNOWN"


_JSON_SCALARS: Final = frozenset({str, bool, type(None)})
_ORJSON_INTS: Final = range(-(2**63), 2**64)


def _orjson_scalar(expected: object) -> bool:
    """An ``expected`` value both encoders write alike: a JSON scalar, an ``int`` orjson holds."""
    if type(expected) is int:
        return expected in _ORJSON_INTS
    return type(expected) in _JSON_SCALARS


def _plain_core_json(wire: dict[str, Any]) -> bytes | None:
    """:func:`canon.core_json` of a binding's wire form, by orjson, when that is provably the
    same bytes (every session digests every binding twice; ``json.dumps`` is most of a small
    decision's cost); else ``None`` and the caller runs ``core_json``.

    The same bytes when every value is of an exact type both encode alike (``str``, ``bool``,
    ``None``, an ``int`` orjson holds, lists of exact ``str``, ``str -> str`` parameters, integer
    bounds; ``expected`` a scalar) and the output is ASCII without DEL: orjson then sorts the
    ASCII keys, escapes control characters, quotes and backslashes exactly as ``json.dumps(...,
    ensure_ascii=True, sort_keys=True, separators=(",", ":"))`` does (which also escapes DEL
    and every non-ASCII character; property-tested in ``tests/session/test_digest_fast.py``).
    """
    if not _orjson_scalar(wire["expected"]):
        return None
    for key in ("subject_id", "predicate", "mechanism_id", "mechanism_digest"):
        if type(wire[key]) is not str:
            return None
    for key in ("evidence_refs", "trust_roots"):
        if any(type(item) is not str for item in wire[key]):
            return None
    bounds = wire["bounds"]
    for value in bounds.values():
        if type(value) is not int or value not in _ORJSON_INTS:
            return None
    for name, value in wire["parameters"].items():
        if type(name) is not str or type(value) is not str:
            return None
    data: bytes = orjson.dumps(wire, option=orjson.OPT_SORT_KEYS)
    if not data.isascii() or b"\x7f" in data:
        return None
    return data


def normalise_digest(reference: object) -> str:
    """``sha256:<hex>`` for a ``sha256:``-prefixed or bare 64-hex reference.

    Raises ``EvidenceBindingError("not a SHA-256 evidence reference: <repr>")`` otherwise.
    """
    match = _DIGEST_RE.fullmatch(reference) if isinstance(reference, str) else None
    if match is None:
        raise EvidenceBindingError(f"not a SHA-256 evidence reference: {reference!r}")
    return "sha256:" + match.group(1)


@_dataclass_compatible
@attrs.frozen
class EvidenceBounds:
    """Declared item and byte bounds for one proposition's evidence."""

    max_evidence_items: int
    max_evidence_bytes: int

    def __attrs_post_init__(self) -> None:
        if self.max_evidence_items < 0 or self.max_evidence_bytes < 0:
            raise EvidenceBindingError("evidence bounds cannot be negative")

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_evidence_items": self.max_evidence_items,
            "max_evidence_bytes": self.max_evidence_bytes,
        }


@_dataclass_compatible
@attrs.frozen
class BoundProposition:
    """What a caller pins: mechanism, exact evidence references, trust roots, bounds, parameters."""

    subject_id: str
    predicate: str
    expected: Any
    mechanism_id: str
    mechanism_digest: str
    evidence_refs: tuple[str, ...]
    trust_roots: tuple[str, ...]
    bounds: EvidenceBounds
    parameters: Mapping[str, str] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        if not self.subject_id or not self.predicate or not self.mechanism_id:
            raise EvidenceBindingError("subject_id, predicate, and mechanism_id must not be empty")
        if not isinstance(self.mechanism_digest, str) or not _DIGEST_RE.fullmatch(
            self.mechanism_digest
        ):
            raise EvidenceBindingError("mechanism_digest must be a SHA-256 digest")
        refs = tuple(self.evidence_refs)
        if not refs:
            raise EvidenceBindingError("a bound proposition needs evidence")
        normalised = tuple(normalise_digest(ref) for ref in refs)
        if len(set(normalised)) != len(normalised):
            raise EvidenceBindingError(
                "duplicate evidence references do not create additional support"
            )
        roots = tuple(self.trust_roots)
        if not roots or any(not root for root in roots):
            raise EvidenceBindingError("at least one explicit trust root is required")
        object.__setattr__(self, "evidence_refs", normalised)
        object.__setattr__(self, "trust_roots", tuple(sorted(set(roots))))
        object.__setattr__(self, "parameters", dict(sorted(dict(self.parameters).items())))

    def __deepcopy__(self, memo: dict[int, Any]) -> BoundProposition:
        """An independent copy, as ``copy.deepcopy`` would make, without walking immutables.

        Sessions snapshot every binding twice; exact strings, tuples of strings, integer
        bounds and a ``str -> str`` parameter dict are copied directly (a plain dict copy),
        anything else (``expected``, or values a caller swapped in) is deep-copied.
        """
        clone = object.__new__(type(self))
        memo[id(self)] = clone
        for name in _BINDING_FIELDS:
            object.__setattr__(clone, name, _copy_field(getattr(self, name), memo))
        return clone

    def to_dict(self) -> dict[str, Any]:
        return {
            "subject_id": self.subject_id,
            "predicate": self.predicate,
            "expected": self.expected,
            "mechanism_id": self.mechanism_id,
            "mechanism_digest": normalise_digest(self.mechanism_digest),
            "evidence_refs": list(self.evidence_refs),
            "trust_roots": list(self.trust_roots),
            "bounds": self.bounds.to_dict(),
            "parameters": dict(self.parameters),
        }

    def digest(self) -> str:
        """Bare hex SHA-256 of the core (ASCII-escaped) encoding of :meth:`to_dict`."""
        wire = self.to_dict()
        data = _plain_core_json(wire)
        if data is None:
            return core_digest(wire)
        return hashlib.sha256(data).hexdigest()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BoundProposition:
        """Rebuild a binding from :meth:`to_dict` output (fields coerced as the reference does)."""
        bounds = data["bounds"]
        return cls(
            subject_id=str(data["subject_id"]),
            predicate=str(data["predicate"]),
            expected=data["expected"],
            mechanism_id=str(data["mechanism_id"]),
            mechanism_digest=str(data["mechanism_digest"]),
            evidence_refs=tuple(str(ref) for ref in data["evidence_refs"]),
            trust_roots=tuple(str(root) for root in data["trust_roots"]),
            bounds=EvidenceBounds(
                int(bounds["max_evidence_items"]), int(bounds["max_evidence_bytes"])
            ),
            parameters={str(k): str(v) for k, v in dict(data.get("parameters", {})).items()},
        )


_BINDING_FIELDS: Final = tuple(field.name for field in attrs.fields(BoundProposition))


@_dataclass_compatible
@attrs.frozen
class MechanismDecision:
    """A mechanism's answer: outcome, details, and its separate observations."""

    outcome: MechanismOutcome
    details: str
    observations: Mapping[str, Any] = attrs.field(factory=dict)


@_dataclass_compatible
@attrs.frozen
class EvaluatedProposition:
    """A session's result: the decision bound to the snapshot digest of the binding."""

    binding_digest: str
    outcome: MechanismOutcome
    mechanism_id: str
    mechanism_digest: str
    evidence_refs: tuple[str, ...]
    trust_roots: tuple[str, ...]
    observed_evidence_bytes: int
    details: str
    observations: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def passed(self) -> bool:
        return bool(self.outcome == MechanismOutcome.PASS)

    def to_dict(self) -> dict[str, Any]:
        return {
            "binding_digest": self.binding_digest,
            "outcome": MechanismOutcome(self.outcome).value,
            "mechanism_id": self.mechanism_id,
            "mechanism_digest": normalise_digest(self.mechanism_digest),
            "evidence_refs": list(self.evidence_refs),
            "trust_roots": list(self.trust_roots),
            "observed_evidence_bytes": self.observed_evidence_bytes,
            "details": self.details,
            "observations": dict(self.observations),
        }


def _result_setters() -> tuple[Any, ...]:
    return tuple(
        EvaluatedProposition.__dict__[field.name].__set__
        for field in attrs.fields(EvaluatedProposition)
    )


(
    _SET_BINDING_DIGEST,
    _SET_OUTCOME,
    _SET_MECHANISM_ID,
    _SET_MECHANISM_DIGEST,
    _SET_EVIDENCE_REFS,
    _SET_TRUST_ROOTS,
    _SET_OBSERVED,
    _SET_DETAILS,
    _SET_OBSERVATIONS,
) = _result_setters()


def evaluated(
    binding_digest: str,
    outcome: MechanismOutcome,
    mechanism_id: str,
    mechanism_digest: str,
    evidence_refs: tuple[str, ...],
    trust_roots: tuple[str, ...],
    observed_evidence_bytes: int,
    details: str,
    observations: Mapping[str, Any],
) -> EvaluatedProposition:
    """``EvaluatedProposition(...)`` of these values (every field given), made as its
    generated ``__init__`` makes it — each field set as the object it is, nothing validated or
    converted — through the slots' own setters (the session makes one per decision)."""
    result: EvaluatedProposition = object.__new__(EvaluatedProposition)
    _SET_BINDING_DIGEST(result, binding_digest)
    _SET_OUTCOME(result, outcome)
    _SET_MECHANISM_ID(result, mechanism_id)
    _SET_MECHANISM_DIGEST(result, mechanism_digest)
    _SET_EVIDENCE_REFS(result, evidence_refs)
    _SET_TRUST_ROOTS(result, trust_roots)
    _SET_OBSERVED(result, observed_evidence_bytes)
    _SET_DETAILS(result, details)
    _SET_OBSERVATIONS(result, observations)
    return result


@runtime_checkable
class VerificationMechanism(Protocol):
    """What a session hosts: an identified, digest-pinned evaluator of bound propositions."""

    mechanism_id: str
    mechanism_digest: str

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        """Decide ``binding`` over the resolved evidence bytes, in reference order."""
        ...
