"""docs/spec/formation.md §8 ``test_formation_resources.py``, from the *packaged* resources: the
retained profile and schema are the exact inert files, and a schema pass is not a formation
check."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
import testdata
from jsonschema import Draft202012Validator

import catalog
import mechanism.formation as formation
from catalog import StoredPackage
from mechanism.canonical import canonical_bytes, validate_value

PROFILE_PATH = "mechanism/formation/data/typed-formation-0.1.json"
SCHEMA_PATH = "mechanism/formation/data/vstd-typed-formation-0.1.schema.json"
DIGEST = "sha256:" + hashlib.sha256(b"payload").hexdigest()


def _validator(package: StoredPackage) -> Draft202012Validator:
    schema_bytes = package.artifact_bytes(SCHEMA_PATH)
    assert schema_bytes is not None
    schema = json.loads(schema_bytes)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _subject(nodes: list[dict[str, Any]], root: int) -> dict[str, Any]:
    return {
        "schema_version": formation.SUBJECT_SCHEMA,
        "profile_digest": formation.PROFILE_DIGEST,
        "context": {
            "ground_artifact_digest": "sha256:" + hashlib.sha256(b"ground").hexdigest(),
            "authority_axiom_agency_digest": "sha256:" + hashlib.sha256(b"agency").hexdigest(),
        },
        "nodes": nodes,
        "root": root,
    }


SEVEN_CONSTRUCTORS = _subject(
    [
        {"tag": "ATOM", "payload_digest": DIGEST},
        {"tag": "APPLY", "argument": 0},
        {"tag": "APPLY_STEP", "source": 0, "target": 1},
        {"tag": "ID", "at": 0},
        {"tag": "COMPOSE", "left": 3, "right": 2},
        {"tag": "QUOTE", "value": 4},
        {"tag": "READ", "code": 5},
    ],
    6,
)


def test_profile_is_exact_inert_installed_resource(reference_package: StoredPackage) -> None:
    profile = reference_package.artifact_bytes(PROFILE_PATH)
    assert profile is not None
    assert profile == formation.profile_bytes()
    assert hashlib.sha256(profile).hexdigest() == testdata.reference_sha256(PROFILE_PATH)
    assert len(profile) == 1498 and not profile.endswith(b"\n")
    data = json.loads(profile)
    assert isinstance(data["context_meaning"], str) and data["context_meaning"]
    assert canonical_bytes(data) == profile  # canonical data, nothing executable
    roles = {a["path"]: a["role"] for a in reference_package.manifest["artifacts"]}
    assert roles[PROFILE_PATH] == "PROFILE" and roles[SCHEMA_PATH] == "SCHEMA"


def test_packaged_schema_validates_seven_constructors_and_the_produced_certificate(
    reference_package: StoredPackage,
) -> None:
    validator = _validator(reference_package)
    subject_bytes = canonical_bytes(SEVEN_CONSTRUCTORS)
    certificate_bytes = formation.produce_formation_certificate(subject_bytes)
    assert list(validator.iter_errors(SEVEN_CONSTRUCTORS)) == []
    assert list(validator.iter_errors(json.loads(certificate_bytes))) == []
    report = formation.check_formation(subject_bytes, certificate_bytes)
    assert report["status"] == "CHECKED"
    assert report["observation"]["quote_origins"] == [5]


@pytest.mark.parametrize("claim", ["status", "self_derivation", "complete", "agency"])
@pytest.mark.parametrize("record", ["subject", "certificate"])
def test_packaged_schema_refuses_extra_status_claims(
    reference_package: StoredPackage, claim: str, record: str
) -> None:
    validator = _validator(reference_package)
    subject_bytes = canonical_bytes(SEVEN_CONSTRUCTORS)
    if record == "subject":
        value = dict(SEVEN_CONSTRUCTORS)
    else:
        value = json.loads(formation.produce_formation_certificate(subject_bytes))
    assert validator.is_valid(value)
    value[claim] = True
    assert not validator.is_valid(value)


def test_schema_pass_is_not_reference_or_type_checking(reference_package: StoredPackage) -> None:
    validator = _validator(reference_package)
    forward = _subject(
        [{"tag": "ATOM", "payload_digest": DIGEST}, {"tag": "APPLY", "argument": 1}], 1
    )
    assert validator.is_valid(forward)
    forward_bytes = canonical_bytes(forward)
    certificate = {
        "schema_version": formation.CERTIFICATE_SCHEMA,
        "subject_digest": "sha256:" + hashlib.sha256(forward_bytes).hexdigest(),
        "profile_digest": formation.PROFILE_DIGEST,
        "root": 1,
        "steps": [
            {"node": 0, "rule": "ATOM", "premises": []},
            {"node": 1, "rule": "APPLY", "premises": [1]},
        ],
    }
    assert validator.is_valid(certificate)
    report = formation.check_formation(forward_bytes, canonical_bytes(certificate))
    assert report["status"] == "INVALID"
    ill_typed = _subject([{"tag": "ATOM", "payload_digest": DIGEST}, {"tag": "READ", "code": 0}], 1)
    assert validator.is_valid(ill_typed)
    with pytest.raises(ValueError):
        formation.produce_formation_certificate(canonical_bytes(ill_typed))


def test_packaged_resources_are_the_reference_files(reference_package: StoredPackage) -> None:
    for path in (SCHEMA_PATH, PROFILE_PATH):
        packaged = reference_package.artifact_bytes(path)
        assert packaged is not None
        assert hashlib.sha256(packaged).hexdigest() == testdata.reference_sha256(path)


def test_every_registry_entry_is_a_network_canonical_value() -> None:
    """The daemon embeds entries in canonical headers: every entry must encode canonically."""
    for component in catalog.reference_registry().components:
        validate_value(component.to_dict())
