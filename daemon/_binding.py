"""Wire form ⇄ :class:`session.BoundProposition`, exact.

Rules: the wire form is exactly ``BoundProposition.to_dict()``: the nine keys, no more, no
fewer; ``subject_id``, ``predicate``, ``mechanism_id``, ``mechanism_digest`` exact strings;
``evidence_refs`` and ``trust_roots`` arrays of exact strings; ``bounds`` an object with exactly
``max_evidence_items`` and ``max_evidence_bytes``, exact non-negative integers (booleans are
not integers); ``parameters`` an object of string values; ``expected`` any JSON value. Then the
session's own constructor rules apply. Every refusal is :class:`BindingWireError` with a
message; nothing else escapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from session import BoundProposition, EvidenceBindingError, EvidenceBounds

BINDING_KEYS: Final = frozenset(
    {
        "subject_id",
        "predicate",
        "expected",
        "mechanism_id",
        "mechanism_digest",
        "evidence_refs",
        "trust_roots",
        "bounds",
        "parameters",
    }
)
_BOUNDS_KEYS: Final = frozenset({"max_evidence_items", "max_evidence_bytes"})


class BindingWireError(ValueError):
    """The wire form is not a valid bound proposition."""


def _string(data: Mapping[str, Any], key: str) -> str:
    value = data[key]
    if type(value) is not str:
        raise BindingWireError(f"binding {key} must be a string")
    return value


def _strings(data: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = data[key]
    if type(value) is not list or any(type(item) is not str for item in value):
        raise BindingWireError(f"binding {key} must be an array of strings")
    return tuple(value)


def binding_from_wire(data: object) -> BoundProposition:
    """Build the bound proposition a client sent, or raise :class:`BindingWireError`."""
    if type(data) is not dict:
        raise BindingWireError("binding must be an object")
    if set(data) != BINDING_KEYS:
        raise BindingWireError(
            f"binding keys must be exactly {sorted(BINDING_KEYS)}; got {sorted(data)}"
        )
    bounds = data["bounds"]
    if type(bounds) is not dict or set(bounds) != _BOUNDS_KEYS:
        raise BindingWireError(f"binding bounds must have exactly {sorted(_BOUNDS_KEYS)}")
    for key in sorted(_BOUNDS_KEYS):
        if type(bounds[key]) is not int or bounds[key] < 0:
            raise BindingWireError(f"binding bounds.{key} must be a non-negative integer")
    parameters = data["parameters"]
    if type(parameters) is not dict or any(type(value) is not str for value in parameters.values()):
        raise BindingWireError("binding parameters must be an object of strings")
    try:
        return BoundProposition(
            subject_id=_string(data, "subject_id"),
            predicate=_string(data, "predicate"),
            expected=data["expected"],
            mechanism_id=_string(data, "mechanism_id"),
            mechanism_digest=_string(data, "mechanism_digest"),
            evidence_refs=_strings(data, "evidence_refs"),
            trust_roots=_strings(data, "trust_roots"),
            bounds=EvidenceBounds(bounds["max_evidence_items"], bounds["max_evidence_bytes"]),
            parameters=dict(parameters),
        )
    except EvidenceBindingError as error:
        raise BindingWireError(str(error)) from None


def binding_to_wire(binding: BoundProposition) -> dict[str, Any]:
    """The wire form: ``binding.to_dict()``."""
    return binding.to_dict()
