"""The reference's ``test_formation_mechanism.py`` checklist (docs/spec/formation.md §8) and the
§5 preflight.

Fixture: a one-ATOM subject, its certificate, bounds ``(2, 524288)``.
"""

from __future__ import annotations

import ast
import builtins
import io
import os
import pathlib
from pathlib import Path
from typing import Any

import attrs
import pytest

import mechanism.formation._checker as checker
import mechanism.formation._mechanism as adapter
from mechanism.canonical import canonical_bytes, canonical_digest, is_digest
from mechanism.formation import (
    MECHANISM_DIGEST,
    MECHANISM_ID,
    PROFILE_DIGEST,
    RESIDUAL_OBLIGATIONS,
    FormationPathCertificateMechanism,
    check_formation,
    formation_binding,
)
from session import (
    BoundProposition,
    EvaluatedProposition,
    EvidenceBounds,
    EvidenceStore,
    MechanismDecision,
    MechanismOutcome,
    VerificationSession,
)

from ._builders import (
    AGENCY,
    GROUND,
    OTHER_PAYLOAD,
    apply,
    atom,
    certificate_record,
    digest,
    pair,
    subject,
    subject_record,
)

PASS, FAIL, UNKNOWN = MechanismOutcome.PASS, MechanismOutcome.FAIL, MechanismOutcome.UNKNOWN
FOREIGN = "sha256:770f948d29900a63a6ba55f2bbc61bdd18fec1a73769c8e1e524d664c40f6e06"
OBSERVATION_KEYS = {
    "status",
    "reason_codes",
    "formation_report",
    "residual_obligations",
    "trust_roots_meaning",
    "claim_scope",
}
SUBJECT, CERTIFICATE = pair([atom()])


def binding_for(
    subject_bytes: bytes = SUBJECT,
    certificate_bytes: bytes = CERTIFICATE,
    **changes: Any,
) -> BoundProposition:
    """The honest binding, rebuilt field by field from the spec (§5 "A correct binding")."""
    parameters = {
        "profile_digest": PROFILE_DIGEST,
        "ground_artifact_digest": GROUND,
        "authority_axiom_agency_digest": AGENCY,
    }
    parameters.update(changes.pop("parameters", {}))
    fields: dict[str, Any] = {
        "subject_id": digest(subject_bytes),
        "predicate": MECHANISM_ID,
        "expected": "CHECKED",
        "mechanism_id": MECHANISM_ID,
        "mechanism_digest": MECHANISM_DIGEST,
        "evidence_refs": (digest(subject_bytes), digest(certificate_bytes)),
        "trust_roots": tuple(parameters.values()),
        "bounds": EvidenceBounds(2, 524288),
        "parameters": parameters,
    }
    fields.update(changes)
    return BoundProposition(**fields)


def session_with(
    *items: bytes, mechanism: FormationPathCertificateMechanism | None = None
) -> VerificationSession:
    store = EvidenceStore()
    for item in items:
        store.add(item)
    session = VerificationSession(store)
    session.register(mechanism or FormationPathCertificateMechanism())
    return session


def run(binding: BoundProposition, *items: bytes) -> EvaluatedProposition:
    return session_with(*(items or (SUBJECT, CERTIFICATE))).evaluate(binding)


def direct(binding: object, evidence: object = (SUBJECT, CERTIFICATE)) -> MechanismDecision:
    return FormationPathCertificateMechanism().evaluate(binding, evidence)  # type: ignore[arg-type]


def assert_decision(
    decision: MechanismDecision | EvaluatedProposition,
    outcome: MechanismOutcome,
    reason: str,
    *,
    report: bool,
) -> dict[str, Any]:
    assert decision.outcome is outcome
    assert decision.details == reason
    observations = dict(decision.observations)
    assert observations.keys() == OBSERVATION_KEYS
    status = {PASS: "CHECKED", FAIL: "INVALID", UNKNOWN: "UNKNOWN"}[outcome]
    assert observations["status"] == status
    assert observations["reason_codes"] == ([reason] if reason else [])
    assert observations["residual_obligations"] == list(RESIDUAL_OBLIGATIONS)
    assert observations["trust_roots_meaning"] == "DECLARED_ASSUMPTIONS_ONLY"
    assert observations["claim_scope"] == "EXACT_FINITE_FORMATION_CERTIFICATE_ONLY"
    assert (observations["formation_report"] is not None) is report
    return observations


