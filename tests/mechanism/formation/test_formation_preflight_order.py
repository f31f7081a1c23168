"""The adapter's preflight order (docs/spec/formation.md §5 steps 2–15), every pair of violations.

Each violation below breaks exactly one preflight step of an otherwise honest binding and
evidence pair. Applied together, the earliest step must decide: its outcome, its reason code,
and a report only for the pure-check step. This pins the whole order, not just each step.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from mechanism.formation import (
    ADAPTER_REASON_CODES,
    MECHANISM_DIGEST,
    MECHANISM_ID,
    PROFILE_DIGEST,
    RESIDUAL_OBLIGATIONS,
    FormationPathCertificateMechanism,
)
from mechanism.formation._wire import MAX_RECORD_BYTES
from session import BoundProposition, EvidenceBounds, MechanismOutcome

from ._builders import AGENCY, GROUND, apply, atom, digest, pair

FOREIGN = "sha256:770f948d29900a63a6ba55f2bbc61bdd18fec1a73769c8e1e524d664c40f6e06"
OTHER = digest(b"another declared digest")
UNDECLARED_ROOT = digest(b"a trust root no parameter declares")
SUBJECT, CERTIFICATE = pair([atom()])
# An ill-typed subject (APPLY_STEP(0, 0): the target is not APPLY(source)) with its naive
# certificate: it admits and binds, and the pure check answers FORMATION_RULE_INVALID.
BAD_SUBJECT, BAD_CERTIFICATE = pair(
    [atom(), apply(0), {"tag": "APPLY_STEP", "source": 0, "target": 0}]
)


class State:
    def __init__(self) -> None:
        self.fields: dict[str, Any] = {
            "subject_id": digest(SUBJECT),
            "predicate": MECHANISM_ID,
            "expected": "CHECKED",
            "mechanism_id": MECHANISM_ID,
            "mechanism_digest": MECHANISM_DIGEST,
            "evidence_refs": (digest(SUBJECT), digest(CERTIFICATE)),
            "bounds": EvidenceBounds(2, 2 * MAX_RECORD_BYTES),
        }
        self.parameters = {
            "profile_digest": PROFILE_DIGEST,
            "ground_artifact_digest": GROUND,
            "authority_axiom_agency_digest": AGENCY,
        }
        self.extra_roots: tuple[str, ...] = ()
        self.evidence: list[Any] = [SUBJECT, CERTIFICATE]
        self.after: list[Callable[[BoundProposition], None]] = []

    def binding(self) -> BoundProposition:
        roots = tuple(self.parameters.values()) + self.extra_roots
        binding = BoundProposition(
            **self.fields, trust_roots=roots, parameters=dict(self.parameters)
        )
        for change in self.after:
            change(binding)
        return binding


def _set(binding: BoundProposition, name: str, value: object) -> None:
    object.__setattr__(binding, name, value)


def _pure_check_invalid(state: State) -> None:
    state.evidence = [BAD_SUBJECT, BAD_CERTIFICATE]
    state.fields["subject_id"] = digest(BAD_SUBJECT)
    state.fields["evidence_refs"] = (digest(BAD_SUBJECT), digest(BAD_CERTIFICATE))


# (step, reason, violation) — the violation breaks only that step.
VIOLATIONS: list[tuple[int, str, Callable[[State], None]]] = [
    (2, "FORMATION_IMPLEMENTATION_UNSUPPORTED", lambda s: s.fields.update(mechanism_digest=OTHER)),
    (3, "FORMATION_PREDICATE_UNSUPPORTED", lambda s: s.fields.update(expected="PASS")),
    (4, "FORMATION_PARAMETERS_UNSUPPORTED", lambda s: s.parameters.update(extra=PROFILE_DIGEST)),
    (5, "FORMATION_PROFILE_UNSUPPORTED", lambda s: s.parameters.update(profile_digest=FOREIGN)),
    (6, "FORMATION_ROOTS_UNSUPPORTED", lambda s: setattr(s, "extra_roots", (UNDECLARED_ROOT,))),
    (7, "FORMATION_BOUNDS_UNSUPPORTED", lambda s: s.fields.update(bounds=EvidenceBounds(3, 10))),
    (
        8,
        "FORMATION_REFERENCES_UNSUPPORTED",
        lambda s: s.after.append(
            lambda b: _set(b, "evidence_refs", (b.evidence_refs[0], b.evidence_refs[1][7:]))
        ),
    ),
    (
        9,
        "FORMATION_SUBJECT_BINDING_INVALID",
        lambda s: s.after.append(lambda b: _set(b, "subject_id", b.evidence_refs[1])),
    ),
    (10, "FORMATION_EVIDENCE_UNAVAILABLE", lambda s: setattr(s, "evidence", s.evidence[:1])),
    (
        11,
        "FORMATION_EVIDENCE_TYPE_INVALID",
        lambda s: s.evidence.__setitem__(0, bytearray(s.evidence[0])),
    ),
    (
        12,
        "FORMATION_LIMIT_EXCEEDED",
        lambda s: s.evidence.__setitem__(0, b" " * (MAX_RECORD_BYTES + 1)),
    ),
    (
        13,
        "FORMATION_EVIDENCE_BINDING_INVALID",
        lambda s: s.evidence.__setitem__(1, s.evidence[1] + b" "),
    ),
    (
        14,
        "FORMATION_CONTEXT_BINDING_INVALID",
        lambda s: s.parameters.update(ground_artifact_digest=OTHER),
    ),
    (15, "FORMATION_CHECK_INVALID", _pure_check_invalid),
]


def _evaluate(violations: list[tuple[int, str, Callable[[State], None]]]) -> Any:
    state = State()
    # Later steps first, so an earlier step's change of a shared item is the one that stays.
    for _, _, violate in sorted(violations, key=lambda item: item[0], reverse=True):
        violate(state)
    return FormationPathCertificateMechanism().evaluate(state.binding(), state.evidence)


@pytest.mark.parametrize("violation", VIOLATIONS, ids=[f"step{step}" for step, _, _ in VIOLATIONS])
def test_each_violation_alone_gives_its_own_reason(
    violation: tuple[int, str, Callable[[State], None]],
) -> None:
    step, reason, _ = violation
    decision = _evaluate([violation])
    assert decision.details == reason
    assert decision.outcome is ADAPTER_REASON_CODES[reason]
    assert (decision.observations["formation_report"] is not None) is (step == 15)
    assert decision.observations["residual_obligations"] == list(RESIDUAL_OBLIGATIONS)


def test_the_honest_state_passes() -> None:
    decision = _evaluate([])
    assert decision.outcome is MechanismOutcome.PASS and decision.details == ""


PAIRS = list(itertools.combinations(VIOLATIONS, 2))


@pytest.mark.parametrize("violations", PAIRS, ids=[f"step{a[0]}+step{b[0]}" for a, b in PAIRS])
def test_the_earliest_violated_step_decides(
    violations: tuple[tuple[int, str, Callable[[State], None]], ...],
) -> None:
    first_step, first_reason, _ = min(violations, key=lambda item: item[0])
    decision = _evaluate(list(violations))
    assert decision.details == first_reason
    assert decision.outcome is ADAPTER_REASON_CODES[first_reason]
    assert (decision.observations["formation_report"] is not None) is (first_step == 15)
