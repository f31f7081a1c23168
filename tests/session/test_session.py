"""VerificationSession: the twelve evaluation steps in order (docs/spec/formation.md §1.3)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from session import (
    BoundProposition,
    BytesDigestMechanism,
    EvidenceBindingError,
    EvidenceBounds,
    MechanismDecision,
    MechanismOutcome,
    VerificationSession,
)

DIGEST = "sha256:" + "1" * 64


class Recording:
    """A mechanism that records what it was given and answers a fixed decision."""

    mechanism_id = "test.recording"

    def __init__(self, answer: object = None, digest: str = DIGEST) -> None:
        self.mechanism_digest = digest
        self.answer = (
            answer
            if answer is not None
            else MechanismDecision(MechanismOutcome.FAIL, "no", {"k": 1})
        )
        self.calls: list[tuple[BoundProposition, Sequence[bytes]]] = []

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> Any:
        self.calls.append((binding, evidence))
        return self.answer


def setup(
    mechanism: Any, payloads: Sequence[bytes] = (b"a", b"bb"), bounds: EvidenceBounds | None = None
) -> tuple[VerificationSession, BoundProposition]:
    session = VerificationSession()
    refs = tuple(session.evidence_store.add(p) for p in payloads)
    session.register(mechanism)
    binding = BoundProposition(
        subject_id="s",
        predicate="p",
        expected="e",
        mechanism_id=mechanism.mechanism_id,
        mechanism_digest=DIGEST,
        evidence_refs=refs,
        trust_roots=("r",),
        bounds=bounds or EvidenceBounds(2, 3),
        parameters={"x": "y"},
    )
    return session, binding


def test_the_mechanism_decides_and_the_result_is_bound_to_the_snapshot() -> None:
    mechanism = Recording()
    session, binding = setup(mechanism)
    result = session.evaluate(binding)
    assert result.outcome is MechanismOutcome.FAIL
    assert result.details == "no" and result.observations == {"k": 1}
    assert result.binding_digest == binding.digest()
    assert result.observed_evidence_bytes == 3
    assert mechanism.calls[0][1] == (b"a", b"bb")
    assert mechanism.calls[0][0] is not binding  # an execution copy, never the caller's object


def test_unregistered_mechanism_is_unknown_not_fail() -> None:
    session, binding = setup(Recording())
    other = VerificationSession(session.evidence_store)
    result = other.evaluate(binding)
    assert (result.outcome, result.details, result.observed_evidence_bytes) == (
        MechanismOutcome.UNKNOWN,
        "bound mechanism is not registered",
        0,
    )
    assert result.observations == {}


def test_digest_mismatch_is_unknown() -> None:
    mechanism = Recording(digest="sha256:" + "2" * 64)
    session, binding = setup(mechanism)
    result = session.evaluate(binding)
    assert result.details == "registered mechanism digest does not match"
    assert mechanism.calls == []


def test_item_bound_is_checked_before_resolution() -> None:
    mechanism = Recording()
    session, binding = setup(mechanism, bounds=EvidenceBounds(1, 100))
    session.evidence_store._items.clear()  # resolution would fail; the item bound wins first
    result = session.evaluate(binding)
    assert result.details == "evidence item bound exceeded"
    assert result.observed_evidence_bytes == 0


def test_missing_evidence_is_unknown_with_the_store_message() -> None:
    session, binding = setup(Recording())
    session.evidence_store._items.pop(binding.evidence_refs[1])
    result = session.evaluate(binding)
    assert result.details == f"evidence is unavailable: {binding.evidence_refs[1]}"
    assert result.outcome is MechanismOutcome.UNKNOWN


def test_tampered_store_bytes_are_unknown() -> None:
    session, binding = setup(Recording())
    session.evidence_store._items[binding.evidence_refs[0]] = b"z"
    result = session.evaluate(binding)
    assert result.details.startswith("evidence bytes do not match their reference")


def test_byte_bound_is_unknown_and_reports_observed_bytes() -> None:
    mechanism = Recording()
    session, binding = setup(mechanism, bounds=EvidenceBounds(2, 2))
    result = session.evaluate(binding)
    assert (result.details, result.observed_evidence_bytes) == ("evidence byte bound exceeded", 3)
    assert mechanism.calls == []


def test_mechanism_mutating_its_copy_is_unknown() -> None:
    class Mutating(Recording):
        def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> Any:
            binding.parameters["x"] = "changed"  # type: ignore[index]
            return MechanismDecision(MechanismOutcome.PASS, "")

    session, binding = setup(Mutating())
    result = session.evaluate(binding)
    assert result.details == "mechanism changed its binding snapshot"
    assert binding.parameters == {"x": "y"}


def test_caller_mutation_during_the_check_cannot_change_the_bound_result() -> None:
    class CallerMutates(Recording):
        def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> Any:
            outer.parameters["x"] = "mutated by caller"  # type: ignore[index]
            return MechanismDecision(MechanismOutcome.PASS, "")

    session, outer = setup(CallerMutates())
    before = outer.digest()
    result = session.evaluate(outer)
    assert result.outcome is MechanismOutcome.PASS
    assert result.binding_digest == before != outer.digest()


def test_mechanism_exception_is_captured_as_unknown() -> None:
    class Raising(Recording):
        def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> Any:
            raise RuntimeError("boom")

    session, binding = setup(Raising())
    result = session.evaluate(binding)
    assert result.details == "mechanism execution failed: RuntimeError: boom"
    assert result.observations == {} and result.observed_evidence_bytes == 3


@pytest.mark.parametrize("answer", ["PASS", {"outcome": "PASS"}, True])
def test_non_decision_return_values_are_unknown(answer: object) -> None:
    session, binding = setup(Recording(answer=answer))
    result = session.evaluate(binding)
    assert result.details == "mechanism returned an invalid decision object"


def test_undigestible_binding_raises_rather_than_binding_a_result() -> None:
    session, binding = setup(Recording())
    broken = attrs.evolve(binding, expected=float("inf"))
    with pytest.raises(EvidenceBindingError, match="cannot obtain a digestible binding snapshot"):
        session.evaluate(broken)


def test_substitution_under_a_registered_id_is_refused() -> None:
    session = VerificationSession()
    session.register(Recording())
    session.register(Recording())  # same id and digest: replaced silently
    with pytest.raises(
        EvidenceBindingError, match=r"mechanism substitution refused for test\.recording"
    ):
        session.register(Recording(digest="sha256:" + "9" * 64))
    assert len(session.registered_mechanisms()) == 1


def test_registration_refuses_empty_id_and_bad_digest() -> None:
    class Nameless(Recording):
        mechanism_id = ""

    with pytest.raises(EvidenceBindingError, match="mechanism_id must not be empty"):
        VerificationSession().register(Nameless())
    with pytest.raises(EvidenceBindingError):
        VerificationSession().register(Recording(digest="nope"))


def test_bytes_digest_mechanism_pass_fail_and_unknown() -> None:
    mechanism = BytesDigestMechanism()
    session = VerificationSession()
    session.register(mechanism)
    reference = session.evidence_store.add(b"payload")

    def bind(expected: object, predicate: str = "bytes.sha256") -> BoundProposition:
        return BoundProposition(
            subject_id="s",
            predicate=predicate,
            expected=expected,
            mechanism_id="vstd.bytes.sha256",
            mechanism_digest=mechanism.mechanism_digest,
            evidence_refs=(reference,),
            trust_roots=("r",),
            bounds=EvidenceBounds(1, 100),
        )

    assert session.evaluate(bind(reference[7:])).outcome is MechanismOutcome.PASS
    failed = session.evaluate(bind("sha256:" + "0" * 64))
    assert failed.outcome is MechanismOutcome.FAIL
    assert failed.observations == {"observed_digest": reference}
    assert session.evaluate(bind(reference, "other")).outcome is MechanismOutcome.UNKNOWN
    import session._bytes_digest as module

    source = Path(str(module.__file__)).read_bytes()
    expected_digest = "sha256:" + hashlib.sha256(source).hexdigest()
    assert mechanism.mechanism_digest == expected_digest


# ---- nothing but step 1 raises (docs/spec/formation.md §1.3) -------------------


def test_decision_with_non_mapping_observations_is_an_invalid_decision_not_a_crash() -> None:
    session, binding = setup(Recording(answer=MechanismDecision(MechanismOutcome.PASS, "", 5)))  # type: ignore[arg-type]
    result = session.evaluate(binding)
    assert result.outcome is MechanismOutcome.UNKNOWN
    assert result.details == "mechanism returned an invalid decision object"
    assert result.observations == {} and result.observed_evidence_bytes == 3


def test_unhashable_mechanism_id_set_after_construction_is_not_registered() -> None:
    session, binding = setup(Recording())
    object.__setattr__(binding, "mechanism_id", ["test.recording"])
    result = session.evaluate(binding)
    assert result.outcome is MechanismOutcome.UNKNOWN
    assert result.details == "bound mechanism is not registered"


def test_registered_instance_whose_digest_became_malformed_does_not_match() -> None:
    mechanism = Recording()
    session, binding = setup(mechanism)
    mechanism.mechanism_digest = "not a digest"
    result = session.evaluate(binding)
    assert result.outcome is MechanismOutcome.UNKNOWN
    assert result.details == "registered mechanism digest does not match"
    assert mechanism.calls == []


@pytest.mark.parametrize(
    ("field", "details"),
    [
        ("max_evidence_items", "evidence item bound exceeded"),
        ("max_evidence_bytes", "evidence byte bound exceeded"),
    ],
)
def test_bound_that_cannot_be_compared_is_exceeded_not_a_crash(field: str, details: str) -> None:
    mechanism = Recording()
    session, binding = setup(mechanism)
    object.__setattr__(binding.bounds, field, "many")
    result = session.evaluate(binding)
    assert result.outcome is MechanismOutcome.UNKNOWN
    assert result.details == details
    assert mechanism.calls == []


# ---- evaluate_compound (docs/spec/formation.md §1.3) --------------------------------------------


class Compound(Recording):
    """Answers one decision per binding; records each compound invocation."""

    def __init__(self, answer: object = None) -> None:
        super().__init__()
        self.compound_answer = answer
        self.compound_calls: list[tuple[Any, Any]] = []

    def evaluate_compound(self, bindings: Any, evidence: Any) -> Any:
        self.compound_calls.append((bindings, evidence))
        if self.compound_answer is not None:
            return self.compound_answer
        return [
            MechanismDecision(MechanismOutcome.PASS, f"ok {i}", {"i": i})
            for i, _ in enumerate(bindings)
        ]


def _compound_setup(
    mechanism: Any, bounds: EvidenceBounds | None = None
) -> tuple[VerificationSession, list[BoundProposition]]:
    session, first = setup(mechanism, bounds=bounds)
    ref = session.evidence_store.add(b"ccc")
    second = attrs.evolve(first, subject_id="t", evidence_refs=(ref,))
    return session, [first, second]


def test_compound_invokes_once_and_binds_each_result_to_its_snapshot() -> None:
    mechanism = Compound()
    session, bindings = _compound_setup(mechanism)
    results = session.evaluate_compound(bindings)
    assert [r.details for r in results] == ["ok 0", "ok 1"]
    assert [r.binding_digest for r in results] == [b.digest() for b in bindings]
    assert [r.observed_evidence_bytes for r in results] == [3, 3]
    assert len(mechanism.compound_calls) == 1 and mechanism.calls == []
    copies, evidence = mechanism.compound_calls[0]
    assert evidence == ((b"a", b"bb"), (b"ccc",))
    assert all(c is not b for c, b in zip(copies, bindings, strict=True))
    assert session.evaluate_compound([]) == ()


@pytest.mark.parametrize(
    ("case", "details"),
    [
        ("two mechanisms", "compound propositions do not bind one exact mechanism"),
        ("no entry point", "bound mechanism has no compound evaluation entry point"),
        ("items", "compound evidence item bound exceeded before invocation"),
        ("bytes", "compound evidence byte bound exceeded before invocation"),
        ("one decision", "compound mechanism did not return one decision per binding"),
        ("missing", "evidence is unavailable: sha256:" + "0" * 64),
        ("unregistered", "bound mechanism is not registered"),
    ],
)
def test_compound_refusals_answer_every_binding_unknown(case: str, details: str) -> None:
    mechanism: Any = Recording() if case == "no entry point" else Compound()
    if case == "one decision":
        mechanism = Compound(answer=[MechanismDecision(MechanismOutcome.PASS, "")])
    bounds = {"items": EvidenceBounds(1, 10), "bytes": EvidenceBounds(2, 2)}.get(case)
    session, bindings = _compound_setup(mechanism, bounds)
    if case == "two mechanisms":
        bindings[1] = attrs.evolve(bindings[1], mechanism_id="other")
    if case == "missing":
        bindings[1] = attrs.evolve(bindings[1], evidence_refs=("0" * 64,))
    if case == "unregistered":
        session = VerificationSession(session.evidence_store)
    results = session.evaluate_compound(bindings)
    assert [r.outcome for r in results] == [MechanismOutcome.UNKNOWN] * 2
    assert {r.details for r in results} == {details}
    assert all(r.observations == {} for r in results)
    if isinstance(mechanism, Compound) and case != "one decision":
        assert mechanism.compound_calls == []