def session_refusal(result: EvaluatedProposition, details: str) -> None:
    assert result.outcome is UNKNOWN
    assert result.details == details
    assert dict(result.observations) == {}


# --- the reference checklist -------------------------------------------------------------


def test_session_rechecks_exact_certificate_without_promoting_residuals() -> None:
    binding = binding_for()
    result = run(binding)
    observations = assert_decision(result, PASS, "", report=True)
    assert result.binding_digest == binding.digest()
    assert result.observed_evidence_bytes == len(SUBJECT) + len(CERTIFICATE)
    assert observations["formation_report"] == check_formation(SUBJECT, CERTIFICATE)
    assert observations["formation_report"]["residual_obligations"] == list(RESIDUAL_OBLIGATIONS)
    assert result.mechanism_digest == MECHANISM_DIGEST
    assert formation_binding(SUBJECT, CERTIFICATE) == binding


def test_session_changed_target_is_a_bounded_binding_failure() -> None:
    result = run(binding_for(subject_id=digest(b"another target")))
    assert_decision(result, FAIL, "FORMATION_SUBJECT_BINDING_INVALID", report=False)


@pytest.mark.parametrize("name", ["ground_artifact_digest", "authority_axiom_agency_digest"])
def test_session_context_parameters_do_not_establish_context(name: str) -> None:
    result = run(binding_for(parameters={name: digest(b"a different declared coordinate")}))
    assert_decision(result, FAIL, "FORMATION_CONTEXT_BINDING_INVALID", report=False)


def _changed(case: str) -> tuple[bytes, bytes]:
    if case == "target":
        return subject([atom(OTHER_PAYLOAD)]), CERTIFICATE
    if case == "ground_context":
        return subject([atom()], ground=digest(b"other ground")), CERTIFICATE
    if case == "agency_context":
        return subject([atom()], agency=digest(b"other agency")), CERTIFICATE
    record = certificate_record(SUBJECT, subject_record([atom()]))
    record["profile_digest"] = FOREIGN
    return SUBJECT, canonical_bytes(record)


@pytest.mark.parametrize(
    "case", ["target", "ground_context", "agency_context", "certificate_profile"]
)
def test_session_old_certificate_does_not_cover_changed_bytes(case: str) -> None:
    subject_bytes, certificate_bytes = _changed(case)
    binding = formation_binding(subject_bytes, certificate_bytes)
    result = run(binding, subject_bytes, certificate_bytes)
    observations = assert_decision(result, FAIL, "FORMATION_CHECK_INVALID", report=True)
    report = observations["formation_report"]
    assert report["reason_codes"] == ["FORMATION_CERTIFICATE_BINDING_INVALID"]


def test_session_unsupported_profile_in_parameters_is_unknown() -> None:
    result = run(binding_for(parameters={"profile_digest": FOREIGN}))
    assert_decision(result, UNKNOWN, "FORMATION_PROFILE_UNSUPPORTED", report=False)


def test_session_unsupported_profile_in_subject_is_unknown() -> None:
    subject_bytes, certificate_bytes = pair([atom()], profile=FOREIGN)
    result = run(binding_for(subject_bytes, certificate_bytes), subject_bytes, certificate_bytes)
    observations = assert_decision(result, UNKNOWN, "FORMATION_CHECK_UNKNOWN", report=True)
    assert observations["formation_report"]["reason_codes"] == ["FORMATION_PROFILE_UNSUPPORTED"]


def test_session_missing_evidence_and_implementation_mismatch_are_unknown() -> None:
    empty = session_with()
    session_refusal(empty.evaluate(binding_for()), f"evidence is unavailable: {digest(SUBJECT)}")
    wrong = binding_for(mechanism_digest=digest(b"another implementation"))
    session_refusal(run(wrong), "registered mechanism digest does not match")
    unregistered = VerificationSession(EvidenceStore())
    session_refusal(unregistered.evaluate(binding_for()), "bound mechanism is not registered")


