"""The session's binding snapshot (step 1 of ``VerificationSession.evaluate``), taken in one pass.

Rules (:func:`take`):

* The snapshot is an independent copy of the binding (``copy.deepcopy`` semantics) and its
  digest is ``snapshot.digest()``; when neither can be obtained, :func:`take` raises
  ``EvidenceBindingError("cannot obtain a digestible binding snapshot")``.
* A **plain** binding — exactly a ``BoundProposition`` whose fields are of exact plain types
  (``str``; ``tuple`` of ``str``; ``EvidenceBounds`` of ``int``; a ``dict`` of ``str`` to
  ``str``; ``expected`` a ``str``, ``int``, ``bool`` or ``None``) — is read once: every field
  is read and type-checked in one pass, the copy shares the immutable field objects and holds
  its own copy of the parameter dict (what ``BoundProposition.__deepcopy__`` makes), and the
  digest is the orjson encoding of those same values when that is provably the core encoding
  (the rules of ``session._types._plain_core_json``), else ``snapshot.digest()`` itself. The
  mechanism digest is normalised once, for the digest and for the session's step 3 alike.
* A plain snapshot records its field objects (:attr:`Snapshot.recorded`: the nine fields, the
  bounds' two ints, the parameter dict, its keys and its values, in order): the session hands the
  snapshot itself to the mechanism and, afterwards, recomputes the digest only when one of those
  objects was replaced (:func:`unchanged`). Nothing but the session holds the snapshot before
  the call, so what the session reports (id, digest, references, roots) is read here, before
  the mechanism can touch it.
* Any other binding takes the general path: ``copy.deepcopy`` (``__deepcopy__`` for the exact
  type), then ``digest()`` of the copy, then the reported fields read from the copy.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import operator
from typing import Any, Final

import orjson

from ._types import (
    _BINDING_FIELDS,
    BoundProposition,
    EvidenceBindingError,
    EvidenceBounds,
    normalise_digest,
)

__all__ = ["Snapshot", "normalised_digest", "take", "unchanged"]

_EXPECTED_SCALARS: Final = frozenset({str, bool, type(None)})
_ORJSON_INTS: Final = range(-(2**63), 2**64)

# The copy is made as ``__deepcopy__`` makes it (a new instance, each field set as the object
# it is), through the slots' own setters: a frozen class refuses ``setattr``.
_new_binding: Final = functools.partial(object.__new__, BoundProposition)
_slots: Final = {name: BoundProposition.__dict__[name].__set__ for name in _BINDING_FIELDS}
_set_subject_id: Final = _slots["subject_id"]
_set_predicate: Final = _slots["predicate"]
_set_expected: Final = _slots["expected"]
_set_mechanism_id: Final = _slots["mechanism_id"]
_set_mechanism_digest: Final = _slots["mechanism_digest"]
_set_evidence_refs: Final = _slots["evidence_refs"]
_set_trust_roots: Final = _slots["trust_roots"]
_set_bounds: Final = _slots["bounds"]
_set_parameters: Final = _slots["parameters"]

# normalise_digest of exact strings it accepted (a mechanism's digest recurs in every binding).
_NORMALISED: Final[dict[str, str]] = {}
_NORMALISED_MAX: Final = 1024


def normalised_digest(reference: object) -> str:
    """:func:`~session._types.normalise_digest`, remembered for the exact ``str`` references
    it accepted (at most 1,024 of them; the memory is emptied when full). Raises as it does."""
    if type(reference) is str:
        known = _NORMALISED.get(reference)
        if known is not None:
            return known
        normal = normalise_digest(reference)
        if len(_NORMALISED) >= _NORMALISED_MAX:
            _NORMALISED.clear()
        _NORMALISED[reference] = normal
        return normal
    return normalise_digest(reference)


class Snapshot:
    """A binding snapshot and what the session reports about it.

    ``binding`` is the copy, ``digest`` its binding digest; ``mechanism_id``,
    ``mechanism_digest`` (as given), ``evidence_refs`` and ``trust_roots`` were read from it
    before any mechanism held it. For a plain snapshot, ``bound_digest`` is the normalised
    mechanism digest and ``recorded`` the objects its digest is computed from (``None`` for
    both otherwise).
    """

    __slots__ = (
        "binding",
        "bound_digest",
        "digest",
        "evidence_refs",
        "mechanism_digest",
        "mechanism_id",
        "recorded",
        "trust_roots",
    )

    def __init__(
        self,
        binding: BoundProposition,
        digest: str,
        reported: tuple[Any, Any, Any, Any],
        bound_digest: str | None = None,
        recorded: tuple[Any, ...] | None = None,
    ) -> None:
        self.binding = binding
        self.digest = digest
        self.mechanism_id, self.mechanism_digest, self.evidence_refs, self.trust_roots = reported
        self.bound_digest = bound_digest
        self.recorded = recorded


def take(binding: BoundProposition) -> Snapshot:
    """The snapshot of ``binding`` (module rules); raises ``EvidenceBindingError``."""
    if type(binding) is BoundProposition:
        plain = _plain(binding)
        if plain is not None:
            return plain
    try:
        if type(binding) is BoundProposition:
            # What copy.deepcopy does for the exact type, without its memo bookkeeping.
            snapshot = binding.__deepcopy__({})
        else:
            snapshot = copy.deepcopy(binding)
        digest = snapshot.digest()
    except Exception:
        raise EvidenceBindingError("cannot obtain a digestible binding snapshot") from None
    reported = (
        snapshot.mechanism_id,
        snapshot.mechanism_digest,
        snapshot.evidence_refs,
        snapshot.trust_roots,
    )
    return Snapshot(snapshot, digest, reported)


def _plain(binding: BoundProposition) -> Snapshot | None:
    """The one-pass snapshot of a plain binding, or ``None`` (not plain, or anything raised:
    the general path then decides, with its own errors)."""
    try:
        fields = _plain_fields(binding)
        if fields is None:
            return None
        (
            subject_id,
            predicate,
            expected,
            mechanism_id,
            mechanism_digest,
            refs,
            roots,
            bounds,
            _,
            _,
            copied,
        ) = fields
        bound_digest = normalised_digest(mechanism_digest)
        snapshot = _new_binding()
        _set_subject_id(snapshot, subject_id)
        _set_predicate(snapshot, predicate)
        _set_expected(snapshot, expected)
        _set_mechanism_id(snapshot, mechanism_id)
        _set_mechanism_digest(snapshot, mechanism_digest)
        _set_evidence_refs(snapshot, refs)
        _set_trust_roots(snapshot, roots)
        _set_bounds(snapshot, bounds)
        _set_parameters(snapshot, copied)
        data = _plain_json(fields, bound_digest)
        digest = snapshot.digest() if data is None else hashlib.sha256(data).hexdigest()
    except Exception:
        return None
    recorded = (*fields, tuple(copied), tuple(copied.values()))
    return Snapshot(
        snapshot, digest, (mechanism_id, mechanism_digest, refs, roots), bound_digest, recorded
    )


def _plain_fields(binding: BoundProposition) -> tuple[Any, ...] | None:
    """Every field of a plain binding read once, in order, and type-checked: ``(subject_id,
    predicate, expected, mechanism_id, mechanism_digest, refs, roots, bounds, items, size,
    parameters copy)``; ``None`` when one is not of its exact plain type."""
    subject_id = binding.subject_id
    predicate = binding.predicate
    expected = binding.expected
    mechanism_id = binding.mechanism_id
    mechanism_digest = binding.mechanism_digest
    refs = binding.evidence_refs
    roots = binding.trust_roots
    bounds = binding.bounds
    parameters = binding.parameters
    kind = type(expected)
    if (
        type(subject_id) is not str
        or type(predicate) is not str
        or type(mechanism_id) is not str
        or type(mechanism_digest) is not str
        or not (kind in _EXPECTED_SCALARS or kind is int)
    ):
        return None
    contents = _plain_contents(refs, roots, bounds, parameters)
    if contents is None:
        return None
    items, size, copied = contents
    return (
        subject_id,
        predicate,
        expected,
        mechanism_id,
        mechanism_digest,
        refs,
        roots,
        bounds,
        items,
        size,
        copied,
    )


def _plain_contents(
    refs: object, roots: object, bounds: object, parameters: object
) -> tuple[int, int, dict[str, str]] | None:
    """The container fields' exact types and contents: tuples of ``str``, ``EvidenceBounds``
    of two ``int`` (returned) and a ``dict`` of ``str`` to ``str`` (returned as a copy)."""
    if (
        type(refs) is not tuple
        or type(roots) is not tuple
        or type(bounds) is not EvidenceBounds
        or type(parameters) is not dict
    ):
        return None
    for item in (*refs, *roots):
        if type(item) is not str:
            return None
    items, size = bounds.max_evidence_items, bounds.max_evidence_bytes
    if type(items) is not int or type(size) is not int:
        return None
    # An exact dict is copied entry by entry with its stored hashes: no key code runs.
    copied = dict(parameters)
    for key, value in copied.items():
        if type(key) is not str or type(value) is not str:
            return None
    return items, size, copied


def _plain_json(fields: tuple[Any, ...], bound_digest: str) -> bytes | None:
    """The orjson encoding of a plain binding's values when it is provably the core encoding
    (integers orjson writes exactly, ASCII output without DEL), else ``None``."""
    subject_id, predicate, expected, mechanism_id, _, refs, roots, _, items, size, copied = fields
    if type(expected) is int and expected not in _ORJSON_INTS:
        return None
    if items not in _ORJSON_INTS or size not in _ORJSON_INTS:
        return None
    data = orjson.dumps(
        {
            "subject_id": subject_id,
            "predicate": predicate,
            "expected": expected,
            "mechanism_id": mechanism_id,
            "mechanism_digest": bound_digest,
            "evidence_refs": refs,
            "trust_roots": roots,
            "bounds": {"max_evidence_items": items, "max_evidence_bytes": size},
            "parameters": copied,
        },
        option=orjson.OPT_SORT_KEYS,
    )
    if not data.isascii() or b"\x7f" in data:
        return None
    return data


def unchanged(binding: BoundProposition, recorded: tuple[Any, ...]) -> bool:
    """Whether ``binding`` still consists of exactly the ``recorded`` objects (by identity:
    immutable objects, so equal content; a replaced object, even an equal one, is "changed"
    and the caller computes the digest), its parameter dict holding the recorded keys and
    values in the recorded order. Never raises."""
    try:
        bounds = binding.bounds
        parameters = binding.parameters
        keys, values = recorded[11], recorded[12]
        return (
            binding.subject_id is recorded[0]
            and binding.predicate is recorded[1]
            and binding.expected is recorded[2]
            and binding.mechanism_id is recorded[3]
            and binding.mechanism_digest is recorded[4]
            and binding.evidence_refs is recorded[5]
            and binding.trust_roots is recorded[6]
            and bounds is recorded[7]
            and bounds.max_evidence_items is recorded[8]
            and bounds.max_evidence_bytes is recorded[9]
            and parameters is recorded[10]
            and len(parameters) == len(keys)
            and all(map(operator.is_, parameters, keys))
            and all(map(operator.is_, parameters.values(), values))
        )
    except Exception:  # a deleted field, or parameters no longer a dict: the digest decides
        return False
