"""The checker's check order (docs/spec/formation.md §3.6 steps 1–7), every pair of violations.

Each violation breaks one step of an honest pair; applied together, the earliest step decides
its status and reason, and ``subject_digest``/``root`` are null exactly when the subject
record itself was not admitted. Among other things this pins "the certificate is admitted
before the subject's profile is compared" and "cheap certificate checks precede inference".
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from mechanism.canonical import canonical_bytes
from mechanism.formation import check_formation

from ._builders import RESIDUALS, apply_step, atom, certificate_record, digest, subject_record

FOREIGN = "sha256:770f948d29900a63a6ba55f2bbc61bdd18fec1a73769c8e1e524d664c40f6e06"


class Pair:
    def __init__(self) -> None:
        self.subject: dict[str, Any] = subject_record([atom(), atom()], 0)
        self.subject_suffix = b""
        self.certificate_changes: list[Callable[[dict[str, Any]], None]] = []
        self.certificate_suffix = b""

    def encode(self) -> tuple[bytes, bytes]:
        subject_bytes = canonical_bytes(self.subject)
        certificate = certificate_record(subject_bytes, self.subject)
        for change in self.certificate_changes:
            change(certificate)
        return (
            subject_bytes + self.subject_suffix,
            canonical_bytes(certificate) + self.certificate_suffix,
        )


def _rule(certificate: dict[str, Any]) -> None:
    certificate["steps"][1]["rule"] = "APPLY"


# (step, status, reason, violation)
VIOLATIONS: list[tuple[int, str, str, Callable[[Pair], None]]] = [
    (1, "INVALID", "FORMATION_RECORD_INVALID", lambda p: setattr(p, "subject_suffix", b" ")),
    (
        3,
        "INVALID",
        "FORMATION_RECORD_INVALID",
        lambda p: setattr(p, "certificate_suffix", b"\n"),
    ),
    (
        3,
        "UNKNOWN",
        "FORMATION_PROFILE_UNSUPPORTED",
        lambda p: p.certificate_changes.append(
            lambda c: c.update(schema_version="verifier-typed-formation-certificate-1")
        ),
    ),
    (
        4,
        "UNKNOWN",
        "FORMATION_PROFILE_UNSUPPORTED",
        lambda p: p.subject.update(profile_digest=FOREIGN),
    ),
    (
        5,
        "INVALID",
        "FORMATION_CERTIFICATE_BINDING_INVALID",
        lambda p: p.certificate_changes.append(lambda c: c.update(root=1)),
    ),
    (
        6,
        "INVALID",
        "FORMATION_CERTIFICATE_STEP_INVALID",
        lambda p: p.certificate_changes.append(_rule),
    ),
    (
        7,
        "INVALID",
        "FORMATION_RULE_INVALID",
        lambda p: p.subject["nodes"].__setitem__(1, apply_step(0, 0)),
    ),
]


def _check(violations: list[tuple[int, str, str, Callable[[Pair], None]]]) -> tuple[Any, bytes]:
    pair = Pair()
    for violation in violations:
        violation[3](pair)
    subject_bytes, certificate_bytes = pair.encode()
    return check_formation(subject_bytes, certificate_bytes), subject_bytes


def _expect(
    report: dict[str, Any], subject_bytes: bytes, step: int, status: str, reason: str
) -> None:
    assert (report["status"], report["reason_codes"]) == (status, [reason])
    admitted = step > 1
    assert report["subject_digest"] == (digest(subject_bytes) if admitted else None)
    assert report["root"] == (0 if admitted else None)
    assert report["observation"] is None
    assert report["residual_obligations"] == RESIDUALS


@pytest.mark.parametrize("violation", VIOLATIONS, ids=[v[2] + f"@{v[0]}" for v in VIOLATIONS])
def test_each_violation_alone(violation: tuple[int, str, str, Callable[[Pair], None]]) -> None:
    report, subject_bytes = _check([violation])
    _expect(report, subject_bytes, violation[0], violation[1], violation[2])


def test_the_honest_pair_checks() -> None:
    report, _ = _check([])
    assert report["status"] == "CHECKED"


PAIRS = [(a, b) for a, b in itertools.combinations(VIOLATIONS, 2) if a[0] != b[0]]


@pytest.mark.parametrize("violations", PAIRS, ids=[f"{a[0]}+{b[0]}" for a, b in PAIRS])
def test_the_earliest_violated_step_decides(
    violations: tuple[tuple[int, str, str, Callable[[Pair], None]], ...],
) -> None:
    step, status, reason, _ = min(violations, key=lambda item: item[0])
    report, subject_bytes = _check(list(violations))
    _expect(report, subject_bytes, step, status, reason)
