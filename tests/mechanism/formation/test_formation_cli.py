"""``evidenced formation produce|check|evaluate``: exact stdout bytes, one stderr line, exit codes.

The table of cases calls ``daemon.cli.main`` in-process; the smoke tests at the end run the real
``python -m daemon.cli`` process and require the very same answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import clirun
import pytest
import testdata

from mechanism.canonical import canonical_bytes
from mechanism.formation import MECHANISM_DIGEST, check_formation

from ._builders import atom, pair

FIXTURES = testdata.fixture("formation", directory=True)


def cli(*args: str | Path) -> clirun.CliResult:
    return clirun.in_process(["formation", *args])


def fixture(name: str) -> tuple[Path, Path]:
    return FIXTURES / f"{name}.subject.json", FIXTURES / f"{name}.certificate.json"


def assert_one_line_stderr(completed: clirun.CliResult) -> None:
    lines = completed.stderr.decode().splitlines()
    assert len(lines) <= 1
    assert b"Traceback" not in completed.stderr


def test_produce_writes_the_exact_certificate_bytes(tmp_path: Path) -> None:
    subject_path, certificate_path = fixture("compose")
    completed = cli("produce", subject_path)
    assert completed.returncode == 0
    assert completed.stdout == certificate_path.read_bytes()
    assert completed.stderr == b""


def test_check_prints_the_canonical_report_and_exits_by_status() -> None:
    for name, code in (("quote-read", 0), ("tampered", 1), ("unsupported-profile", 3)):
        subject_path, certificate_path = fixture(name)
        completed = cli("check", subject_path, certificate_path)
        assert completed.returncode == code, completed.stderr
        expected = check_formation(subject_path.read_bytes(), certificate_path.read_bytes())
        assert completed.stdout == canonical_bytes(expected) + b"\n"
        assert_one_line_stderr(completed)


def test_evaluate_prints_the_evaluated_proposition_and_exits_by_outcome() -> None:
    for name, code, outcome, details in (
        ("atom", 0, "PASS", ""),
        ("tampered", 1, "FAIL", "FORMATION_CHECK_INVALID"),
        ("unsupported-profile", 3, "UNKNOWN", "FORMATION_PROFILE_UNSUPPORTED"),
    ):
        completed = cli("evaluate", *fixture(name))
        assert completed.returncode == code, completed.stderr
        result = json.loads(completed.stdout)
        assert result["outcome"] == outcome
        assert result["details"] == details
        assert result["mechanism_digest"] == MECHANISM_DIGEST
        assert len(result["binding_digest"]) == 64
        assert_one_line_stderr(completed)


def test_evaluate_with_another_pinned_digest_is_unknown() -> None:
    other = "sha256:" + "0" * 64
    completed = cli("evaluate", *fixture("atom"), "--mechanism-digest", other)
    assert completed.returncode == 3
    assert json.loads(completed.stdout)["details"] == "registered mechanism digest does not match"


def test_lowered_ceiling_option_reaches_the_checker() -> None:
    completed = cli("check", *fixture("compose"), "--max-path-steps", "1")
    assert completed.returncode == 3
    assert json.loads(completed.stdout)["reason_codes"] == ["FORMATION_LIMIT_EXCEEDED"]


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--max-depth", "65"],
        ["check", "--max-nodes", "-1"],
        ["evaluate", "--max-path-steps", "4097"],
        ["evaluate", "--mechanism-digest", "sha256:ABC"],
        ["check", "--max-depth", "ten"],
    ],
)
def test_raising_a_ceiling_or_bad_arguments_is_a_usage_error(args: list[str]) -> None:
    command, *options = args
    completed = cli(command, *fixture("atom"), *options)
    assert completed.returncode == 2
    assert clirun.error_of(completed)["code"] == "USAGE"
    assert_one_line_stderr(completed)


def test_missing_arguments_are_a_usage_error() -> None:
    completed = cli("check", fixture("atom")[0])
    assert completed.returncode == 2
    assert_one_line_stderr(completed)


@pytest.mark.parametrize("command", ["produce", "check", "evaluate"])
def test_missing_files_are_exit_66_with_the_error_document(tmp_path: Path, command: str) -> None:
    missing = tmp_path / "absent.json"
    args = [missing] if command == "produce" else [missing, fixture("atom")[1]]
    completed = cli(command, *args)
    assert completed.returncode == 66
    assert clirun.error_of(completed)["code"] == "INPUT_UNREADABLE"
    assert_one_line_stderr(completed)
    assert b"absent.json" in completed.stderr


def test_produce_refuses_an_ill_typed_or_unsupported_subject(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(pair([atom(), {"tag": "READ", "code": 0}])[0])
    completed = cli("produce", bad)
    assert completed.returncode == 1
    assert clirun.error_of(completed)["code"] == "FORMATION_INVALID"
    assert_one_line_stderr(completed)
    completed = cli("produce", fixture("unsupported-profile")[0])
    assert completed.returncode == 3
    assert clirun.error_of(completed)["code"] == "FORMATION_UNKNOWN"
    assert_one_line_stderr(completed)


def test_evaluate_without_an_admissible_subject_is_rejected_input(tmp_path: Path) -> None:
    noisy = tmp_path / "noisy.json"
    noisy.write_bytes(fixture("atom")[0].read_bytes() + b"\n")
    completed = cli("evaluate", noisy, fixture("atom")[1])
    assert completed.returncode == 65
    assert clirun.error_of(completed)["code"] == "BINDING_UNBUILDABLE"
    assert_one_line_stderr(completed)


@pytest.mark.parametrize(
    "args",
    [
        ["produce", FIXTURES / "compose.subject.json"],
        ["evaluate", *fixture("tampered"), "--max-path-steps", "4097"],
    ],
    ids=["produce-0", "usage-2"],
)
def test_the_real_process_answers_exactly_as_in_process(args: list[str | Path]) -> None:
    process = clirun.subprocess_run(["formation", *args], cwd=testdata.REPO)
    assert process == cli(*args)
