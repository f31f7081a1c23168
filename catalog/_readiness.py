"""Execution readiness: are the caller's preflight declarations complete and consistent?

Rules (docs/spec/formation.md §7.3):

* :func:`assess_execution_readiness` never raises: any malformed input becomes an ``INVALID``
  finding. It never imports, executes or instantiates a component and never grants
  authorization (``execution_performed`` and ``authorization_granted_by_module`` are always
  ``false``).
* ``status`` follows the findings' worst severity, **INVALID > BLOCKED > NOT_ESTABLISHED >
  READY**; ``READY`` only when there is no finding. ``findings`` are the sorted, unique finding
  messages themselves (e.g. ``"missing native input bindings for <candidate>: [...]"``, as
  docs/spec/formation.md §7.3 quotes it); the severity of each is carried by ``status``, not by
  a prefix.
* INVALID — the plan is not the plan ``plan_validation(analysis, registry, package)`` gives (a
  changed plan, analysis or registry); a supplied package whose artifacts changed; a declaration
  for a candidate the plan does not list or with a different component; a sub-record naming
  another candidate, hole or component; duplicate ids; a native input contract the component
  does not declare; a native input ``schema_id`` outside the component's accepted set; a
  resolution for a prerequisite the candidate does not require (an invented
  ``EXACT_RULE_PROFILE:`` value among them), or an ``AUTHORITY:`` prerequisite resolved outside
  the authorization decision; an ``EXACT_…:sha256:<hex>`` resolution (rule profile, compiled
  catalog) whose evidence is not that digest; an evidence mapping that does not bind its input's
  digest, or evidence indices that are not distinct positions ``0..n-1`` for ``n`` bindings; an
  authorization ``NOT_REQUIRED`` for a candidate that requires an ``AUTHORITY:``
  prerequisite; a value of the wrong type anywhere.
* BLOCKED — a prerequisite declared unresolved; authorization ``DENIED``; an unavailable component.
* NOT_ESTABLISHED — no candidate declared; missing native input bindings, evidence mappings or
  prerequisite resolutions (every required prerequisite plus ``RUNTIME_AVAILABILITY``; the
  ``AUTHORITY:`` ones go to authorization); no authorization decision, ``UNKNOWN``
  authorization, or one that does not cover a candidate; no reassessment contract, or one that
  does not cover a candidate or names no check; a ``STORED_PACKAGE`` plan assessed without its
  package.
* Readiness checks schema membership against the **component-wide** accepted set, not a
  schema-to-role map: it cannot establish subject/certificate role pairing. The native checker
  must enforce roles. READY does not establish that any instance or input was inspected.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from ._codec import is_bare_hex, is_prefixed_digest
from ._descriptor import ComponentDescriptor
from ._errors import CatalogError, PlanningError
from ._package import StoredPackage
from ._planning import PlanCandidate, ValidationAnalysis, ValidationPlan, plan_validation
from ._registry import ComponentRegistry

__all__ = [
    "AUTHORIZATION_DECISIONS",
    "READINESS_CLAIM_BOUNDARY",
    "READINESS_SCHEMA_VERSION",
    "READINESS_STATUSES",
    "CandidateExecutionDeclaration",
    "ExecutionReadinessReport",
    "NativeInputBinding",
    "PlannedEvidenceMapping",
    "PostExecutionReassessmentContract",
    "PrerequisiteResolution",
    "SuppliedAuthorizationDecision",
    "assess_execution_readiness",
]

READINESS_SCHEMA_VERSION = "VSTD-EXECUTION-READINESS-EXPERIMENTAL-0.1"
READINESS_STATUSES = ("INVALID", "BLOCKED", "NOT_ESTABLISHED", "READY")  # precedence order
AUTHORIZATION_DECISIONS = frozenset({"AUTHORIZED", "DENIED", "UNKNOWN", "NOT_REQUIRED"})
READINESS_CLAIM_BOUNDARY = (
    "READY means only that caller-supplied preflight declarations are internally complete and "
    "consistent with the exact analysis, plan, and registry. It does not execute a component, "
    "validate native inputs or results, grant authorization, establish safety or closure, or "
    "perform post-execution reassessment."
)
RUNTIME_AVAILABILITY = "RUNTIME_AVAILABILITY"
AUTHORITY_PREFIX = "AUTHORITY:"
RULE_PROFILE_PREFIX = "EXACT_RULE_PROFILE:"


def _as_tuple(value: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(value)


@attrs.frozen
class NativeInputBinding:
    """Declares which exact bytes (by bare hex SHA-256) fill one native input contract."""

    binding_id: str
    candidate_id: str
    hole_id: str
    component_id: str
    native_input_contract: str
    input_sha256: str
    schema_id: str | None = None
    media_type: str | None = None


@attrs.frozen
class PlannedEvidenceMapping:
    """Declares the evidence position (0-based) and ``sha256:`` ref a bound input will occupy."""

    mapping_id: str
    candidate_id: str
    binding_id: str
    evidence_index: int
    evidence_ref: str


@attrs.frozen
class PrerequisiteResolution:
    """Declares whether one required prerequisite is met, with optional evidence and a reason."""

    candidate_id: str
    prerequisite: str
    resolved: bool
    evidence_sha256: str | None = None
    reason: str = ""


@attrs.frozen
class CandidateExecutionDeclaration:
    """Everything a caller declares before executing one planned candidate."""

    candidate_id: str
    component_id: str
    native_input_bindings: tuple[NativeInputBinding, ...] = attrs.field(
        converter=_as_tuple, default=()
    )
    evidence_mappings: tuple[PlannedEvidenceMapping, ...] = attrs.field(
        converter=_as_tuple, default=()
    )
    prerequisite_resolutions: tuple[PrerequisiteResolution, ...] = attrs.field(
        converter=_as_tuple, default=()
    )


@attrs.frozen
class SuppliedAuthorizationDecision:
    """A decision the caller obtained elsewhere; this module never grants authorization."""

    decision: str
    candidate_ids: tuple[str, ...] = attrs.field(converter=_as_tuple, default=())
    authority: str = ""
    reason: str = ""


@attrs.frozen
class PostExecutionReassessmentContract:
    """What the caller commits to re-check after execution (not performed here)."""

    contract_id: str
    candidate_ids: tuple[str, ...] = attrs.field(converter=_as_tuple)
    checks: tuple[str, ...] = attrs.field(converter=_as_tuple)


@attrs.frozen
class ExecutionReadinessReport:
    """The readiness answer; :meth:`to_dict` is its JSON form."""

    status: str
    findings: tuple[str, ...]
    analysis_digest: str | None
    plan_digest: str | None
    registry_digest: str | None
    package_digest: str | None
    candidate_ids: tuple[str, ...]

    @property
    def schema_version(self) -> str:
        return READINESS_SCHEMA_VERSION

    @property
    def execution_performed(self) -> bool:
        """Always ``False``: readiness never executes a component."""
        return False

    @property
    def authorization_granted_by_module(self) -> bool:
        """Always ``False``: authorization is only ever supplied by the caller."""
        return False

    @property
    def claim_boundary(self) -> str:
        return READINESS_CLAIM_BOUNDARY

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "status": self.status,
            "findings": list(self.findings),
            "analysis_digest": self.analysis_digest,
            "plan_digest": self.plan_digest,
            "registry_digest": self.registry_digest,
            "package_digest": self.package_digest,
            "candidate_ids": list(self.candidate_ids),
            "execution_performed": self.execution_performed,
            "authorization_granted_by_module": self.authorization_granted_by_module,
            "native_input_validation": "NOT_PERFORMED",
            "post_execution_reassessment": "NOT_PERFORMED",
            "claim_boundary": self.claim_boundary,
        }


class _Findings:
    def __init__(self) -> None:
        self.items: set[tuple[str, str]] = set()

    def add(self, status: str, message: str) -> None:
        self.items.add((status, message))

    def status(self) -> str:
        for status in READINESS_STATUSES[:-1]:
            if any(s == status for s, _ in self.items):
                return status
        return "READY"

    def sorted(self) -> tuple[str, ...]:
        return tuple(sorted({message for _, message in self.items}))


def _pinned_digest(prerequisite: str) -> str | None:
    """The digest an ``EXACT_…:sha256:<hex>`` prerequisite pins (rule profile, catalog), if any."""
    name, sep, value = prerequisite.partition(":")
    if sep and name.startswith("EXACT_") and is_prefixed_digest(value):
        return value
    return None


def _is_text(value: object) -> bool:
    return type(value) is str and bool(value)


def _same(value: object, expected: str) -> bool:
    """Exact identifier equality: a ``str`` subclass (with its own ``__eq__``) never matches."""
    return type(value) is str and value == expected


def _strip_package(plan: dict[str, Any]) -> dict[str, Any]:
    out = dict(plan)
    for key in ("binding_scope", "package_id", "package_version", "package_digest"):
        out.pop(key, None)
    out["candidates"] = [
        {
            **c,
            "prerequisites": [
                p for p in c["prerequisites"] if not p.startswith("PACKAGE_DEPENDENCY:")
            ],
        }
        for c in plan["candidates"]
    ]
    return out


def _check_plan(
    analysis: object,
    plan: object,
    registry: object,
    package: object,
    found: _Findings,
) -> ValidationPlan | None:
    """Re-derive the plan; return it when the supplied plan is exactly that plan."""
    if type(analysis) is not ValidationAnalysis:
        found.add("INVALID", "analysis is not a ValidationAnalysis")
        return None
    if type(plan) is not ValidationPlan:
        found.add("INVALID", "plan is not a ValidationPlan")
        return None
    if not isinstance(registry, ComponentRegistry):
        found.add("INVALID", "registry is not a ComponentRegistry")
        return None
    if package is not None and type(package) is not StoredPackage:
        found.add("INVALID", "package is not a StoredPackage")
        return None
    if plan.analysis_digest != analysis.digest():
        found.add("INVALID", "plan analysis_digest does not match the analysis")
    if plan.registry_digest != registry.canonical_digest():
        found.add("INVALID", "plan registry_digest does not match the registry")
    try:
        expected = plan_validation(
            analysis, registry, package=package if type(package) is StoredPackage else None
        )
    except CatalogError as error:
        found.add("INVALID", f"stored package rejected: {error}")
        return None
    supplied = plan.to_dict()
    if package is None and plan.binding_scope == "STORED_PACKAGE":
        found.add("NOT_ESTABLISHED", "plan is bound to a stored package that was not supplied")
        if _strip_package(supplied) != _strip_package(expected.to_dict()):
            found.add("INVALID", "plan differs from the plan of this analysis and registry")
            return None
        return plan
    if supplied != expected.to_dict():
        found.add("INVALID", "plan differs from the plan of this analysis, registry and package")
        return None
    return plan


def _required(candidate: PlanCandidate) -> set[str]:
    return {*candidate.prerequisites, RUNTIME_AVAILABILITY}


def _check_declaration(
    declaration: CandidateExecutionDeclaration,
    candidate: PlanCandidate,
    registry: ComponentRegistry,
    binding_ids: set[str],
    found: _Findings,
) -> None:
    """One declaration's three parts in turn: bindings, evidence mappings, resolutions."""
    cid = candidate.candidate_id
    component = registry.get(candidate.component_id)
    if component is None:  # pragma: no cover - the re-derived plan guarantees it
        found.add("INVALID", f"{cid}: component {candidate.component_id} is not registered")
        return
    if component.availability != "AVAILABLE":
        found.add("BLOCKED", f"{cid}: component {component.component_id} is not available")
    bindings = _check_bindings(declaration, candidate, component, binding_ids, found)
    _check_mappings(declaration, cid, bindings, found)
    _check_resolutions(declaration, candidate, found)


