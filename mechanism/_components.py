"""Catalog declarations of this project's mechanisms, as plain data (never catalog objects).

Each built-in provider's ``catalog_metadata()`` describes its components with
:func:`component` and :func:`packaging`; the catalog's reference registry is derived from
them (``scripts/derive_catalog.py`` writes ``catalog/data/reference-components.json``, and a
test keeps it equal to what the providers declare). The vocabulary shared by the families
lives here: the planning surface, the base prerequisites, the default freshness text and the
Python requirement.

Rules: every value is JSON-ready (strings and lists of strings); a component mapping has exactly
the field names of ``catalog.ComponentDescriptor``; ``lifecycle`` is ``EXPERIMENTAL`` and
``availability`` ``AVAILABLE`` for every shipped component; ``optional_dependencies`` and
``trust_roots`` are empty. Nothing here imports the catalog.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import attrs

__all__ = [
    "BASE_PREREQUISITES",
    "PLANNING_SURFACE",
    "PYTHON",
    "STATELESS_FRESHNESS",
    "Family",
    "component",
    "packaging",
]

PLANNING_SURFACE: Final = ("VSTD-2",)
BASE_PREREQUISITES: Final = (
    "EXACT_IMPLEMENTATION_COORDINATE",
    "EXACT_NATIVE_INPUT",
    "RESOURCE_BOUNDS",
)
PYTHON: Final = ("python>=3.11",)
STATELESS_FRESHNESS: Final = (
    "Stateless function over exact immutable bytes; no cache or session state. Any change to the "
    "packaged source, schema, specification or profile bytes changes the package digest and "
    "requires fresh implementation-coordinate evidence."
)


@attrs.frozen
class Family:
    """What every component of one mechanism family shares."""

    verifier_family_id: str
    pinned_prerequisite: str
    native_system: str
    native_versions: tuple[str, ...]
    claim_boundary: str
    domain_tags: tuple[str, ...]


def component(
    family: Family,
    *,
    component_id: str,
    kind: str,
    implementation_ref: str,
    mode: str,
    accepted: Sequence[str],
    emitted: Sequence[str],
    mechanism_id: str,
    relation_id: str,
    extra_prerequisites: Sequence[str],
    vocabulary: Sequence[str],
    inputs: Sequence[str],
    outputs: Sequence[str],
    loss: str,
    freshness: str,
    tag: str,
    extra_versions: Sequence[str] = (),
) -> dict[str, Any]:
    """One component declaration in the field form of ``catalog.ComponentDescriptor``."""
    return {
        "component_id": component_id,
        "kind": kind,
        "implementation_ref": implementation_ref,
        "lifecycle": "EXPERIMENTAL",
        "availability": "AVAILABLE",
        "interaction_modes": [mode],
        "verifier_family_ids": [family.verifier_family_id],
        "planning_surface_schema_ids": list(PLANNING_SURFACE),
        "accepted_schema_ids": list(accepted),
        "emitted_schema_ids": list(emitted),
        "mechanism_ids": [mechanism_id],
        "relation_ids": [relation_id],
        "execution_prerequisites": [
            *BASE_PREREQUISITES,
            family.pinned_prerequisite,
            *extra_prerequisites,
        ],
        "optional_dependencies": [],
        "trust_roots": [],
        "native_system": family.native_system,
        "native_versions": [*family.native_versions, *extra_versions],
        "native_result_vocabulary": list(vocabulary),
        "native_inputs": list(inputs),
        "native_outputs": list(outputs),
        "transformation_loss": loss,
        "freshness_behavior": freshness,
        "claim_boundary": family.claim_boundary,
        "domain_tags": [*family.domain_tags, tag],
    }


def packaging(
    component_id: str,
    source_refs: Sequence[str],
    artifacts: Sequence[tuple[str, str]],
    dependencies: Sequence[str],
) -> dict[str, Any]:
    """What a stored package retains for one component: source refs (``module:attribute``),
    ``(role, source-root-relative path)`` artifacts and planning dependencies."""
    return {
        "component_id": component_id,
        "source_refs": list(source_refs),
        "artifacts": [{"role": role, "path": path} for role, path in artifacts],
        "dependencies": list(dependencies),
    }
