"""The pair pre-check pipeline: named steps, the first that does not hold decides.

The order is each mechanism's contract (tests/mechanism/test_precheck_declarations.py pins the
built-in mechanisms'); these tests pin that the first step that does not hold decides, that no
later step runs, and that a step that raises is reported by name (each mechanism decides what
that means). Source identities are here too: the other shared piece of every mechanism.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from session import (
    BoundProposition,
    EvidenceBounds,
    MechanismOutcome,
    PairPrecheck,
    PairState,
    PrecheckFailed,
    Refusal,
    SourceIdentity,
    file_digest,
)
from session import precheck as steps
from session.canon import core_digest, digest_bytes

SUBJECT, COMPANION = b"subject bytes", b"companion bytes"
REFS = (digest_bytes(SUBJECT), digest_bytes(COMPANION))
DIGEST = "sha256:" + "1" * 64
STANDARD = (
    "binding",
    "implementation",
    "predicate",
    "parameters",
    "trust_roots",
    "bounds",
    "references",
    "subject",
    "evidence",
    "evidence_type",
    "evidence_size",
    "rehash",
)


def _pipeline(log: list[str]) -> PairPrecheck:
    def logged(step: steps.PrecheckStep) -> steps.PrecheckStep:
        def holds(state: PairState) -> bool:
            log.append(step.name)
            return step.holds(state)

        return steps.PrecheckStep(step.name, step.code, step.outcome, holds)

    return PairPrecheck(
        [
            logged(s)
            for s in (
                steps.binding_type("B"),
                steps.implementation("I", "m.id", DIGEST),
                steps.predicate("P", "m.id", "OK"),
                steps.parameters("A", {"k"}, lambda copied: copied["k"] == "v"),
                steps.trust_roots("T", lambda copied: ("root",)),
                steps.pair_bounds("N", 100),
                steps.pair_references("R"),
                steps.subject_is_first("S"),
                steps.evidence_pair("E"),
                steps.evidence_bytes("Y"),
                steps.evidence_size("Z", 50),
                steps.evidence_rehash("H"),
            )
        ]
    )


def _binding(**changes: Any) -> BoundProposition:
    fields: dict[str, Any] = {
        "subject_id": REFS[0],
        "predicate": "m.id",
        "expected": "OK",
        "mechanism_id": "m.id",
        "mechanism_digest": DIGEST,
        "evidence_refs": REFS,
        "trust_roots": ("root",),
        "bounds": EvidenceBounds(2, 100),
        "parameters": {"k": "v"},
    }
    fields.update(changes)
    return BoundProposition(**fields)


@pytest.mark.parametrize(
    ("breaks", "binding", "evidence", "outcome", "code"),
    [
        ("binding", {"binding": "not a binding"}, (SUBJECT, COMPANION), "UNKNOWN", "B"),
        ("implementation", {"mechanism_digest": DIGEST[7:]}, (SUBJECT, COMPANION), "UNKNOWN", "I"),
        ("predicate", {"expected": "NO"}, (SUBJECT, COMPANION), "UNKNOWN", "P"),
        ("parameters", {"parameters": {"k": "w"}}, (SUBJECT, COMPANION), "UNKNOWN", "A"),
        ("trust_roots", {"trust_roots": ("other",)}, (SUBJECT, COMPANION), "UNKNOWN", "T"),
        ("bounds", {"bounds": EvidenceBounds(3, 100)}, (SUBJECT, COMPANION), "UNKNOWN", "N"),
        ("references", {"subject_id": "s"}, (SUBJECT, COMPANION), "UNKNOWN", "R"),
        ("subject", {"subject_id": REFS[1]}, (SUBJECT, COMPANION), "FAIL", "S"),
        ("evidence", {}, (SUBJECT,), "UNKNOWN", "E"),
        ("evidence_type", {}, (SUBJECT, bytearray(COMPANION)), "FAIL", "Y"),
        ("evidence_size", {}, (SUBJECT * 5, COMPANION), "UNKNOWN", "Z"),
        ("rehash", {}, (COMPANION, SUBJECT), "FAIL", "H"),
    ],
)
def test_the_first_step_that_does_not_hold_decides_and_no_later_step_runs(
    breaks: str, binding: dict[str, Any], evidence: tuple[Any, ...], outcome: str, code: str
) -> None:
    log: list[str] = []
    subject = binding.pop("binding") if "binding" in binding else _binding(**binding)
    answer = _pipeline(log).run(subject, evidence)
    assert answer == Refusal(breaks, MechanismOutcome(outcome), code)
    assert log == list(STANDARD[: STANDARD.index(breaks) + 1])


def test_an_admitted_pair_carries_a_private_copy_of_the_parameters() -> None:
    binding = _binding()
    admitted = _pipeline([]).run(binding, [SUBJECT, COMPANION])
    assert isinstance(admitted, PairState)
    assert admitted.items == (SUBJECT, COMPANION)
    assert admitted.parameters == {"k": "v"}
    admitted.parameters["k"] = "changed"
    assert binding.parameters == {"k": "v"}


def test_a_step_that_raises_is_named_with_its_cause() -> None:
    def explode(state: PairState) -> bool:
        raise RuntimeError("boom")

    pipeline = PairPrecheck((steps.binding_type("B"), steps.step("custom", "C", explode)))
    with pytest.raises(PrecheckFailed) as failed:
        pipeline.run(_binding(), (SUBJECT, COMPANION))
    assert failed.value.step == "custom"
    assert isinstance(failed.value.__cause__, RuntimeError)


def test_step_names_are_unique() -> None:
    with pytest.raises(ValueError, match="repeat"):
        PairPrecheck((steps.binding_type("B"), steps.binding_type("B2")))


def test_a_source_identity_is_the_canonical_digest_of_its_document(tmp_path: Path) -> None:
    first, second = tmp_path / "a.py", tmp_path / "b.py"
    first.write_bytes(b"A = 1\n")
    second.write_bytes(b"B = 2\n")
    identity = SourceIdentity.read(
        "SCHEMA-1", [("pkg/a.py", first), ("pkg/b.py", second)], {"pin": DIGEST}
    )
    document = identity.document()
    assert document == {
        "schema_version": "SCHEMA-1",
        "pin": DIGEST,
        "sources": [
            {"path": "pkg/a.py", "digest": file_digest(first)},
            {"path": "pkg/b.py", "digest": file_digest(second)},
        ],
    }
    assert identity.digest == "sha256:" + core_digest(document)
    second.write_bytes(b"B = 3\n")
    changed = SourceIdentity.read(
        "SCHEMA-1", [("pkg/a.py", first), ("pkg/b.py", second)], {"pin": DIGEST}
    )
    assert changed.digest != identity.digest
    with pytest.raises(ValueError, match="ASCII"):
        SourceIdentity.read("SCHEMA-1", [("pkg/ä.py", first)])


@pytest.mark.parametrize(
    ("subject", "companion", "admitted"),
    [
        (b"s" * 1000, b"c" * 16, True),  # a large subject with a small companion
        (b"s" * 1000, b"c" * 17, False),  # the companion over its own limit
        (b"s" * 1001, b"c" * 16, False),  # the subject over its own limit
    ],
)
def test_a_small_companion_cannot_borrow_the_subjects_item_limit(
    subject: bytes, companion: bytes, admitted: bool
) -> None:
    """One limit for both items lets a companion grow to the subject's size before any parser
    sees it; ``evidence_sizes`` gives each item its own."""
    pipeline = PairPrecheck(
        (
            steps.evidence_pair("E"),
            steps.evidence_bytes("Y"),
            steps.evidence_sizes("Z", (1000, 16)),
        )
    )
    binding = _binding(bounds=EvidenceBounds(2, 2000))
    answer = pipeline.run(binding, (subject, companion))
    if admitted:
        assert isinstance(answer, PairState)
    else:
        assert answer == Refusal("evidence_size", MechanismOutcome.UNKNOWN, "Z")
    over_the_pair = pipeline.run(_binding(bounds=EvidenceBounds(2, 1015)), (b"s" * 1000, b"c" * 16))
    assert over_the_pair == Refusal("evidence_size", MechanismOutcome.UNKNOWN, "Z")


_STEP_ARGUMENTS: dict[str, tuple[Any, ...]] = {
    "binding_type": (),
    "implementation": ("m.id", DIGEST),
    "predicate": ("m.id", "OK"),
    "parameters": ((), lambda copied: True),
    "trust_roots": (lambda copied: (),),
    "pair_bounds": (100,),
    "pair_references": (),
    "subject_is_first": (),
    "evidence_pair": (),
    "evidence_bytes": (),
    "evidence_size": (50,),
    "evidence_sizes": ((50, 10),),
    "evidence_rehash": (),
}


def test_every_standard_step_documents_what_it_checks_and_its_outcome() -> None:
    """The API reference is generated from these docstrings: each standard step names the step
    it makes and the outcome it answers (an undocumented step would leave an author reading
    the source)."""
    public = {
        name
        for name in steps.__all__
        if callable(getattr(steps, name)) and name[0].islower() and name != "step"
    }
    assert public == set(_STEP_ARGUMENTS)
    for name, arguments in _STEP_ARGUMENTS.items():
        made = getattr(steps, name)("CODE", *arguments)
        doc = getattr(steps, name).__doc__ or ""
        assert f"Step ``{made.name}``" in doc, name
        outcome = "**FAIL**" if made.outcome is MechanismOutcome.FAIL else "UNKNOWN"
        assert outcome in doc, name
    assert "evidence_sizes" in (steps.__doc__ or "")
