"""docs/spec/formation.md §8 ``test_formation_catalog.py``, adapted to this project's
implementation refs.

Each case is named after the reference test it reproduces."""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
from typing import Any

import pytest
import testdata

import catalog
import mechanism.formation as formation
from catalog import StoredPackage, assess_execution_readiness, plan_validation
from mechanism.canonical import canonical_bytes, canonical_digest
from session import EvidenceStore, MechanismOutcome, VerificationSession

PROFILE = "sha256:271760d604e1ade55cba4974c658b92263bd3ee8ae343677dd91d0e713fb677f"
FORMATION_CLAIM_BOUNDARY = (
    "A planned mechanism match does not establish rule-profile compatibility or execution. "
    "Finite formation does not establish source self-derivation, grounding, completeness, "
    "authority axiom agency, historical execution, implementation independence, or a "
    "silo-status upgrade."
)
SUBJECT = "VSTD-TYPED-FORMATION-0.1"
CERTIFICATE = "VSTD-TYPED-FORMATION-CERTIFICATE-0.1"


def _sha256(data: bytes | None) -> str:
    assert data is not None
    return hashlib.sha256(data).hexdigest()


ROLES: dict[str, dict[str, Any]] = {
    "component:artifact-network-typed-formation-producer": {
        "kind": "PROVER",
        "implementation_ref": "mechanism.formation:produce_formation_certificate",
        "interaction_modes": ["STATIC"],
        "accepted_schema_ids": [SUBJECT],
        "emitted_schema_ids": [CERTIFICATE],
        "mechanism_ids": ["mechanism:typed-formation-certificate-production"],
        "relation_ids": ["relation:produces-typed-formation-certificate"],
        "extra_prerequisites": [],
        "native_result_vocabulary": [],
        "native_versions": ["VSTD-TYPED-FORMATION-PROFILE-0.1", PROFILE],
        "tag": "certificate",
    },
    "component:artifact-network-typed-formation-checker": {
        "kind": "CHECKER",
        "implementation_ref": "mechanism.formation:check_formation",
        "interaction_modes": ["OFFLINE_REPLAY"],
        "accepted_schema_ids": [SUBJECT, CERTIFICATE],
        "emitted_schema_ids": [],
        "mechanism_ids": ["mechanism:typed-formation-certificate-check"],
        "relation_ids": ["relation:checks-typed-formation-certificate"],
        "extra_prerequisites": [],
        "native_result_vocabulary": ["CHECKED", "INVALID", "UNKNOWN"],
        "native_versions": ["VSTD-TYPED-FORMATION-PROFILE-0.1", PROFILE],
        "tag": "certificate",
    },
    "component:artifact-network-typed-formation-receipt-rechecker": {
        "kind": "CHECKER",
        "implementation_ref": "mechanism.formation:recheck_formation_receipt",
        "interaction_modes": ["OFFLINE_REPLAY"],
        "accepted_schema_ids": [
            "VSTD-SILO-COMMIT-0.1",
            "VSTD-SILO-FORMATION-RECEIPT-0.1",
            "VSTD-SILO-FORMATION-SELECTION-0.1",
        ],
        "emitted_schema_ids": [],
        "mechanism_ids": ["mechanism:typed-formation-receipt-recheck"],
        "relation_ids": ["relation:rechecks-typed-formation-receipt"],
        "extra_prerequisites": ["EXACT_FORMATION_SELECTION", "OBSERVED_CENSUS_BYTES"],
        "native_result_vocabulary": sorted(
            ["BOUND", "COMPLETE", "INCOMPLETE", "MATCHED", "CHECKED", "INVALID", "UNKNOWN"]
        ),
        "native_versions": ["VSTD-TYPED-FORMATION-PROFILE-0.1", PROFILE],
        "tag": "receipt",
    },
    "component:artifact-network-typed-formation-session-mechanism": {
        "kind": "ADAPTER",
        "implementation_ref": "mechanism.formation:FormationPathCertificateMechanism.evaluate",
        "interaction_modes": ["OFFLINE_REPLAY"],
        "accepted_schema_ids": [],
        "emitted_schema_ids": [],
        "mechanism_ids": ["vstd.typed_formation.checked.0.1"],
        "relation_ids": ["relation:checks-bound-typed-formation-proposition"],
        "extra_prerequisites": [
            "DECLARED_CONTEXT_DIGESTS",
            "EXACT_BOUND_PROPOSITION",
            "EXPLICIT_MECHANISM_INSTANCE",
        ],
        "native_result_vocabulary": ["FAIL", "PASS", "UNKNOWN"],
        "native_versions": sorted(
            ["VSTD-TYPED-FORMATION-PROFILE-0.1", PROFILE, "vstd.typed_formation.checked.0.1"]
        ),
        "tag": "certificate",
    },
}