def _check_bindings(
    declaration: CandidateExecutionDeclaration,
    candidate: PlanCandidate,
    component: ComponentDescriptor,
    binding_ids: set[str],
    found: _Findings,
) -> dict[str, NativeInputBinding]:
    """The native input bindings; returns the well-identified ones by id.

    ``binding_ids`` is shared by every declaration of the assessment (an id is unique across
    them); a native input the component declares and no binding fills is NOT_ESTABLISHED.
    """
    cid = candidate.candidate_id
    bound_contracts: set[str] = set()
    bindings: dict[str, NativeInputBinding] = {}
    for binding in declaration.native_input_bindings:
        if type(binding) is not NativeInputBinding:
            found.add("INVALID", f"{cid}: native input binding is not a NativeInputBinding")
            continue
        bid = binding.binding_id
        if not _is_text(bid) or bid in binding_ids:
            found.add("INVALID", f"{cid}: binding id {bid!r} is empty or duplicated")
            continue
        binding_ids.add(bid)
        bindings[bid] = binding
        _check_binding(binding, candidate, component, bound_contracts, found)
    missing = sorted(set(component.native_inputs) - bound_contracts)
    if missing:
        found.add("NOT_ESTABLISHED", f"missing native input bindings for {cid}: {missing}")
    return bindings


