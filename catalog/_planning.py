"""Validation planning over declared components (docs/spec/formation.md §7.3, first half).

Rules:

* A :class:`ValidationAnalysis` names holes; each hole asks for a declared component on the
  planning surface (``schema_id``, normally ``VSTD-2``), in an ``interaction_mode``, for a
  ``relation_id`` and/or ``mechanism_id``. Its digest is the bare hex core-codec digest of
  :meth:`ValidationAnalysis.to_dict`.
* :func:`plan_validation(analysis, registry, package=None)` lists, per hole, every
  ``registry.match_exact`` candidate (component-id order). With a stored package it first
  validates the package (a changed byte raises :class:`ComponentIndexError`), requires the
  package's registry to be this registry, and binds ``binding_scope: "STORED_PACKAGE"``,
  ``package_digest`` and ``registry_digest``; without one the scope is ``REGISTRY_ONLY``.
* Each candidate carries its prerequisites: the component's ``execution_prerequisites`` (so
  ``EXACT_RULE_PROFILE:<digest>`` is preserved), ``EVIDENCE_BYTES``, and one
  ``PACKAGE_DEPENDENCY:<requirement>`` per dependency the package declares for the component.
* Planning never imports, executes or instantiates a component, never closes a hole, and its
  result always says ``execution_performed: false``. Malformed analyses raise
  :class:`PlanningError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from ._codec import core_digest
from ._errors import ComponentIndexError, PlanningError
from ._package import StoredPackage, validate_package
from ._registry import ComponentRegistry

__all__ = [
    "ANALYSIS_SCHEMA_VERSION",
    "PLAN_CLAIM_BOUNDARY",
    "PLAN_SCHEMA_VERSION",
    "AnalysisHole",
    "PlanCandidate",
    "ValidationAnalysis",
    "ValidationPlan",
    "plan_validation",
]

ANALYSIS_SCHEMA_VERSION = "EVIDENCED-VALIDATION-ANALYSIS-0.1"
PLAN_SCHEMA_VERSION = "EVIDENCED-VALIDATION-PLAN-EXPERIMENTAL-0.1"
PLAN_CLAIM_BOUNDARY = (
    "A plan lists declared candidates for each hole. It does not load retained source, execute "
    "or instantiate a component, close a hole, validate native inputs, or establish rule-profile "
    "compatibility."
)


def _text(value: object, what: str) -> str:
    if type(value) is not str or not value:
        raise PlanningError(f"{what} must be a non-empty string")
    return value


def _optional_text(value: object, what: str) -> str | None:
    return None if value is None else _text(value, what)


@attrs.frozen
class AnalysisHole:
    """One open question of an analysis: which declared component could fill it."""

    hole_id: str
    schema_id: str
    interaction_mode: str
    relation_id: str | None = None
    mechanism_id: str | None = None

    def __attrs_post_init__(self) -> None:
        _text(self.hole_id, "hole_id")
        _text(self.schema_id, "schema_id")
        _text(self.interaction_mode, "interaction_mode")
        _optional_text(self.relation_id, "relation_id")
        _optional_text(self.mechanism_id, "mechanism_id")
        if self.relation_id is None and self.mechanism_id is None:
            raise PlanningError(f"hole {self.hole_id} names neither a relation nor a mechanism")

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def _sorted_holes(holes: Iterable[AnalysisHole]) -> tuple[AnalysisHole, ...]:
    return tuple(sorted(holes, key=lambda h: str(h.hole_id)))


@attrs.frozen
class ValidationAnalysis:
    """An analysis: an id and its holes (unique ids, held in hole-id order)."""

    analysis_id: str
    holes: tuple[AnalysisHole, ...] = attrs.field(converter=_sorted_holes)

    def __attrs_post_init__(self) -> None:
        _text(self.analysis_id, "analysis_id")
        if not self.holes:
            raise PlanningError("an analysis needs at least one hole")
        ids = [h.hole_id for h in self.holes]
        if any(type(h) is not AnalysisHole for h in self.holes) or len(set(ids)) != len(ids):
            raise PlanningError("analysis holes must be AnalysisHole records with unique ids")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": ANALYSIS_SCHEMA_VERSION,
            "analysis_id": self.analysis_id,
            "holes": [h.to_dict() for h in self.holes],
        }

    def digest(self) -> str:
        return core_digest(self.to_dict())

    @classmethod
    def from_dict(cls, data: object) -> ValidationAnalysis:
        """Strict parse: exactly the analysis keys; each hole exactly the hole keys."""
        if type(data) is not dict or set(data) != {"schema_version", "analysis_id", "holes"}:
            raise PlanningError("an analysis is exactly {schema_version, analysis_id, holes}")
        if data["schema_version"] != ANALYSIS_SCHEMA_VERSION:
            raise PlanningError(f"unsupported analysis schema {data['schema_version']!r}")
        holes = data["holes"]
        if type(holes) is not list:
            raise PlanningError("analysis holes must be a list")
        keys = {"hole_id", "schema_id", "interaction_mode", "relation_id", "mechanism_id"}
        parsed = []
        for hole in holes:
            if type(hole) is not dict or not {"hole_id", "schema_id", "interaction_mode"} <= set(
                hole
            ):
                raise PlanningError("a hole needs hole_id, schema_id and interaction_mode")
            if not set(hole) <= keys:
                raise PlanningError(f"unexpected hole keys {sorted(set(hole) - keys)}")
            parsed.append(AnalysisHole(**hole))
        return cls(data["analysis_id"], parsed)


@attrs.frozen
class PlanCandidate:
    """A declared component that could fill a hole, with everything execution would require."""

    candidate_id: str
    hole_id: str
    component_id: str
    implementation_ref: str
    interaction_mode: str
    relation_id: str | None
    mechanism_id: str | None
    prerequisites: tuple[str, ...]
    native_inputs: tuple[str, ...]
    accepted_schema_ids: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        out = attrs.asdict(self)
        for key in ("prerequisites", "native_inputs", "accepted_schema_ids"):
            out[key] = list(out[key])
        return out


@attrs.frozen
class ValidationPlan:
    """The result of :func:`plan_validation`; :meth:`to_dict` is its JSON form."""

    analysis_id: str
    analysis_digest: str
    registry_digest: str
    binding_scope: str
    package_id: str | None
    package_version: str | None
    package_digest: str | None
    holes: tuple[tuple[str, tuple[str, ...]], ...]
    candidates: tuple[PlanCandidate, ...]

    @property
    def schema_version(self) -> str:
        return PLAN_SCHEMA_VERSION

    @property
    def execution_performed(self) -> bool:
        """Always ``False``: planning never executes a component."""
        return False

    @property
    def claim_boundary(self) -> str:
        return PLAN_CLAIM_BOUNDARY

    def candidate(self, candidate_id: object) -> PlanCandidate | None:
        for candidate in self.candidates:
            if candidate.candidate_id == candidate_id:
                return candidate
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "analysis_id": self.analysis_id,
            "analysis_digest": self.analysis_digest,
            "registry_digest": self.registry_digest,
            "binding_scope": self.binding_scope,
            "package_id": self.package_id,
            "package_version": self.package_version,
            "package_digest": self.package_digest,
            "holes": [
                {
                    "hole_id": hole_id,
                    "status": "CANDIDATES_DECLARED" if ids else "NO_DECLARED_CANDIDATE",
                    "candidate_ids": list(ids),
                }
                for hole_id, ids in self.holes
            ],
            "candidates": [c.to_dict() for c in self.candidates],
            "execution_performed": self.execution_performed,
            "claim_boundary": self.claim_boundary,
        }

    def digest(self) -> str:
        return core_digest(self.to_dict())

    @classmethod
    def from_dict(cls, data: object) -> ValidationPlan:
        """Strict parse of :meth:`to_dict`; the result must re-serialise to the same dict."""
        try:
            if type(data) is not dict:
                raise PlanningError("a plan must be a JSON object")
            candidates = []
            for item in data["candidates"]:
                fields = dict(item)
                for key in ("prerequisites", "native_inputs", "accepted_schema_ids"):
                    fields[key] = tuple(fields[key])
                candidates.append(PlanCandidate(**fields))
            plan = cls(
                analysis_id=data["analysis_id"],
                analysis_digest=data["analysis_digest"],
                registry_digest=data["registry_digest"],
                binding_scope=data["binding_scope"],
                package_id=data["package_id"],
                package_version=data["package_version"],
                package_digest=data["package_digest"],
                holes=tuple(
                    (hole["hole_id"], tuple(hole["candidate_ids"])) for hole in data["holes"]
                ),
                candidates=tuple(candidates),
            )
        except PlanningError:
            raise
        except (KeyError, TypeError, ValueError) as error:
            raise PlanningError(f"malformed plan: {type(error).__name__}: {error}") from None
        if plan.to_dict() != data:
            raise PlanningError("plan is not in the exact form plan_validation produces")
        return plan


def _dependencies(package: StoredPackage | None, component_id: str) -> tuple[str, ...]:
    if package is None:
        return ()
    for entry in package.manifest["components"]:
        if entry["component_id"] == component_id:
            return tuple(entry["dependencies"])
    raise ComponentIndexError(f"package declares no component {component_id}")


def plan_validation(
    analysis: ValidationAnalysis,
    registry: ComponentRegistry,
    package: StoredPackage | None = None,
) -> ValidationPlan:
    """Declared candidates per hole; never executes anything (see the module rules)."""
    if type(analysis) is not ValidationAnalysis:
        raise PlanningError("analysis must be a ValidationAnalysis")
    if not isinstance(registry, ComponentRegistry):
        raise PlanningError("registry must be a ComponentRegistry")
    registry_digest = registry.canonical_digest()
    package_digest: str | None = None
    if package is not None:
        package_digest = validate_package(package)
        if package.registry().canonical_digest() != registry_digest:
            raise ComponentIndexError("the stored package declares a different registry")
    holes: list[tuple[str, tuple[str, ...]]] = []
    candidates: list[PlanCandidate] = []
    for hole in analysis.holes:
        ids: list[str] = []
        for component in registry.match_exact(
            hole.schema_id,
            hole.interaction_mode,
            relation_id=hole.relation_id,
            mechanism_id=hole.mechanism_id,
        ):
            candidate_id = f"candidate:{hole.hole_id}:{component.component_id}"
            prerequisites = {
                *component.execution_prerequisites,
                "EVIDENCE_BYTES",
                *(
                    f"PACKAGE_DEPENDENCY:{d}"
                    for d in _dependencies(package, component.component_id)
                ),
            }
            candidates.append(
                PlanCandidate(
                    candidate_id=candidate_id,
                    hole_id=hole.hole_id,
                    component_id=component.component_id,
                    implementation_ref=component.implementation_ref,
                    interaction_mode=hole.interaction_mode,
                    relation_id=hole.relation_id,
                    mechanism_id=hole.mechanism_id,
                    prerequisites=tuple(sorted(prerequisites)),
                    native_inputs=component.native_inputs,
                    accepted_schema_ids=component.accepted_schema_ids,
                )
            )
            ids.append(candidate_id)
        holes.append((hole.hole_id, tuple(ids)))
    return ValidationPlan(
        analysis_id=analysis.analysis_id,
        analysis_digest=analysis.digest(),
        registry_digest=registry_digest,
        binding_scope="REGISTRY_ONLY" if package is None else "STORED_PACKAGE",
        package_id=None if package is None else package.package_id,
        package_version=None if package is None else package.package_version,
        package_digest=package_digest,
        holes=tuple(holes),
        candidates=tuple(sorted(candidates, key=lambda c: c.candidate_id)),
    )