@pytest.mark.parametrize("component_id", sorted(ROLES))
def test_names_exact_native_roles_and_profile(component_id: str) -> None:
    role = ROLES[component_id]
    entry = catalog.reference_registry().get(component_id)
    assert entry is not None
    data = entry.to_dict()
    for key in (
        "kind",
        "implementation_ref",
        "interaction_modes",
        "accepted_schema_ids",
        "emitted_schema_ids",
        "mechanism_ids",
        "relation_ids",
        "native_result_vocabulary",
    ):
        assert data[key] == role[key], key
    assert data["native_versions"] == sorted(role["native_versions"])
    assert data["lifecycle"] == "EXPERIMENTAL"
    assert data["availability"] == "AVAILABLE"
    assert data["verifier_family_ids"] == ["artifact-network"]
    assert data["planning_surface_schema_ids"] == ["VSTD-2"]
    assert data["native_system"] == "Verifier Standard experimental finite typed formation"
    assert data["optional_dependencies"] == [] and data["trust_roots"] == []
    assert data["claim_boundary"] == FORMATION_CLAIM_BOUNDARY
    for word in ("self-derivation", "completeness", "agency", "execution"):
        assert word in data["claim_boundary"]
    assert data["execution_prerequisites"] == sorted(
        [
            "EXACT_NATIVE_INPUT",
            "EXACT_IMPLEMENTATION_COORDINATE",
            "RESOURCE_BOUNDS",
            f"EXACT_RULE_PROFILE:{PROFILE}",
            *role["extra_prerequisites"],
        ]
    )
    assert data["domain_tags"] == sorted(
        ["artifact", role["tag"], "experimental", "typed-formation"]
    )
    # The reference's profile path and this project's both appear in the transformation loss.
    assert "src/verifier/profiles/typed-formation-0.1.json" in data["transformation_loss"]
    assert "mechanism/formation/data/typed-formation-0.1.json" in data["transformation_loss"]
    assert data["native_inputs"] and all(isinstance(i, str) for i in data["native_inputs"])
    if data["kind"] == "ADAPTER":
        assert "unbound instance method" in data["freshness_behavior"]
        assert "FormationPathCertificateMechanism()" in data["freshness_behavior"]
        assert entry.names_unbound_method


def test_declared_constants_agree_with_the_mechanism() -> None:
    assert catalog.FORMATION_MECHANISM_ID == formation.MECHANISM_ID
    assert catalog.FORMATION_PROFILE_DIGEST == formation.PROFILE_DIGEST == PROFILE
    checker = catalog.reference_registry().get("component:artifact-network-typed-formation-checker")
    assert checker is not None
    assert set(checker.accepted_schema_ids) == {
        formation.SUBJECT_SCHEMA,
        formation.CERTIFICATE_SCHEMA,
    }


def test_profile_and_packaged_contract_are_exact_inert_resources(
    reference_package: StoredPackage,
) -> None:
    profile = reference_package.artifact_bytes("mechanism/formation/data/typed-formation-0.1.json")
    assert profile == formation.profile_bytes()
    assert "sha256:" + hashlib.sha256(profile).hexdigest() == formation.profile_digest() == PROFILE
    schema = reference_package.artifact_bytes(
        "mechanism/formation/data/vstd-typed-formation-0.1.schema.json"
    )
    assert schema == formation.schema_bytes()
    assert _sha256(schema) == testdata.reference_sha256(
        "mechanism/formation/data/vstd-typed-formation-0.1.schema.json"
    )
    assert _sha256(profile) == testdata.reference_sha256(
        "mechanism/formation/data/typed-formation-0.1.json"
    )
    spec = reference_package.artifact_bytes(
        "catalog/data/specifications/vstd-typed-formation-0.1.txt"
    )
    assert _sha256(spec) == testdata.reference_sha256(
        "catalog/data/specifications/vstd-typed-formation-0.1.txt"
    )
    # Inert: the profile is data (a JSON object with the context meaning), never code.
    assert "context_meaning" in json.loads(profile)


