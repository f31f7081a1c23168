"""The adapter hands the record it admitted to the checker: the same report, one admission.

The session adapter admits the subject for its context check (step 14) and hands that record,
or the admission error, with the subject digest its rehash step computed, to the checker's
internal entry point (``check_admitted_subject``); an honest binding's one-pass preflight
admits only the subject's head and hands that (``head_only``: the check applies the per-node
rules and admits in full where ``check_formation`` would). The public ``check_formation`` still
admits the bytes itself. These tests hold the entry point to ``check_formation``'s report byte
for byte on the reference corpus (every refusal class included), under lowered ceilings and on
mutated subjects, with a full record or a head, and count the admissions (full or head) of one
evaluation through the real session.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mechanism.formation._checker as checker
import mechanism.formation._mechanism as adapter
from mechanism.canonical import canonical_bytes
from mechanism.formation import (
    FormationError,
    FormationPathCertificateMechanism,
    admit_subject,
    check_formation,
    formation_binding,
)
from mechanism.formation._wire import admit_subject_head
from session import EvidenceStore, MechanismOutcome, VerificationSession
from session.canon import digest_bytes

from ._corpus import b64url, pure_cases

PAIRS = [
    (b64url(case["subject_bytes_base64url"]), b64url(case["certificate_bytes_base64url"]))
    for case in pure_cases()
]


def _handed_over(
    subject: bytes, certificate: bytes, head: bool = False, **ceilings: int
) -> dict[str, Any]:
    limits = {"max_nodes": 1024, "max_depth": 64, "max_path_steps": 4096, **ceilings}
    # The adapter hands a head only when one admits; else the whole record (or its refusal).
    admitted: Any = admit_subject_head(subject, max_nodes=limits["max_nodes"]) if head else None
    head_only = admitted is not None
    if not head_only:
        try:
            admitted = admit_subject(subject, max_nodes=limits["max_nodes"])
        except FormationError as error:
            admitted = error
    return checker.check_admitted_subject(
        subject,
        certificate,
        admitted,
        digest_bytes(subject),
        max_nodes=limits["max_nodes"],
        max_depth=limits["max_depth"],
        max_path_steps=limits["max_path_steps"],
        head_only=head_only,
    )


@pytest.mark.parametrize("head", [False, True], ids=["record", "head"])
@pytest.mark.parametrize("pair", PAIRS, ids=[case["case_id"] for case in pure_cases()])
@pytest.mark.parametrize("ceilings", [{}, {"max_nodes": 1}, {"max_depth": 1, "max_path_steps": 1}])
def test_handed_over_record_gets_the_public_report(
    pair: tuple[bytes, bytes], ceilings: dict[str, int], head: bool
) -> None:
    subject, certificate = pair
    expected = check_formation(subject, certificate, **ceilings)
    handed = _handed_over(subject, certificate, head, **ceilings)
    assert canonical_bytes(handed) == canonical_bytes(expected)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(PAIRS),
    st.integers(0, 10_000),
    st.sampled_from([b"", b" ", b"0", b"}", b'"', b"\\", b"\x00", b"\xff"]),
    st.integers(0, 2),
    st.booleans(),
)
def test_mutated_subject_gets_the_public_report(
    pair: tuple[bytes, bytes], position: int, inserted: bytes, removed: int, head: bool
) -> None:
    subject, certificate = pair
    at = position % (len(subject) + 1)
    mutated = subject[:at] + inserted + subject[at + removed :]
    assert canonical_bytes(_handed_over(mutated, certificate, head)) == canonical_bytes(
        check_formation(mutated, certificate)
    )


def test_subject_is_admitted_and_hashed_once_per_evaluation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    subject, certificate = PAIRS[0]
    admissions: list[bytes] = []
    hashed: list[bytes] = []

    def counting_admit(data: bytes, **kwargs: Any) -> dict[str, Any]:
        admissions.append(data)
        return admit_subject(data, **kwargs)

    def counting_head(data: bytes, **kwargs: Any) -> dict[str, Any] | None:
        admissions.append(data)
        return admit_subject_head(data, **kwargs)

    def counting_digest(data: bytes) -> str:
        hashed.append(data)
        return digest_bytes(data)

    for module in (adapter, checker):
        monkeypatch.setattr(module, "admit_subject", counting_admit)
        monkeypatch.setattr(module, "admit_subject_head", counting_head)
    monkeypatch.setattr(checker, "digest_bytes", counting_digest)
    mechanism = FormationPathCertificateMechanism()
    session = VerificationSession(EvidenceStore())
    session.evidence_store.add(subject)
    session.evidence_store.add(certificate)
    session.register(mechanism)
    binding = formation_binding(subject, certificate)
    admissions.clear()
    result = session.evaluate(binding)
    assert admissions == [subject]
    assert subject not in hashed  # the checker hashes node texts only, not the subject again
    assert result.outcome is MechanismOutcome.PASS
    assert result.observations["formation_report"] == check_formation(subject, certificate)
