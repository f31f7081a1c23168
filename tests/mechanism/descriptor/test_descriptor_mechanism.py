"""The session adapter: ordered stages, PASS/FAIL/UNKNOWN discipline, and every named bad input."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
import safetensors.numpy
from hypothesis import given, settings
from hypothesis import strategies as st

from mechanism.canonical import canonical_digest, digest_bytes, validate_value
from mechanism.descriptor import (
    CATALOG_DIGEST,
    DECISION_REASON_CODES,
    MECHANISM_DIGEST,
    MECHANISM_ID,
    RESIDUAL_OBLIGATIONS,
    STAGE_ORDER,
    DescriptorAuthorizationMechanism,
    Instruction,
    default_mechanism,
    descriptor_binding,
    render_program,
    safetensors_fixture_bytes,
    tisc_fixture_bytes,
)
from session import (
    BoundProposition,
    EvidenceBounds,
    EvidenceStore,
    MechanismDecision,
    MechanismOutcome,
    VerificationSession,
)

from ._support import REPO, SAFETENSORS_REF, TISC_REF, fixture, sha3_ref

PASS, FAIL, UNKNOWN = MechanismOutcome.PASS, MechanismOutcome.FAIL, MechanismOutcome.UNKNOWN
TISC = tisc_fixture_bytes()
WEIGHTS = safetensors_fixture_bytes()
TISC_DESCRIPTOR = fixture("descriptor-tisc.txt")
WEIGHTS_DESCRIPTOR = fixture("descriptor-safetensors.txt")
REPORT_KEYS = (
    "storage_report",
    "descriptor_report",
    "discovery",
    "authorization_report",
    "provider_report",
)
_STAGE_OF_REPORT = dict(zip(STAGE_ORDER[1:], REPORT_KEYS, strict=True))


def descriptor(*lines: str) -> bytes:
    return "".join(line + "\n" for line in lines).encode("ascii")


def forged(payload: bytes, representation: str, provider: str, operation: str) -> bytes:
    """A descriptor whose every hash is freshly consistent with ``payload``."""
    return descriptor(
        "t81.experiment-descriptor.v1",
        sha3_ref(payload),
        representation,
        provider,
        operation,
        "object-interface-fixtures-v1",
    )


def check_shape(decision: MechanismDecision) -> None:
    """Invariants every decision must satisfy, whatever the outcome."""
    observations = dict(decision.observations)
    validate_value(observations)  # a network-canonical value: no floats, no negative ints
    assert observations["residual_obligations"] == list(RESIDUAL_OBLIGATIONS)
    assert observations["stage_order"] == list(STAGE_ORDER)
    assert observations["catalog_digest"] == CATALOG_DIGEST
    codes = observations["reason_codes"]
    if decision.outcome is PASS:
        assert codes == [] and decision.details == "" and observations["status"] == "CHECKED"
        assert all(observations[key] is not None for key in REPORT_KEYS)
        return
    assert codes == [decision.details] and decision.details in DECISION_REASON_CODES
    assert observations["status"] == ("INVALID" if decision.outcome is FAIL else "UNKNOWN")
    failed = observations["failed_stage"]
    assert failed in STAGE_ORDER
    later = STAGE_ORDER[STAGE_ORDER.index(failed) + 1 :]
    for stage in later:
        assert observations[_STAGE_OF_REPORT[stage]] is None, f"{stage} ran after {failed}"


def evaluate(
    descriptor_bytes: bytes,
    payload: bytes,
    *,
    operation: str | None = None,
    mechanism: DescriptorAuthorizationMechanism | None = None,
    binding: BoundProposition | None = None,
    evidence: Sequence[Any] | None = None,
) -> MechanismDecision:
    host = mechanism or default_mechanism()
    if binding is None:
        if operation is None:
            operation = "inspect" if payload == WEIGHTS else "run"
        binding = descriptor_binding(descriptor_bytes, payload, operation=operation, mechanism=host)
    decision = host.evaluate(binding, (descriptor_bytes, payload) if evidence is None else evidence)
    check_shape(decision)
    return decision


def outcome(decision: MechanismDecision) -> tuple[MechanismOutcome, str]:
    return decision.outcome, decision.details


# -- PASS ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("descriptor_bytes", "payload"), [(TISC_DESCRIPTOR, TISC), (WEIGHTS_DESCRIPTOR, WEIGHTS)]
)
def test_both_fixture_pairs_pass_directly_and_through_a_session(
    descriptor_bytes: bytes, payload: bytes
) -> None:
    decision = evaluate(descriptor_bytes, payload)
    assert outcome(decision) == (PASS, "")
    mechanism = default_mechanism()
    store = EvidenceStore()
    store.add(descriptor_bytes)
    store.add(payload)
    session = VerificationSession(store)
    session.register(mechanism)
    binding = descriptor_binding(descriptor_bytes, payload)
    result = session.evaluate(binding)
    assert result.outcome is PASS and result.binding_digest == binding.digest()
    assert result.observations == decision.observations


def test_tisc_pass_reports_every_stage_and_the_vm_observation() -> None:
    observations = evaluate(TISC_DESCRIPTOR, TISC).observations
    assert observations["storage_report"]["status"] == "ADMITTED"
    assert observations["descriptor_report"]["identity"] == sha3_ref(TISC_DESCRIPTOR)
    assert observations["discovery"]["provider"] == "t81vm"
    paths = [path["path"] for path in observations["authorization_report"]["paths"]]
    assert paths == ["axion_final_authorization"]
    vm = observations["provider_report"]["vm"]
    assert vm["registers"] == {"r40": "6", "r41": "7", "r42": "42"} and vm["halted"] is True


def test_weights_pass_reports_tensor_values_and_the_private_snapshot() -> None:
    report = evaluate(WEIGHTS_DESCRIPTOR, WEIGHTS).observations["provider_report"]["weights"]
    assert report["tensors"][0]["values"] == [["-1", "0"], ["1", "-1"]]
    assert report["snapshot"]["file_mode"] == "0600"


# -- descriptor byte-level violations, through the adapter ---------------------------------------

CODEC_CASES = json.loads(Path(__file__).with_name("codec_cases.json").read_text("utf-8"))["cases"]


@pytest.mark.parametrize(
    "case",
    [case for case in CODEC_CASES if case["code"] is not None],
    ids=[case["name"] for case in CODEC_CASES if case["code"] is not None],
)
def test_every_descriptor_violation_is_refused_by_the_adapter_with_its_code(
    case: dict[str, Any],
) -> None:
    data = str(case["descriptor"]).encode("latin-1")
    payload = WEIGHTS if SAFETENSORS_REF in case["descriptor"] else TISC
    decision = evaluate(data, payload)
    expected = FAIL if case["kind"] == "invalid" else UNKNOWN
    assert outcome(decision) == (expected, case["code"])
    assert decision.observations["failed_stage"] == "descriptor"
    assert decision.observations["storage_report"]["status"] == "ADMITTED"  # stored, then refused


# -- named bad inputs ----------------------------------------------------------------------------


def test_swapped_representation_and_provider_fail() -> None:
    data = forged(TISC, "safetensors-i8", "t81vm", "run")
    assert outcome(evaluate(data, TISC)) == (FAIL, "DESCRIPTOR_PROVIDER_MISMATCH")
    data = forged(WEIGHTS, "base81-symbolic-tisc", "native-weights", "inspect")
    assert outcome(evaluate(data, WEIGHTS)) == (FAIL, "DESCRIPTOR_PROVIDER_MISMATCH")


def test_run_comma_inspect_fails() -> None:
    data = forged(TISC, "base81-symbolic-tisc", "t81vm", "run,inspect")
    assert outcome(evaluate(data, TISC)) == (FAIL, "DESCRIPTOR_OPERATIONS_NOT_SINGLETON")


def test_payload_of_the_other_fixture_fails() -> None:
    # Honest caller pins the payload it actually holds: the descriptor's claim does not match.
    decision = evaluate(TISC_DESCRIPTOR, WEIGHTS, operation="run")
    assert outcome(decision) == (FAIL, "DESCRIPTOR_PAYLOAD_REFERENCE_MISMATCH")
    # A caller who pinned the descriptor's reference sees the payload bytes refuted instead.
    host = default_mechanism()
    binding = descriptor_binding(TISC_DESCRIPTOR, WEIGHTS, operation="run", mechanism=host)
    pinned = attrs.evolve(binding, parameters={**binding.parameters, "payload_reference": TISC_REF})
    decision = evaluate(TISC_DESCRIPTOR, WEIGHTS, binding=pinned)
    assert outcome(decision) == (FAIL, "DESCRIPTOR_PAYLOAD_HASH_MISMATCH")


def test_right_payload_with_a_reference_to_the_other_fixture_fails() -> None:
    data = TISC_DESCRIPTOR.replace(TISC_REF.encode(), SAFETENSORS_REF.encode())
    assert outcome(evaluate(data, TISC)) == (FAIL, "DESCRIPTOR_PAYLOAD_REFERENCE_MISMATCH")


def test_forged_descriptor_with_fresh_consistent_hashes_but_false_capability_fails() -> None:
    # The TISC payload claimed to be SafeTensors for native-weights/inspect: every hash is fresh.
    data = forged(TISC, "safetensors-i8", "native-weights", "inspect")
    decision = evaluate(data, TISC, operation="inspect")
    assert outcome(decision) == (FAIL, "DISCOVERY_REPRESENTATION_MISMATCH")
    assert decision.observations["descriptor_report"]["status"] == "VALID"
    assert decision.observations["provider_report"] is None


def test_forged_program_with_fresh_hash_is_not_the_adapter_fixture() -> None:
    program = render_program([Instruction(2, 42, 42, 0, 0), Instruction(1)])
    data = forged(program, "base81-symbolic-tisc", "t81vm", "run")
    assert outcome(evaluate(data, program)) == (FAIL, "DISCOVERY_REPRESENTATION_MISMATCH")


def test_forged_weights_with_other_values_are_not_the_adapter_fixture() -> None:
    payload = safetensors.numpy.save({"weight": np.array([[1, 1], [1, 1]], dtype=np.int8)})
    data = forged(payload, "safetensors-i8", "native-weights", "inspect")
    assert outcome(evaluate(data, payload)) == (FAIL, "DISCOVERY_REPRESENTATION_MISMATCH")


def test_safetensors_header_lying_about_offsets_never_reaches_the_provider() -> None:
    payload = WEIGHTS.replace(b"[0,4]", b"[0,8]")
    data = forged(payload, "safetensors-i8", "native-weights", "inspect")
    decision = evaluate(data, payload)
    assert outcome(decision) == (FAIL, "DISCOVERY_REPRESENTATION_MISMATCH")
    assert decision.observations["provider_report"] is None


def test_requested_operation_the_adapter_does_not_offer_fails() -> None:
    decision = evaluate(TISC_DESCRIPTOR, TISC, operation="inspect")
    assert outcome(decision) == (FAIL, "DISCOVERY_OPERATION_NOT_OFFERED")
    decision = evaluate(TISC_DESCRIPTOR, TISC, operation="execute")
    assert outcome(decision) == (FAIL, "DISCOVERY_OPERATION_NOT_OFFERED")


def test_policy_that_denies_at_halt_fails_with_a_security_fault() -> None:
    host = DescriptorAuthorizationMechanism(policy=fixture("policy-deny-at-halt.apl"))
    decision = evaluate(TISC_DESCRIPTOR, TISC, mechanism=host)
    assert outcome(decision) == (FAIL, "PROVIDER_SECURITY_FAULT")
    vm = decision.observations["provider_report"]["vm"]
    assert vm["trap"] == "SecurityFault" and vm["axion_log"][0]["pc"] == 3
    assert decision.observations["authorization_report"]["status"] == "AUTHORIZED"


def test_max_instructions_3_fails_at_the_halt_step() -> None:
    host = DescriptorAuthorizationMechanism(policy=fixture("policy-max-instructions-3.apl"))
    decision = evaluate(TISC_DESCRIPTOR, TISC, mechanism=host)
    assert outcome(decision) == (FAIL, "PROVIDER_SECURITY_FAULT")
    vm = decision.observations["provider_report"]["vm"]
    assert vm["trap_reason"] == "Instruction count limit exceeded: count=4 limit=3"


def test_public_minimal_policy_without_final_entries_still_passes() -> None:
    host = DescriptorAuthorizationMechanism(policy=fixture("policy-public-minimal.apl"))
    assert outcome(evaluate(TISC_DESCRIPTOR, TISC, mechanism=host)) == (PASS, "")


def test_unknown_policy_clause_fails_closed() -> None:
    host = DescriptorAuthorizationMechanism(policy=fixture("policy-unknown-clause.apl"))
    decision = evaluate(TISC_DESCRIPTOR, TISC, mechanism=host)
    assert outcome(decision) == (FAIL, "AUTHORIZATION_POLICY_INVALID")
    assert decision.observations["provider_report"] is None
    # Path C does not consult Axion: the weights pair is authorized by the allowlist alone.
    assert outcome(evaluate(WEIGHTS_DESCRIPTOR, WEIGHTS, mechanism=host)) == (PASS, "")


def test_path_b_denial_prevents_the_run() -> None:
    host = DescriptorAuthorizationMechanism(policy=fixture("policy-wrong-payload.apl"))
    decision = evaluate(TISC_DESCRIPTOR, TISC, mechanism=host)
    assert outcome(decision) == (FAIL, "AUTHORIZATION_AXION_DENIED")
    assert decision.observations["provider_report"] is None


def test_missing_allowlist_entry_fails_and_the_provider_never_runs() -> None:
    host = DescriptorAuthorizationMechanism(allowlist=fixture("allowlist-missing-weights.json"))
    decision = evaluate(WEIGHTS_DESCRIPTOR, WEIGHTS, mechanism=host)
    assert outcome(decision) == (FAIL, "AUTHORIZATION_NOT_ALLOWLISTED")
    assert decision.observations["provider_report"] is None
    # Path B does not consult the allowlist: the TISC run is authorized by Axion alone.
    assert outcome(evaluate(TISC_DESCRIPTOR, TISC, mechanism=host)) == (PASS, "")


def test_wildcard_allowlist_entry_fails_closed() -> None:
    host = DescriptorAuthorizationMechanism(allowlist=fixture("allowlist-wildcard.json"))
    decision = evaluate(WEIGHTS_DESCRIPTOR, WEIGHTS, mechanism=host)
    assert outcome(decision) == (FAIL, "AUTHORIZATION_ALLOWLIST_INVALID")


def test_payload_file_changed_after_submission_the_provider_sees_the_snapshot(
    tmp_path: Path, opened_files: list[tuple[str, Any, Any]]
) -> None:
    source = tmp_path / "weights.safetensors"
    source.write_bytes(WEIGHTS)
    submitted = source.read_bytes()
    store = EvidenceStore()
    store.add(WEIGHTS_DESCRIPTOR)
    store.add(submitted)
    source.write_bytes(WEIGHTS.replace(b"\xff\x00\x01\xff", b"\x01\x01\x01\x01"))
    session = VerificationSession(store)
    mechanism = default_mechanism()
    session.register(mechanism)
    binding = descriptor_binding(WEIGHTS_DESCRIPTOR, submitted, mechanism=mechanism)
    opened_files.clear()
    result = session.evaluate(binding)
    opened_paths = [path for path, _, _ in opened_files]
    assert result.outcome is PASS
    assert str(source) not in opened_paths  # the caller's mutable source is never reopened
    snapshot_opens = [path for path in opened_paths if path.endswith("payload.safetensors")]
    assert snapshot_opens and all(str(tmp_path) not in path for path in snapshot_opens)
    weights = result.observations["provider_report"]["weights"]
    assert weights["snapshot"]["reference"] == SAFETENSORS_REF
    assert weights["tensors"][0]["values"] == [["-1", "0"], ["1", "-1"]]


def test_t81vm_evaluation_opens_no_file_at_all(opened_files: list[tuple[str, Any, Any]]) -> None:
    mechanism = default_mechanism()
    binding = descriptor_binding(TISC_DESCRIPTOR, TISC, mechanism=mechanism)
    opened_files.clear()
    assert mechanism.evaluate(binding, (TISC_DESCRIPTOR, TISC)).outcome is PASS
    assert opened_files == []


# -- oversize inputs and limits -----------------------------------------------------------------


def test_oversize_descriptor_is_refuted_by_the_format_limit() -> None:
    data = TISC_DESCRIPTOR[:-1] + b"x" * 5000 + b"\n"
    assert outcome(evaluate(data, TISC)) == (FAIL, "DESCRIPTOR_TOO_LARGE")


def test_oversize_payload_is_a_storage_limit_not_a_refutation() -> None:
    payload = TISC + b"e" * 70_000
    assert outcome(evaluate(TISC_DESCRIPTOR, payload)) == (
        UNKNOWN,
        "DESCRIPTOR_STORAGE_LIMIT_EXCEEDED",
    )


def test_oversize_payload_through_a_session_meets_the_byte_bound_first() -> None:
    payload = TISC + b"e" * 200_000
    store = EvidenceStore()
    store.add(TISC_DESCRIPTOR)
    store.add(payload)
    session = VerificationSession(store)
    mechanism = default_mechanism()
    session.register(mechanism)
    result = session.evaluate(descriptor_binding(TISC_DESCRIPTOR, payload, operation="run"))
    assert (result.outcome, result.details) == (UNKNOWN, "evidence byte bound exceeded")


def test_lowered_descriptor_limit_is_unknown() -> None:
    host = DescriptorAuthorizationMechanism(max_descriptor_bytes=100)
    decision = evaluate(TISC_DESCRIPTOR, TISC, mechanism=host)
    assert outcome(decision) == (UNKNOWN, "DESCRIPTOR_LIMIT_EXCEEDED")


def test_lowered_step_limit_is_unknown() -> None:
    host = DescriptorAuthorizationMechanism(max_steps=3)
    decision = evaluate(TISC_DESCRIPTOR, TISC, mechanism=host)
    assert outcome(decision) == (UNKNOWN, "PROVIDER_STEP_LIMIT_EXHAUSTED")


def test_lowered_item_limit_is_unknown() -> None:
    host = DescriptorAuthorizationMechanism(max_item_bytes=100)
    decision = evaluate(TISC_DESCRIPTOR, TISC, mechanism=host)
    assert outcome(decision) == (UNKNOWN, "DESCRIPTOR_STORAGE_LIMIT_EXCEEDED")


@pytest.mark.parametrize(
    ("keyword", "value", "error"),
    [
        ("max_steps", 100_001, ValueError),
        ("max_steps", -1, ValueError),
        ("max_steps", True, TypeError),
        ("max_descriptor_bytes", 4097, ValueError),
        ("max_descriptor_bytes", 4096.0, TypeError),
        ("max_item_bytes", 65_537, ValueError),
    ],
)
def test_limits_may_only_be_lowered(keyword: str, value: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        DescriptorAuthorizationMechanism(**{keyword: value})  # type: ignore[arg-type]


# -- binding preflight --------------------------------------------------------------------------


def _honest() -> BoundProposition:
    return descriptor_binding(TISC_DESCRIPTOR, TISC)


def _mutated(**changes: Any) -> BoundProposition:
    binding = _honest()
    for name, value in changes.items():
        object.__setattr__(binding, name, value)
    return binding


OTHER_DIGEST = "sha256:" + "0" * 64
PARAMS = _honest().parameters

BINDING_CASES: list[tuple[str, Any, MechanismOutcome, str]] = [
    (
        "not_a_bound_proposition",
        lambda: _honest().to_dict(),
        UNKNOWN,
        "DESCRIPTOR_BINDING_UNSUPPORTED",
    ),
    (
        "foreign_mechanism_id",
        lambda: _mutated(mechanism_id="vstd.bytes.sha256"),
        UNKNOWN,
        "DESCRIPTOR_IMPLEMENTATION_UNSUPPORTED",
    ),
    (
        "bare_hex_mechanism_digest",
        lambda: attrs.evolve(_honest(), mechanism_digest=MECHANISM_DIGEST[7:]),
        UNKNOWN,
        "DESCRIPTOR_IMPLEMENTATION_UNSUPPORTED",
    ),
    (
        "other_mechanism_digest",
        lambda: attrs.evolve(_honest(), mechanism_digest=OTHER_DIGEST),
        UNKNOWN,
        "DESCRIPTOR_IMPLEMENTATION_UNSUPPORTED",
    ),
    (
        "other_predicate",
        lambda: attrs.evolve(_honest(), predicate="bytes.sha256"),
        UNKNOWN,
        "DESCRIPTOR_PREDICATE_UNSUPPORTED",
    ),
    (
        "expected_true",
        lambda: attrs.evolve(_honest(), expected=True),
        UNKNOWN,
        "DESCRIPTOR_PREDICATE_UNSUPPORTED",
    ),
    (
        "expected_pass",
        lambda: attrs.evolve(_honest(), expected="PASS"),
        UNKNOWN,
        "DESCRIPTOR_PREDICATE_UNSUPPORTED",
    ),
    (
        "parameters_not_a_dict",
        lambda: _mutated(parameters=tuple(PARAMS.items())),
        UNKNOWN,
        "DESCRIPTOR_PARAMETERS_UNSUPPORTED",
    ),
    (
        "parameter_missing",
        lambda: attrs.evolve(
            _honest(), parameters={k: v for k, v in PARAMS.items() if k != "operation"}
        ),
        UNKNOWN,
        "DESCRIPTOR_PARAMETERS_UNSUPPORTED",
    ),
    (
        "permission_parameter_added",
        lambda: attrs.evolve(_honest(), parameters={**PARAMS, "permission": "allow"}),
        UNKNOWN,
        "DESCRIPTOR_PARAMETERS_UNSUPPORTED",
    ),
    (
        "identity_upper_case",
        lambda: attrs.evolve(
            _honest(),
            parameters={**PARAMS, "descriptor_identity": PARAMS["descriptor_identity"].upper()},
        ),
        UNKNOWN,
        "DESCRIPTOR_PARAMETERS_UNSUPPORTED",
    ),
    (
        # a requested operation outside the compiled singleton set is a refuted capability
        "operation_wildcard_is_not_offered",
        lambda: attrs.evolve(_honest(), parameters={**PARAMS, "operation": "*"}),
        FAIL,
        "DISCOVERY_OPERATION_NOT_OFFERED",
    ),
    (
        "operation_not_a_str",
        lambda: _mutated(parameters={**PARAMS, "operation": 1}),
        UNKNOWN,
        "DESCRIPTOR_PARAMETERS_UNSUPPORTED",
    ),
    (
        "policy_not_a_digest",
        lambda: attrs.evolve(_honest(), parameters={**PARAMS, "authorization_policy": "default"}),
        UNKNOWN,
        "DESCRIPTOR_PARAMETERS_UNSUPPORTED",
    ),
    (
        "other_authorization_policy",
        lambda: attrs.evolve(
            _honest(),
            parameters={**PARAMS, "authorization_policy": OTHER_DIGEST},
            trust_roots=(OTHER_DIGEST, CATALOG_DIGEST),
        ),
        UNKNOWN,
        "DESCRIPTOR_AUTHORIZATION_POLICY_UNSUPPORTED",
    ),
    (
        "catalog_root_missing",
        lambda: attrs.evolve(_honest(), trust_roots=(PARAMS["authorization_policy"],)),
        UNKNOWN,
        "DESCRIPTOR_ROOTS_UNSUPPORTED",
    ),
    (
        "extra_root",
        lambda: attrs.evolve(
            _honest(), trust_roots=(PARAMS["authorization_policy"], CATALOG_DIGEST, OTHER_DIGEST)
        ),
        UNKNOWN,
        "DESCRIPTOR_ROOTS_UNSUPPORTED",
    ),
    (
        "three_items",
        lambda: attrs.evolve(_honest(), bounds=EvidenceBounds(3, 1000)),
        UNKNOWN,
        "DESCRIPTOR_BOUNDS_UNSUPPORTED",
    ),
    (
        "bool_byte_bound",
        lambda: attrs.evolve(_honest(), bounds=EvidenceBounds(2, True)),
        UNKNOWN,
        "DESCRIPTOR_BOUNDS_UNSUPPORTED",
    ),
    (
        "byte_bound_above_the_cap",
        lambda: attrs.evolve(_honest(), bounds=EvidenceBounds(2, 131_073)),
        UNKNOWN,
        "DESCRIPTOR_BOUNDS_UNSUPPORTED",
    ),
    (
        "unprefixed_evidence_ref",
        lambda: _mutated(
            evidence_refs=(_honest().evidence_refs[0], _honest().evidence_refs[1][7:])
        ),
        UNKNOWN,
        "DESCRIPTOR_REFERENCES_UNSUPPORTED",
    ),
    (
        "one_evidence_ref",
        lambda: _mutated(evidence_refs=(_honest().evidence_refs[0],)),
        UNKNOWN,
        "DESCRIPTOR_REFERENCES_UNSUPPORTED",
    ),
    (
        "subject_is_not_the_descriptor",
        lambda: attrs.evolve(_honest(), subject_id=OTHER_DIGEST),
        FAIL,
        "DESCRIPTOR_SUBJECT_BINDING_INVALID",
    ),
    (
        "descriptor_identity_pin_differs",
        lambda: attrs.evolve(_honest(), parameters={**PARAMS, "descriptor_identity": "0" * 64}),
        FAIL,
        "DESCRIPTOR_IDENTITY_MISMATCH",
    ),
    (
        "payload_pin_differs",
        lambda: attrs.evolve(
            _honest(), parameters={**PARAMS, "payload_reference": SAFETENSORS_REF}
        ),
        FAIL,
        "DESCRIPTOR_PAYLOAD_HASH_MISMATCH",
    ),
]


@pytest.mark.parametrize(
    ("make", "expected", "code"),
    [(m, o, c) for _, m, o, c in BINDING_CASES],
    ids=[name for name, _, _, _ in BINDING_CASES],
)
def test_binding_preflight_table(make: Any, expected: MechanismOutcome, code: str) -> None:
    decision = evaluate(TISC_DESCRIPTOR, TISC, binding=make())
    assert outcome(decision) == (expected, code)


@pytest.mark.parametrize(
    ("evidence", "code", "expected"),
    [
        ((TISC_DESCRIPTOR,), "DESCRIPTOR_EVIDENCE_UNAVAILABLE", UNKNOWN),
        ((TISC_DESCRIPTOR, TISC, TISC), "DESCRIPTOR_EVIDENCE_UNAVAILABLE", UNKNOWN),
        (iter([TISC_DESCRIPTOR, TISC]), "DESCRIPTOR_EVIDENCE_UNAVAILABLE", UNKNOWN),
        ((bytearray(TISC_DESCRIPTOR), TISC), "DESCRIPTOR_EVIDENCE_TYPE_INVALID", FAIL),
        ((TISC_DESCRIPTOR, "payload"), "DESCRIPTOR_EVIDENCE_TYPE_INVALID", FAIL),
        ((TISC, TISC_DESCRIPTOR), "DESCRIPTOR_EVIDENCE_BINDING_INVALID", FAIL),
        ((TISC_DESCRIPTOR, TISC + b"x"), "DESCRIPTOR_EVIDENCE_BINDING_INVALID", FAIL),
    ],
    ids=["one_item", "three_items", "iterator", "bytearray", "str", "reversed", "substituted"],
)
def test_storage_admission_table(evidence: Any, code: str, expected: MechanismOutcome) -> None:
    decision = evaluate(TISC_DESCRIPTOR, TISC, evidence=evidence)
    assert outcome(decision) == (expected, code)
    assert decision.observations["storage_report"]["status"] == "REFUSED"


def test_session_refuses_a_binding_to_another_mechanism_digest() -> None:
    store = EvidenceStore()
    store.add(TISC_DESCRIPTOR)
    store.add(TISC)
    session = VerificationSession(store)
    session.register(default_mechanism())
    binding = descriptor_binding(TISC_DESCRIPTOR, TISC, mechanism_digest=OTHER_DIGEST)
    result = session.evaluate(binding)
    assert (result.outcome, result.details) == (
        UNKNOWN,
        "registered mechanism digest does not match",
    )


def test_descriptor_binding_never_reads_pins_from_the_descriptor() -> None:
    # A lying descriptor: the binding's pins are computed from the bytes, not from line 2.
    data = TISC_DESCRIPTOR.replace(TISC_REF.encode(), SAFETENSORS_REF.encode())
    binding = descriptor_binding(data, TISC)
    assert binding.parameters["payload_reference"] == TISC_REF
    assert binding.parameters["descriptor_identity"] == sha3_ref(data)
    assert binding.subject_id == binding.evidence_refs[0] == digest_bytes(data)


def test_descriptor_binding_takes_the_catalog_operation_for_a_fixture_payload() -> None:
    assert descriptor_binding(TISC_DESCRIPTOR, TISC).parameters["operation"] == "run"
    assert descriptor_binding(WEIGHTS_DESCRIPTOR, WEIGHTS).parameters["operation"] == "inspect"


def test_mechanism_has_its_own_source_identity() -> None:
    package = REPO / "mechanism" / "descriptor"
    names = [
        "_mechanism.py",
        "_codec.py",
        "_catalog.py",
        "_canonfs.py",
        "_tisc.py",
        "_vm.py",
        "_axion.py",
        "_authorization.py",
        "_weights.py",
    ]
    sources = [{"path": n, "digest": digest_bytes((package / n).read_bytes())} for n in names]
    sources.append(
        {
            "path": "canonical.py",
            "digest": digest_bytes((REPO / "mechanism" / "canonical.py").read_bytes()),
        }
    )
    expected = canonical_digest(
        {
            "schema_version": "t81.descriptor-mechanism-source-identity.v1",
            "catalog_digest": CATALOG_DIGEST,
            "sources": sources,
        }
    )
    mechanism = default_mechanism()
    assert mechanism.mechanism_digest == MECHANISM_DIGEST == expected
    assert mechanism.mechanism_id == MECHANISM_ID
    # Host configuration is pinned separately: it does not change the source identity.
    other = DescriptorAuthorizationMechanism(policy=fixture("policy-public-minimal.apl"))
    assert other.mechanism_digest == mechanism.mechanism_digest
    assert other.authorization_policy_digest != mechanism.authorization_policy_digest


_CLOSED = frozenset(DECISION_REASON_CODES)


@settings(max_examples=100, deadline=None)
@given(
    which=st.sampled_from([(TISC_DESCRIPTOR, TISC), (WEIGHTS_DESCRIPTOR, WEIGHTS)]),
    position=st.integers(min_value=0, max_value=200),
    byte=st.integers(min_value=0, max_value=255),
)
def test_any_descriptor_byte_mutation_is_refused_with_a_closed_code_and_nothing_raises(
    which: tuple[bytes, bytes], position: int, byte: int
) -> None:
    original, payload = which
    index = position % len(original)
    mutated = original[:index] + bytes([byte]) + original[index + 1 :]
    decision = evaluate(mutated, payload)
    if mutated == original:
        assert decision.outcome is PASS
        return
    assert decision.outcome in (FAIL, UNKNOWN)
    assert decision.details in _CLOSED