def test_packaged_adapter_sources_reproduce_its_implementation_coordinate(
    reference_package: StoredPackage,
) -> None:
    """The package retains exactly the adapter's source inventory, so its digest is recomputable."""
    sources = []
    for path, digest in formation.SOURCE_INVENTORY:
        data = reference_package.artifact_bytes(path)
        assert data is not None, path
        assert "sha256:" + hashlib.sha256(data).hexdigest() == digest
        sources.append({"path": path, "digest": digest})
    identity = {
        "schema_version": "VSTD-TYPED-FORMATION-SOURCE-IDENTITY-0.1",
        "profile_digest": PROFILE,
        "sources": sources,
    }
    assert canonical_digest(identity) == formation.MECHANISM_DIGEST
    manifest = reference_package.manifest
    adapter = next(
        c for c in manifest["components"] if c["component_id"].endswith("session-mechanism")
    )
    assert {p for p, _ in formation.SOURCE_INVENTORY} <= set(adapter["artifact_paths"])
    assert adapter["implementation_path"] == "mechanism/formation/_mechanism.py"
    producer = next(c for c in manifest["components"] if c["component_id"].endswith("producer"))
    assert "mechanism/formation/_producer.py" not in adapter["artifact_paths"]
    assert producer["implementation_path"] == "mechanism/formation/_producer.py"


def _atom_subject() -> bytes:
    subject = {
        "schema_version": SUBJECT,
        "profile_digest": PROFILE,
        "context": {
            "ground_artifact_digest": "sha256:" + hashlib.sha256(b"ground").hexdigest(),
            "authority_axiom_agency_digest": "sha256:" + hashlib.sha256(b"agency").hexdigest(),
        },
        "nodes": [{"tag": "ATOM", "payload_digest": "sha256:" + "ab" * 32}],
        "root": 0,
    }
    return canonical_bytes(subject)


def _resolve(ref: str) -> Any:
    """What a caller does explicitly, outside the catalog: import and look the ref up."""
    module, _, attribute = ref.partition(":")
    target: Any = importlib.import_module(module)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


def test_entrypoints_execute_only_explicitly_and_retain_residuals() -> None:
    registry = catalog.reference_registry()
    refs = {c.component_id.rsplit("-", 1)[-1]: c.implementation_ref for c in registry.components}
    producer = _resolve(refs["producer"])
    checker = _resolve(refs["checker"])
    evaluate = _resolve(refs["mechanism"])
    assert list(inspect.signature(producer).parameters)[:1] == ["subject_bytes"]
    positional = [
        name
        for name, p in inspect.signature(checker).parameters.items()
        if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    ]
    assert positional == ["subject_bytes", "certificate_bytes"]
    assert list(inspect.signature(evaluate).parameters) == ["self", "binding", "evidence"]
    # The ref names an unbound method: it needs an explicit instance.
    assert inspect.isfunction(evaluate)

    subject = _atom_subject()
    certificate = producer(subject)
    report = checker(subject, certificate)
    assert report["status"] == "CHECKED"
    assert report["residual_obligations"] == list(formation.RESIDUAL_OBLIGATIONS)

    store = EvidenceStore()
    store.add(subject)
    store.add(certificate)
    session = VerificationSession(store)
    binding = formation.formation_binding(subject, certificate)
    before = session.evaluate(binding)
    assert before.outcome is MechanismOutcome.UNKNOWN  # nothing registered: nothing executed
    session.register(formation.FormationPathCertificateMechanism())
    after = session.evaluate(binding)
    assert after.outcome is MechanismOutcome.PASS
    assert after.observations["formation_report"] == report
    assert after.observations["residual_obligations"] == list(formation.RESIDUAL_OBLIGATIONS)