@pytest.mark.parametrize("position", [0, 1])
def test_direct_evaluation_rehashes_substituted_bytes(position: int) -> None:
    evidence = [SUBJECT, CERTIFICATE]
    evidence[position] = (
        subject([atom(), apply(0)]) if position == 0 else pair([atom(), apply(0)])[1]
    )
    decision = direct(binding_for(), tuple(evidence))
    assert_decision(decision, FAIL, "FORMATION_EVIDENCE_BINDING_INVALID", report=False)


def test_session_rechecks_tampered_evidence_store() -> None:
    session = session_with(SUBJECT, CERTIFICATE)
    items = session.evidence_store._items  # the store's memory, tampered behind its back
    items[digest(SUBJECT)], items[digest(CERTIFICATE)] = CERTIFICATE, SUBJECT
    result = session.evaluate(binding_for())
    session_refusal(result, f"evidence bytes do not match their reference: {digest(SUBJECT)}")


def test_session_forged_verdict_is_not_a_certificate() -> None:
    record = certificate_record(SUBJECT, subject_record([atom()]))
    record["status"] = "CHECKED"
    forged = canonical_bytes(record)
    result = run(binding_for(SUBJECT, forged), SUBJECT, forged)
    observations = assert_decision(result, FAIL, "FORMATION_CHECK_INVALID", report=True)
    assert observations["formation_report"]["status"] == "INVALID"
    assert observations["formation_report"]["reason_codes"] == ["FORMATION_RECORD_INVALID"]


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"expected": True}, "FORMATION_PREDICATE_UNSUPPORTED"),
        ({"expected": "PASS"}, "FORMATION_PREDICATE_UNSUPPORTED"),
        ({"expected": {"status": "CHECKED"}}, "FORMATION_PREDICATE_UNSUPPORTED"),
        ({"predicate": "bytes.sha256"}, "FORMATION_PREDICATE_UNSUPPORTED"),
        ({"parameters_exact": {}}, "FORMATION_PARAMETERS_UNSUPPORTED"),
        ({"parameters": {"claimed_status": GROUND}}, "FORMATION_PARAMETERS_UNSUPPORTED"),
        ({"trust_roots": (digest(b"a foreign root"),)}, "FORMATION_ROOTS_UNSUPPORTED"),
    ],
    ids=["expected_true", "expected_pass", "expected_dict", "predicate", "empty", "extra", "roots"],
)
def test_session_unsupported_binding_shape_is_unknown(changes: dict[str, Any], reason: str) -> None:
    if "parameters_exact" in changes:
        binding = attrs.evolve(binding_for(), parameters=changes["parameters_exact"])
    else:
        binding = binding_for(**changes)
    assert_decision(run(binding), UNKNOWN, reason, report=False)


BUDGETS: list[tuple[Any, Any, str, str]] = [
    # (items, bytes, session details or "" if the session lets it through, direct reason)
    (2, 0, "evidence byte bound exceeded", "FORMATION_LIMIT_EXCEEDED"),
    (2, 1, "evidence byte bound exceeded", "FORMATION_LIMIT_EXCEEDED"),
    (True, 1000, "evidence item bound exceeded", "FORMATION_BOUNDS_UNSUPPORTED"),
    (2, True, "evidence byte bound exceeded", "FORMATION_BOUNDS_UNSUPPORTED"),
    (2, 1.0, "evidence byte bound exceeded", "FORMATION_BOUNDS_UNSUPPORTED"),
    (3, 1000, "", "FORMATION_BOUNDS_UNSUPPORTED"),
    (2, 524289, "", "FORMATION_BOUNDS_UNSUPPORTED"),
]


@pytest.mark.parametrize(("items", "size", "session_details", "reason"), BUDGETS)
def test_exact_integer_budget_is_enforced_directly_and_in_session(
    items: Any, size: Any, session_details: str, reason: str
) -> None:
    binding = binding_for(bounds=EvidenceBounds(items, size))
    assert_decision(direct(binding), UNKNOWN, reason, report=False)
    result = run(binding)
    if session_details:
        session_refusal(result, session_details)
    else:
        assert_decision(result, UNKNOWN, reason, report=False)


