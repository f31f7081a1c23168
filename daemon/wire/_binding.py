"""Wire form ⇄ :class:`session.BoundProposition`, exact.

Rules: the wire form is exactly ``BoundProposition.to_dict()``: the nine keys, no more, no
fewer; ``subject_id``, ``predicate``, ``mechanism_id``, ``mechanism_digest`` exact strings;
``evidence_refs`` and ``trust_roots`` arrays of exact strings; ``bounds`` an object with exactly
``max_evidence_items`` and ``max_evidence_bytes``, exact non-negative integers (booleans are
not integers); ``parameters`` an object of string values; ``expected`` any JSON value. Then the
session's own constructor rules apply. Every refusal is :class:`BindingWireError` with a
message; nothing else escapes.

Checked in this order, the first failure reported: the value is an object; its key set; then
``bounds``, ``parameters``, ``subject_id``, ``predicate``, ``mechanism_id``,
``mechanism_digest``, ``evidence_refs``, ``trust_roots``; then the constructor. The session's
``to_dict()`` is the other direction (a digest preimage: ``docs/adr/0012``).

:func:`binding_from_wire` is on every submit's path, so it applies the field rules itself, in
the check order, and calls the constructor once: no generic structuring per request. The
binding converter (:data:`BINDINGS`, :mod:`daemon.wire._exact`) applies the same rules through
cattrs and stays the reference: ``tests/daemon/test_header_models.py`` holds both to the
recorded corpus (``binding_cases.jsonl``), refusal words included.
"""

from __future__ import annotations

from typing import Any, Final

from cattrs.errors import ClassValidationError
from cattrs.gen import make_dict_structure_fn

from daemon.wire._errors import PeerError
from daemon.wire._exact import (
    FieldError,
    Rule,
    exact_converter,
    exact_keys,
    first_failure,
    rule_override,
)
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
_CHECK_ORDER: Final = (
    "bounds",
    "parameters",
    "subject_id",
    "predicate",
    "mechanism_id",
    "mechanism_digest",
    "evidence_refs",
    "trust_roots",
)
_NAMES: Final = {name: name for name in (*_CHECK_ORDER, "expected")}


class BindingWireError(PeerError, ValueError):
    """The wire form is not a valid bound proposition."""


def _string(value: Any, _: Any = None) -> str:
    if type(value) is not str:
        raise FieldError("binding {key} must be a string")
    return value


def _strings(value: Any, _: Any = None) -> tuple[str, ...]:
    if type(value) is not list or any(type(item) is not str for item in value):
        raise FieldError("binding {key} must be an array of strings")
    return tuple(value)


def _json(value: Any, _: Any = None) -> Any:
    return value


def _bounds(value: Any, _: Any = None) -> EvidenceBounds:
    if type(value) is not dict or value.keys() != _BOUNDS_KEYS:
        raise FieldError(f"binding bounds must have exactly {sorted(_BOUNDS_KEYS)}", keyed=False)
    for key in sorted(_BOUNDS_KEYS):
        if type(value[key]) is not int or value[key] < 0:
            raise FieldError(f"binding bounds.{key} must be a non-negative integer", keyed=False)
    return EvidenceBounds(value["max_evidence_items"], value["max_evidence_bytes"])


def _parameters(value: Any, _: Any = None) -> dict[str, str]:
    if type(value) is not dict or any(type(item) is not str for item in value.values()):
        raise FieldError("binding parameters must be an object of strings", keyed=False)
    return dict(value)


#: The converter of the binding's wire form (a format of its own: submit headers carry it).
BINDINGS: Final = exact_converter()
BINDINGS.register_structure_hook(
    BoundProposition,
    make_dict_structure_fn(
        BoundProposition,
        BINDINGS,
        _cattrs_forbid_extra_keys=True,
        _cattrs_detailed_validation=True,
        subject_id=rule_override(Rule(_string)),
        predicate=rule_override(Rule(_string)),
        expected=rule_override(Rule(_json)),
        mechanism_id=rule_override(Rule(_string)),
        mechanism_digest=rule_override(Rule(_string)),
        evidence_refs=rule_override(Rule(_strings)),
        trust_roots=rule_override(Rule(_strings)),
        bounds=rule_override(Rule(_bounds)),
        parameters=rule_override(Rule(_parameters)),
    ),
)
_STRUCTURE: Final = BINDINGS.get_structure_hook(BoundProposition)


_FIELD_RULES: Final = (
    ("bounds", _bounds),
    ("parameters", _parameters),
    ("subject_id", _string),
    ("predicate", _string),
    ("mechanism_id", _string),
    ("mechanism_digest", _string),
    ("evidence_refs", _strings),
    ("trust_roots", _strings),
)


def binding_from_wire(data: object) -> BoundProposition:
    """Build the bound proposition a client sent, or raise :class:`BindingWireError` (module
    rules: the key set, each field's rule in the check order, then the constructor)."""
    if type(data) is not dict:
        raise BindingWireError("binding must be an object")
    if data.keys() != BINDING_KEYS:
        raise BindingWireError(
            f"binding keys must be exactly {sorted(BINDING_KEYS)}; got {sorted(data)}"
        )
    values: dict[str, Any] = {"expected": data["expected"]}
    for key, check in _FIELD_RULES:
        try:
            values[key] = check(data[key])
        except FieldError as failure:
            raise BindingWireError(failure.words(key)) from None
    try:
        return BoundProposition(**values)
    except EvidenceBindingError as failure:
        raise BindingWireError(str(failure)) from None


def binding_from_wire_structured(data: object) -> BoundProposition:
    """:func:`binding_from_wire` through the cattrs converter (:data:`BINDINGS`): the
    reference the hand-applied rules are tested against."""
    if type(data) is not dict:
        raise BindingWireError("binding must be an object")
    if exact_keys(data, BINDING_KEYS) is not None:
        raise BindingWireError(
            f"binding keys must be exactly {sorted(BINDING_KEYS)}; got {sorted(data)}"
        )
    try:
        binding: BoundProposition = _STRUCTURE(data, BoundProposition)
    except ClassValidationError as error:
        key, failure = first_failure(error, _NAMES, _CHECK_ORDER)
        if key is not None and isinstance(failure, FieldError):
            raise BindingWireError(failure.words(key)) from None
        if isinstance(failure, EvidenceBindingError):
            raise BindingWireError(str(failure)) from None
        raise failure from None
    return binding


def binding_to_wire(binding: BoundProposition) -> dict[str, Any]:
    """The wire form: ``binding.to_dict()``."""
    wire: dict[str, Any] = binding.to_dict()
    return wire
