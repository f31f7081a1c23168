"""The session's one-pass snapshot (``session/_snapshot.py``): for any binding, the snapshot
is what ``BoundProposition.__deepcopy__`` makes and its digest is ``digest()`` of that copy,
byte for byte; what a plain snapshot reports and records is read before any mechanism holds
it; and the copy shares nothing mutable with the caller's binding. And what the session vouches
for while a mechanism runs (``session/_resolved.py``): the references of the one evidence
tuple it handed, during that call only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from binding_strategies import bindings
from hypothesis import given, settings

from session import (
    BoundProposition,
    EvaluatedProposition,
    EvidenceBindingError,
    EvidenceBounds,
    EvidenceStore,
    FrozenInstanceError,
    MechanismDecision,
    MechanismOutcome,
    VerificationSession,
    resolved_references,
)
from session._snapshot import normalised_digest, take, unchanged
from session._types import _BINDING_FIELDS, evaluated, normalise_digest
from session.canon import digest_bytes


def _binding(**changes: Any) -> BoundProposition:
    fields: dict[str, Any] = {
        "subject_id": "s",
        "predicate": "p",
        "expected": "e",
        "mechanism_id": "m",
        "mechanism_digest": "ab" * 32,
        "evidence_refs": ("cd" * 32,),
        "trust_roots": ("r",),
        "bounds": EvidenceBounds(1, 64),
        "parameters": {"k": "v"},
    }
    fields.update(changes)
    return BoundProposition(**fields)


@settings(max_examples=1500, deadline=None)
@given(binding=bindings())
def test_the_snapshot_is_the_deep_copy_and_its_digest_is_the_copys_digest(
    binding: BoundProposition,
) -> None:
    reference = binding.__deepcopy__({})
    taken = take(binding)
    assert taken.binding is not binding
    assert taken.digest == reference.digest() == binding.digest()
    for name in _BINDING_FIELDS:
        assert getattr(taken.binding, name) == getattr(reference, name)
    assert taken.binding.parameters is not binding.parameters
    assert (taken.mechanism_id, taken.mechanism_digest) == (
        binding.mechanism_id,
        binding.mechanism_digest,
    )
    assert (taken.evidence_refs, taken.trust_roots) == (binding.evidence_refs, binding.trust_roots)
    if taken.recorded is not None:
        assert taken.bound_digest == normalise_digest(binding.mechanism_digest)
        assert unchanged(taken.binding, taken.recorded)


@pytest.mark.parametrize(
    "expected", ["del\x7f", "café", 2**64, -(2**63) - 1, True, None, 0, '\x00"']
)
def test_a_plain_binding_the_orjson_form_cannot_encode_is_digested_by_the_core_codec(
    expected: object,
) -> None:
    binding = _binding(expected=expected, parameters={"k": "é"})
    taken = take(binding)
    assert taken.recorded is not None
    assert taken.digest == binding.digest()


def test_a_mechanism_digest_replaced_by_garbage_before_the_snapshot_is_undigestible() -> None:
    binding = _binding()
    object.__setattr__(binding, "mechanism_digest", "garbage")
    with pytest.raises(EvidenceBindingError, match="cannot obtain a digestible binding snapshot"):
        take(binding)


def test_a_binding_with_a_deleted_field_is_undigestible() -> None:
    binding = _binding()
    object.__delattr__(binding, "predicate")
    with pytest.raises(EvidenceBindingError, match="cannot obtain a digestible binding snapshot"):
        take(binding)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("subject_id", type("S", (str,), {})("s")),
        ("expected", ["e"]),
        ("evidence_refs", ["cd" * 32]),
        ("trust_roots", (type("S", (str,), {})("r"),)),
        ("bounds", EvidenceBounds(1.0, 64)),  # type: ignore[arg-type]
        ("parameters", {"k": 1}),
    ],
)
def test_a_binding_of_other_types_is_deep_copied_and_not_recorded(name: str, value: object) -> None:
    binding = _binding()
    object.__setattr__(binding, name, value)
    taken = take(binding)
    assert taken.recorded is None and taken.bound_digest is None
    assert taken.digest == binding.digest()
    assert getattr(taken.binding, name) == value


def test_parameters_mutated_by_the_caller_after_the_snapshot_are_not_evaluated() -> None:
    seen: list[dict[str, str]] = []

    class Mechanism:
        mechanism_id = "m"
        mechanism_digest = "sha256:" + "ab" * 32

        def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> Any:
            outer.parameters["k"] = "swapped"  # type: ignore[index]
            seen.append(dict(binding.parameters))
            return MechanismDecision(MechanismOutcome.PASS, "")

    session = VerificationSession()
    ref = session.evidence_store.add(b"x")
    session.register(Mechanism())
    outer = _binding(evidence_refs=(ref,))
    before = outer.digest()
    result = session.evaluate(outer)
    assert seen == [{"k": "v"}]
    assert result.binding_digest == before != outer.digest()


def test_a_field_replaced_by_an_equal_object_after_the_snapshot_is_digested_again() -> None:
    binding = _binding()
    taken = take(binding)
    assert taken.recorded is not None
    object.__setattr__(taken.binding, "subject_id", "".join(["", "s"]))
    assert not unchanged(taken.binding, taken.recorded)


def test_a_parameter_swapped_in_place_after_the_snapshot_is_seen() -> None:
    taken = take(_binding(parameters={"a": "1", "b": "2"}))
    assert taken.recorded is not None
    taken.binding.parameters["b"] = "3"  # type: ignore[index]
    assert not unchanged(taken.binding, taken.recorded)


def test_a_remembered_normalisation_answers_only_for_the_same_text() -> None:
    assert normalised_digest("ab" * 32) == "sha256:" + "ab" * 32
    assert normalised_digest("sha256:" + "ab" * 32) == "sha256:" + "ab" * 32
    with pytest.raises(EvidenceBindingError):
        normalised_digest("AB" * 32)
    with pytest.raises(EvidenceBindingError):
        normalised_digest(b"ab" * 32)


def test_a_registered_digest_changed_to_another_digest_does_not_match() -> None:
    class Mechanism:
        mechanism_id = "m"
        mechanism_digest = "sha256:" + "ab" * 32

        def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> Any:
            raise AssertionError("must not be called")

    mechanism = Mechanism()
    session = VerificationSession()
    ref = session.evidence_store.add(b"x")
    session.register(mechanism)
    mechanism.mechanism_digest = "sha256:" + "cd" * 32
    result = session.evaluate(_binding(evidence_refs=(ref,)))
    assert result.details == "registered mechanism digest does not match"


# ---- resolved_references: what the session proved about the evidence it hands -------------


def test_only_the_handed_tuple_resolves_and_only_during_the_call() -> None:
    seen: list[object] = []

    class Mechanism:
        mechanism_id = "m"
        mechanism_digest = "sha256:" + "ab" * 32

        def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> Any:
            seen.append(resolved_references(evidence))
            seen.append(resolved_references(tuple(bytes(item) for item in evidence)))
            seen.append(resolved_references(list(evidence)))
            return MechanismDecision(MechanismOutcome.PASS, "")

    session = VerificationSession()
    refs = (session.evidence_store.add(b"x"), session.evidence_store.add(b"yy"))
    session.register(Mechanism())
    held: list[object] = []
    original = Mechanism.evaluate

    def keeping(self: Mechanism, binding: BoundProposition, evidence: Sequence[bytes]) -> Any:
        held.append(evidence)
        return original(self, binding, evidence)

    Mechanism.evaluate = keeping  # type: ignore[method-assign]
    bare = _binding(evidence_refs=refs, bounds=EvidenceBounds(2, 64))
    object.__setattr__(bare, "evidence_refs", tuple(ref.removeprefix("sha256:") for ref in refs))
    assert session.evaluate(bare).passed
    assert seen == [refs, None, None]  # normalised, as the store resolved them
    assert resolved_references(held[0]) is None  # the call returned


def test_a_mechanism_that_raises_leaves_nothing_resolved() -> None:
    held: list[object] = []

    class Raising:
        mechanism_id = "m"
        mechanism_digest = "sha256:" + "ab" * 32

        def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> Any:
            held.append(evidence)
            raise RuntimeError("boom")

    session = VerificationSession()
    ref = session.evidence_store.add(b"x")
    session.register(Raising())
    result = session.evaluate(_binding(evidence_refs=(ref,)))
    assert result.details == "mechanism execution failed: RuntimeError: boom"
    assert resolved_references(held[0]) is None


def test_evidence_swapped_in_the_store_is_never_handed_as_resolved() -> None:
    class Mechanism:
        mechanism_id = "m"
        mechanism_digest = "sha256:" + "ab" * 32

        def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> Any:
            raise AssertionError("must not be called")

    session = VerificationSession()
    ref = session.evidence_store.add(b"x")
    session.evidence_store._items[ref] = b"swapped"
    session.register(Mechanism())
    result = session.evaluate(_binding(evidence_refs=(ref,)))
    assert result.details == f"evidence bytes do not match their reference: {ref}"


def test_a_store_of_another_class_hands_nothing_as_resolved() -> None:
    seen: list[object] = []

    class Store(EvidenceStore):
        def resolve(self, reference: str) -> bytes:
            return b"whatever the subclass says"

    class Mechanism:
        mechanism_id = "m"
        mechanism_digest = "sha256:" + "ab" * 32

        def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> Any:
            seen.append(resolved_references(evidence))
            return MechanismDecision(MechanismOutcome.PASS, "")

    session = VerificationSession(Store())
    session.register(Mechanism())
    assert session.evaluate(_binding()).passed
    assert seen == [None]


def test_a_session_inside_a_mechanism_restores_the_outer_answer() -> None:
    seen: list[tuple[str, object]] = []

    class Inner:
        mechanism_id = "inner"
        mechanism_digest = "sha256:" + "ab" * 32

        def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> Any:
            seen.append(("inner", resolved_references(evidence)))
            return MechanismDecision(MechanismOutcome.PASS, "")

    class Outer:
        mechanism_id = "outer"
        mechanism_digest = "sha256:" + "ab" * 32

        def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> Any:
            inner = VerificationSession()
            ref = inner.evidence_store.add(b"inner")
            inner.register(Inner())
            inner.evaluate(_binding(mechanism_id="inner", evidence_refs=(ref,)))
            seen.append(("outer", resolved_references(evidence)))
            return MechanismDecision(MechanismOutcome.PASS, "")

    session = VerificationSession()
    ref = session.evidence_store.add(b"outer")
    session.register(Outer())
    assert session.evaluate(_binding(mechanism_id="outer", evidence_refs=(ref,))).passed
    assert seen[0] == ("inner", (digest_bytes(b"inner"),))
    assert seen[1] == ("outer", (ref,))


def test_the_result_is_made_as_the_generated_constructor_makes_it() -> None:
    values: dict[str, Any] = {
        "binding_digest": "ab" * 32,
        "outcome": MechanismOutcome.FAIL,
        "mechanism_id": "m",
        "mechanism_digest": "sha256:" + "cd" * 32,
        "evidence_refs": ("sha256:" + "ef" * 32,),
        "trust_roots": ("r",),
        "observed_evidence_bytes": 7,
        "details": "d",
        "observations": {"k": [1]},
    }
    made = evaluated(*values.values())
    assert made == EvaluatedProposition(**values)
    assert all(getattr(made, name) is value for name, value in values.items())
    with pytest.raises(FrozenInstanceError):
        made.details = "other"  # type: ignore[misc]
