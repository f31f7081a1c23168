"""The descriptor mechanism's stage entries: declared constants agree with the mechanism, the
package reproduces its implementation coordinate, entrypoints run only when called explicitly,
and the declaration pipeline never imports it."""

from __future__ import annotations

import hashlib
import importlib
import inspect
from typing import Any

import pytest
import testdata

import catalog
import mechanism.descriptor as descriptor
import mechanism.descriptor._mechanism as descriptor_mechanism
from catalog import StoredPackage
from mechanism.canonical import canonical_digest, digest_bytes
from session import EvidenceStore, MechanismOutcome, VerificationSession

FAMILY = "t81-experiment-descriptor"
ADAPTER = "component:t81-experiment-descriptor-session-mechanism"


def _descriptor_components() -> list[catalog.ComponentDescriptor]:
    return [c for c in catalog.reference_registry().components if FAMILY in c.verifier_family_ids]


def test_every_separate_stage_has_an_entry() -> None:
    kinds = sorted((c.kind, c.component_id) for c in _descriptor_components())
    assert kinds == [
        ("ADAPTER", ADAPTER),
        ("AUTHORIZER", "component:t81-host-final-authorization"),
        ("CHECKER", "component:t81-experiment-descriptor-preflight"),
        ("CHECKER", "component:t81-validated-operation-discovery"),
        ("PROVER", "component:t81-experiment-descriptor-encoder"),
        ("PROVIDER", "component:native-weights-fixture-provider"),
        ("PROVIDER", "component:t81vm-fixture-provider"),
    ]


def test_declared_constants_agree_with_the_mechanism() -> None:
    assert catalog.DESCRIPTOR_MECHANISM_ID == descriptor.MECHANISM_ID
    pin = f"EXACT_COMPILED_CATALOG:{descriptor.CATALOG_DIGEST}"
    for component in _descriptor_components():
        assert pin in component.execution_prerequisites, component.component_id
        assert descriptor.SCHEMA in component.native_versions
        assert descriptor.PROFILE in component.native_versions
        for word in ("self-derivation", "completeness", "agency", "execution"):
            assert word in component.claim_boundary
    by_provider = {a.provider: a.representation for a in descriptor.CATALOG}
    registry = catalog.reference_registry()
    t81vm = registry.get("component:t81vm-fixture-provider")
    weights = registry.get("component:native-weights-fixture-provider")
    assert t81vm is not None and weights is not None
    assert t81vm.accepted_schema_ids == (by_provider["t81vm"],)
    assert weights.accepted_schema_ids == (by_provider["native-weights"],)


def test_adapter_entry_is_what_the_daemon_lists() -> None:
    entry = catalog.entry_for_mechanism(descriptor.MECHANISM_ID)
    assert entry is not None and entry["component_id"] == ADAPTER
    assert "unbound instance method" in entry["freshness_behavior"]
    assert "DescriptorAuthorizationMechanism(" in entry["freshness_behavior"]
    assert "AUTHORITY:HOST_FINAL_AUTHORIZATION" in entry["execution_prerequisites"]
    assert descriptor.default_mechanism().mechanism_id in entry["mechanism_ids"]


def test_packaged_adapter_sources_reproduce_its_implementation_coordinate(
    reference_package: StoredPackage,
) -> None:
    sources = []
    for name in descriptor_mechanism._SOURCE_FILES:
        path = (
            "mechanism/canonical.py"
            if name == "../canonical.py"
            else f"mechanism/descriptor/{name}"
        )
        data = reference_package.artifact_bytes(path)
        assert data is not None, path
        sources.append({"path": name.removeprefix("../"), "digest": digest_bytes(data)})
    identity = {
        "schema_version": "t81.descriptor-mechanism-source-identity.v1",
        "catalog_digest": descriptor.CATALOG_DIGEST,
        "sources": sources,
    }
    assert canonical_digest(identity) == descriptor.MECHANISM_DIGEST
    spec = reference_package.artifact_bytes(
        "catalog/data/specifications/t81-experiment-descriptor-v1.txt"
    )
    assert spec is not None
    assert hashlib.sha256(spec).hexdigest() == testdata.reference_sha256(
        "catalog/data/specifications/t81-experiment-descriptor-v1.txt"
    )


