"""Component descriptors: what a component declares, never what it does.

Rules:

* A :class:`ComponentDescriptor` is a frozen declaration. Every string-list field is stored
  sorted and unique (construction normalises it; a bare ``str`` where a list is expected, an empty
  string, or a non-``str`` item is refused with :class:`ComponentRegistryError`).
* Closed vocabularies: ``kind`` ∈ :data:`COMPONENT_KINDS`, every interaction mode ∈
  :data:`INTERACTION_MODES`, ``lifecycle`` ∈ :data:`LIFECYCLES`, ``availability`` ∈
  :data:`AVAILABILITIES`.
* ``implementation_ref`` is ``module.path:attribute[.attribute]``. It names code; the catalog never
  imports, executes or instantiates it. A ref whose attribute path has two parts names an
  **unbound instance method**: a caller must construct the instance explicitly.
* Every ``EXACT_RULE_PROFILE:`` prerequisite carries a strict ``sha256:`` digest.
* ``matches_exact(schema_id, interaction_mode, mechanism_id=None, relation_id=None)`` (the
  parameter order of ``search_exact``, docs/spec/formation.md §7.2) is True only when
  ``schema_id`` is a *planning surface* schema (``VSTD-2``; a native serialized schema never
  matches), the mode is declared, at least one of relation/mechanism is given, and each given one
  is declared (relations × mechanisms is a Cartesian product). It never raises for a query value
  of the wrong type; such a value simply matches nothing.
* ``to_dict()`` is the JSON-ready descriptor (lists as lists), the unit that registry, package and
  index digests bind.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from ._codec import is_prefixed_digest
from ._errors import ComponentRegistryError

__all__ = [
    "AVAILABILITIES",
    "COMPONENT_KINDS",
    "INTERACTION_MODES",
    "LIFECYCLES",
    "ComponentDescriptor",
]

COMPONENT_KINDS = frozenset({"ADAPTER", "AUTHORIZER", "CHECKER", "PROVER", "PROVIDER"})
INTERACTION_MODES = frozenset({"LIVE_MUTATING", "OFFLINE_REPLAY", "STATIC"})
LIFECYCLES = frozenset({"DEPRECATED", "EXPERIMENTAL", "SUPPORTED"})
AVAILABILITIES = frozenset({"AVAILABLE", "UNAVAILABLE"})

RULE_PROFILE_PREFIX = "EXACT_RULE_PROFILE:"


def _string_set(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ComponentRegistryError(f"expected a list of strings, got {type(value).__name__}")
    items = list(value)
    for item in items:
        if type(item) is not str or not item:
            raise ComponentRegistryError("list items must be non-empty strings")
    return tuple(sorted(set(items)))


def _text(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if type(value) is not str or not value:
        raise ComponentRegistryError(f"{attribute.name} must be a non-empty string")


def _member(vocabulary: frozenset[str]) -> Any:
    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if type(value) is not str or value not in vocabulary:
            raise ComponentRegistryError(
                f"{attribute.name} {value!r} is not one of {sorted(vocabulary)}"
            )

    return check


@attrs.frozen(kw_only=True)
class ComponentDescriptor:
    """One registry entry. Field meanings follow docs/spec/formation.md §7.1."""

    component_id: str = attrs.field(validator=_text)
    kind: str = attrs.field(validator=_member(COMPONENT_KINDS))
    implementation_ref: str = attrs.field(validator=_text)
    lifecycle: str = attrs.field(validator=_member(LIFECYCLES))
    availability: str = attrs.field(validator=_member(AVAILABILITIES))
    interaction_modes: tuple[str, ...] = attrs.field(converter=_string_set)
    verifier_family_ids: tuple[str, ...] = attrs.field(converter=_string_set)
    planning_surface_schema_ids: tuple[str, ...] = attrs.field(converter=_string_set)
    accepted_schema_ids: tuple[str, ...] = attrs.field(converter=_string_set)
    emitted_schema_ids: tuple[str, ...] = attrs.field(converter=_string_set)
    mechanism_ids: tuple[str, ...] = attrs.field(converter=_string_set)
    relation_ids: tuple[str, ...] = attrs.field(converter=_string_set)
    execution_prerequisites: tuple[str, ...] = attrs.field(converter=_string_set)
    optional_dependencies: tuple[str, ...] = attrs.field(converter=_string_set)
    trust_roots: tuple[str, ...] = attrs.field(converter=_string_set)
    native_system: str = attrs.field(validator=_text)
    native_versions: tuple[str, ...] = attrs.field(converter=_string_set)
    native_result_vocabulary: tuple[str, ...] = attrs.field(converter=_string_set)
    native_inputs: tuple[str, ...] = attrs.field(converter=_string_set)
    native_outputs: tuple[str, ...] = attrs.field(converter=_string_set)
    transformation_loss: str = attrs.field(validator=_text)
    freshness_behavior: str = attrs.field(validator=_text)
    claim_boundary: str = attrs.field(validator=_text)
    domain_tags: tuple[str, ...] = attrs.field(converter=_string_set)

    def __attrs_post_init__(self) -> None:
        module, sep, attribute = self.implementation_ref.partition(":")
        parts = attribute.split(".")
        if (
            not sep
            or not module
            or not all(p.isidentifier() for p in module.split("."))
            or not all(p.isidentifier() for p in parts)
            or len(parts) > 2
        ):
            raise ComponentRegistryError(
                f"implementation_ref {self.implementation_ref!r} is not module:attribute[.method]"
            )
        for mode in self.interaction_modes:
            if mode not in INTERACTION_MODES:
                raise ComponentRegistryError(f"interaction mode {mode!r} is not recognised")
        if not self.interaction_modes:
            raise ComponentRegistryError(f"{self.component_id}: no interaction mode declared")
        for prerequisite in self.execution_prerequisites:
            if prerequisite.startswith(RULE_PROFILE_PREFIX) and not is_prefixed_digest(
                prerequisite[len(RULE_PROFILE_PREFIX) :]
            ):
                raise ComponentRegistryError(
                    f"{self.component_id}: {prerequisite!r} does not carry a sha256: digest"
                )

    @property
    def names_unbound_method(self) -> bool:
        """True when the implementation ref is ``Class.method`` (needs an explicit instance)."""
        return "." in self.implementation_ref.partition(":")[2]

    @property
    def rule_profile_digests(self) -> tuple[str, ...]:
        """The digests of every ``EXACT_RULE_PROFILE:`` prerequisite."""
        return tuple(
            p[len(RULE_PROFILE_PREFIX) :]
            for p in self.execution_prerequisites
            if p.startswith(RULE_PROFILE_PREFIX)
        )

    def matches_exact(
        self,
        schema_id: object,
        interaction_mode: object,
        mechanism_id: object = None,
        relation_id: object = None,
    ) -> bool:
        """Declared-match test (docs/spec/formation.md §7.1): surface, mode, relation, mechanism."""
        if relation_id is None and mechanism_id is None:
            return False
        if type(schema_id) is not str or schema_id not in self.planning_surface_schema_ids:
            return False
        if type(interaction_mode) is not str or interaction_mode not in self.interaction_modes:
            return False
        if relation_id is not None and (
            type(relation_id) is not str or relation_id not in self.relation_ids
        ):
            return False
        return mechanism_id is None or (
            type(mechanism_id) is str and mechanism_id in self.mechanism_ids
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready descriptor (lists as lists, keys as field names)."""
        out: dict[str, Any] = {}
        for field in attrs.fields(ComponentDescriptor):
            value = getattr(self, field.name)
            out[field.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: object) -> ComponentDescriptor:
        """Strict inverse of :meth:`to_dict`: exactly the descriptor keys, lists already sorted."""
        if type(data) is not dict:
            raise ComponentRegistryError("a component descriptor must be a JSON object")
        names = {field.name for field in attrs.fields(ComponentDescriptor)}
        if set(data) != names:
            extra = sorted(set(data) - names)
            missing = sorted(names - set(data))
            raise ComponentRegistryError(
                f"descriptor keys differ: missing {missing}, unexpected {extra}"
            )
        for name, value in data.items():
            if type(value) is list and (
                not all(type(item) is str for item in value) or value != sorted(set(value))
            ):
                raise ComponentRegistryError(f"descriptor list {name} is not sorted unique text")
        try:
            descriptor = cls(**data)
        except TypeError as error:  # pragma: no cover - defensive: attrs arity errors
            raise ComponentRegistryError(str(error)) from None
        for field in attrs.fields(ComponentDescriptor):
            if field.converter is not None and type(data[field.name]) is not list:
                raise ComponentRegistryError(f"descriptor field {field.name} must be a list")
        return descriptor