@pytest.mark.parametrize("position", [0, 1])
def test_per_record_byte_budget_is_unknown(position: int) -> None:
    evidence = [SUBJECT, CERTIFICATE]
    evidence[position] = b" " * 262145
    binding = binding_for(*evidence)
    assert_decision(
        direct(binding, tuple(evidence)), UNKNOWN, "FORMATION_LIMIT_EXCEEDED", report=False
    )
    assert_decision(run(binding, *evidence), UNKNOWN, "FORMATION_LIMIT_EXCEEDED", report=False)


def test_direct_ref_order_types_and_missing_inputs_are_not_accepted() -> None:
    binding = binding_for()
    assert_decision(
        direct(binding, (SUBJECT,)), UNKNOWN, "FORMATION_EVIDENCE_UNAVAILABLE", report=False
    )
    assert_decision(
        direct(binding, (bytearray(SUBJECT), CERTIFICATE)),
        FAIL,
        "FORMATION_EVIDENCE_TYPE_INVALID",
        report=False,
    )
    assert_decision(
        direct(binding, (CERTIFICATE, SUBJECT)),
        FAIL,
        "FORMATION_EVIDENCE_BINDING_INVALID",
        report=False,
    )
    wrong = binding_for(mechanism_digest=digest(b"another implementation"))
    assert_decision(direct(wrong), UNKNOWN, "FORMATION_IMPLEMENTATION_UNSUPPORTED", report=False)


def _malformed(case: str) -> BoundProposition:
    binding = binding_for()
    if case == "parameters_upper_case":
        return binding_for(parameters={"ground_artifact_digest": GROUND.upper()})
    if case == "unsorted_trust_roots":
        object.__setattr__(binding, "trust_roots", tuple(reversed(binding.trust_roots)))
    elif case == "unprefixed_ref":
        refs = binding.evidence_refs
        object.__setattr__(binding, "evidence_refs", (refs[0].removeprefix("sha256:"), refs[1]))
    else:  # bad_subject_id
        return binding_for(subject_id="subject")
    return binding


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("parameters_upper_case", "FORMATION_PARAMETERS_UNSUPPORTED"),
        ("unsorted_trust_roots", "FORMATION_ROOTS_UNSUPPORTED"),
        ("unprefixed_ref", "FORMATION_REFERENCES_UNSUPPORTED"),
        ("bad_subject_id", "FORMATION_REFERENCES_UNSUPPORTED"),
    ],
)
def test_direct_malformed_binding_is_unknown_before_execution(case: str, reason: str) -> None:
    assert_decision(direct(_malformed(case)), UNKNOWN, reason, report=False)


def test_unexpected_checker_exception_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("checker bug")

    monkeypatch.setattr(adapter, "check_admitted_subject", broken)
    assert_decision(direct(binding_for()), UNKNOWN, "FORMATION_EXECUTION_UNKNOWN", report=False)
    assert_decision(run(binding_for()), UNKNOWN, "FORMATION_EXECUTION_UNKNOWN", report=False)


