"""Replay of the reference's 20 retained-silo cases (``silo_cases`` of the interoperability
corpus, vendored under ``tests/data/``): exact canonical equality of every inspection."""

from __future__ import annotations

from typing import Any

import pytest

from mechanism.canonical import canonical_bytes, canonical_digest, is_digest
from mechanism.formation import inspect_silo_formation

from ._corpus import b64url, corpus
from .test_silo_support import assert_well_formed, facets

SILO_CASES: list[dict[str, Any]] = corpus()["silo_cases"]


def _evidence(case: dict[str, Any]) -> dict[str, bytes]:
    return {item["digest"]: b64url(item["bytes_base64url"]) for item in case["evidence"]}


def test_corpus_carries_exactly_twenty_distinct_silo_cases() -> None:
    assert len(SILO_CASES) == 20
    assert len({case["case_id"] for case in SILO_CASES}) == 20


@pytest.mark.parametrize("case", SILO_CASES, ids=[case["case_id"] for case in SILO_CASES])
def test_silo_case_reproduces_the_reference_inspection_byte_for_byte(
    case: dict[str, Any],
) -> None:
    commit = b64url(case["commit_bytes_base64url"])
    evidence = _evidence(case)
    before = dict(evidence)
    result = inspect_silo_formation(commit, evidence, **case["paths"])
    assert canonical_bytes(result) == canonical_bytes(case["expected_report"])
    assert canonical_digest(result) == case["expected_report_digest"]
    assert evidence == before  # the caller's mapping is untouched
    assert_well_formed(result)


@pytest.mark.parametrize("case", SILO_CASES, ids=[case["case_id"] for case in SILO_CASES])
def test_silo_case_evidence_is_sorted_unique_digests(case: dict[str, Any]) -> None:
    digests = [item["digest"] for item in case["evidence"]]
    assert all(is_digest(digest) for digest in digests)
    assert digests == sorted(set(digests))


# The facet table the reference documents (docs/spec/formation.md §6.4), independent of the
# byte replay.
FACETS = {
    "swapped-path-selectors": ("INVALID", "COMPLETE", "UNKNOWN", "UNKNOWN"),
    "profile-coordinate-mismatch-missing-ground": ("INVALID", "INCOMPLETE", "MATCHED", "CHECKED"),
    "unsupported-profile": ("UNKNOWN", "COMPLETE", "MATCHED", "UNKNOWN"),
    "missing-unrelated": ("BOUND", "INCOMPLETE", "MATCHED", "CHECKED"),
    "malformed-certificate-missing-unrelated": ("INVALID", "INCOMPLETE", "MATCHED", "INVALID"),
}


@pytest.mark.parametrize("case_id", sorted(FACETS))
def test_documented_facets_hold(case_id: str) -> None:
    (case,) = [case for case in SILO_CASES if case["case_id"] == case_id]
    result = inspect_silo_formation(
        b64url(case["commit_bytes_base64url"]), _evidence(case), **case["paths"]
    )
    assert facets(result) == FACETS[case_id]
