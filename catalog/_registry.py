"""The component registry: a versioned, digest-bound set of component descriptors.

Rules:

* Component ids are unique; components are held in component-id order.
* ``match_exact(...)`` returns every descriptor whose :meth:`ComponentDescriptor.matches_exact`
  holds, in component-id order.
* ``canonical_dict()`` is ``{schema_version, registry_version, components: [descriptor dicts
  sorted by component_id]}``; ``canonical_digest()`` is the **bare hex** SHA-256 of its
  ASCII-escaped, sorted, compact JSON (docs/spec/formation.md §7.1).
* ``entry_for_mechanism(mechanism_id)`` (on a registry, and the module-level function over the
  reference registry) returns the ADAPTER descriptor dict declaring that session mechanism id, or
  ``None``. Nothing is imported or instantiated: the registry is data.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._codec import core_digest
from ._descriptor import ComponentDescriptor
from ._errors import ComponentRegistryError

__all__ = ["CATALOG_SCHEMA_VERSION", "ComponentRegistry"]

CATALOG_SCHEMA_VERSION = "VSTD-INTEROPERABILITY-CATALOG-1.1"


class ComponentRegistry:
    """An immutable, ordered set of :class:`ComponentDescriptor` with a canonical digest."""

    __slots__ = ("_by_id", "_components", "registry_version", "schema_version")

    def __init__(
        self,
        components: Iterable[ComponentDescriptor],
        *,
        registry_version: str,
        schema_version: str = CATALOG_SCHEMA_VERSION,
    ) -> None:
        if type(schema_version) is not str or not schema_version:
            raise ComponentRegistryError("schema_version must be a non-empty string")
        if type(registry_version) is not str or not registry_version:
            raise ComponentRegistryError("registry_version must be a non-empty string")
        items = list(components)
        by_id: dict[str, ComponentDescriptor] = {}
        for item in items:
            if type(item) is not ComponentDescriptor:
                raise ComponentRegistryError("registry components must be ComponentDescriptor")
            if item.component_id in by_id:
                raise ComponentRegistryError(f"duplicate component id {item.component_id!r}")
            by_id[item.component_id] = item
        self.schema_version = schema_version
        self.registry_version = registry_version
        self._components = tuple(by_id[key] for key in sorted(by_id))
        self._by_id = by_id

    def __repr__(self) -> str:
        return (
            f"ComponentRegistry({self.registry_version!r}, {len(self._components)} components, "
            f"digest={self.canonical_digest()[:12]}…)"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ComponentRegistry):
            return NotImplemented
        return self.canonical_dict() == other.canonical_dict()

    def __hash__(self) -> int:
        return hash(self.canonical_digest())

    @property
    def components(self) -> tuple[ComponentDescriptor, ...]:
        """Descriptors in component-id order."""
        return self._components

    def get(self, component_id: str) -> ComponentDescriptor | None:
        """The descriptor with that id, or ``None``."""
        return self._by_id.get(component_id) if type(component_id) is str else None

    def match_exact(
        self,
        schema_id: object,
        interaction_mode: object,
        mechanism_id: object = None,
        relation_id: object = None,
    ) -> tuple[ComponentDescriptor, ...]:
        """Every declared match, in component-id order."""
        return tuple(
            c
            for c in self._components
            if c.matches_exact(
                schema_id, interaction_mode, relation_id=relation_id, mechanism_id=mechanism_id
            )
        )

    def entry_for_mechanism(self, mechanism_id: object) -> dict[str, Any] | None:
        """The ADAPTER descriptor dict declaring this session mechanism id, or ``None``."""
        if type(mechanism_id) is not str:
            return None
        for component in self._components:
            if component.kind == "ADAPTER" and mechanism_id in component.mechanism_ids:
                return component.to_dict()
        return None

    def canonical_dict(self) -> dict[str, Any]:
        """``{schema_version, registry_version, components}`` (components sorted by id)."""
        return {
            "schema_version": self.schema_version,
            "registry_version": self.registry_version,
            "components": [c.to_dict() for c in self._components],
        }

    def canonical_digest(self) -> str:
        """Bare hex SHA-256 of the ASCII-escaped sorted compact JSON of :meth:`canonical_dict`."""
        return core_digest(self.canonical_dict())

    @classmethod
    def from_dict(cls, data: object) -> ComponentRegistry:
        """Strict inverse of :meth:`canonical_dict` (components must already be in id order)."""
        if type(data) is not dict or set(data) != {
            "schema_version",
            "registry_version",
            "components",
        }:
            raise ComponentRegistryError(
                "a registry is exactly {schema_version, registry_version, components}"
            )
        components = data["components"]
        if type(components) is not list:
            raise ComponentRegistryError("registry components must be a list")
        descriptors = [ComponentDescriptor.from_dict(item) for item in components]
        ids = [d.component_id for d in descriptors]
        if ids != sorted(set(ids)):
            raise ComponentRegistryError("registry components are not sorted by unique id")
        return cls(
            descriptors,
            registry_version=data["registry_version"],
            schema_version=data["schema_version"],
        )
