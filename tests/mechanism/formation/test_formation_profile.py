"""The compiled profile and JSON Schema are inert package data, byte-identical to the reference
files (their SHA-256 is recorded in ``tests/data/MANIFEST.json``)."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from typing import Any

import jsonschema
import pytest
import testdata

from mechanism.canonical import canonical_bytes
from mechanism.formation import (
    CERTIFICATE_SCHEMA,
    MAX_DEPTH,
    MAX_JSON_CONTAINERS,
    MAX_JSON_DEPTH,
    MAX_NODES,
    MAX_PATH_STEPS,
    MAX_RECORD_BYTES,
    PROFILE_DIGEST,
    PROFILE_SCHEMA,
    RESIDUAL_OBLIGATIONS,
    SUBJECT_SCHEMA,
    check_formation,
    produce_formation_certificate,
    profile_bytes,
    profile_digest,
    schema_bytes,
)

from ._builders import apply, apply_step, atom, compose, digest, ident, pair, quote, read, subject

PINNED = "sha256:271760d604e1ade55cba4974c658b92263bd3ee8ae343677dd91d0e713fb677f"
PACKAGE = resources.files("mechanism.formation.data")


def test_packaged_profile_is_byte_identical_to_the_reference_file() -> None:
    packaged = PACKAGE.joinpath("typed-formation-0.1.json").read_bytes()
    recorded = testdata.reference_sha256("mechanism/formation/data/typed-formation-0.1.json")
    assert hashlib.sha256(packaged).hexdigest() == recorded
    assert profile_bytes() == packaged
    assert len(packaged) == 1498


def test_packaged_schema_is_byte_identical_to_the_reference_file() -> None:
    name = "vstd-typed-formation-0.1.schema.json"
    recorded = testdata.reference_sha256(f"mechanism/formation/data/{name}")
    assert hashlib.sha256(schema_bytes()).hexdigest() == recorded
    assert PACKAGE.joinpath(name).read_bytes() == schema_bytes()


def test_profile_digest_is_the_compiled_digest() -> None:
    assert profile_digest() == PROFILE_DIGEST == PINNED == digest(profile_bytes())


def test_profile_is_a_canonical_inert_declaration_matching_the_constants() -> None:
    profile: dict[str, Any] = json.loads(profile_bytes())
    assert canonical_bytes(profile) == profile_bytes()
    assert profile["schema_version"] == PROFILE_SCHEMA
    assert profile["subject_schema"] == SUBJECT_SCHEMA
    assert profile["certificate_schema"] == CERTIFICATE_SCHEMA
    assert profile["residual_obligations"] == list(RESIDUAL_OBLIGATIONS)
    assert profile["limits"] == {
        "max_depth": MAX_DEPTH,
        "max_json_containers": MAX_JSON_CONTAINERS,
        "max_json_depth": MAX_JSON_DEPTH,
        "max_nodes": MAX_NODES,
        "max_path_steps": MAX_PATH_STEPS,
        "max_record_bytes": MAX_RECORD_BYTES,
    }
    assert profile["context_meaning"] == (
        "declared byte coordinates only; no grounding or agency proof"
    )


SEVEN = [atom(), apply(0), ident(0), apply_step(0, 1), ident(1), compose(3, 4), quote(5), read(6)]


def _validator() -> Any:
    return jsonschema.Draft202012Validator(json.loads(schema_bytes()))


def test_schema_validates_a_seven_constructor_subject_and_its_certificate() -> None:
    subject_bytes = subject(SEVEN)
    certificate_bytes = produce_formation_certificate(subject_bytes)
    validator = _validator()
    validator.validate(json.loads(subject_bytes))
    validator.validate(json.loads(certificate_bytes))
    report = check_formation(subject_bytes, certificate_bytes)
    assert report["status"] == "CHECKED"
    assert report["observation"]["quote_origins"] == [6]


@pytest.mark.parametrize("field", ["status", "self_derivation", "complete", "agency"])
def test_schema_refuses_claim_fields_on_both_records(field: str) -> None:
    subject_bytes, certificate_bytes = pair([atom()])
    validator = _validator()
    for record in (json.loads(subject_bytes), json.loads(certificate_bytes)):
        record[field] = True
        assert not validator.is_valid(record)


def test_a_schema_pass_is_not_a_formation_check() -> None:
    validator = _validator()
    forward = json.loads(subject([atom(), apply(1)], 0))  # a self reference
    assert validator.is_valid(forward)
    forward_report = check_formation(canonical_bytes(forward), pair([atom(), apply(0)])[1])
    assert forward_report["reason_codes"] == ["FORMATION_RECORD_INVALID"]
    ill_typed_bytes, certificate_bytes = pair([atom(), read(0)])
    assert validator.is_valid(json.loads(ill_typed_bytes))
    assert validator.is_valid(json.loads(certificate_bytes))
    assert check_formation(ill_typed_bytes, certificate_bytes)["status"] == "INVALID"
    with pytest.raises(ValueError):
        produce_formation_certificate(ill_typed_bytes)