def _resolve(ref: str) -> Any:
    module, _, attribute = ref.partition(":")
    target: Any = importlib.import_module(module)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


def test_entrypoints_execute_only_explicitly() -> None:
    registry = catalog.reference_registry()
    expected = {
        "component:t81-experiment-descriptor-encoder": ["payload"],
        "component:t81-experiment-descriptor-preflight": ["data", "max_bytes"],
        "component:t81-host-final-authorization": [
            "self",
            "provider",
            "operation",
            "payload_reference",
        ],
        "component:t81vm-fixture-provider": ["program", "engine", "max_steps"],
        "component:native-weights-fixture-provider": ["payload", "max_bytes"],
        ADAPTER: ["self", "binding", "evidence"],
    }
    for component_id, parameters in expected.items():
        component = registry.get(component_id)
        assert component is not None
        target = _resolve(component.implementation_ref)
        assert list(inspect.signature(target).parameters) == parameters, component_id
    discovery = registry.get("component:t81-validated-operation-discovery")
    assert discovery is not None
    assert set(_resolve(discovery.implementation_ref)) == {"t81vm", "native-weights"}

    payload = descriptor.tisc_fixture_bytes()
    descriptor_bytes = descriptor.encode_descriptor(payload)
    store = EvidenceStore()
    store.add(descriptor_bytes)
    store.add(payload)
    session = VerificationSession(store)
    binding = descriptor.descriptor_binding(descriptor_bytes, payload)
    assert session.evaluate(binding).outcome is MechanismOutcome.UNKNOWN
    session.register(descriptor.default_mechanism())
    result = session.evaluate(binding)
    assert result.outcome is MechanismOutcome.PASS, result.details
    assert list(result.observations["residual_obligations"]) == list(
        descriptor.RESIDUAL_OBLIGATIONS
    )


@pytest.mark.parametrize("component_id", sorted(c.component_id for c in _descriptor_components()))
def test_descriptor_pipeline_remains_nonexecuting(
    component_id: str, nonexecuting_run: dict[str, Any]
) -> None:
    assert nonexecuting_run["loaded"] == []
    result = nonexecuting_run["results"][component_id]
    assert result["search"]["match_count"] == 1
    assert result["readiness"]["status"] == "READY", result["readiness"]["findings"]
    assert result["readiness"]["authorization_granted_by_module"] is False


def test_host_authority_cannot_be_waived_by_declaring_authorization_not_required(
    reference_package: StoredPackage, kit: Any
) -> None:
    component_id = "component:t81vm-fixture-provider"
    component = catalog.reference_registry().get(component_id)
    assert component is not None
    analysis = catalog.ValidationAnalysis(
        "a",
        [
            catalog.AnalysisHole(
                "h", "VSTD-2", "OFFLINE_REPLAY", relation_id=component.relation_ids[0]
            )
        ],
    )
    registry = reference_package.registry()
    plan = catalog.plan_validation(analysis, registry, package=reference_package)
    (candidate,) = plan.candidates
    declaration = kit.honest_declaration(candidate, [b"program", b"policy"])
    waived = catalog.SuppliedAuthorizationDecision("NOT_REQUIRED", [candidate.candidate_id])
    report = catalog.assess_execution_readiness(
        analysis,
        plan,
        registry,
        [declaration],
        waived,
        kit.reassess(plan),
        package=reference_package,
    )
    assert report.status == "INVALID"
    assert any("NOT_REQUIRED but required" in f for f in report.findings)
    wrong_catalog = catalog.PrerequisiteResolution(
        candidate.candidate_id,
        f"EXACT_COMPILED_CATALOG:{descriptor.CATALOG_DIGEST}",
        True,
        "00" * 32,
    )
    forged = catalog.CandidateExecutionDeclaration(
        declaration.candidate_id,
        declaration.component_id,
        declaration.native_input_bindings,
        declaration.evidence_mappings,
        [
            wrong_catalog if r.prerequisite == wrong_catalog.prerequisite else r
            for r in declaration.prerequisite_resolutions
        ],
    )
    report = catalog.assess_execution_readiness(
        analysis, plan, registry, [forged], kit.authorized(plan), kit.reassess(plan)
    )
    assert report.status == "INVALID"
    assert any("different exact digest" in f for f in report.findings)