@pytest.mark.parametrize("component_id", sorted(ROLES))
def test_package_index_detection_plan_and_readiness_remain_nonexecuting(
    component_id: str, nonexecuting_run: dict[str, Any]
) -> None:
    assert nonexecuting_run["loaded"] == []  # no formation, descriptor or session protocol module
    result = nonexecuting_run["results"][component_id]
    search = result["search"]
    assert search["result"] == "DECLARED_MATCHES" and search["match_count"] == 1
    assert search["matches"][0]["component"]["component_id"] == component_id
    assert search["matches"][0]["package_sha256"] == result["digest"]
    assert search["execution_performed"] is False
    assert search["package_availability"] == "NOT_CHECKED"
    assert search["native_qualification"] == "NOT_ESTABLISHED"
    plan = result["plan"]
    assert plan["binding_scope"] == "STORED_PACKAGE"
    assert plan["package_digest"] == result["digest"]
    assert plan["execution_performed"] is False
    prerequisites = plan["candidates"][0]["prerequisites"]
    assert f"EXACT_RULE_PROFILE:{PROFILE}" in prerequisites
    assert "EVIDENCE_BYTES" in prerequisites
    assert any(p.startswith("PACKAGE_DEPENDENCY:") for p in prerequisites)
    readiness = result["readiness"]
    assert readiness["status"] == "READY", readiness["findings"]
    assert readiness["execution_performed"] is False
    assert readiness["authorization_granted_by_module"] is False


def _bad_pair(case: str) -> tuple[bytes, bytes, str]:
    subject = _atom_subject()
    if case == "profile":
        data = json.loads(subject)
        data["profile_digest"] = "sha256:" + "00" * 32
        foreign = canonical_bytes(data)
        return foreign, formation.produce_formation_certificate(subject), "UNKNOWN"
    if case == "premises":
        data = json.loads(subject)
        data["nodes"].append({"tag": "ATOM", "payload_digest": "sha256:" + "cd" * 32})
        two = canonical_bytes(data)
        certificate = json.loads(formation.produce_formation_certificate(two))
        certificate["steps"][1]["premises"] = [1, 0]
        return two, canonical_bytes(certificate), "INVALID"
    assert case == "swapped"
    certificate = formation.produce_formation_certificate(subject)
    return certificate, subject, "UNKNOWN"


@pytest.mark.parametrize("case", ["profile", "premises", "swapped"])
def test_planning_match_cannot_promote_unsupported_or_invalid_native_evidence(
    case: str, reference_package: StoredPackage, kit: Any
) -> None:
    """Readiness can be READY for pairs the native checker refuses: READY is declarations only."""
    first, second, native_status = _bad_pair(case)
    component_id = "component:artifact-network-typed-formation-checker"
    analysis = kit.analysis_for(component_id)
    registry = reference_package.registry()
    plan = plan_validation(analysis, registry, package=reference_package)
    (candidate,) = plan.candidates
    # Declared schemas follow the bytes' claimed roles: for swapped roles the certificate is
    # bound to the subject contract with the certificate schema, which is still a member of the
    # component-wide accepted set.
    schemas = [SUBJECT, CERTIFICATE] if case != "swapped" else [CERTIFICATE, SUBJECT]
    declaration = kit.honest_declaration(candidate, [first, second], schemas)
    report = assess_execution_readiness(
        analysis,
        plan,
        registry,
        [declaration],
        kit.authorized(plan),
        kit.reassess(plan),
        package=reference_package,
    )
    assert report.status == "READY", report.findings
    assert report.to_dict()["execution_performed"] is False
    native = formation.check_formation(first, second)
    assert native["status"] == native_status
    assert native["observation"] is None
    if case == "swapped":
        assert native["reason_codes"] == ["FORMATION_PROFILE_UNSUPPORTED"]
        assert native["subject_digest"] is None


def test_plan_object_carries_the_stored_package_binding(
    reference_package: StoredPackage, kit: Any
) -> None:
    """docs/spec/formation.md §7.3: plan_validation(analysis, registry, package=package) yields
    binding_scope STORED_PACKAGE, package_digest, registry_digest, execution_performed False —
    on the plan object as on its JSON form."""
    analysis = kit.analysis_for("component:artifact-network-typed-formation-checker")
    registry = reference_package.registry()
    plan = plan_validation(analysis, registry, package=reference_package)
    assert plan.binding_scope == "STORED_PACKAGE"
    assert plan.package_digest == catalog.validate_package(reference_package)
    assert plan.registry_digest == registry.canonical_digest()
    assert plan.execution_performed is False
    data = plan.to_dict()
    for key in ("schema_version", "execution_performed", "claim_boundary"):
        assert data[key] == getattr(plan, key)
