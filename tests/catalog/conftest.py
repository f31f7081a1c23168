"""Shared builders for catalog tests: real packages, honest declarations, a hostile source tree."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import catalog
from catalog import (
    AnalysisHole,
    CandidateExecutionDeclaration,
    NativeInputBinding,
    PlanCandidate,
    PlannedEvidenceMapping,
    PostExecutionReassessmentContract,
    PrerequisiteResolution,
    StoredPackage,
    SuppliedAuthorizationDecision,
    ValidationAnalysis,
    ValidationPlan,
)

SUBJECT_HOLE = {
    "component:artifact-network-typed-formation-producer": (
        "relation:produces-typed-formation-certificate",
        "STATIC",
    ),
    "component:artifact-network-typed-formation-checker": (
        "relation:checks-typed-formation-certificate",
        "OFFLINE_REPLAY",
    ),
    "component:artifact-network-typed-formation-receipt-rechecker": (
        "relation:rechecks-typed-formation-receipt",
        "OFFLINE_REPLAY",
    ),
    "component:artifact-network-typed-formation-session-mechanism": (
        "relation:checks-bound-typed-formation-proposition",
        "OFFLINE_REPLAY",
    ),
}


@pytest.fixture(scope="session")
def reference_package() -> StoredPackage:
    return catalog.build_package()


def analysis_for(component_id: str, hole_id: str = "hole-1") -> ValidationAnalysis:
    relation, mode = SUBJECT_HOLE[component_id]
    return ValidationAnalysis(
        "analysis:test", [AnalysisHole(hole_id, "VSTD-2", mode, relation_id=relation)]
    )


def honest_declaration(
    candidate: PlanCandidate,
    inputs: Sequence[bytes],
    schema_ids: Sequence[str | None] | None = None,
) -> CandidateExecutionDeclaration:
    """Complete, consistent declarations binding ``inputs`` to the contracts in declared order."""
    contracts = list(candidate.native_inputs)
    assert len(inputs) == len(contracts)
    schemas = list(schema_ids) if schema_ids is not None else [None] * len(inputs)
    bindings = []
    mappings = []
    for index, (contract, data, schema) in enumerate(zip(contracts, inputs, schemas, strict=True)):
        digest = hashlib.sha256(data).hexdigest()
        bindings.append(
            NativeInputBinding(
                binding_id=f"binding-{index}",
                candidate_id=candidate.candidate_id,
                hole_id=candidate.hole_id,
                component_id=candidate.component_id,
                native_input_contract=contract,
                input_sha256=digest,
                schema_id=schema,
                media_type="application/json",
            )
        )
        mappings.append(
            PlannedEvidenceMapping(
                mapping_id=f"mapping-{index}",
                candidate_id=candidate.candidate_id,
                binding_id=f"binding-{index}",
                evidence_index=index,
                evidence_ref=f"sha256:{digest}",
            )
        )
    resolutions = []
    for prerequisite in sorted({*candidate.prerequisites, "RUNTIME_AVAILABILITY"}):
        if prerequisite.startswith("AUTHORITY:"):
            continue
        evidence = None
        if prerequisite.startswith("EXACT_RULE_PROFILE:sha256:"):
            evidence = prerequisite.removeprefix("EXACT_RULE_PROFILE:sha256:")
        resolutions.append(
            PrerequisiteResolution(
                candidate.candidate_id, prerequisite, True, evidence, "declared by the test"
            )
        )
    return CandidateExecutionDeclaration(
        candidate.candidate_id, candidate.component_id, bindings, mappings, resolutions
    )


def authorized(plan: ValidationPlan) -> SuppliedAuthorizationDecision:
    return SuppliedAuthorizationDecision(
        "AUTHORIZED", [c.candidate_id for c in plan.candidates], "test host", "fixture"
    )


def reassess(plan: ValidationPlan) -> PostExecutionReassessmentContract:
    return PostExecutionReassessmentContract(
        "reassessment-1", [c.candidate_id for c in plan.candidates], ["recheck native result"]
    )


@pytest.fixture
def hostile_tree(tmp_path: Path) -> Path:
    """A source root whose component package raises on import (and whose module does too)."""
    root = tmp_path / "src"
    package = root / "boomcomp"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        textwrap.dedent(
            """
            raise RuntimeError("boomcomp was imported: the catalog must never do this")
            from boomcomp._impl import check as check_alias  # unreachable re-export
            from ._impl import Checker
            from ._impl import check
            """
        )
    )
    (package / "_impl.py").write_text(
        textwrap.dedent(
            """
            import sys
            sys.exit("boomcomp._impl was executed")


            def check(subject: bytes) -> dict:
                return {}


            class Checker:
                def evaluate(self, binding, evidence):
                    return None
            """
        )
    )
    (package / "data").mkdir()
    (package / "data" / "profile.json").write_bytes(b'{"rules":[]}')
    (package / "SPEC.txt").write_bytes(b"The boom component checks nothing.\n")
    return root


BuildDeclaration = Callable[..., CandidateExecutionDeclaration]


# In a fresh interpreter: build and write the package and index once, then for every registered
# component search, plan and assess readiness; print the results and which mechanism/session
# modules got imported (there must be none).
NONEXECUTING_SCRIPT = textwrap.dedent(
    """
    import hashlib, json, pathlib, sys
    import catalog
    from catalog import (AnalysisHole, CandidateExecutionDeclaration, NativeInputBinding,
        PlannedEvidenceMapping, PostExecutionReassessmentContract, PrerequisiteResolution,
        SuppliedAuthorizationDecision, ValidationAnalysis)
    outdir = pathlib.Path(sys.argv[1])
    catalog.write_build(catalog.build_package(), outdir)
    loaded = catalog.load_index(outdir)
    results = {}
    for entry in loaded.entries:
        component = entry.component
        component_id = component.component_id
        relation, mode = component.relation_ids[0], component.interaction_modes[0]
        stored = catalog.load_package(outdir / entry.package_path)
        digest = entry.validate_package(stored)
        found = loaded.search_exact("VSTD-2", mode, relation_id=relation)
        hole = AnalysisHole("h", "VSTD-2", mode, relation_id=relation)
        analysis = ValidationAnalysis("a", [hole])
        registry = stored.registry()
        plan = catalog.plan_validation(analysis, registry, package=stored)
        (candidate,) = plan.candidates
        bindings, mappings = [], []
        for i, contract in enumerate(candidate.native_inputs):
            h = hashlib.sha256(contract.encode()).hexdigest()
            bindings.append(NativeInputBinding(f"b{i}", candidate.candidate_id, "h",
                component_id, contract, h))
            mappings.append(PlannedEvidenceMapping(f"m{i}", candidate.candidate_id, f"b{i}",
                i, "sha256:" + h))
        resolutions = [PrerequisiteResolution(candidate.candidate_id, p, True)
            for p in sorted({*candidate.prerequisites, "RUNTIME_AVAILABILITY"})
            if not p.startswith("AUTHORITY:")]
        declaration = CandidateExecutionDeclaration(candidate.candidate_id, component_id,
            bindings, mappings, resolutions)
        report = catalog.assess_execution_readiness(analysis, plan, registry, [declaration],
            SuppliedAuthorizationDecision("AUTHORIZED", [candidate.candidate_id]),
            PostExecutionReassessmentContract("r", [candidate.candidate_id], ["recheck"]),
            package=stored)
        results[component_id] = {"digest": digest, "search": found, "plan": plan.to_dict(),
            "readiness": report.to_dict()}
    floors = ("session.canon", "session.cli")  # the package's floors (its __init__ loads nothing)
    loaded_names = sorted(m for m in sys.modules
        if m.startswith(("mechanism.formation", "mechanism.descriptor", "session"))
        and m != "session" and not any(m == f or m.startswith(f + ".") for f in floors))
    print(json.dumps({"results": results, "loaded": loaded_names}))
    """
)


@pytest.fixture(scope="session")
def nonexecuting_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One fresh-interpreter run of :data:`NONEXECUTING_SCRIPT` over every component."""
    outdir = tmp_path_factory.mktemp("nonexecuting") / "build"
    completed = subprocess.run(
        [sys.executable, "-c", NONEXECUTING_SCRIPT, str(outdir)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    result: dict[str, Any] = json.loads(completed.stdout)
    return result


class Kit:
    """Helpers exposed to test modules through the ``kit`` fixture (importlib mode)."""

    analysis_for = staticmethod(analysis_for)
    honest_declaration = staticmethod(honest_declaration)
    authorized = staticmethod(authorized)
    reassess = staticmethod(reassess)


@pytest.fixture(scope="session")
def kit() -> type[Kit]:
    return Kit
