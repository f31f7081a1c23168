"""``evidenced formation inspect-silo`` / ``receipt build|recheck``: documents and exit codes.

The table of cases calls ``daemon.cli.main`` in-process; the smoke test at the end runs the real
``python -m daemon.cli`` process for each command and requires the very same answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import clirun
import pytest

from mechanism.canonical import canonical_bytes, digest_bytes
from mechanism.formation import build_formation_receipt, inspect_silo_formation

from .test_silo_support import PATHS, commit_bytes, evidence_for, standard_silo


def run(*args: str) -> clirun.CliResult:
    return clirun.in_process(["formation", *args])


def write_silo(tmp_path: Path, evidence: dict[str, bytes], commit: bytes) -> tuple[Path, Path]:
    directory = tmp_path / "evidence"
    directory.mkdir()
    for digest, data in evidence.items():
        (directory / digest.removeprefix("sha256:")).write_bytes(data)
    commit_path = tmp_path / "commit.json"
    commit_path.write_bytes(commit)
    return commit_path, directory


def path_options() -> list[str]:
    return [
        "--subject-path",
        PATHS["subject_path"],
        "--certificate-path",
        PATHS["certificate_path"],
        "--profile-path",
        PATHS["profile_path"],
        "--ground-path",
        PATHS["ground_path"],
    ]


def inspect_cli(commit_path: Path, directory: Path) -> clirun.CliResult:
    return run("inspect-silo", str(commit_path), "--evidence-dir", str(directory), *path_options())


def one_json(stdout: bytes) -> Any:
    return json.loads(stdout)  # exactly one document, or this raises


@pytest.mark.parametrize(
    ("change", "exit_code"),
    [("none", 0), ("missing", 3), ("substituted", 1)],
)
def test_inspect_silo_prints_the_inspection_and_exits_by_facets(
    tmp_path: Path, change: str, exit_code: int
) -> None:
    silo = standard_silo()
    evidence = evidence_for(silo)
    unrelated = silo["unrelated.txt"].digest
    if change == "missing":
        del evidence[unrelated]
    elif change == "substituted":
        evidence[unrelated] = b"not the declared bytes"
    commit = commit_bytes(silo)
    commit_path, directory = write_silo(tmp_path, evidence, commit)
    done = inspect_cli(commit_path, directory)
    assert done.returncode == exit_code, done.stderr
    assert one_json(done.stdout) == inspect_silo_formation(commit, evidence, **PATHS)
    assert b"Traceback" not in done.stderr


def test_inspect_silo_refuses_an_evidence_entry_not_named_by_a_digest(tmp_path: Path) -> None:
    silo = standard_silo()
    commit_path, directory = write_silo(tmp_path, evidence_for(silo), commit_bytes(silo))
    (directory / "README.txt").write_bytes(b"notes")
    done = inspect_cli(commit_path, directory)
    assert done.returncode == 65
    assert one_json(done.stdout)["error"]["code"] == "EVIDENCE_DIRECTORY_REFUSED"
    assert done.stderr.count(b"\n") == 1


def test_inspect_silo_accepts_files_named_by_the_full_digest(tmp_path: Path) -> None:
    # "evidence files named by their digest" (docs/silo.md): the digest is "sha256:<64 hex>", so
    # that spelling is as good as the bare 64 hex digits; the two may be mixed in one directory.
    silo = standard_silo()
    evidence = evidence_for(silo)
    commit = commit_bytes(silo)
    commit_path, directory = write_silo(tmp_path, evidence, commit)
    for index, digest in enumerate(sorted(evidence)):
        if index % 2 == 0:
            (directory / digest.removeprefix("sha256:")).rename(directory / digest)
    done = inspect_cli(commit_path, directory)
    assert done.returncode == 0, done.stderr
    assert one_json(done.stdout) == inspect_silo_formation(commit, evidence, **PATHS)


def test_inspect_silo_refuses_one_digest_under_both_spellings(tmp_path: Path) -> None:
    silo = standard_silo()
    evidence = evidence_for(silo)
    commit_path, directory = write_silo(tmp_path, evidence, commit_bytes(silo))
    digest = sorted(evidence)[0]
    (directory / digest).write_bytes(evidence[digest])
    done = inspect_cli(commit_path, directory)
    assert done.returncode == 65
    assert one_json(done.stdout)["error"]["code"] == "EVIDENCE_DIRECTORY_REFUSED"
    assert b"Traceback" not in done.stderr


def test_inspect_silo_over_256_evidence_files_is_an_entry_limit(tmp_path: Path) -> None:
    silo = standard_silo()
    evidence = evidence_for(silo)
    for index in range(257 - len(evidence)):
        evidence[digest_bytes(b"%d" % index)] = b"%d" % index
    commit_path, directory = write_silo(tmp_path, evidence, commit_bytes(silo))
    done = inspect_cli(commit_path, directory)
    assert done.returncode == 3
    assert "EVIDENCE_ENTRY_LIMIT" in one_json(done.stdout)["reason_codes"]


def test_inspect_silo_missing_commit_is_exit_66_with_the_error_document(tmp_path: Path) -> None:
    (tmp_path / "evidence").mkdir()
    done = inspect_cli(tmp_path / "absent.json", tmp_path / "evidence")
    assert done.returncode == 66
    assert one_json(done.stdout)["error"]["code"] == "INPUT_UNREADABLE"
    assert b"Traceback" not in done.stderr


def test_inspect_silo_without_role_paths_is_a_usage_error(tmp_path: Path) -> None:
    done = run("inspect-silo", str(tmp_path / "commit.json"), "--evidence-dir", str(tmp_path))
    assert done.returncode == 2


def _receipt_files(tmp_path: Path) -> tuple[Path, Path, Path, bytes, dict[str, bytes]]:
    silo = standard_silo()
    evidence = evidence_for(silo)
    commit = commit_bytes(silo)
    commit_path, directory = write_silo(tmp_path, evidence, commit)
    selection = canonical_bytes(
        {
            "schema_version": "VSTD-SILO-FORMATION-SELECTION-0.1",
            "commit_digest": digest_bytes(commit),
            **PATHS,
        }
    )
    selection_path = tmp_path / "selection.json"
    selection_path.write_bytes(selection)
    return selection_path, commit_path, directory, selection, evidence


def test_receipt_build_emits_the_exact_receipt_bytes(tmp_path: Path) -> None:
    selection_path, commit_path, directory, selection, evidence = _receipt_files(tmp_path)
    output = tmp_path / "receipt.json"
    done = run(
        "receipt", "build", "--selection", str(selection_path), "--commit", str(commit_path),
        "--evidence-dir", str(directory), "--output", str(output),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    expected = build_formation_receipt(selection, commit_path.read_bytes(), evidence)
    assert done.stdout == expected  # raw canonical bytes, no trailing newline
    assert output.read_bytes() == expected


def _recheck(
    tmp_path: Path, receipt: bytes, selection_path: Path, commit_path: Path, directory: Path
) -> clirun.CliResult:
    receipt_path = tmp_path / "to-recheck.json"
    receipt_path.write_bytes(receipt)
    return run(
        "receipt", "recheck", str(receipt_path), "--selection", str(selection_path),
        "--commit", str(commit_path), "--evidence-dir", str(directory),
    )  # fmt: skip


def test_receipt_recheck_prints_the_fresh_inspection(tmp_path: Path) -> None:
    selection_path, commit_path, directory, selection, evidence = _receipt_files(tmp_path)
    receipt = build_formation_receipt(selection, commit_path.read_bytes(), evidence)
    done = _recheck(tmp_path, receipt, selection_path, commit_path, directory)
    assert done.returncode == 0, done.stderr
    assert one_json(done.stdout) == json.loads(receipt)["inspection"]


@pytest.mark.parametrize(
    ("tamper", "code", "exit_code"),
    [
        ("claim", "FORMATION_RECEIPT_NOT_REPRODUCED", 1),
        ("profile", "FORMATION_RECEIPT_BINDING_INVALID", 1),
        ("garbage", "FORMATION_RECEIPT_INVALID", 65),
    ],
)
def test_receipt_recheck_refusals_map_to_exit_codes(
    tmp_path: Path, tamper: str, code: str, exit_code: int
) -> None:
    selection_path, commit_path, directory, selection, evidence = _receipt_files(tmp_path)
    receipt = build_formation_receipt(selection, commit_path.read_bytes(), evidence)
    value = json.loads(receipt)
    if tamper == "claim":
        value["inspection"]["snapshot_retention"] = "INCOMPLETE"
        receipt = canonical_bytes(value)
    elif tamper == "profile":
        value["rule_profile_digest"] = digest_bytes(b"other")
        receipt = canonical_bytes(value)
    else:
        receipt = b"not json"
    done = _recheck(tmp_path, receipt, selection_path, commit_path, directory)
    assert done.returncode == exit_code
    assert one_json(done.stdout)["error"]["code"] == code
    assert one_json(done.stdout)["error"]["exit"] == exit_code
    assert done.stderr.decode().strip().endswith(code)


def test_receipt_without_an_action_is_a_usage_error() -> None:
    done = run("receipt")
    assert done.returncode == 2
    assert one_json(done.stdout)["error"]["code"] == "USAGE"
    assert b"receipt" in done.stderr


def test_the_real_process_answers_exactly_as_in_process(tmp_path: Path) -> None:
    selection_path, commit_path, directory, selection, evidence = _receipt_files(tmp_path)
    receipt = build_formation_receipt(selection, commit_path.read_bytes(), evidence)
    receipt_path = tmp_path / "receipt.json"
    receipt_path.write_bytes(receipt)
    inspect = ["inspect-silo", str(commit_path), "--evidence-dir", str(directory), *path_options()]
    recheck = ["receipt", "recheck", str(receipt_path), "--selection", str(selection_path),
               "--commit", str(commit_path), "--evidence-dir", str(directory)]  # fmt: skip
    for args in (inspect, recheck):
        process = clirun.subprocess_run(["formation", *args])
        assert process == run(*args)
        assert process.returncode == 0, process.stderr
