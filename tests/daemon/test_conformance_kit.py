"""The conformance kit (``evidenced mechanism check``, ``daemon.conformance``).

A sound test mechanism and the example plugin pass every check; each broken test mechanism
(``tests/_support/broken_mechanisms.py``: one broken behaviour each) fails the check that
names its behaviour, with a finding that says which input and what happened. The pytest plugin
is exercised in a real pytest process over a small suite, as an author would run it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import clirun
import pytest
import testdata

from daemon.conformance import ConformanceReport, TargetError, check_mechanism

CHECKS = [
    "identity",
    "options",
    "samples",
    "vocabulary",
    "determinism",
    "no-mutation",
    "exceptions",
    "bounds",
    "digest-stability",
    "timing",
]


@functools.cache
def _check(target: str, time_budget: float = 5.0) -> ConformanceReport:
    """One battery run per target for the whole module (each starts a process)."""
    return check_mechanism(target, time_budget=time_budget)


@pytest.mark.parametrize("target", ["sri", "formation", "broken_mechanisms:SOUND"])
def test_sound_mechanisms_pass_every_check(target: str) -> None:
    report = _check(target)
    assert [check.name for check in report.checks] == CHECKS
    assert report.passed, report.failed()
    assert report.kind == "provider"
    digests = report.checks[CHECKS.index("digest-stability")].details
    assert digests["fresh_process"] == digests["this_process"]


def test_a_bare_mechanism_is_checked_without_the_provider_checks() -> None:
    report = _check("broken_mechanisms:MECHANISM_ONLY")
    assert report.kind == "mechanism" and report.passed, report.failed()
    assert report.checks[CHECKS.index("options")].details == {"applies": False}


def test_a_mechanism_that_mutates_its_inputs_fails_no_mutation() -> None:
    failed = _check("broken_mechanisms:MUTATING").failed()
    findings = failed["no-mutation"]
    assert "sample one item: the binding was changed by evaluate" in findings
    assert "sample one item: the evidence sequence was changed by evaluate" in findings
    assert "sample one item: through a session: mechanism changed its binding snapshot" in (
        findings
    )
    # The session protected the decision: the honest sample was not PASSed.
    assert failed["samples"] == (
        "sample one item: expected PASS, got UNKNOWN (mechanism changed its binding snapshot)",
    )
    assert set(failed) == {"no-mutation", "samples"}


def test_a_nondeterministic_mechanism_fails_determinism() -> None:
    failed = _check("broken_mechanisms:NONDETERMINISTIC").failed()
    assert (
        "sample one item: the same input answered differently: ['PASS', 'FAIL', 'PASS']"
        in (failed["determinism"])
    )


def test_a_mechanism_that_raises_fails_exceptions_and_the_session_contains_it() -> None:
    failed = _check("broken_mechanisms:RAISING").failed()
    assert set(failed) == {"exceptions"}
    assert "evidence extended: raised ValueError: unexpected evidence" in failed["exceptions"][0]
    assert any(
        finding.startswith("evidence not bytes: raised ValueError")
        for finding in failed["exceptions"]
    )


def test_a_digest_that_depends_on_the_process_fails_digest_stability() -> None:
    failed = _check("broken_mechanisms:UNSTABLE").failed()
    assert set(failed) == {"digest-stability"}
    assert failed["digest-stability"][0].startswith("a fresh process announces")


def test_a_mechanism_that_passes_beyond_its_accepted_bounds_fails_bounds() -> None:
    failed = _check("broken_mechanisms:OVERREACHING").failed()
    assert set(failed) == {"bounds"}
    assert any("more items than accepted_bounds" in finding for finding in failed["bounds"])


def test_an_evaluation_over_the_time_budget_fails_timing() -> None:
    failed = _check("broken_mechanisms:SOUND", time_budget=1e-9).failed()
    assert set(failed) == {"timing"}
    assert failed["timing"][0].startswith("at the bound sizes: an evaluation took")


def test_the_command_prints_the_report_and_exits_by_the_verdict() -> None:
    passed = clirun.in_process(["mechanism", "check", "sri"])
    assert passed.returncode == 0, passed.err
    assert passed.document()["passed"] is True
    failed = clirun.in_process(["mechanism", "check", "broken_mechanisms:RAISING"])
    assert failed.returncode == 1
    assert failed.document()["passed"] is False
    assert "exceptions: evidence extended: raised ValueError" in failed.err
    missing = clirun.in_process(["mechanism", "check", "no_such_module_xyz:PROVIDER"])
    assert missing.returncode == 65
    assert clirun.error_of(missing)["code"] == "TARGET_UNLOADABLE"
    assert "no_such_module_xyz:PROVIDER" in missing.document()["error"]["message"]
    with pytest.raises(TargetError, match="no mechanism provider 'nothing-here'"):
        check_mechanism("nothing-here")
    usage = clirun.in_process(["mechanism", "check", "sri", "--repeats", "1"])
    assert usage.returncode == 2


def test_the_pytest_plugin_in_an_authors_suite(tmp_path: Path) -> None:
    """An author's suite, run by a real pytest: the example plugin's own tests (the kit through
    the fixture, and its SRI rules) pass, and a test of a broken plugin fails with the kit's
    findings. ``pytest_plugins`` sits in the suite's root conftest, as documented."""
    example = testdata.REPO / "examples" / "evidenced-sri" / "tests"
    for name in ("conftest.py", "test_sri.py"):
        shutil.copyfile(example / name, tmp_path / name)
    (tmp_path / "test_broken.py").write_text(
        "def test_broken_plugin(mechanism_conformance):\n"
        "    mechanism_conformance('broken_mechanisms:RAISING')\n"
    )
    environment = dict(os.environ)
    environment["PYTHONPATH"] = str(testdata.REPO / "tests" / "_support")
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error", "."],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 1, output
    assert "1 failed, 8 passed" in completed.stdout, output
    assert "FAILED test_broken.py::test_broken_plugin" in completed.stdout
    assert "broken_mechanisms:RAISING (test.kit.raising.0.1) fails the conformance battery" in (
        completed.stdout
    )
    assert "exceptions: evidence extended: raised ValueError: unexpected evidence" in (
        completed.stdout
    )