def _check_binding(
    binding: NativeInputBinding,
    candidate: PlanCandidate,
    component: ComponentDescriptor,
    bound_contracts: set[str],
    found: _Findings,
) -> None:
    """One binding's fields; a contract it fills correctly joins ``bound_contracts``."""
    cid, bid = candidate.candidate_id, binding.binding_id
    if not _same(binding.candidate_id, cid) or not _same(
        binding.component_id, candidate.component_id
    ):
        found.add("INVALID", f"{cid}: binding {bid} names another candidate or component")
    if not _same(binding.hole_id, candidate.hole_id):
        found.add("INVALID", f"{cid}: binding {bid} names another hole")
    contract = binding.native_input_contract
    if type(contract) is not str or contract not in component.native_inputs:
        found.add(
            "INVALID",
            f"{cid}: binding {bid} native input contract {contract!r} is not declared by "
            f"{component.component_id}",
        )
    elif contract in bound_contracts:
        found.add("INVALID", f"{cid}: native input contract {contract!r} bound twice")
    else:
        bound_contracts.add(contract)
    if not is_bare_hex(binding.input_sha256):
        found.add("INVALID", f"{cid}: binding {bid} input_sha256 is not bare 64-hex")
    schema = binding.schema_id
    if schema is not None and (
        type(schema) is not str or schema not in component.accepted_schema_ids
    ):
        found.add(
            "INVALID",
            f"{cid}: native input schema {schema!r} is not accepted by {component.component_id}",
        )
    if binding.media_type is not None and not _is_text(binding.media_type):
        found.add("INVALID", f"{cid}: binding {bid} media_type is not a string")


