"""The adapter's one-pass preflight (``_honest`` in ``mechanism/formation/_mechanism.py``).

An honest binding of exact built-in types is admitted in one pass: steps 1–13 without
``is_digest`` (each such rule holds by equality with a strict digest) and the subject's head
instead of its full admission, whose context digests then stand for the ground and agency
parameters' digest rule. Anything else takes the ordered steps. These tests hold every decision
to the ordered path's, byte for byte, with the one-pass path on and off, and name the attacks
whose rule the one pass checks only implicitly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mechanism.formation._mechanism as adapter
from mechanism.canonical import canonical_bytes
from mechanism.formation import (
    MECHANISM_DIGEST,
    PROFILE_DIGEST,
    FormationPathCertificateMechanism,
    formation_binding,
)
from mechanism.formation._wire import MAX_RECORD_BYTES
from session import (
    BoundProposition,
    EvidenceBounds,
    EvidenceStore,
    MechanismDecision,
    MechanismOutcome,
    VerificationSession,
)

from ._builders import AGENCY, GROUND, apply, apply_step, atom, digest, pair

SUBJECT, CERTIFICATE = pair([atom(), apply(0)])
BAD_SUBJECT, BAD_CERTIFICATE = pair([atom(), apply(0), apply_step(0, 0)])


class _Str(str):
    pass


def _encoded(decision: MechanismDecision) -> bytes:
    return canonical_bytes(
        {
            "outcome": decision.outcome.value,
            "details": decision.details,
            "observations": dict(decision.observations),
        }
    )


def _ordered(binding: object, evidence: object, **ceilings: int) -> MechanismDecision:
    original = adapter._honest
    adapter._honest = lambda binding, evidence: None
    try:
        return FormationPathCertificateMechanism(**ceilings).evaluate(binding, evidence)  # type: ignore[arg-type]
    finally:
        adapter._honest = original


def _both(binding: object, evidence: object, **ceilings: int) -> MechanismDecision:
    ordered = _ordered(binding, evidence, **ceilings)
    one_pass = FormationPathCertificateMechanism(**ceilings).evaluate(binding, evidence)  # type: ignore[arg-type]
    assert _encoded(one_pass) == _encoded(ordered)
    return one_pass


def _set(name: str, value: object) -> Callable[[BoundProposition], None]:
    return lambda binding: object.__setattr__(binding, name, value)


def _parameter(name: str, value: object) -> Callable[[BoundProposition], None]:
    return lambda binding: binding.parameters.__setitem__(name, value)  # type: ignore[index]


def _roots(value: object) -> Callable[[BoundProposition], None]:
    return _set("trust_roots", value)


def _float_bounds(bounds: EvidenceBounds) -> None:
    object.__setattr__(bounds, "max_evidence_items", 2.0)
    object.__setattr__(bounds, "max_evidence_bytes", 9000.0)


SORTED_ROOTS = tuple(sorted({PROFILE_DIGEST, GROUND, AGENCY}))
REF_SUBJECT, REF_CERTIFICATE = digest(SUBJECT), digest(CERTIFICATE)

CHANGES: dict[str, Callable[[BoundProposition], None]] = {
    "nothing": lambda binding: None,
    "mechanism id another string": _set("mechanism_id", "other"),
    "mechanism id an equal str subclass": _set(
        "mechanism_id", _Str(FormationPathCertificateMechanism.mechanism_id)
    ),
    "mechanism digest an equal str subclass": _set("mechanism_digest", _Str(MECHANISM_DIGEST)),
    "mechanism digest bare hex": _set("mechanism_digest", MECHANISM_DIGEST[7:]),
    "mechanism digest upper case": _set("mechanism_digest", MECHANISM_DIGEST.upper()),
    "predicate an equal str subclass": _set(
        "predicate", _Str(FormationPathCertificateMechanism.mechanism_id)
    ),
    "expected an equal str subclass": _set("expected", _Str("CHECKED")),
    "expected PASS": _set("expected", "PASS"),
    "parameters a list of pairs": _set("parameters", []),
    "parameter key a str subclass": lambda b: b.parameters.update(  # type: ignore[attr-defined]
        {_Str("x"): GROUND}
    ),
    "parameter added": _parameter("extra", GROUND),
    "ground parameter upper case": _parameter("ground_artifact_digest", GROUND.upper()),
    "ground parameter not a digest": _parameter("ground_artifact_digest", "ground"),
    "ground parameter another digest": _parameter("ground_artifact_digest", digest(b"x")),
    "ground parameter an equal str subclass": _parameter("ground_artifact_digest", _Str(GROUND)),
    "agency parameter bare hex": _parameter("authority_axiom_agency_digest", AGENCY[7:]),
    "agency parameter an int": _parameter("authority_axiom_agency_digest", 7),
    "profile parameter another digest": _parameter("profile_digest", digest(b"p")),
    "profile parameter an equal str subclass": _parameter("profile_digest", _Str(PROFILE_DIGEST)),
    "roots a list": _roots(list(SORTED_ROOTS)),
    "roots reversed": _roots(tuple(reversed(SORTED_ROOTS))),
    "roots with an equal str subclass": _roots((_Str(SORTED_ROOTS[0]), *SORTED_ROOTS[1:])),
    "roots one short": _roots(SORTED_ROOTS[:2]),
    "bounds three items": _set("bounds", EvidenceBounds(3, 2 * MAX_RECORD_BYTES)),
    "bounds a byte too few": _set("bounds", EvidenceBounds(2, len(SUBJECT) + len(CERTIFICATE) - 1)),
    "bounds above the pair limit": _set("bounds", EvidenceBounds(2, 2 * MAX_RECORD_BYTES + 1)),
    "bounds of floats": lambda b: _float_bounds(b.bounds),
    "refs bare hex": _set("evidence_refs", (REF_SUBJECT[7:], REF_CERTIFICATE[7:])),
    "refs upper case": _set("evidence_refs", (REF_SUBJECT.upper(), REF_CERTIFICATE)),
    "refs equal str subclasses": _set("evidence_refs", (_Str(REF_SUBJECT), _Str(REF_CERTIFICATE))),
    "refs a list": _set("evidence_refs", [REF_SUBJECT, REF_CERTIFICATE]),
    "refs swapped": _set("evidence_refs", (REF_CERTIFICATE, REF_SUBJECT)),
    "refs the same twice": _set("evidence_refs", (REF_SUBJECT, REF_SUBJECT)),
    "refs three": _set("evidence_refs", (REF_SUBJECT, REF_CERTIFICATE, digest(b"3"))),
    "subject id bare hex": _set("subject_id", REF_SUBJECT[7:]),
    "subject id an equal str subclass": _set("subject_id", _Str(REF_SUBJECT)),
    "subject id the certificate": _set("subject_id", REF_CERTIFICATE),
}

EVIDENCE: dict[str, object] = {
    "the pair": (SUBJECT, CERTIFICATE),
    "the pair as a list": [SUBJECT, CERTIFICATE],
    "swapped": (CERTIFICATE, SUBJECT),
    "one item": (SUBJECT,),
    "three items": (SUBJECT, CERTIFICATE, b""),
    "a bytearray": (bytearray(SUBJECT), CERTIFICATE),
    "a tuple subclass": type("T", (tuple,), {})((SUBJECT, CERTIFICATE)),
    "a longer certificate": (SUBJECT, CERTIFICATE + b" "),
    "another subject": (BAD_SUBJECT, CERTIFICATE),
    "an oversized subject": (b" " * (MAX_RECORD_BYTES + 1), CERTIFICATE),
    "not a sequence": 5,
}


def _binding(change: Callable[[BoundProposition], None]) -> BoundProposition:
    binding = formation_binding(SUBJECT, CERTIFICATE)
    change(binding)
    return binding


@pytest.mark.parametrize("evidence", list(EVIDENCE), ids=list(EVIDENCE))
@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_every_decision_is_the_ordered_paths(change: str, evidence: str) -> None:
    _both(_binding(CHANGES[change]), EVIDENCE[evidence])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(sorted(CHANGES)), max_size=3),
    st.sampled_from(sorted(EVIDENCE)),
    st.sampled_from([{}, {"max_nodes": 1}, {"max_depth": 1}, {"max_path_steps": 0}]),
)
def test_combined_changes_decide_as_the_ordered_path(
    changes: list[str], evidence: str, ceilings: dict[str, int]
) -> None:
    binding = formation_binding(SUBJECT, CERTIFICATE)
    for name in changes:
        with contextlib.suppress(AttributeError, TypeError):  # parameters no longer a dict
            CHANGES[name](binding)
    _both(binding, EVIDENCE[evidence], **ceilings)


@pytest.mark.parametrize(
    ("subject", "certificate"),
    [
        (BAD_SUBJECT, BAD_CERTIFICATE),  # admits and binds, the pure check refuses it
        (SUBJECT, BAD_CERTIFICATE),
        pair([atom(), {"tag": "APPLY", "argument": 1}]),  # the head admits, a node does not
        pair([atom(), {"tag": "APPLY", "argument": 0, "x": 1}]),
        pair([atom("sha256:" + "G" * 64)]),
        pair([atom()], ground=digest(b"declared elsewhere")),
        pair([atom()], profile=digest(b"another profile")),
    ],
)
def test_subjects_the_pure_check_refuses_decide_as_the_ordered_path(
    subject: bytes, certificate: bytes
) -> None:
    binding = BoundProposition(
        subject_id=digest(subject),
        predicate=FormationPathCertificateMechanism.mechanism_id,
        expected="CHECKED",
        mechanism_id=FormationPathCertificateMechanism.mechanism_id,
        mechanism_digest=MECHANISM_DIGEST,
        evidence_refs=(digest(subject), digest(certificate)),
        trust_roots=(PROFILE_DIGEST, GROUND, AGENCY),
        bounds=EvidenceBounds(2, 2 * MAX_RECORD_BYTES),
        parameters={
            "profile_digest": PROFILE_DIGEST,
            "ground_artifact_digest": GROUND,
            "authority_axiom_agency_digest": AGENCY,
        },
    )
    _both(binding, (subject, certificate))


# ---- the attacks whose rule the one pass checks only implicitly ----------------------------


def test_bare_hex_references_to_the_right_bytes_are_refused_not_passed() -> None:
    # The references' digest rule holds in one pass only by equality with the items' digests.
    binding = _binding(CHANGES["refs bare hex"])
    decision = _both(binding, (SUBJECT, CERTIFICATE))
    assert decision.details == "FORMATION_REFERENCES_UNSUPPORTED"


def test_a_context_parameter_that_is_no_digest_is_unsupported_not_a_context_failure() -> None:
    # The ground/agency digest rule holds in one pass only by equality with the admitted
    # context; a value that is no digest must still be step 4's refusal, not step 14's.
    for change in ("ground parameter not a digest", "agency parameter bare hex"):
        decision = _both(_binding(CHANGES[change]), (SUBJECT, CERTIFICATE))
        assert decision.details == "FORMATION_PARAMETERS_UNSUPPORTED"


def test_a_mechanism_digest_that_only_compares_equal_is_another_implementation() -> None:
    decision = _both(
        _binding(CHANGES["mechanism digest an equal str subclass"]), (SUBJECT, CERTIFICATE)
    )
    assert decision.details == "FORMATION_IMPLEMENTATION_UNSUPPORTED"


def test_a_subject_id_that_only_compares_equal_is_no_reference() -> None:
    decision = _both(_binding(CHANGES["subject id an equal str subclass"]), (SUBJECT, CERTIFICATE))
    assert decision.details == "FORMATION_REFERENCES_UNSUPPORTED"


def test_a_subject_whose_head_admits_but_a_node_does_not_is_the_checkers_refusal() -> None:
    subject, certificate = pair([atom(), {"tag": "APPLY", "argument": 1}])
    binding = formation_binding(SUBJECT, CERTIFICATE)
    object.__setattr__(binding, "subject_id", digest(subject))
    object.__setattr__(binding, "evidence_refs", (digest(subject), digest(certificate)))
    decision = _both(binding, (subject, certificate))
    assert decision.details == "FORMATION_CHECK_INVALID"
    assert decision.observations["formation_report"]["reason_codes"] == ["FORMATION_RECORD_INVALID"]


def test_evidence_mutated_in_the_store_after_the_snapshot_is_not_evaluated() -> None:
    store = EvidenceStore()
    first = store.add(SUBJECT)
    store.add(CERTIFICATE)
    store._items[first] = BAD_SUBJECT  # swapped after it was hashed
    session = VerificationSession(store)
    session.register(FormationPathCertificateMechanism())
    result = session.evaluate(formation_binding(SUBJECT, CERTIFICATE))
    assert result.outcome is MechanismOutcome.UNKNOWN
    assert result.details.startswith("evidence bytes do not match their reference")


def test_the_one_pass_reads_the_parameters_once_and_only_its_copy() -> None:
    class Counting(dict[str, Any]):
        reads = 0

    binding = formation_binding(SUBJECT, CERTIFICATE)
    # Not an exact dict: the ordered path decides (step 4), and the one pass reads nothing of it.
    object.__setattr__(binding, "parameters", Counting(binding.parameters))
    decision = _both(binding, (SUBJECT, CERTIFICATE))
    assert decision.details == "FORMATION_PARAMETERS_UNSUPPORTED"


def test_an_honest_pair_passes_through_the_real_session() -> None:
    store = EvidenceStore()
    store.add(SUBJECT)
    store.add(CERTIFICATE)
    session = VerificationSession(store)
    session.register(FormationPathCertificateMechanism())
    result = session.evaluate(formation_binding(SUBJECT, CERTIFICATE))
    assert result.outcome is MechanismOutcome.PASS
    ordered = _ordered(formation_binding(SUBJECT, CERTIFICATE), (SUBJECT, CERTIFICATE))
    assert dict(result.observations) == dict(ordered.observations)


def test_an_honest_snapshot_takes_the_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    answers: list[object] = []
    real = adapter._honest

    def recording(binding: object, evidence: object) -> Any:
        answers.append(real(binding, evidence))
        return answers[-1]

    monkeypatch.setattr(adapter, "_honest", recording)
    store = EvidenceStore()
    store.add(SUBJECT)
    store.add(CERTIFICATE)
    session = VerificationSession(store)
    session.register(FormationPathCertificateMechanism())
    assert session.evaluate(formation_binding(SUBJECT, CERTIFICATE)).passed
    assert len(answers) == 1 and answers[0] is not None
