"""Replay of the reference's 30 pure cross-language cases, byte for byte."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from mechanism.canonical import canonical_bytes, canonical_digest
from mechanism.formation import PROFILE_DIGEST, RESIDUAL_OBLIGATIONS, check_formation, profile_bytes

from ._corpus import CORPUS_PATH, b64url, corpus, pure_cases

CASES = pure_cases()


def test_corpus_is_the_published_reference_file() -> None:
    data = CORPUS_PATH.read_bytes()
    assert hashlib.sha256(data).hexdigest().startswith("e736f592")
    assert corpus()["schema_version"] == "VSTD-FORMATION-INTEROPERABILITY-CORPUS-0.1"
    assert len(CASES) == 30
    assert len({case["case_id"] for case in CASES}) == 30


def test_corpus_profile_is_our_compiled_profile() -> None:
    profile = corpus()["profile"]
    assert b64url(profile["bytes_base64url"]) == profile_bytes()
    assert profile["digest"] == PROFILE_DIGEST


@pytest.mark.parametrize("case", CASES, ids=[case["case_id"] for case in CASES])
def test_pure_case_report_is_byte_identical(case: dict[str, Any]) -> None:
    report = check_formation(
        b64url(case["subject_bytes_base64url"]), b64url(case["certificate_bytes_base64url"])
    )
    assert canonical_bytes(report) == canonical_bytes(case["expected_report"])
    assert canonical_digest(report) == case["expected_report_digest"]
    assert report["residual_obligations"] == list(RESIDUAL_OBLIGATIONS)
    assert (report["observation"] is None) == (report["status"] != "CHECKED")