def _check_mappings(
    declaration: CandidateExecutionDeclaration,
    cid: str,
    bindings: dict[str, NativeInputBinding],
    found: _Findings,
) -> None:
    """The evidence mappings: one per binding, at distinct positions ``0..n-1``."""
    mapped: set[str] = set()
    indices: list[int] = []
    mapping_ids: set[str] = set()
    for mapping in declaration.evidence_mappings:
        if type(mapping) is not PlannedEvidenceMapping:
            found.add("INVALID", f"{cid}: evidence mapping is not a PlannedEvidenceMapping")
            continue
        if not _is_text(mapping.mapping_id) or mapping.mapping_id in mapping_ids:
            found.add("INVALID", f"{cid}: mapping id {mapping.mapping_id!r} empty or duplicated")
        mapping_ids.add(str(mapping.mapping_id))
        if not _same(mapping.candidate_id, cid):
            found.add("INVALID", f"{cid}: mapping {mapping.mapping_id} names another candidate")
        target = bindings.get(mapping.binding_id) if type(mapping.binding_id) is str else None
        if target is None:
            found.add("INVALID", f"{cid}: mapping {mapping.mapping_id} names no binding of {cid}")
            continue
        _check_mapping(mapping, cid, target, mapped, indices, found)
    if len(set(indices)) != len(indices) or any(not 0 <= i < len(bindings) for i in indices):
        found.add(
            "INVALID", f"{cid}: evidence indices are not distinct positions 0..{len(bindings) - 1}"
        )
    unmapped = sorted(set(bindings) - mapped)
    if unmapped:
        found.add("NOT_ESTABLISHED", f"missing evidence mappings for {cid}: {unmapped}")


