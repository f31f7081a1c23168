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


@pytest.mark.parametrize(
    "target",
    ["sri", "formation", "descriptor", "broken_mechanisms:SOUND", "kit_pair_mechanisms:PAIR"],
)
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
        "sample one item: the same input answered differently: outcome: 'PASS' (evaluation 1) "
        "vs 'FAIL' (evaluation 2)" in failed["determinism"]
    )


def test_a_clock_in_the_observations_is_named_as_the_field_that_differed() -> None:
    """Not ``['PASS', 'PASS', 'PASS']``: the outcome agreed, an observation did not."""
    failed = _check("broken_mechanisms:CLOCKED").failed()
    assert set(failed) == {"determinism"}
    assert failed["determinism"][0] == (
        "sample one item: the same input answered differently: observations.evaluated_at: "
        "1 (evaluation 1) vs 2 (evaluation 2)"
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
    # Its own 17-byte sample exceeds the 8 bytes it states: a client binding is lowered to
    # them, and the session refuses the sample (a host would never read it).
    assert set(failed) == {"bounds", "samples"}
    assert failed["samples"] == (
        "sample one item (client binding, as evidenced submit pins it): expected PASS, got "
        "UNKNOWN (evidence byte bound exceeded)",
    )
    assert any("more items than accepted_bounds" in finding for finding in failed["bounds"])


def test_an_evaluation_over_the_time_budget_fails_timing() -> None:
    failed = _check("broken_mechanisms:SOUND", time_budget=1e-9).failed()
    assert set(failed) == {"timing"}
    assert failed["timing"][0].startswith("sample one item: an evaluation took")
    assert any(f.startswith("at the bound sizes: an evaluation took") for f in failed["timing"])


# --------------------------------------------------------------------------- where bugs are


def test_a_mechanism_slow_only_on_a_bound_sized_honest_sample_fails_timing() -> None:
    """Random bytes at the bound are refused unparsed in microseconds; the honest sample grown
    to the bound reaches the verification, which sleeps for twice the budget."""
    import kit_pair_mechanisms

    budget = kit_pair_mechanisms.SLOW_SECONDS / 2
    failed = _check("kit_pair_mechanisms:SLOW_AT_BOUND", time_budget=budget).failed()
    assert set(failed) == {"timing"}
    assert failed["timing"][0].startswith(
        "sample sha256 scaled by the provider to 65,608 bytes: an evaluation took"
    )
    assert not any(finding.startswith("at the bound sizes") for finding in failed["timing"])
    # The kit's own growth reaches it too: the message grown to the bound is refused at its
    # own limit (65,536) in microseconds; the largest growth that is not refused is slow.
    assert any(
        finding.startswith("sample changed with its subject grown to")
        and "(the largest not refused as at the bound): an evaluation took" in finding
        for finding in failed["timing"]
    ), failed["timing"]


def test_the_timing_details_show_every_sample_scaled_to_the_bound_and_random_splits() -> None:
    timing = _check("kit_pair_mechanisms:PAIR").checks[CHECKS.index("timing")].details
    cases = timing["cases"]
    assert cases["sample sha256 scaled by the provider to 65,608 bytes"]["outcome"] == "PASS"
    # The kit's own growth (the provider does not scale "changed"): each item in turn.
    assert cases["sample changed with its subject grown to 65,720 bytes"]["evidence_bytes"] == (
        65_792
    )
    assert "sample changed with its companion grown to 65,755 bytes" in cases
    splits = [name for name in cases if name.startswith("a random split of the bound")]
    assert len(splits) == 2
    assert all(cases[name]["evidence_bytes"] == 65_792 for name in splits)
    lowered = timing["option_sets"]["lowered"]
    assert lowered["bounds"] == {"max_evidence_items": 2, "max_evidence_bytes": 4352}
    assert lowered["cases"]["sample sha256 scaled by the provider to 4,168 bytes"]["outcome"] == (
        "PASS"
    )


def test_a_mechanism_that_crashes_on_a_well_hashed_malformed_companion_fails_exceptions() -> None:
    """Every hostile variant with a broken hash is refused by the rehash step before the
    parser; the well-hashed ones are re-bound honestly and reach it."""
    failed = _check("kit_pair_mechanisms:CRASH_ON_MALFORMED").failed()
    assert set(failed) == {"exceptions"}
    findings = failed["exceptions"]
    assert any(
        finding.startswith(
            "sample sha256: companion a byte made non-ASCII (re-bound): raised UnicodeDecodeError"
        )
        and "through a session: UNKNOWN" in finding
        and "mechanism execution failed: UnicodeDecodeError" in finding
        for finding in findings
    ), findings
    assert not any("(re-bound)" not in finding for finding in findings)


def test_a_mechanism_wrong_only_under_a_non_default_option_set_fails_samples() -> None:
    failed = _check("kit_pair_mechanisms:WRONG_UNDER_OPTIONS").failed()
    assert set(failed) == {"samples"}
    assert failed["samples"] == (
        "option set 'sha512 only': sample sha256: expected UNKNOWN, got PASS ()",
        "option set 'sha512 only': sample sha256 scaled by the provider to 65,608 bytes: "
        "expected UNKNOWN, got PASS ()",
        "option set 'sha512 only': sample changed: expected UNKNOWN, got FAIL (MISMATCH)",
    )


def test_every_declared_option_set_is_run_through_announce_and_pin() -> None:
    report = _check("kit_pair_mechanisms:PAIR")
    samples = report.checks[CHECKS.index("samples")].details
    # The client pins the host's algorithms (announce/pin): both bindings are one.
    assert samples["option_sets"]["sha512 only"]["outcomes"] == {
        "sample sha256": "UNKNOWN",
        "sample sha512": "PASS",
        "sample changed": "UNKNOWN",
        "sample sha256 scaled by the provider to 65,608 bytes": "UNKNOWN",
        "sample sha512 scaled by the provider to 65,672 bytes": "PASS",
    }
    # The lowered limit: the default options' binding declares 65,792 bytes, more than the
    # host accepts; the client binding is lowered to the announced accepted_bounds, is the
    # host's own binding (one run), and PASSes.
    lowered = samples["option_sets"]["lowered"]["outcomes"]
    assert lowered["sample sha256"] == "PASS"
    assert lowered["sample sha256 scaled by the provider to 4,168 bytes"] == "PASS"
    options = report.checks[CHECKS.index("options")].details
    assert options == {"applies": True, "option_sets": ["lowered", "sha512 only"]}


def test_an_option_set_the_constructor_refuses_is_a_finding_naming_the_option() -> None:
    failed = _check("kit_pair_mechanisms:RAISED_LIMIT").failed()
    assert set(failed) == {"options"}
    assert failed["options"] == (
        "option set 'raised': OptionsError: sessions.<name>.options.<test.kit.pair.0.1>"
        ".max_message_bytes: refused by the provider: CeilingError: max_message_bytes may "
        "only be lowered: 0 <= max_message_bytes <= 65536",
    )


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
    example = testdata.REPO / "examples" / "evidenced-sri"
    for name in ("conftest.py", "tests/test_sri.py"):
        shutil.copyfile(example / name, tmp_path / Path(name).name)
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
