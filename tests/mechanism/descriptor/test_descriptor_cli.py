"""``evidenced descriptor``: one JSON document (or the exact bytes), documented exit codes.

The table of cases calls ``daemon.cli.main`` in-process; the smoke tests at the end run the real
``python -m daemon.cli`` process and require the very same answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import clirun
import pytest

from mechanism.descriptor import DEFAULT_POLICY

from ._support import FIXTURES, REPO, fixture


def run(*args: str | Path) -> clirun.CliResult:
    return clirun.in_process(["descriptor", *args])


def document(result: clirun.CliResult) -> Any:
    assert b"Traceback" not in result.stderr
    return json.loads(result.stdout)


TISC_PAIR = (FIXTURES / "descriptor-tisc.txt", FIXTURES / "tisc-fixture.bin")
WEIGHTS_PAIR = (FIXTURES / "descriptor-safetensors.txt", FIXTURES / "safetensors-fixture.bin")


@pytest.mark.parametrize(("pair", "operation"), [(TISC_PAIR, "run"), (WEIGHTS_PAIR, "inspect")])
def test_check_passes_both_fixture_pairs_with_the_embedded_default(
    pair: tuple[Path, Path], operation: str
) -> None:
    result = run("check", *pair, "--operation", operation)
    assert result.returncode == 0, result.stderr
    decision = document(result)
    assert decision["outcome"] == "PASS" and decision["details"] == ""
    assert decision["observations"]["status"] == "CHECKED"


@pytest.mark.parametrize(
    ("options", "code"),
    [
        (("--policy", FIXTURES / "policy-deny-at-halt.apl"), "PROVIDER_SECURITY_FAULT"),
        (("--policy", FIXTURES / "policy-max-instructions-3.apl"), "PROVIDER_SECURITY_FAULT"),
        (("--policy", FIXTURES / "policy-unknown-clause.apl"), "AUTHORIZATION_POLICY_INVALID"),
    ],
)
def test_check_fails_with_exit_1_and_the_reason_code(options: tuple[Any, ...], code: str) -> None:
    result = run("check", *TISC_PAIR, "--operation", "run", *options)
    assert result.returncode == 1
    decision = document(result)
    assert (decision["outcome"], decision["details"]) == ("FAIL", code)


@pytest.mark.parametrize(
    ("allowlist", "code"),
    [
        ("allowlist-missing-weights.json", "AUTHORIZATION_NOT_ALLOWLISTED"),
        ("allowlist-wildcard.json", "AUTHORIZATION_ALLOWLIST_INVALID"),
    ],
)
def test_check_refuses_weights_by_the_allowlist(allowlist: str, code: str) -> None:
    result = run(
        "check", *WEIGHTS_PAIR, "--operation", "inspect", "--allowlist", FIXTURES / allowlist
    )
    assert result.returncode == 1
    decision = document(result)
    assert (decision["outcome"], decision["details"]) == ("FAIL", code)


def test_check_swapped_payload_fails() -> None:
    result = run("check", TISC_PAIR[0], WEIGHTS_PAIR[1], "--operation", "run")
    assert result.returncode == 1
    assert document(result)["details"] == "DESCRIPTOR_PAYLOAD_REFERENCE_MISMATCH"


def test_check_with_a_lowered_step_limit_is_unknown_exit_3() -> None:
    result = run("check", *TISC_PAIR, "--operation", "run", "--max-steps", "2")
    assert result.returncode == 3
    assert document(result)["details"] == "PROVIDER_STEP_LIMIT_EXHAUSTED"


def test_check_refuses_raising_a_limit_as_a_usage_error() -> None:
    result = run("check", *TISC_PAIR, "--operation", "run", "--max-steps", "100001")
    assert result.returncode == 2 and clirun.error_of(result)["code"] == "USAGE"


def test_check_without_operation_is_a_usage_error() -> None:
    assert run("check", *TISC_PAIR).returncode == 2


def test_a_missing_file_exits_66_with_the_error_document(tmp_path: Path) -> None:
    result = run("check", tmp_path / "missing.txt", TISC_PAIR[1], "--operation", "run")
    assert result.returncode == 66
    assert clirun.error_of(result)["code"] == "INPUT_UNREADABLE"


def test_make_prints_the_canonical_descriptor_as_json_and_raw_only_when_asked() -> None:
    result = run("make", FIXTURES / "safetensors-fixture.bin")
    expected = fixture("descriptor-safetensors.txt")
    assert result.returncode == 0
    assert document(result)["descriptor"].encode("ascii") == expected
    assert document(result)["size"] == len(expected)
    result = run("make", FIXTURES / "tisc-fixture.bin", "--raw")
    assert result.returncode == 0 and result.stdout == fixture("descriptor-tisc.txt")


def test_make_out_writes_the_exact_bytes_and_prints_the_document(tmp_path: Path) -> None:
    out = tmp_path / "descriptor.txt"
    result = run("make", FIXTURES / "tisc-fixture.bin", "--out", out)
    assert result.returncode == 0 and document(result)["written"] == str(out)
    assert out.read_bytes() == fixture("descriptor-tisc.txt")


def test_make_refuses_a_payload_outside_the_profile() -> None:
    result = run("make", FIXTURES / "descriptor-tisc.txt")
    assert result.returncode == 65 and clirun.error_of(result)["exit"] == 65
    assert b"DESCRIPTOR_PAYLOAD_NOT_ADMITTED" in result.stderr


def test_run_tisc_prints_the_vm_trace() -> None:
    result = run("run-tisc", FIXTURES / "tisc-fixture.bin")
    assert result.returncode == 0
    trace = document(result)
    assert trace["result"]["registers"] == {"r40": "6", "r41": "7", "r42": "42"}
    assert trace["result"]["trace"] == [[0, "LoadImm"], [1, "LoadImm"], [2, "Mul"], [3, "Halt"]]
    assert trace["policy_error"] is None and trace["program"][2]["opcode"] == 7
    assert trace["policy_digest"].startswith("sha256:") and DEFAULT_POLICY


def test_run_tisc_with_max_instructions_3_traps_exit_1() -> None:
    result = run(
        "run-tisc",
        FIXTURES / "tisc-fixture.bin",
        "--policy",
        FIXTURES / "policy-max-instructions-3.apl",
    )
    assert result.returncode == 1
    assert document(result)["result"]["trap"] == "SecurityFault"


def test_run_tisc_with_an_unknown_clause_reports_the_parse_error_and_traps() -> None:
    result = run(
        "run-tisc",
        FIXTURES / "tisc-fixture.bin",
        "--policy",
        FIXTURES / "policy-unknown-clause.apl",
    )
    assert result.returncode == 1
    assert "AXION_POLICY_UNKNOWN_CLAUSE" in document(result)["policy_error"]


def test_run_tisc_step_limit_exits_3() -> None:
    result = run("run-tisc", FIXTURES / "tisc-fixture.bin", "--max-steps", "1")
    assert result.returncode == 3 and document(result)["result"]["step_limit_exhausted"] is True


def test_run_tisc_refuses_undecodable_text_with_65(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tisc"
    bad.write_bytes(b"@code\n\xff\n")
    result = run("run-tisc", bad)
    assert result.returncode == 65 and clirun.error_of(result)["code"] == "TISC_UNDECODABLE"
    assert b"TISC_UTF8_INVALID" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["check", *TISC_PAIR, "--operation", "run"],
        ["make", FIXTURES / "tisc-fixture.bin", "--raw"],
    ],
    ids=["check-pass", "make-bytes"],
)
def test_the_real_process_answers_exactly_as_in_process(args: list[str | Path]) -> None:
    process = clirun.subprocess_run(["descriptor", *args], cwd=REPO)
    assert process == run(*args)
    assert process.returncode == 0, process.stderr