def _check_mapping(
    mapping: PlannedEvidenceMapping,
    cid: str,
    target: NativeInputBinding,
    mapped: set[str],
    indices: list[int],
    found: _Findings,
) -> None:
    """One mapping of ``target``: noted in ``mapped``, its integer index in ``indices``."""
    if mapping.binding_id in mapped:
        found.add("INVALID", f"{cid}: binding {mapping.binding_id} mapped twice")
    mapped.add(mapping.binding_id)
    if not is_prefixed_digest(mapping.evidence_ref) or mapping.evidence_ref != (
        f"sha256:{target.input_sha256}"
    ):
        found.add(
            "INVALID",
            f"{cid}: mapping {mapping.mapping_id} evidence_ref does not bind the input "
            f"digest of {mapping.binding_id}",
        )
    if type(mapping.evidence_index) is not int:
        found.add("INVALID", f"{cid}: mapping {mapping.mapping_id} index is not an integer")
    else:
        indices.append(mapping.evidence_index)


def _check_resolutions(
    declaration: CandidateExecutionDeclaration, candidate: PlanCandidate, found: _Findings
) -> None:
    """The prerequisite resolutions: every required one but the ``AUTHORITY:`` ones, once."""
    cid = candidate.candidate_id
    required = _required(candidate)
    resolved: set[str] = set()
    for resolution in declaration.prerequisite_resolutions:
        name = _resolution_name(resolution, cid, required, resolved, found)
        if name is None:
            continue
        resolved.add(name)
        _check_resolution(resolution, cid, name, found)
    outstanding = sorted(p for p in required - resolved if not p.startswith(AUTHORITY_PREFIX))
    if outstanding:
        found.add("NOT_ESTABLISHED", f"missing prerequisite resolutions for {cid}: {outstanding}")


def _resolution_name(
    resolution: object, cid: str, required: set[str], resolved: set[str], found: _Findings
) -> str | None:
    """The prerequisite ``resolution`` may resolve, or ``None`` (with its finding) when none."""
    if type(resolution) is not PrerequisiteResolution:
        found.add("INVALID", f"{cid}: resolution is not a PrerequisiteResolution")
        return None
    name = resolution.prerequisite
    if not _same(resolution.candidate_id, cid):
        found.add("INVALID", f"{cid}: resolution of {name!r} names another candidate")
    if type(name) is not str:
        found.add("INVALID", f"{cid}: prerequisite name is not a string")
        return None
    if name.startswith(AUTHORITY_PREFIX):
        found.add(
            "INVALID",
            f"{cid}: {name} is resolved by the authorization decision, not a resolution",
        )
        return None
    if name not in required:
        kind = "invented rule profile" if name.startswith(RULE_PROFILE_PREFIX) else "prerequisite"
        found.add("INVALID", f"{cid}: {kind} {name} is not required by the candidate")
        return None
    if name in resolved:
        found.add("INVALID", f"{cid}: {name} resolved twice")
        return None
    return name


