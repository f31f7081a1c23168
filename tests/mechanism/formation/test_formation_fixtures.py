"""The example pairs in fixtures/formation/ are fresh and answer as their index says."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import testdata

from mechanism.formation import (
    FormationPathCertificateMechanism,
    check_formation,
    formation_binding,
)
from session import EvidenceStore, VerificationSession

FIXTURES = testdata.fixture("formation", directory=True)
INDEX: list[dict[str, Any]] = json.loads((FIXTURES / "index.json").read_bytes())["pairs"]


def test_fixtures_are_fresh() -> None:
    completed = subprocess.run(
        [sys.executable, str(FIXTURES / "generate.py"), "--check"],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr


def test_every_constructor_has_an_example_pair() -> None:
    tags: set[str] = set()
    for entry in INDEX:
        subject = json.loads((FIXTURES / f"{entry['name']}.subject.json").read_bytes())
        tags.update(node["tag"] for node in subject["nodes"])
    assert tags == {"ATOM", "APPLY", "ID", "APPLY_STEP", "COMPOSE", "QUOTE", "READ"}
    names = {entry["name"] for entry in INDEX}
    assert {"quote-read", "tampered", "unsupported-profile"} <= names


@pytest.mark.parametrize("entry", INDEX, ids=[entry["name"] for entry in INDEX])
def test_fixture_answers_match_the_index(entry: dict[str, Any]) -> None:
    subject = (FIXTURES / f"{entry['name']}.subject.json").read_bytes()
    certificate = (FIXTURES / f"{entry['name']}.certificate.json").read_bytes()
    report = check_formation(subject, certificate)
    assert {"status": report["status"], "reason_codes": report["reason_codes"]} == entry["check"]
    store = EvidenceStore()
    store.add(subject)
    store.add(certificate)
    session = VerificationSession(store)
    session.register(FormationPathCertificateMechanism())
    result = session.evaluate(formation_binding(subject, certificate))
    assert {"outcome": result.outcome.value, "details": result.details} == entry["evaluate"]


def test_quote_read_fixture_is_the_spec_example() -> None:
    subject = (FIXTURES / "quote-read.subject.json").read_bytes()
    certificate = (FIXTURES / "quote-read.certificate.json").read_bytes()
    observation = check_formation(subject, certificate)["observation"]
    assert observation["quote_origins"] == [1, 3]
    assert observation["dependency_nodes"] == [0, 1, 3, 4, 5]
    assert observation["quote_rank"] == 2
    assert observation["required_depth"] == 5
