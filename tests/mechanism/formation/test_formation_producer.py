"""The producer (docs/spec/formation.md §4): the one naive certificate or a typed refusal, never
partial."""

from __future__ import annotations

from typing import Any

import pytest

from mechanism.canonical import canonical_bytes
from mechanism.formation import (
    FormationError,
    FormationLimitError,
    UnsupportedFormation,
    check_formation,
    produce_formation_certificate,
)

from ._builders import (
    OTHER_PAYLOAD,
    apply,
    apply_step,
    atom,
    compose,
    ident,
    pair,
    quote,
    read,
    subject,
    subject_record,
)
from ._corpus import b64url, pure_cases

FOREIGN = "sha256:770f948d29900a63a6ba55f2bbc61bdd18fec1a73769c8e1e524d664c40f6e06"
CHECKED_CASES = [case for case in pure_cases() if case["expected_report"]["status"] == "CHECKED"]
REFUSED_CASES = [case for case in pure_cases() if case["expected_report"]["status"] != "CHECKED"]


@pytest.mark.parametrize("case", CHECKED_CASES, ids=[c["case_id"] for c in CHECKED_CASES])
def test_producer_reproduces_the_reference_certificate(case: dict[str, Any]) -> None:
    subject_bytes = b64url(case["subject_bytes_base64url"])
    certificate = produce_formation_certificate(subject_bytes)
    assert certificate == b64url(case["certificate_bytes_base64url"])


_SUBJECT_REFUSED = {
    "FORMATION_RULE_INVALID",
    "FORMATION_RECORD_INVALID",
    "FORMATION_PROFILE_UNSUPPORTED",
    "FORMATION_LIMIT_EXCEEDED",
}


@pytest.mark.parametrize("case", REFUSED_CASES, ids=[c["case_id"] for c in REFUSED_CASES])
def test_producer_refuses_or_emits_only_the_naive_certificate(case: dict[str, Any]) -> None:
    subject_bytes = b64url(case["subject_bytes_base64url"])
    report = case["expected_report"]
    try:
        certificate = produce_formation_certificate(subject_bytes)
    except FormationError as error:
        # Only subject-side failures may stop the producer, with the matching class.
        (reason,) = report["reason_codes"]
        assert reason in _SUBJECT_REFUSED
        if reason == "FORMATION_LIMIT_EXCEEDED":
            assert isinstance(error, FormationLimitError)
        elif reason == "FORMATION_PROFILE_UNSUPPORTED":
            assert isinstance(error, UnsupportedFormation)
        else:
            assert type(error) is FormationError
        return
    # The subject is fine; the corpus pairs it with a broken certificate. Ours checks.
    assert check_formation(subject_bytes, certificate)["status"] == "CHECKED"


@pytest.mark.parametrize(
    ("nodes", "error"),
    [
        ([atom(), quote(0), apply(1)], FormationError),
        ([atom(), quote(0), ident(1)], FormationError),
        ([atom(), atom(OTHER_PAYLOAD), apply_step(0, 1)], FormationError),
        ([atom(), apply(0), apply_step(1, 0)], FormationError),
        ([atom(), compose(0, 0)], FormationError),
        ([atom(), apply(0), apply_step(0, 1), apply_step(0, 1), compose(2, 3)], FormationError),
        ([atom(), read(0)], FormationError),
        ([atom(), apply(0), apply_step(0, 1), read(2)], FormationError),
        ([atom(), *(apply(i) for i in range(64))], FormationLimitError),
    ],
    ids=[
        "APPLY(code)",
        "ID(code)",
        "step_target_not_apply",
        "step_reversed",
        "COMPOSE(form)",
        "compose_endpoints",
        "READ(form)",
        "READ(path)",
        "depth_65",
    ],
)
def test_producer_refuses_ill_typed_subjects(nodes: list[dict[str, Any]], error: type) -> None:
    with pytest.raises(error) as caught:
        produce_formation_certificate(subject(nodes))
    assert type(caught.value) is error


def test_producer_refuses_a_foreign_profile_and_schema() -> None:
    with pytest.raises(UnsupportedFormation):
        produce_formation_certificate(subject([atom()], profile=FOREIGN))
    record = subject_record([atom()])
    record["schema_version"] = "VSTD-TYPED-FORMATION-0.2"
    with pytest.raises(UnsupportedFormation):
        produce_formation_certificate(canonical_bytes(record))


@pytest.mark.parametrize("data", [bytearray(b"{}"), b"{}", b" " * 262145, b"[" * 17])
def test_producer_admits_subjects_like_the_wire(data: Any) -> None:
    with pytest.raises(FormationError):
        produce_formation_certificate(data)


def test_producer_output_is_the_naive_certificate_for_every_constructor() -> None:
    nodes = [
        atom(),
        apply(0),
        ident(0),
        apply_step(0, 1),
        ident(1),
        compose(3, 4),
        compose(2, 5),
        quote(6),
        read(7),
        quote(7),
        read(9),
        read(10),
    ]
    for root in (0, 5, 8, 11):
        subject_bytes, naive = pair(nodes, root)
        assert produce_formation_certificate(subject_bytes) == naive
