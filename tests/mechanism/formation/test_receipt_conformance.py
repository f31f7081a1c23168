"""Replay of the reference's formation receipt corpus (vendored under ``tests/data/``):
every case's receipt is rebuilt byte for byte and rechecks to the expected inspection; every
recheck case fails with exactly the expected error code."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from typing import Any

import pytest

from mechanism.canonical import canonical_bytes, digest_bytes
from mechanism.formation import (
    PROFILE_DIGEST,
    FormationReceiptError,
    build_formation_receipt,
    recheck_formation_receipt,
)

from ._corpus import CORPUS_PATH, RECEIPT_CORPUS_PATH, b64url


@cache
def receipt_corpus() -> dict[str, Any]:
    value: dict[str, Any] = json.loads(RECEIPT_CORPUS_PATH.read_bytes())
    return value


CASES: list[dict[str, Any]] = receipt_corpus()["cases"]
RECHECKS: list[dict[str, Any]] = receipt_corpus()["recheck_cases"]
BY_ID = {case["case_id"]: case for case in CASES}


def _inputs(case: dict[str, Any]) -> tuple[bytes, bytes, dict[str, bytes]]:
    return (
        b64url(case["selection_bytes_base64url"]),
        b64url(case["commit_bytes_base64url"]),
        {item["digest"]: b64url(item["bytes_base64url"]) for item in case["evidence"]},
    )


def test_receipt_corpus_is_the_published_file_bound_to_its_sources() -> None:
    data = RECEIPT_CORPUS_PATH.read_bytes()
    assert hashlib.sha256(data).hexdigest().startswith("1f24918b")
    corpus = receipt_corpus()
    assert corpus["schema_version"] == "VSTD-FORMATION-RECEIPT-CORPUS-0.1"
    assert corpus["rule_profile_digest"] == PROFILE_DIGEST
    assert corpus["source_corpus_digest"] == digest_bytes(CORPUS_PATH.read_bytes())
    assert len(CASES) == 33 and len(BY_ID) == 33
    assert len(RECHECKS) == 2


@pytest.mark.parametrize("case", CASES, ids=list(BY_ID))
def test_receipt_case_is_rebuilt_byte_for_byte(case: dict[str, Any]) -> None:
    selection, commit, evidence = _inputs(case)
    receipt = build_formation_receipt(selection, commit, evidence)
    assert receipt == b64url(case["receipt_bytes_base64url"])
    assert digest_bytes(receipt) == case["receipt_digest"]


@pytest.mark.parametrize("case", CASES, ids=list(BY_ID))
def test_receipt_case_rechecks_to_the_expected_inspection(case: dict[str, Any]) -> None:
    selection, commit, evidence = _inputs(case)
    inspection = recheck_formation_receipt(
        b64url(case["receipt_bytes_base64url"]), selection, commit, evidence
    )
    assert canonical_bytes(inspection) == canonical_bytes(case["expected_inspection"])


@pytest.mark.parametrize("case", RECHECKS, ids=[case["case_id"] for case in RECHECKS])
def test_recheck_case_fails_with_the_expected_code(case: dict[str, Any]) -> None:
    selection, commit, evidence = _inputs(BY_ID[case["base_case_id"]])
    with pytest.raises(FormationReceiptError) as raised:
        recheck_formation_receipt(
            b64url(case["receipt_bytes_base64url"]), selection, commit, evidence
        )
    assert raised.value.code == case["expected_error"] == str(raised.value)
