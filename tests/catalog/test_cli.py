"""``evidenced catalog …``: one JSON document on stdout, exit codes.

The table of cases calls ``daemon.cli.main`` in-process; the smoke test at the end runs the real
``python -m daemon.cli`` process and requires the very same answer.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import attrs
import clirun
import pytest

import catalog

CHECKER = "component:artifact-network-typed-formation-checker"


def run(*args: str) -> tuple[int, Any, str]:
    result = clirun.in_process(["catalog", *args])
    assert "Traceback" not in result.err
    return result.returncode, result.document(), result.err


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("catalog") / "build"
    code, document, _ = run("package", "build", str(directory))
    assert code == 0
    assert document["component_count"] == len(catalog.reference_registry().components)
    assert document["execution_performed"] is False
    return directory


def test_list_prints_the_registry_and_its_bare_hex_digest() -> None:
    code, document, _ = run("list")
    registry = catalog.reference_registry()
    assert code == 0
    assert document["registry_sha256"] == registry.canonical_digest()
    assert {k: v for k, v in document.items() if k != "registry_sha256"} == (
        registry.canonical_dict()
    )


def test_show_prints_one_descriptor_and_refuses_unknown_ids() -> None:
    code, document, _ = run("show", CHECKER)
    assert code == 0 and document["component_id"] == CHECKER
    code, document, stderr = run("show", "component:nope")
    assert code == 65 and clirun.is_error(document, 65) and stderr.count("\n") == 1
    assert document["error"]["code"] == "UNKNOWN_COMPONENT"


def test_search_over_a_built_index(build: Path) -> None:
    code, document, _ = run(
        "search",
        "--schema",
        "VSTD-2",
        "--mode",
        "OFFLINE_REPLAY",
        "--mechanism",
        "mechanism:typed-formation-certificate-check",
        "--index",
        str(build),
    )
    assert code == 0
    assert document["result"] == "DECLARED_MATCHES"
    assert [m["component_id"] for m in document["matches"]] == [CHECKER]
    assert document["index_digest"] == catalog.load_index(build).canonical_digest()
    code, document, _ = run(
        "search",
        "--schema",
        "VSTD-TYPED-FORMATION-0.1",
        "--mode",
        "OFFLINE_REPLAY",
        "--mechanism",
        "mechanism:typed-formation-certificate-check",
    )
    assert code == 0
    assert document["result"] == "NO_DECLARED_MATCH_IN_THIS_INDEX"
    assert document["match_count"] == 0 and document["execution_performed"] is False


def test_search_without_relation_or_mechanism_is_a_usage_error() -> None:
    code, document, _ = run("search", "--schema", "VSTD-2", "--mode", "STATIC")
    assert code == 2 and clirun.is_error(document, 2)


def test_verify_reports_valid_then_names_a_changed_byte(build: Path, tmp_path: Path) -> None:
    code, document, _ = run("package", "verify", str(build))
    assert code == 0 and document["result"] == "VALID"
    copy = tmp_path / "copy"
    shutil.copytree(build, copy)
    spec = next(copy.glob("packages/*/artifacts/catalog/data/specifications/*formation*.txt"))
    data = spec.read_bytes()
    spec.write_bytes(data[:100] + b"X" + data[101:])
    code, document, stderr = run("package", "verify", str(copy))
    assert code == 1 and document["result"] == "INVALID"
    assert "vstd-typed-formation-0.1.txt changed" in document["errors"][0]
    assert "changed" in stderr


def test_build_refuses_a_non_empty_directory(build: Path) -> None:
    code, document, stderr = run("package", "build", str(build))
    assert code == 65 and clirun.is_error(document, 65) and "not empty" in stderr


def _write(path: Path, value: Any) -> str:
    path.write_text(json.dumps(value))
    return str(path)


def test_plan_and_readiness_round_trip(build: Path, tmp_path: Path, kit: Any) -> None:
    analysis = kit.analysis_for(CHECKER)
    analysis_file = _write(tmp_path / "analysis.json", analysis.to_dict())
    code, plan_document, _ = run("plan", analysis_file, "--package", str(build))
    assert code == 0 and plan_document["binding_scope"] == "STORED_PACKAGE"
    plan_file = _write(tmp_path / "plan.json", plan_document)
    plan = catalog.ValidationPlan.from_dict(plan_document)
    (candidate,) = plan.candidates
    declaration = kit.honest_declaration(candidate, [b"s", b"c"])
    declarations = [
        {
            "candidate_id": declaration.candidate_id,
            "component_id": declaration.component_id,
            "native_input_bindings": [attrs.asdict(b) for b in declaration.native_input_bindings],
            "evidence_mappings": [attrs.asdict(m) for m in declaration.evidence_mappings],
            "prerequisite_resolutions": [
                attrs.asdict(r) for r in declaration.prerequisite_resolutions
            ],
        }
    ]
    declarations_file = _write(tmp_path / "declarations.json", declarations)
    authorization = _write(
        tmp_path / "authorization.json",
        {"decision": "AUTHORIZED", "candidate_ids": [candidate.candidate_id]},
    )
    reassessment = _write(
        tmp_path / "reassessment.json",
        {"contract_id": "r", "candidate_ids": [candidate.candidate_id], "checks": ["recheck"]},
    )
    common = ["--analysis", analysis_file, "--plan", plan_file, "--declarations"]
    code, report, _ = run(
        "readiness",
        *common,
        declarations_file,
        "--authorization",
        authorization,
        "--reassessment",
        reassessment,
        "--package",
        str(build),
    )
    assert code == 0, report
    assert report["status"] == "READY" and report["execution_performed"] is False
    code, report, _ = run("readiness", *common, declarations_file, "--package", str(build))
    assert code == 3 and report["status"] == "NOT_ESTABLISHED"
    declarations[0]["native_input_bindings"][0]["schema_id"] = "VSTD-SILO-COMMIT-0.1"
    bad = _write(tmp_path / "bad.json", declarations)
    code, report, _ = run(
        "readiness",
        *common,
        bad,
        "--authorization",
        authorization,
        "--reassessment",
        reassessment,
        "--package",
        str(build),
    )
    assert code == 1 and report["status"] == "INVALID"


@pytest.mark.parametrize(
    "content",
    ["not json", '{"schema_version": "EVIDENCED-VALIDATION-ANALYSIS-0.1"}', '{"a": 1, "a": 2}'],
)
def test_malformed_analysis_is_rejected_input(tmp_path: Path, content: str) -> None:
    path = tmp_path / "analysis.json"
    path.write_text(content)
    code, document, stderr = run("plan", str(path))
    assert code == 65 and clirun.is_error(document, 65) and stderr.count("\n") == 1


def test_a_missing_input_file_is_exit_66_with_the_error_document(tmp_path: Path) -> None:
    code, document, stderr = run("plan", str(tmp_path / "absent.json"))
    assert code == 66 and clirun.is_error(document, 66) and "absent.json" in stderr


@pytest.mark.parametrize("what", ["absent", "file"])
def test_verify_of_an_unreadable_build_directory_is_unreadable_input(
    tmp_path: Path, what: str
) -> None:
    """Exit 66 is for input that cannot be read (common CLI contract); 1 (INVALID) is for a
    build whose bytes are readable but do not match their declarations."""
    target = tmp_path / "build"
    if what == "file":
        target.write_text("{}")
    code, document, stderr = run("package", "verify", str(target))
    assert code == 66 and clirun.is_error(document, 66) and stderr.count("\n") == 1


@pytest.mark.parametrize("args", [("list",), ("show", "component:nope")])
def test_the_real_process_answers_exactly_as_in_process(args: tuple[str, ...]) -> None:
    process = clirun.subprocess_run(["catalog", *args])
    assert process == clirun.in_process(["catalog", *args])
    assert process.returncode in (0, 65) and "Traceback" not in process.err
