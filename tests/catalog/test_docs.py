"""The worked example in docs/catalog.md runs as documented (files extracted from the doc)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import testdata

import catalog
from catalog import StoredPackage
from catalog._readiness import (
    authorization_from_json,
    declarations_from_json,
    reassessment_from_json,
)

ROOT = testdata.REPO
CANDIDATE = "candidate:h1:component:artifact-network-typed-formation-checker"
COMPONENT = "component:artifact-network-typed-formation-checker"


def _doc_files() -> dict[str, Any]:
    text = (ROOT / "docs" / "catalog.md").read_text(encoding="utf-8")
    files = {}
    for name, body in re.findall(r"<!-- file: (\S+) -->\n```json\n(.*?)```", text, re.S):
        body = body.replace('"CANDIDATE"', json.dumps(CANDIDATE))
        body = body.replace('"COMPONENT"', json.dumps(COMPONENT))
        files[name] = json.loads(body)
    return files


def test_documented_example_is_blocked_then_ready(reference_package: StoredPackage) -> None:
    files = _doc_files()
    assert sorted(files) == [
        "analysis.json",
        "authorization.json",
        "declarations.json",
        "reassessment.json",
    ]
    analysis = catalog.ValidationAnalysis.from_dict(files["analysis.json"])
    registry = reference_package.registry()
    plan = catalog.plan_validation(analysis, registry, package=reference_package)
    assert [c.candidate_id for c in plan.candidates] == [CANDIDATE]
    declarations = declarations_from_json(files["declarations.json"])
    for binding, name in zip(
        declarations[0].native_input_bindings, ["subject", "certificate"], strict=True
    ):
        data = testdata.read_fixture(f"formation/atom.{name}.json")
        assert binding.input_sha256 == hashlib.sha256(data).hexdigest()
    authorization = authorization_from_json(files["authorization.json"])
    reassessment = reassessment_from_json(files["reassessment.json"])

    def assess(decls: Any) -> catalog.ExecutionReadinessReport:
        return catalog.assess_execution_readiness(
            analysis, plan, registry, decls, authorization, reassessment, package=reference_package
        )

    report = assess(declarations)
    assert report.status == "BLOCKED"
    assert report.findings == (
        f"{CANDIDATE}: prerequisite RUNTIME_AVAILABILITY is unresolved: no worker scheduled yet",
    )
    files["declarations.json"][0]["prerequisite_resolutions"][-1]["resolved"] = True
    assert assess(declarations_from_json(files["declarations.json"])).status == "READY"