def _check_resolution(
    resolution: PrerequisiteResolution, cid: str, name: str, found: _Findings
) -> None:
    """One resolution's values: a boolean, bare-hex evidence (the pinned digest), a reason."""
    if type(resolution.resolved) is not bool:
        found.add("INVALID", f"{cid}: resolution of {name} is not a boolean")
        return
    evidence = resolution.evidence_sha256
    if evidence is not None and not is_bare_hex(evidence):
        found.add("INVALID", f"{cid}: evidence_sha256 for {name} is not bare 64-hex")
    if type(resolution.reason) is not str:
        found.add("INVALID", f"{cid}: reason for {name} is not a string")
    pinned = _pinned_digest(name)
    if pinned is not None and evidence is not None and f"sha256:{evidence}" != pinned:
        found.add("INVALID", f"{cid}: evidence for {name} is a different exact digest")
    if not resolution.resolved:
        found.add("BLOCKED", f"{cid}: prerequisite {name} is unresolved: {resolution.reason}")


def _check_authorization(
    authorization: object, candidates: list[PlanCandidate], planned: set[str], found: _Findings
) -> None:
    if authorization is None:
        found.add("NOT_ESTABLISHED", "no authorization decision was supplied")
        return
    if type(authorization) is not SuppliedAuthorizationDecision:
        found.add("INVALID", "authorization is not a SuppliedAuthorizationDecision")
        return
    decision = authorization.decision
    if type(decision) is not str or decision not in AUTHORIZATION_DECISIONS:
        found.add("INVALID", f"authorization decision {decision!r} is not recognised")
        return
    covered = set(authorization.candidate_ids)
    if any(type(c) is not str for c in covered):
        found.add("INVALID", "authorization candidate ids must be strings")
        return
    strangers = sorted(covered - planned)
    if strangers:
        found.add("INVALID", f"authorization names candidates outside the plan: {strangers}")
    _judge_decision(authorization, candidates, covered, found)


def _judge_decision(
    authorization: SuppliedAuthorizationDecision,
    candidates: list[PlanCandidate],
    covered: set[str],
    found: _Findings,
) -> None:
    """What a recognised decision says of the declared candidates (it covers ``covered``)."""
    decision = authorization.decision
    needs = sorted(
        c.candidate_id
        for c in candidates
        if any(p.startswith(AUTHORITY_PREFIX) for p in c.prerequisites)
    )
    declared = {c.candidate_id for c in candidates}
    if decision == "DENIED":
        found.add("BLOCKED", f"authorization denied: {authorization.reason}")
    elif decision == "UNKNOWN":
        found.add("NOT_ESTABLISHED", "authorization is UNKNOWN")
    elif decision == "NOT_REQUIRED":
        if needs:
            found.add("INVALID", f"authorization declared NOT_REQUIRED but required by {needs}")
    else:
        uncovered = sorted(declared - covered)
        if uncovered:
            found.add("NOT_ESTABLISHED", f"authorization does not cover {uncovered}")


def _check_reassessment(
    reassessment: object, candidates: list[PlanCandidate], planned: set[str], found: _Findings
) -> None:
    if reassessment is None:
        found.add("NOT_ESTABLISHED", "no post-execution reassessment contract was supplied")
        return
    if type(reassessment) is not PostExecutionReassessmentContract:
        found.add("INVALID", "reassessment is not a PostExecutionReassessmentContract")
        return
    if not _is_text(reassessment.contract_id):
        found.add("INVALID", "reassessment contract_id is empty")
    if any(not _is_text(c) for c in (*reassessment.candidate_ids, *reassessment.checks)):
        found.add("INVALID", "reassessment candidate ids and checks must be non-empty strings")
        return
    declared = {c.candidate_id for c in candidates}
    strangers = sorted(set(reassessment.candidate_ids) - planned)
    if strangers:
        found.add("INVALID", f"reassessment names candidates outside the plan: {strangers}")
    uncovered = sorted(declared - set(reassessment.candidate_ids))
    if uncovered:
        found.add("NOT_ESTABLISHED", f"reassessment does not cover {uncovered}")
    if not reassessment.checks:
        found.add("NOT_ESTABLISHED", "reassessment contract names no check")