@pytest.mark.parametrize(
    ("status", "outcome", "reason"),
    [
        ("UNKNOWN", UNKNOWN, "FORMATION_CHECK_UNKNOWN"),
        ("INVALID", FAIL, "FORMATION_CHECK_INVALID"),
        ("PASS", UNKNOWN, "FORMATION_CHECK_RESULT_UNSUPPORTED"),
    ],
)
def test_checker_status_maps_to_exactly_one_outcome(
    monkeypatch: pytest.MonkeyPatch, status: str, outcome: MechanismOutcome, reason: str
) -> None:
    real = checker.check_admitted_subject

    def relabelled(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return {**real(*args, **kwargs), "status": status}

    monkeypatch.setattr(adapter, "check_admitted_subject", relabelled)
    observations = assert_decision(direct(binding_for()), outcome, reason, report=True)
    assert observations["formation_report"]["status"] == status


def test_session_never_binds_pass_to_caller_mutation_during_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    binding = binding_for()
    before = binding.digest()
    real = checker.check_admitted_subject

    def mutating(*args: Any, **kwargs: Any) -> dict[str, Any]:
        binding.parameters["ground_artifact_digest"] = digest(b"changed mid-check")  # type: ignore[index]
        return real(*args, **kwargs)

    monkeypatch.setattr(adapter, "check_admitted_subject", mutating)
    result = run(binding)
    assert result.outcome is PASS
    assert result.binding_digest == before
    assert binding.digest() != before  # the caller's object did change


def test_direct_parameters_are_copied_before_semantic_validation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    binding = binding_for()
    real = is_digest

    def mutating(value: object) -> bool:
        if value == AGENCY:  # validating a parameter value: the copy must already exist
            binding.parameters["profile_digest"] = FOREIGN  # type: ignore[index]
            binding.parameters["ground_artifact_digest"] = FOREIGN  # type: ignore[index]
        return real(value)

    monkeypatch.setattr(adapter, "is_digest", mutating)
    assert_decision(direct(binding), PASS, "", report=True)


def test_checker_exhaustion_keeps_pure_report_and_residuals() -> None:
    deep = [atom(), *(apply(index) for index in range(64))]
    subject_bytes, certificate_bytes = pair(deep)
    binding = formation_binding(subject_bytes, certificate_bytes)
    result = run(binding, subject_bytes, certificate_bytes)
    observations = assert_decision(result, UNKNOWN, "FORMATION_CHECK_UNKNOWN", report=True)
    report = observations["formation_report"]
    assert report["reason_codes"] == ["FORMATION_LIMIT_EXCEEDED"]
    assert report["residual_obligations"] == list(RESIDUAL_OBLIGATIONS)


def test_known_context_failure_precedes_later_inference_exhaustion() -> None:
    deep = [atom(), *(apply(index) for index in range(64))]
    subject_bytes, certificate_bytes = pair(deep)
    binding = binding_for(
        subject_bytes, certificate_bytes, parameters={"ground_artifact_digest": FOREIGN}
    )
    result = run(binding, subject_bytes, certificate_bytes)
    assert_decision(result, FAIL, "FORMATION_CONTEXT_BINDING_INVALID", report=False)


def _repo_root() -> Path:
    return next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())


def test_mechanism_has_exact_selected_source_identity() -> None:
    root = _repo_root()
    paths = [
        "mechanism/formation/_mechanism.py",
        "mechanism/formation/_checker.py",
        "mechanism/formation/_wire.py",
        "mechanism/canonical.py",
    ]
    identity = {
        "schema_version": "VSTD-TYPED-FORMATION-SOURCE-IDENTITY-0.1",
        "profile_digest": PROFILE_DIGEST,
        "sources": [{"path": p, "digest": digest((root / p).read_bytes())} for p in paths],
    }
    assert canonical_digest(identity) == MECHANISM_DIGEST
    assert FormationPathCertificateMechanism().mechanism_digest == MECHANISM_DIGEST
    assert FormationPathCertificateMechanism.mechanism_id == MECHANISM_ID
    assert not any("producer" in p for p in paths)


