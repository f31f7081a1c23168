"""Readiness: statuses, precedence, sorted findings, the fixed claim boundary, never raising."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import catalog
from catalog import (
    READINESS_CLAIM_BOUNDARY,
    CandidateExecutionDeclaration,
    NativeInputBinding,
    PlannedEvidenceMapping,
    PrerequisiteResolution,
    StoredPackage,
    SuppliedAuthorizationDecision,
    ValidationAnalysis,
    ValidationPlan,
    assess_execution_readiness,
    plan_validation,
)

CHECKER = "component:artifact-network-typed-formation-checker"
PROFILE = "sha256:271760d604e1ade55cba4974c658b92263bd3ee8ae343677dd91d0e713fb677f"
SUBJECT = "VSTD-TYPED-FORMATION-0.1"
CERTIFICATE = "VSTD-TYPED-FORMATION-CERTIFICATE-0.1"


@attrs.define
class Case:
    analysis: Any
    plan: Any
    registry: Any
    declarations: Any
    authorization: Any
    reassessment: Any
    package: Any

    def assess(self) -> catalog.ExecutionReadinessReport:
        return assess_execution_readiness(
            self.analysis,
            self.plan,
            self.registry,
            self.declarations,
            self.authorization,
            self.reassessment,
            package=self.package,
        )

    @property
    def declaration(self) -> CandidateExecutionDeclaration:
        value: CandidateExecutionDeclaration = self.declarations[0]
        return value

    def evolve_declaration(self, **changes: Any) -> None:
        self.declarations = [attrs.evolve(self.declaration, **changes)]


@pytest.fixture
def case(reference_package: StoredPackage, kit: Any) -> Case:
    analysis = kit.analysis_for(CHECKER)
    registry = reference_package.registry()
    plan = plan_validation(analysis, registry, package=reference_package)
    (candidate,) = plan.candidates
    declaration = kit.honest_declaration(
        candidate, [b"subject bytes", b"certificate bytes"], [SUBJECT, CERTIFICATE]
    )
    return Case(
        analysis,
        plan,
        registry,
        [declaration],
        kit.authorized(plan),
        kit.reassess(plan),
        reference_package,
    )


def _bindings(case: Case, **changes: Any) -> None:
    first, *rest = case.declaration.native_input_bindings
    case.evolve_declaration(native_input_bindings=[attrs.evolve(first, **changes), *rest])


def _mapping(case: Case, **changes: Any) -> None:
    first, *rest = case.declaration.evidence_mappings
    case.evolve_declaration(evidence_mappings=[attrs.evolve(first, **changes), *rest])


def _resolution(case: Case, prerequisite: str, **changes: Any) -> None:
    case.evolve_declaration(
        prerequisite_resolutions=[
            attrs.evolve(r, **changes) if r.prerequisite == prerequisite else r
            for r in case.declaration.prerequisite_resolutions
        ]
    )


def _add_resolution(case: Case, prerequisite: str, evidence: str | None = None) -> None:
    extra = PrerequisiteResolution(
        case.declaration.candidate_id, prerequisite, True, evidence, "made up"
    )
    case.evolve_declaration(
        prerequisite_resolutions=[*case.declaration.prerequisite_resolutions, extra]
    )


def _drop_resolution(case: Case, prerequisite: str) -> None:
    case.evolve_declaration(
        prerequisite_resolutions=[
            r for r in case.declaration.prerequisite_resolutions if r.prerequisite != prerequisite
        ]
    )


def _tamper_package(case: Case) -> None:
    path, data = case.package.artifacts[0]
    case.package = case.package.with_artifact(path, data[:-1] + bytes([data[-1] ^ 1]))


def _other_analysis(case: Case) -> None:
    case.analysis = ValidationAnalysis("analysis:other", case.analysis.holes)


def _registry_only_plan(case: Case) -> None:
    case.plan = plan_validation(case.analysis, case.registry)


def _forge_plan(case: Case) -> None:
    data = case.plan.to_dict()
    (candidate,) = data["candidates"]
    candidate["prerequisites"] = [p for p in candidate["prerequisites"] if p != "RESOURCE_BOUNDS"]
    case.plan = ValidationPlan.from_dict(data)


def _unknown_candidate(case: Case) -> None:
    case.evolve_declaration(candidate_id="candidate:hole-1:component:invented")


Mutation = Callable[[Case], None]

# (name, mutation, expected status, a substring the findings must contain)
TABLE: list[tuple[str, Mutation, str, str]] = [
    (
        "missing_native_input_bindings",
        lambda c: c.evolve_declaration(native_input_bindings=[], evidence_mappings=[]),
        "NOT_ESTABLISHED",
        "missing native input bindings for candidate:hole-1:",
    ),
    (
        "schema_outside_the_accepted_set",
        lambda c: _bindings(c, schema_id="VSTD-SILO-COMMIT-0.1"),
        "INVALID",
        "native input schema 'VSTD-SILO-COMMIT-0.1' is not accepted",
    ),
    (
        "invented_rule_profile",
        lambda c: _add_resolution(c, "EXACT_RULE_PROFILE:sha256:" + "ee" * 32, "ee" * 32),
        "INVALID",
        "invented rule profile EXACT_RULE_PROFILE:sha256:eeee",
    ),
    (
        "rule_profile_resolved_with_other_evidence",
        lambda c: _resolution(c, f"EXACT_RULE_PROFILE:{PROFILE}", evidence_sha256="ee" * 32),
        "INVALID",
        "is a different exact digest",
    ),
    (
        "unresolved_prerequisite",
        lambda c: _resolution(c, "RESOURCE_BOUNDS", resolved=False, reason="no budget"),
        "BLOCKED",
        "prerequisite RESOURCE_BOUNDS is unresolved: no budget",
    ),
    (
        "runtime_availability_not_resolved",
        lambda c: _drop_resolution(c, "RUNTIME_AVAILABILITY"),
        "NOT_ESTABLISHED",
        "missing prerequisite resolutions for candidate:hole-1:",
    ),
    (
        "authorization_unknown",
        lambda c: setattr(c, "authorization", attrs.evolve(c.authorization, decision="UNKNOWN")),
        "NOT_ESTABLISHED",
        "authorization is UNKNOWN",
    ),
    (
        "authorization_denied",
        lambda c: setattr(
            c, "authorization", attrs.evolve(c.authorization, decision="DENIED", reason="no")
        ),
        "BLOCKED",
        "authorization denied: no",
    ),
    (
        "authorization_missing",
        lambda c: setattr(c, "authorization", None),
        "NOT_ESTABLISHED",
        "no authorization decision",
    ),
    (
        "authorization_outside_vocabulary",
        lambda c: setattr(c, "authorization", attrs.evolve(c.authorization, decision="MAYBE")),
        "INVALID",
        "'MAYBE' is not recognised",
    ),
    (
        "authorization_not_covering_the_candidate",
        lambda c: setattr(c, "authorization", attrs.evolve(c.authorization, candidate_ids=[])),
        "NOT_ESTABLISHED",
        "authorization does not cover",
    ),
    (
        "reassessment_missing",
        lambda c: setattr(c, "reassessment", None),
        "NOT_ESTABLISHED",
        "no post-execution reassessment contract",
    ),
    (
        "reassessment_without_checks",
        lambda c: setattr(c, "reassessment", attrs.evolve(c.reassessment, checks=[])),
        "NOT_ESTABLISHED",
        "names no check",
    ),
    ("changed_package_artifact", _tamper_package, "INVALID", "stored package rejected"),
    ("plan_of_another_analysis", _other_analysis, "INVALID", "plan analysis_digest"),
    ("registry_only_plan_with_a_package", _registry_only_plan, "INVALID", "plan differs"),
    ("forged_plan_prerequisites", _forge_plan, "INVALID", "plan differs"),
    (
        "stored_package_plan_without_the_package",
        lambda c: setattr(c, "package", None),
        "NOT_ESTABLISHED",
        "stored package that was not supplied",
    ),
    ("undeclared_candidate", _unknown_candidate, "INVALID", "is not in the plan"),
    (
        "prefixed_input_digest",
        lambda c: _bindings(c, input_sha256="sha256:" + "ab" * 32),
        "INVALID",
        "input_sha256 is not bare 64-hex",
    ),
    (
        "mapping_binds_other_bytes",
        lambda c: _mapping(c, evidence_ref="sha256:" + "cd" * 32),
        "INVALID",
        "evidence_ref does not bind the input digest",
    ),
    (
        "mapping_missing",
        lambda c: c.evolve_declaration(evidence_mappings=c.declaration.evidence_mappings[1:]),
        "NOT_ESTABLISHED",
        "missing evidence mappings",
    ),
    (
        "duplicate_evidence_index",
        lambda c: _mapping(c, evidence_index=1),
        "INVALID",
        "evidence indices are not distinct",
    ),
    (
        "boolean_evidence_index",
        lambda c: _mapping(c, evidence_index=False),
        "INVALID",
        "index is not an integer",
    ),
    (
        "authority_resolved_outside_authorization",
        lambda c: _add_resolution(c, "AUTHORITY:HOST"),
        "INVALID",
        "resolved by the authorization decision",
    ),
    (
        "resolved_flag_not_boolean",
        lambda c: _resolution(c, "RESOURCE_BOUNDS", resolved=1),
        "INVALID",
        "is not a boolean",
    ),
    (
        "no_declarations",
        lambda c: setattr(c, "declarations", []),
        "NOT_ESTABLISHED",
        "no candidate execution was declared",
    ),
    (
        "undeclared_native_contract",
        lambda c: _bindings(c, native_input_contract="any bytes at all"),
        "INVALID",
        "native input contract 'any bytes at all' is not declared",
    ),
    (
        "binding_for_another_hole",
        lambda c: _bindings(c, hole_id="hole-2"),
        "INVALID",
        "names another hole",
    ),
    (
        "declared_component_differs",
        lambda c: c.evolve_declaration(
            component_id="component:artifact-network-typed-formation-producer"
        ),
        "INVALID",
        "declared component differs",
    ),
]


def test_complete_consistent_declarations_are_ready(case: Case) -> None:
    report = case.assess()
    assert report.status == "READY"
    assert report.findings == ()
    data = report.to_dict()
    assert data["schema_version"] == "VSTD-EXECUTION-READINESS-EXPERIMENTAL-0.1"
    assert data["execution_performed"] is False
    assert data["authorization_granted_by_module"] is False
    assert data["claim_boundary"] == READINESS_CLAIM_BOUNDARY
    assert data["package_digest"] == catalog.validate_package(case.package)
    assert data["plan_digest"] == case.plan.digest()
    assert data["candidate_ids"] == [case.declaration.candidate_id]


def test_not_required_authorization_is_consistent_without_authority_prerequisites(
    case: Case,
) -> None:
    case.authorization = SuppliedAuthorizationDecision("NOT_REQUIRED", [])
    assert case.assess().status == "READY"


@pytest.mark.parametrize(("name", "mutate", "status", "finding"), TABLE, ids=[t[0] for t in TABLE])
def test_readiness_table(
    case: Case, name: str, mutate: Mutation, status: str, finding: str
) -> None:
    mutate(case)
    report = case.assess()
    assert report.status == status, report.findings
    assert any(finding in f for f in report.findings), report.findings
    assert list(report.findings) == sorted(report.findings)
    assert report.to_dict()["claim_boundary"] == READINESS_CLAIM_BOUNDARY


def test_precedence_is_invalid_then_blocked_then_not_established(case: Case) -> None:
    _resolution(case, "RESOURCE_BOUNDS", resolved=False)  # BLOCKED
    case.reassessment = None  # NOT_ESTABLISHED
    report = case.assess()
    assert report.status == "BLOCKED"
    assert len(report.findings) == 2
    assert "no post-execution reassessment contract was supplied" in report.findings
    _bindings(case, schema_id="VSTD-SILO-COMMIT-0.1")  # INVALID
    report = case.assess()
    assert report.status == "INVALID"
    assert len(report.findings) == 3
    assert list(report.findings) == sorted(report.findings)


def test_role_pairing_is_not_established_by_readiness(case: Case) -> None:
    """Both schemas are members of the component-wide set: swapping them stays READY."""
    first, second = case.declaration.native_input_bindings
    case.evolve_declaration(
        native_input_bindings=[
            attrs.evolve(first, schema_id=second.schema_id),
            attrs.evolve(second, schema_id=first.schema_id),
        ]
    )
    assert case.assess().status == "READY"


def test_readiness_does_not_mutate_its_inputs(case: Case) -> None:
    before = (case.plan.to_dict(), case.declarations, case.authorization, case.reassessment)
    case.assess()
    assert (case.plan.to_dict(), case.declarations, case.authorization, case.reassessment) == before


@pytest.mark.parametrize(
    "junk",
    [None, "declarations", b"bytes", 3, [None], [{"candidate_id": "x"}], [[1, 2]]],
)
def test_malformed_inputs_are_invalid_never_raised(case: Case, junk: Any) -> None:
    case.declarations = junk
    report = case.assess()
    assert report.status in {"INVALID", "NOT_ESTABLISHED"}
    assert report.status == ("NOT_ESTABLISHED" if junk == [] else "INVALID")


def test_everything_missing_is_invalid_not_an_exception() -> None:
    report = assess_execution_readiness(None, None, None, None, None, None)
    assert report.status == "INVALID"
    assert report.to_dict()["execution_performed"] is False


_junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None)
@given(
    field=st.sampled_from(
        ["binding_id", "candidate_id", "hole_id", "input_sha256", "schema_id", "media_type"]
    ),
    value=_junk,
    resolved=_junk,
    decision=_junk,
)
def test_arbitrary_field_values_never_raise(
    reference_package: StoredPackage, kit: Any, field: str, value: Any, resolved: Any, decision: Any
) -> None:
    analysis = kit.analysis_for(CHECKER)
    registry = reference_package.registry()
    plan = plan_validation(analysis, registry)
    (candidate,) = plan.candidates
    declaration = kit.honest_declaration(candidate, [b"s", b"c"])
    first, *rest = declaration.native_input_bindings
    resolution, *others = declaration.prerequisite_resolutions
    declaration = attrs.evolve(
        declaration,
        native_input_bindings=[attrs.evolve(first, **{field: value}), *rest],
        prerequisite_resolutions=[attrs.evolve(resolution, resolved=resolved), *others],
    )
    authorization = SuppliedAuthorizationDecision(decision, [candidate.candidate_id])
    report = assess_execution_readiness(
        analysis, plan, registry, [declaration], authorization, kit.reassess(plan)
    )
    assert report.status in catalog._readiness.READINESS_STATUSES
    assert list(report.findings) == sorted(report.findings)


def test_declaration_records_parse_strictly_from_json(case: Case) -> None:
    from catalog._readiness import declarations_from_json

    data: list[dict[str, Any]] = [
        {
            "candidate_id": case.declaration.candidate_id,
            "component_id": case.declaration.component_id,
            "native_input_bindings": [
                attrs.asdict(b) for b in case.declaration.native_input_bindings
            ],
            "evidence_mappings": [attrs.asdict(m) for m in case.declaration.evidence_mappings],
            "prerequisite_resolutions": [
                attrs.asdict(r) for r in case.declaration.prerequisite_resolutions
            ],
        }
    ]
    parsed = declarations_from_json(data)
    assert parsed == tuple(case.declarations)
    data[0]["native_input_bindings"][0]["verdict"] = "READY"
    with pytest.raises(catalog.PlanningError):
        declarations_from_json(data)


_ = (NativeInputBinding, PlannedEvidenceMapping)


def test_findings_are_the_spec_messages_not_severity_prefixed(case: Case) -> None:
    """docs/spec/formation.md §7.3: missing bindings → NOT_ESTABLISHED ("missing native input
    bindings for …"); the finding is that message itself (sorted, unique), the status carries the
    severity."""
    case.evolve_declaration(native_input_bindings=[], evidence_mappings=[])
    report = case.assess()
    assert report.status == "NOT_ESTABLISHED"
    assert report.findings == (
        f"missing native input bindings for {case.declaration.candidate_id}: "
        f"{sorted(catalog.reference_registry().get(CHECKER).native_inputs)}",  # type: ignore[union-attr]
    )
    _resolution(case, "RESOURCE_BOUNDS", resolved=False, reason="no budget")
    report = case.assess()
    assert report.status == "BLOCKED"
    assert not any(f.startswith(("INVALID", "BLOCKED", "NOT_ESTABLISHED")) for f in report.findings)
    assert list(report.findings) == sorted(set(report.findings))


def test_report_exposes_the_fixed_fields_as_attributes(case: Case) -> None:
    """docs/spec/formation.md §7.3: the ExecutionReadinessReport itself (not only its dict) has the
    schema, ``execution_performed false``, ``authorization_granted_by_module false`` and the
    boundary."""
    for report in (case.assess(), assess_execution_readiness(None, None, None, None, None, None)):
        assert report.schema_version == "VSTD-EXECUTION-READINESS-EXPERIMENTAL-0.1"
        assert report.execution_performed is False
        assert report.authorization_granted_by_module is False
        assert report.claim_boundary == READINESS_CLAIM_BOUNDARY
        data = report.to_dict()
        for key in (
            "schema_version",
            "execution_performed",
            "authorization_granted_by_module",
            "claim_boundary",
        ):
            assert data[key] == getattr(report, key)


def test_a_decision_without_candidate_ids_is_constructible_and_unknown_not_established(
    case: Case,
) -> None:
    """docs/spec/formation.md §7.3: UNKNOWN authorization → NOT_ESTABLISHED, however spelled."""
    case.authorization = SuppliedAuthorizationDecision("UNKNOWN")
    report = case.assess()
    assert report.status == "NOT_ESTABLISHED"
    assert "authorization is UNKNOWN" in report.findings


def test_an_empty_declaration_is_not_established_with_every_gap_named(case: Case) -> None:
    """docs/spec/formation.md §7.3: missing native input bindings → NOT_ESTABLISHED; so are the
    missing prerequisite resolutions (every required one plus RUNTIME_AVAILABILITY)."""
    candidate_id = case.declaration.candidate_id
    case.declarations = [CandidateExecutionDeclaration(candidate_id, CHECKER)]
    report = case.assess()
    assert report.status == "NOT_ESTABLISHED"
    assert any(
        f.startswith(f"missing native input bindings for {candidate_id}") for f in report.findings
    )
    (missing,) = [f for f in report.findings if f.startswith("missing prerequisite resolutions")]
    for prerequisite in (*case.plan.candidates[0].prerequisites, "RUNTIME_AVAILABILITY"):
        assert prerequisite in missing


class _EqualsEverything(str):
    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = str.__hash__


def test_identifiers_are_exact_strings_not_lying_subclasses(case: Case) -> None:
    """Exact types where the declarations name things: a ``str`` subclass that claims equality
    with every id does not select a planned candidate, component or binding."""
    liar = _EqualsEverything("candidate:invented")
    case.evolve_declaration(candidate_id=liar)
    assert case.assess().status == "INVALID"
    case.declarations = [attrs.evolve(case.declaration, candidate_id=str(liar))]
    case.evolve_declaration(candidate_id=case.plan.candidates[0].candidate_id)
    case.evolve_declaration(component_id=_EqualsEverything("component:invented"))
    assert case.assess().status == "INVALID"