def assess_execution_readiness(
    analysis: object,
    plan: object,
    registry: object,
    declarations: Sequence[object] | object,
    authorization: object,
    reassessment: object,
    package: object = None,
) -> ExecutionReadinessReport:
    """Assess declaration readiness; never raises, never executes (see the module rules)."""
    found = _Findings()
    checked: ValidationPlan | None = None
    declared_ids: list[str] = []
    try:
        checked = _check_plan(analysis, plan, registry, package, found)
        if checked is not None:
            assert isinstance(registry, ComponentRegistry)
            candidates = _check_declarations(checked, registry, declarations, declared_ids, found)
            planned = {c.candidate_id for c in checked.candidates}
            _check_authorization(authorization, candidates, planned, found)
            _check_reassessment(reassessment, candidates, planned, found)
    except (PlanningError, CatalogError, TypeError, ValueError, AttributeError) as error:
        found.add("INVALID", f"readiness inputs are malformed: {type(error).__name__}: {error}")
    except Exception as error:  # readiness answers, it does not raise
        found.add("INVALID", f"readiness inputs could not be assessed: {type(error).__name__}")
    package_digest = checked.package_digest if checked is not None else None
    return ExecutionReadinessReport(
        status=found.status(),
        findings=found.sorted(),
        analysis_digest=_digest_of(analysis, "digest")
        if type(analysis) is ValidationAnalysis
        else None,
        plan_digest=_digest_of(plan, "digest") if type(plan) is ValidationPlan else None,
        registry_digest=(
            _digest_of(registry, "canonical_digest")
            if isinstance(registry, ComponentRegistry)
            else None
        ),
        package_digest=package_digest,
        candidate_ids=tuple(sorted(declared_ids)),
    )


def _check_declarations(
    checked: ValidationPlan,
    registry: ComponentRegistry,
    declarations: Sequence[object] | object,
    declared_ids: list[str],
    found: _Findings,
) -> list[PlanCandidate]:
    """Each declaration against the plan; returns the candidates whose declaration was checked.

    ``declared_ids`` receives every planned candidate declared (once), as it is met: the report
    names them even when a later declaration raises.
    """
    if isinstance(declarations, (str, bytes)) or not isinstance(declarations, Sequence):
        found.add("INVALID", "declarations must be a sequence")
        declarations = ()
    candidates: list[PlanCandidate] = []
    binding_ids: set[str] = set()
    for declaration in declarations:
        candidate = _declared_candidate(checked, declaration, declared_ids, found)
        if candidate is None:
            continue
        assert type(declaration) is CandidateExecutionDeclaration
        candidates.append(candidate)
        _check_declaration(declaration, candidate, registry, binding_ids, found)
    if not declared_ids:
        found.add("NOT_ESTABLISHED", "no candidate execution was declared")
    return candidates


def _declared_candidate(
    checked: ValidationPlan, declaration: object, declared_ids: list[str], found: _Findings
) -> PlanCandidate | None:
    """The planned candidate ``declaration`` is for, or ``None`` (with its finding)."""
    if type(declaration) is not CandidateExecutionDeclaration:
        found.add("INVALID", "a declaration is not a CandidateExecutionDeclaration")
        return None
    candidate = (
        checked.candidate(declaration.candidate_id)
        if type(declaration.candidate_id) is str
        else None
    )
    if candidate is None:
        found.add(
            "INVALID",
            f"declared candidate {declaration.candidate_id!r} is not in the plan",
        )
        return None
    if candidate.candidate_id in declared_ids:
        found.add("INVALID", f"candidate {candidate.candidate_id} declared twice")
        return None
    declared_ids.append(candidate.candidate_id)
    if not _same(declaration.component_id, candidate.component_id):
        found.add(
            "INVALID",
            f"{candidate.candidate_id}: declared component differs from the plan",
        )
        return None
    return candidate