def test_adapter_imports_no_producer_and_reads_no_evidence_paths(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tree = ast.parse(Path(adapter.__file__).read_text(encoding="utf-8"))
    imported = {
        node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
    } | {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert not any("producer" in name for name in imported)

    def no_files(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("evaluation touched the filesystem")

    mechanism = FormationPathCertificateMechanism()
    binding = binding_for()
    monkeypatch.setattr(builtins, "open", no_files)
    monkeypatch.setattr(io, "open", no_files)
    monkeypatch.setattr(os, "open", no_files)
    monkeypatch.setattr(pathlib.Path, "open", no_files)
    monkeypatch.setattr(pathlib.Path, "read_bytes", no_files)
    decision = mechanism.evaluate(binding, (SUBJECT, CERTIFICATE))
    assert decision.outcome is PASS


# --- §5 preflight order and the observed reference behaviour ------------------------------


def test_binding_of_another_type_is_unsupported() -> None:
    @attrs.frozen
    class LookAlike(BoundProposition):
        pass

    look_alike = LookAlike(
        **{f.name: getattr(binding_for(), f.name) for f in attrs.fields(BoundProposition)}
    )
    for binding in (None, binding_for().to_dict(), look_alike):
        assert_decision(direct(binding), UNKNOWN, "FORMATION_BINDING_UNSUPPORTED", report=False)


def test_bare_hex_mechanism_digest_is_refused_but_bare_hex_refs_are_normalised() -> None:
    bare_mechanism = binding_for(mechanism_digest=MECHANISM_DIGEST.removeprefix("sha256:"))
    assert_decision(
        direct(bare_mechanism), UNKNOWN, "FORMATION_IMPLEMENTATION_UNSUPPORTED", report=False
    )
    bare_refs = binding_for(
        evidence_refs=(
            digest(SUBJECT).removeprefix("sha256:"),
            digest(CERTIFICATE).removeprefix("sha256:"),
        )
    )
    assert_decision(run(bare_refs), PASS, "", report=True)


def test_other_mechanism_id_is_an_implementation_mismatch() -> None:
    binding = binding_for(mechanism_id="vstd.bytes.sha256")
    assert_decision(direct(binding), UNKNOWN, "FORMATION_IMPLEMENTATION_UNSUPPORTED", report=False)


def test_parameters_that_are_not_a_plain_dict_are_unsupported() -> None:
    binding = binding_for()

    class Params(dict[str, str]):
        pass

    object.__setattr__(binding, "parameters", Params(binding.parameters))
    assert_decision(direct(binding), UNKNOWN, "FORMATION_PARAMETERS_UNSUPPORTED", report=False)


def test_trust_roots_may_not_be_a_list_or_miss_a_parameter() -> None:
    as_list = binding_for()
    object.__setattr__(as_list, "trust_roots", list(as_list.trust_roots))
    assert_decision(direct(as_list), UNKNOWN, "FORMATION_ROOTS_UNSUPPORTED", report=False)
    missing = binding_for(trust_roots=(PROFILE_DIGEST, GROUND))
    assert_decision(direct(missing), UNKNOWN, "FORMATION_ROOTS_UNSUPPORTED", report=False)


def test_references_must_be_two_distinct_digests() -> None:
    three = binding_for(evidence_refs=(digest(SUBJECT), digest(CERTIFICATE), digest(b"third")))
    assert_decision(direct(three), UNKNOWN, "FORMATION_REFERENCES_UNSUPPORTED", report=False)
    same = binding_for()
    object.__setattr__(same, "evidence_refs", (digest(SUBJECT), digest(SUBJECT)))
    assert_decision(direct(same), UNKNOWN, "FORMATION_REFERENCES_UNSUPPORTED", report=False)


@pytest.mark.parametrize("evidence", [None, b"", {0: SUBJECT}, (SUBJECT, CERTIFICATE, CERTIFICATE)])
def test_evidence_that_is_not_a_pair_is_unavailable(evidence: object) -> None:
    assert_decision(
        direct(binding_for(), evidence), UNKNOWN, "FORMATION_EVIDENCE_UNAVAILABLE", report=False
    )


def test_evidence_as_a_list_is_accepted() -> None:
    assert_decision(direct(binding_for(), [SUBJECT, CERTIFICATE]), PASS, "", report=True)


def test_oversized_item_hides_a_substitution_of_the_other_as_unknown() -> None:
    # Documented: the whole-pair size preflight precedes rehashing; this stays UNKNOWN.
    big = b" " * 262145
    binding = binding_for(SUBJECT, big)
    decision = direct(binding, (subject([atom(OTHER_PAYLOAD)]), big))
    assert_decision(decision, UNKNOWN, "FORMATION_LIMIT_EXCEEDED", report=False)


def test_consistently_swapped_roles_are_unknown_with_null_subject_digest() -> None:
    binding = binding_for(
        subject_id=digest(CERTIFICATE), evidence_refs=(digest(CERTIFICATE), digest(SUBJECT))
    )
    observations = assert_decision(
        direct(binding, (CERTIFICATE, SUBJECT)), UNKNOWN, "FORMATION_CHECK_UNKNOWN", report=True
    )
    report = observations["formation_report"]
    assert report["reason_codes"] == ["FORMATION_PROFILE_UNSUPPORTED"]
    assert report["subject_digest"] is None


def test_subject_failing_admission_is_left_to_the_checker() -> None:
    noncanonical = SUBJECT + b"\n"
    binding = binding_for(noncanonical, CERTIFICATE)
    observations = assert_decision(
        direct(binding, (noncanonical, CERTIFICATE)), FAIL, "FORMATION_CHECK_INVALID", report=True
    )
    assert observations["formation_report"]["reason_codes"] == ["FORMATION_RECORD_INVALID"]


def test_lowered_ceilings_reach_the_checker() -> None:
    chain = [atom(), apply(0), apply(1)]
    subject_bytes, certificate_bytes = pair(chain)
    binding = formation_binding(subject_bytes, certificate_bytes)
    low = FormationPathCertificateMechanism(max_depth=2)
    decision = low.evaluate(binding, (subject_bytes, certificate_bytes))
    observations = assert_decision(decision, UNKNOWN, "FORMATION_CHECK_UNKNOWN", report=True)
    assert observations["formation_report"]["reason_codes"] == ["FORMATION_LIMIT_EXCEEDED"]
    assert low.mechanism_digest == MECHANISM_DIGEST


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [
        ("max_nodes", 1025, ValueError),
        ("max_depth", 65, ValueError),
        ("max_path_steps", 4097, ValueError),
        ("max_depth", -1, ValueError),
        ("max_nodes", True, TypeError),
        ("max_depth", 10.0, TypeError),
        ("max_path_steps", "1", TypeError),
    ],
)
def test_ceilings_can_only_be_lowered(name: str, value: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        FormationPathCertificateMechanism(**{name: value})
    with pytest.raises(error):
        check_formation(SUBJECT, CERTIFICATE, **{name: value})
    # The contract says "raises ValueError/TypeError": every refusal is both, so a caller
    # catching either one catches them all.
    for caught in (ValueError, TypeError):
        with pytest.raises(caught):
            FormationPathCertificateMechanism(**{name: value})
        with pytest.raises(caught):
            check_formation(SUBJECT, CERTIFICATE, **{name: value})


def test_formation_binding_refuses_unadmittable_subject_and_identical_pair() -> None:
    from mechanism.formation import FormationError

    with pytest.raises(FormationError):
        formation_binding(SUBJECT + b" ", CERTIFICATE)
    with pytest.raises(FormationError):
        formation_binding(SUBJECT, SUBJECT)
    pinned = formation_binding(SUBJECT, CERTIFICATE, mechanism_digest=digest(b"pinned"))
    assert pinned.mechanism_digest == digest(b"pinned")


def test_every_decision_reason_is_in_the_closed_vocabulary() -> None:
    from mechanism.formation import ADAPTER_REASON_CODES

    assert len(ADAPTER_REASON_CODES) == 18
    assert all(code.startswith("FORMATION_") for code in ADAPTER_REASON_CODES)


class _LoudStr(str):
    """A str subclass equal to the real value: exactness, not equality, is required."""

    __hash__ = str.__hash__


@pytest.mark.parametrize(
    ("field", "reason"),
    [
        ("mechanism_id", "FORMATION_IMPLEMENTATION_UNSUPPORTED"),
        ("predicate", "FORMATION_PREDICATE_UNSUPPORTED"),
        ("expected", "FORMATION_PREDICATE_UNSUPPORTED"),
    ],
)
def test_identity_fields_must_be_exact_strings(field: str, reason: str) -> None:
    binding = binding_for()
    object.__setattr__(binding, field, _LoudStr(getattr(binding, field)))
    assert_decision(direct(binding), UNKNOWN, reason, report=False)


def test_an_exploding_field_is_execution_unknown_not_an_exception() -> None:
    class Exploding:
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("boom")

        __hash__ = object.__hash__

    binding = binding_for()
    object.__setattr__(binding, "subject_id", Exploding())
    decision = direct(binding)
    assert decision.outcome is UNKNOWN
