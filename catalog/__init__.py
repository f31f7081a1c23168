"""``catalog``: component descriptors, registry, stored packages, index, planning, readiness.

The catalog *describes* mechanisms; it never imports, executes or instantiates one. Source files
are located from this package's own location and read as bytes (see :mod:`catalog._sources`).

Public surface:

* :class:`ComponentDescriptor`, :class:`ComponentRegistry`, :func:`reference_registry`,
  :func:`entry_for_mechanism` (the daemon's ``list`` embeds it).
* :class:`StoredPackage`, :func:`build_package`, :func:`validate_package`,
  :func:`load_package`, :func:`write_package`.
* :class:`ComponentIndex`, :class:`IndexEntry`, :func:`build`, :func:`build_index`,
  :func:`load_index`, :func:`write_build`, :func:`verify_build`.
* :class:`ValidationAnalysis`, :class:`AnalysisHole`, :class:`ValidationPlan`,
  :func:`plan_validation`.
* Readiness records and :func:`assess_execution_readiness`.
* Errors: :class:`CatalogError`, :class:`ComponentRegistryError`, :class:`ComponentIndexError`,
  :class:`PlanningError`.
"""

from __future__ import annotations

from typing import Any

from ._codec import core_bytes, core_digest
from ._descriptor import COMPONENT_KINDS, INTERACTION_MODES, ComponentDescriptor
from ._entries import (
    DESCRIPTOR_MECHANISM_ID,
    FORMATION_MECHANISM_ID,
    FORMATION_PROFILE_DIGEST,
    PACKAGING,
    REGISTRY_VERSION,
    ArtifactDeclaration,
    ComponentPackaging,
    reference_registry,
)
from ._errors import CatalogError, ComponentIndexError, ComponentRegistryError, PlanningError
from ._index import (
    INDEX_SCHEMA_VERSION,
    SEARCH_CLAIM_BOUNDARY,
    ComponentIndex,
    IndexEntry,
    build,
    build_index,
    load_index,
    verify_build,
    write_build,
)
from ._package import (
    PACKAGE_SCHEMA_VERSION,
    StoredPackage,
    build_package,
    load_package,
    validate_package,
    write_package,
)
from ._planning import (
    PLAN_CLAIM_BOUNDARY,
    AnalysisHole,
    PlanCandidate,
    ValidationAnalysis,
    ValidationPlan,
    plan_validation,
)
from ._readiness import (
    READINESS_CLAIM_BOUNDARY,
    READINESS_SCHEMA_VERSION,
    CandidateExecutionDeclaration,
    ExecutionReadinessReport,
    NativeInputBinding,
    PlannedEvidenceMapping,
    PostExecutionReassessmentContract,
    PrerequisiteResolution,
    SuppliedAuthorizationDecision,
    assess_execution_readiness,
)
from ._registry import CATALOG_SCHEMA_VERSION, ComponentRegistry

__all__ = [
    "CATALOG_SCHEMA_VERSION",
    "COMPONENT_KINDS",
    "DESCRIPTOR_MECHANISM_ID",
    "FORMATION_MECHANISM_ID",
    "FORMATION_PROFILE_DIGEST",
    "INDEX_SCHEMA_VERSION",
    "INTERACTION_MODES",
    "PACKAGE_SCHEMA_VERSION",
    "PACKAGING",
    "PLAN_CLAIM_BOUNDARY",
    "READINESS_CLAIM_BOUNDARY",
    "READINESS_SCHEMA_VERSION",
    "REGISTRY_VERSION",
    "SEARCH_CLAIM_BOUNDARY",
    "AnalysisHole",
    "ArtifactDeclaration",
    "CandidateExecutionDeclaration",
    "CatalogError",
    "ComponentDescriptor",
    "ComponentIndex",
    "ComponentIndexError",
    "ComponentPackaging",
    "ComponentRegistry",
    "ComponentRegistryError",
    "ExecutionReadinessReport",
    "IndexEntry",
    "NativeInputBinding",
    "PlanCandidate",
    "PlannedEvidenceMapping",
    "PlanningError",
    "PostExecutionReassessmentContract",
    "PrerequisiteResolution",
    "StoredPackage",
    "SuppliedAuthorizationDecision",
    "ValidationAnalysis",
    "ValidationPlan",
    "assess_execution_readiness",
    "build",
    "build_index",
    "build_package",
    "core_bytes",
    "core_digest",
    "entry_for_mechanism",
    "load_index",
    "load_package",
    "plan_validation",
    "reference_registry",
    "validate_package",
    "verify_build",
    "write_build",
    "write_package",
]

_REGISTRY: ComponentRegistry | None = None


def entry_for_mechanism(mechanism_id: str) -> dict[str, Any] | None:
    """The reference registry's ADAPTER descriptor (plain JSON-ready dict) for a mechanism id.

    Returns a fresh dict each call (callers may mutate it), or ``None`` for an unknown id or a
    non-``str`` argument. Never imports or instantiates a mechanism.
    """
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = reference_registry()
    return _REGISTRY.entry_for_mechanism(mechanism_id)