def _digest_of(value: object, method: str) -> str | None:
    """``value.method()`` when it answers a string; ``None`` when it raises or answers else."""
    try:
        result = getattr(value, method)()
    except Exception:
        return None
    return result if type(result) is str else None


def _record(data: object, cls: type[Any], required: set[str], optional: set[str]) -> Any:
    if type(data) is not dict:
        raise PlanningError(f"a {cls.__name__} must be a JSON object")
    keys = set(data)
    if not required <= keys or not keys <= required | optional:
        raise PlanningError(
            f"{cls.__name__} keys must be {sorted(required)} plus optional {sorted(optional)}"
        )
    return cls(**data)


def _list(data: object, what: str) -> list[Any]:
    if type(data) is not list:
        raise PlanningError(f"{what} must be a JSON array")
    return data


def declarations_from_json(data: object) -> tuple[CandidateExecutionDeclaration, ...]:
    """Parse a JSON array of candidate declarations (shape only; readiness judges values)."""
    out = []
    for item in _list(data, "declarations"):
        if type(item) is not dict:
            raise PlanningError("a declaration must be a JSON object")
        fields = dict(item)
        fields["native_input_bindings"] = tuple(
            _record(
                b,
                NativeInputBinding,
                {
                    "binding_id",
                    "candidate_id",
                    "hole_id",
                    "component_id",
                    "native_input_contract",
                    "input_sha256",
                },
                {"schema_id", "media_type"},
            )
            for b in _list(fields.get("native_input_bindings"), "native_input_bindings")
        )
        fields["evidence_mappings"] = tuple(
            _record(
                m,
                PlannedEvidenceMapping,
                {"mapping_id", "candidate_id", "binding_id", "evidence_index", "evidence_ref"},
                set(),
            )
            for m in _list(fields.get("evidence_mappings"), "evidence_mappings")
        )
        fields["prerequisite_resolutions"] = tuple(
            _record(
                r,
                PrerequisiteResolution,
                {"candidate_id", "prerequisite", "resolved"},
                {"evidence_sha256", "reason"},
            )
            for r in _list(fields.get("prerequisite_resolutions"), "prerequisite_resolutions")
        )
        out.append(
            _record(
                fields,
                CandidateExecutionDeclaration,
                {
                    "candidate_id",
                    "component_id",
                    "native_input_bindings",
                    "evidence_mappings",
                    "prerequisite_resolutions",
                },
                set(),
            )
        )
    return tuple(out)


def authorization_from_json(data: object) -> SuppliedAuthorizationDecision:
    """Parse ``{decision, candidate_ids, authority?, reason?}``."""
    if type(data) is dict and type(data.get("candidate_ids")) is not list:
        raise PlanningError("authorization candidate_ids must be a JSON array")
    result: SuppliedAuthorizationDecision = _record(
        data, SuppliedAuthorizationDecision, {"decision", "candidate_ids"}, {"authority", "reason"}
    )
    return result


def reassessment_from_json(data: object) -> PostExecutionReassessmentContract:
    """Parse ``{contract_id, candidate_ids, checks}``."""
    if type(data) is dict and not all(
        type(data.get(k)) is list for k in ("candidate_ids", "checks")
    ):
        raise PlanningError("reassessment candidate_ids and checks must be JSON arrays")
    result: PostExecutionReassessmentContract = _record(
        data, PostExecutionReassessmentContract, {"contract_id", "candidate_ids", "checks"}, set()
    )
    return result


__all__ += ["authorization_from_json", "declarations_from_json", "reassessment_from_json"]
