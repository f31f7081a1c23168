"""Second-reader findings: each test is named after the seed/spec rule it defends.

* docs/spec/descriptor.md §5.1 (no CRLF, whitespace, escaping, duplicate fields, optional fields
  or trailing lines) and §5.2: each byte-level violation has its own stable reason code.
* docs/spec/descriptor.md §6.1 (operations are checked against the compiled singleton set): a
  requested operation outside it is a refuted capability (FAIL), whatever its spelling.
* docs/spec/descriptor.md §3.4: a policy that is not in the language is a parse error and fails
  closed; the host configuration never makes the constructor (or the CLI) raise.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import clirun
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechanism.canonical import validate_value
from mechanism.descriptor import (
    DECISION_REASON_CODES,
    DEFAULT_ALLOWLIST,
    DEFAULT_POLICY,
    DescriptorAuthorizationMechanism,
    DescriptorError,
    PolicyError,
    decode_descriptor,
    default_mechanism,
    descriptor_binding,
    inspect_weights,
    parse_policy,
    policy_digest,
    safetensors_fixture_bytes,
    tisc_fixture_bytes,
)
from session import MechanismOutcome

from ._support import FIXTURES, SAFETENSORS_REF, TISC_REF

VALID = (
    b"t81.experiment-descriptor.v1\n"
    + TISC_REF.encode()
    + b"\nbase81-symbolic-tisc\nt81vm\nrun\nobject-interface-fixtures-v1\n"
)
LINES = VALID.split(b"\n")[:6]


def _join(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


# One representative per violation class the seed names (plus the format's own limits).
SEED_VIOLATIONS: dict[str, bytes] = {
    "crlf": VALID.replace(b"\n", b"\r\n"),
    "whitespace": VALID.replace(b"\nrun\n", b"\nrun \n"),
    "escaping": VALID.replace(b"\nrun\n", b'\n"run"\n'),
    "duplicate_field": _join([*LINES[:5], LINES[4], LINES[5]]),
    "optional_field": _join([*LINES, b"permission=run"]),
    "trailing_line": VALID + b"extra\n",
    "missing_field": _join(LINES[:5]),
    "empty_line": _join([*LINES[:3], b"", *LINES[3:]]),
    "unterminated": VALID[:-1],
    "non_ascii": VALID.replace(b"run", b"r\xc3\xbcn"),
    "control_byte": VALID.replace(b"run", b"r\x00n"),
    "oversize": VALID + b"x" * (4097 - len(VALID)),
}


def _code(data: bytes) -> str:
    with pytest.raises(DescriptorError) as caught:
        decode_descriptor(data)
    return caught.value.code


def test_seed_each_named_byte_level_violation_has_its_own_stable_code() -> None:
    codes = {name: _code(data) for name, data in SEED_VIOLATIONS.items()}
    assert len(set(codes.values())) == len(codes), codes
    assert codes["duplicate_field"] == "DESCRIPTOR_DUPLICATE_FIELD"
    assert codes["trailing_line"] == "DESCRIPTOR_TRAILING_LINES"
    # stable: decoding the same bytes again gives the same code
    assert codes == {name: _code(data) for name, data in SEED_VIOLATIONS.items()}


@pytest.mark.parametrize(
    "lines",
    [
        [LINES[0], *LINES],  # schema twice
        [*LINES[:2], SAFETENSORS_REF.encode(), *LINES[2:]],  # two payload references
        [*LINES[:4], b"t81vm", LINES[5]],  # provider twice, operations missing
        [*LINES, LINES[5]],  # profile twice
    ],
    ids=["schema", "payload_reference", "provider", "profile"],
)
def test_seed_duplicate_fields_are_refused_as_duplicates_not_trailing_lines(
    lines: list[bytes],
) -> None:
    assert _code(_join(lines)) == "DESCRIPTOR_DUPLICATE_FIELD"


def test_seed_duplicate_field_fails_through_the_adapter() -> None:
    data = SEED_VIOLATIONS["duplicate_field"]
    payload = tisc_fixture_bytes()
    decision = default_mechanism().evaluate(descriptor_binding(data, payload), (data, payload))
    assert (decision.outcome, decision.details) == (
        MechanismOutcome.FAIL,
        "DESCRIPTOR_DUPLICATE_FIELD",
    )
    assert decision.observations["storage_report"]["status"] == "ADMITTED"


@pytest.mark.parametrize("operation", ["run,inspect", "run,run", "RUN", "", "*", "inspect"])
def test_seed_requested_operation_outside_the_compiled_singleton_set_fails(
    operation: str,
) -> None:
    payload = tisc_fixture_bytes()
    descriptor = (FIXTURES / "descriptor-tisc.txt").read_bytes()
    binding = descriptor_binding(descriptor, payload, operation=operation)
    decision = default_mechanism().evaluate(binding, (descriptor, payload))
    assert (decision.outcome, decision.details) == (
        MechanismOutcome.FAIL,
        "DISCOVERY_OPERATION_NOT_OFFERED",
    )
    assert decision.observations["provider_report"] is None
    assert decision.observations["authorization_report"] is None


def _cli(*args: str) -> clirun.CliResult:
    """``evidenced descriptor ARGS`` in-process (``test_descriptor_cli.py`` has the process)."""
    return clirun.in_process(["descriptor", *args])


def test_cli_requested_operation_list_is_a_refused_capability_exit_1() -> None:
    done = _cli(
        "check",
        str(FIXTURES / "descriptor-safetensors.txt"),
        str(FIXTURES / "safetensors-fixture.bin"),
        "--operation",
        "run,inspect",
    )
    assert done.returncode == 1, done.stderr
    assert b"DISCOVERY_OPERATION_NOT_OFFERED" in done.stdout
    assert b"Traceback" not in done.stderr


HUGE_INTEGER_POLICY = b"(policy (tier " + b"9" * 5000 + b"))"


def test_axion_integer_beyond_python_conversion_limit_is_a_parse_error() -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy(HUGE_INTEGER_POLICY)
    assert caught.value.code == "AXION_POLICY_SYNTAX"


def test_axion_unparsable_host_policy_fails_closed_and_never_raises() -> None:
    mechanism = DescriptorAuthorizationMechanism(policy=HUGE_INTEGER_POLICY)
    descriptor = (FIXTURES / "descriptor-tisc.txt").read_bytes()
    payload = tisc_fixture_bytes()
    binding = descriptor_binding(descriptor, payload, mechanism=mechanism)
    decision = mechanism.evaluate(binding, (descriptor, payload))
    assert (decision.outcome, decision.details) == (
        MechanismOutcome.FAIL,
        "AUTHORIZATION_POLICY_INVALID",
    )


def test_cli_check_with_an_unparsable_policy_file_exits_1_without_traceback(
    tmp_path: Path,
) -> None:
    policy = tmp_path / "huge.apl"
    policy.write_bytes(HUGE_INTEGER_POLICY)
    done = _cli(
        "check",
        str(FIXTURES / "descriptor-tisc.txt"),
        str(FIXTURES / "tisc-fixture.bin"),
        "--operation",
        "run",
        "--policy",
        str(policy),
    )
    assert done.returncode == 1, done.stderr
    assert b"AUTHORIZATION_POLICY_INVALID" in done.stdout
    assert b"Traceback" not in done.stderr


_POLICY_ALPHABET = st.sampled_from(
    [
        *'()[]" \n-+0123456789.\\',
        *("policy", "tier", "max-instructions", "require-axion-event", "reason", "x"),
        *("\ud800", "é"),
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_POLICY_ALPHABET, max_size=40).map("".join))
def test_axion_parser_only_ever_raises_policy_error_for_text(text: str) -> None:
    with contextlib.suppress(PolicyError):
        parse_policy(text)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80))
def test_axion_parser_only_ever_raises_policy_error_for_bytes(data: bytes) -> None:
    with contextlib.suppress(PolicyError):
        parse_policy(b"(policy " + data)


def test_policy_digest_is_exact_about_its_input_type() -> None:
    assert policy_digest("(policy)") == policy_digest(b"(policy)")
    assert policy_digest("\ud800").startswith("sha256:")
    for bad in (5, None, bytearray(b"(policy)")):
        with pytest.raises(TypeError):
            policy_digest(bad)  # type: ignore[arg-type]


def test_every_audited_code_is_a_declared_decision_code() -> None:
    for code in ("DESCRIPTOR_DUPLICATE_FIELD", "DISCOVERY_OPERATION_NOT_OFFERED"):
        assert code in DECISION_REASON_CODES


def test_weights_fixture_still_passes_with_the_default_configuration() -> None:
    payload = safetensors_fixture_bytes()
    descriptor = (FIXTURES / "descriptor-safetensors.txt").read_bytes()
    decision = default_mechanism().evaluate(
        descriptor_binding(descriptor, payload), (descriptor, payload)
    )
    assert decision.outcome is MechanismOutcome.PASS


def test_host_configuration_may_be_given_as_path_objects() -> None:
    by_path = DescriptorAuthorizationMechanism(
        policy=FIXTURES / "policy-deny-at-halt.apl",
        allowlist=FIXTURES / "allowlist-missing-weights.json",
    )
    by_bytes = DescriptorAuthorizationMechanism(
        policy=(FIXTURES / "policy-deny-at-halt.apl").read_bytes(),
        allowlist=(FIXTURES / "allowlist-missing-weights.json").read_bytes(),
    )
    assert by_path.authorization_policy_digest == by_bytes.authorization_policy_digest
    descriptor = (FIXTURES / "descriptor-tisc.txt").read_bytes()
    payload = tisc_fixture_bytes()
    decision = by_path.evaluate(
        descriptor_binding(descriptor, payload, mechanism=by_path), (descriptor, payload)
    )
    assert (decision.outcome, decision.details) == (
        MechanismOutcome.FAIL,
        "PROVIDER_SECURITY_FAULT",
    )
    with pytest.raises(TypeError):
        DescriptorAuthorizationMechanism(policy=None)  # type: ignore[arg-type]


def test_cli_identical_descriptor_and_payload_files_are_rejected_input_not_an_internal_error() -> (
    None
):
    payload = str(FIXTURES / "tisc-fixture.bin")
    done = _cli("check", payload, payload, "--operation", "run")
    assert done.returncode == 65, done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "BINDING_UNBUILDABLE"
    assert b"Traceback" not in done.stderr and done.stderr.count(b"\n") == 1


NON_NFC = "e\u0301"  # decomposed é: valid UTF-8 text, not NFC


def _decision_for(mechanism: DescriptorAuthorizationMechanism, name: str) -> Any:
    descriptor = (FIXTURES / f"descriptor-{name}.txt").read_bytes()
    payload = (FIXTURES / f"{name}-fixture.bin").read_bytes()
    binding = descriptor_binding(descriptor, payload, mechanism=mechanism)
    return mechanism.evaluate(binding, (descriptor, payload))


@pytest.mark.parametrize(
    ("name", "policy", "allowlist", "code"),
    [
        (
            "tisc",
            f'(policy (tier 1) (require-axion-event (reason "{NON_NFC}")))',
            None,
            "PROVIDER_SECURITY_FAULT",
        ),
        (
            "safetensors",
            None,
            '{"schema_version":"t81.descriptor-allowlist.v1","entries":[],'
            '"e\\u0301":1,"e\\u0301":2}',
            "AUTHORIZATION_ALLOWLIST_INVALID",
        ),
        (
            "safetensors",
            None,
            '{"schema_version":"t81.descriptor-allowlist.v1","entries":[],"\\ud800":1,"\\ud800":2}',
            "AUTHORIZATION_ALLOWLIST_INVALID",
        ),
    ],
    ids=["non_nfc_policy_needle", "non_nfc_allowlist_key", "surrogate_allowlist_key"],
)
def test_observations_stay_network_canonical_whatever_the_host_configuration_quotes(
    name: str, policy: str | None, allowlist: str | None, code: str
) -> None:
    mechanism = DescriptorAuthorizationMechanism(
        policy if policy is not None else DEFAULT_POLICY,
        allowlist if allowlist is not None else DEFAULT_ALLOWLIST,
    )
    decision = _decision_for(mechanism, name)
    assert (decision.outcome, decision.details) == (MechanismOutcome.FAIL, code)
    validate_value(dict(decision.observations))


def test_cli_check_with_a_non_nfc_policy_prints_canonical_json_and_exits_1(tmp_path: Path) -> None:
    policy = tmp_path / "non-nfc.apl"
    policy.write_text(f'(policy (tier 1) (require-axion-event (reason "{NON_NFC}")))', "utf-8")
    done = _cli(
        "check",
        str(FIXTURES / "descriptor-tisc.txt"),
        str(FIXTURES / "tisc-fixture.bin"),
        "--operation",
        "run",
        "--policy",
        str(policy),
    )
    assert done.returncode == 1, done.stderr
    assert b"PROVIDER_SECURITY_FAULT" in done.stdout


def test_weights_snapshot_is_exactly_0600_even_under_a_restrictive_umask() -> None:
    previous = os.umask(0o277)
    try:
        report = inspect_weights(safetensors_fixture_bytes())
    finally:
        os.umask(previous)
    assert report.status == "OBSERVED", report.message
    assert report.snapshot is not None and report.snapshot["file_mode"] == "0600"


def test_genuine_descriptor_with_a_changed_payload_is_bound_and_refused_not_unbindable() -> None:
    descriptor = (FIXTURES / "descriptor-tisc.txt").read_bytes()
    changed = tisc_fixture_bytes().replace(b"ge0f", b"ge1f", 1)  # LoadImm r41 now loads 8
    binding = descriptor_binding(descriptor, changed)
    assert binding.parameters["operation"] == "run"
    decision = default_mechanism().evaluate(binding, (descriptor, changed))
    assert (decision.outcome, decision.details) == (
        MechanismOutcome.FAIL,
        "DESCRIPTOR_PAYLOAD_REFERENCE_MISMATCH",
    )


def test_binding_operation_is_never_parsed_out_of_a_non_canonical_descriptor() -> None:
    forged = VALID.replace(b"\nrun\n", b"\ninspect\n")
    with pytest.raises(DescriptorError) as caught:
        descriptor_binding(forged, b"not a fixture")
    assert caught.value.code == "DESCRIPTOR_PAYLOAD_NOT_ADMITTED"
    # a fixture payload decides, whatever the descriptor claims
    assert descriptor_binding(forged, tisc_fixture_bytes()).parameters["operation"] == "run"
