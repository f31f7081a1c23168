"""The daemon evaluates through VerificationSession, which decides steps 7 and 9 of
docs/spec/formation.md §1.3 for plain bindings by comparing field values instead of re-encoding the
execution copy. These tests defend that shortcut: whatever a mechanism does to its copy, the
result is "mechanism changed its binding snapshot" exactly when the copy's digest changed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from session import (
    BoundProposition,
    EvidenceBounds,
    MechanismDecision,
    MechanismOutcome,
    VerificationSession,
)

DIGEST = "sha256:" + "2" * 64
CHANGED = "mechanism changed its binding snapshot"


class _Str(str):
    pass


def _set(name: str, value: object) -> Callable[[BoundProposition], None]:
    def mutate(binding: BoundProposition) -> None:
        object.__setattr__(binding, name, value)

    return mutate


def _bounds(items: object, size: object) -> Callable[[BoundProposition], None]:
    def mutate(binding: BoundProposition) -> None:
        object.__setattr__(binding.bounds, "max_evidence_items", items)
        object.__setattr__(binding.bounds, "max_evidence_bytes", size)

    return mutate


def _parameters(change: Callable[[dict[str, Any]], object]) -> Callable[[BoundProposition], None]:
    def mutate(binding: BoundProposition) -> None:
        change(binding.parameters)  # type: ignore[arg-type]

    return mutate


MUTATIONS: dict[str, Callable[[BoundProposition], None]] = {
    "nothing": lambda binding: None,
    "subject replaced by an equal string": _set("subject_id", "".join(["s", "ubject"])),
    "subject replaced by a different string": _set("subject_id", "other"),
    "subject replaced by an equal str subclass": _set("subject_id", _Str("subject")),
    "expected True becomes 1": _set("expected", 1),
    "expected becomes a list": _set("expected", ["e"]),
    "expected becomes None": _set("expected", None),
    "mechanism digest loses its prefix": _set("mechanism_digest", DIGEST.removeprefix("sha256:")),
    "mechanism digest becomes garbage": _set("mechanism_digest", "garbage"),
    "evidence refs reordered": lambda b: object.__setattr__(
        b, "evidence_refs", tuple(reversed(b.evidence_refs))
    ),
    "evidence refs become a list": lambda b: object.__setattr__(
        b, "evidence_refs", list(b.evidence_refs)
    ),
    "trust roots gain a root": lambda b: object.__setattr__(
        b, "trust_roots", (*b.trust_roots, "extra")
    ),
    "bounds changed in place": _bounds(9, 9),
    "bounds made equal floats": _bounds(2.0, 3.0),
    "bounds replaced by an equal object": _set("bounds", EvidenceBounds(2, 3)),
    "parameter value changed": _parameters(lambda p: p.update(x="z")),
    "parameter added": _parameters(lambda p: p.update(w="v")),
    "parameters reordered": _parameters(lambda p: (p.pop("a"), p.update(a="b"))),
    "parameter value made an int": _parameters(lambda p: p.update(x=1)),
    "parameters replaced by an equal dict": _set("parameters", {"x": "y", "a": "b"}),
    "field deleted": lambda b: object.__delattr__(b, "predicate"),
}


class Mutating:
    mechanism_id = "test.mutating"
    mechanism_digest = DIGEST

    def __init__(self, mutate: Callable[[BoundProposition], None]) -> None:
        self.mutate = mutate
        self.digests: list[tuple[str, str | None]] = []

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> Any:
        before = binding.digest()
        self.mutate(binding)
        try:
            after: str | None = binding.digest()
        except Exception:
            after = None
        self.digests.append((before, after))
        return MechanismDecision(MechanismOutcome.PASS, "ok")


@pytest.mark.parametrize("expected", [True, "e", 7, None])
@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_a_changed_execution_copy_is_refused_exactly_when_its_digest_changed(
    name: str, expected: object
) -> None:
    mechanism = Mutating(MUTATIONS[name])
    session = VerificationSession()
    refs = tuple(session.evidence_store.add(item) for item in (b"a", b"bb"))
    session.register(mechanism)
    binding = BoundProposition(
        subject_id="subject",
        predicate="p",
        expected=expected,
        mechanism_id=mechanism.mechanism_id,
        mechanism_digest=DIGEST,
        evidence_refs=refs,
        trust_roots=("r",),
        bounds=EvidenceBounds(2, 3),
        parameters={"x": "y", "a": "b"},
    )
    result = session.evaluate(binding)
    ((before, after),) = mechanism.digests
    assert before == result.binding_digest
    if after is None:
        assert result.details.startswith("mechanism execution failed: ")
    elif after != before:
        assert result.details == CHANGED
    else:
        assert (result.outcome, result.details) == (MechanismOutcome.PASS, "ok")
