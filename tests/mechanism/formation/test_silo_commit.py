"""Full ``VSTD-SILO-COMMIT-0.1`` validation (docs/spec/formation.md §6.3): every malformed commit is
``COMMIT_INVALID`` with nothing else examined, and the grammar's edges are accepted."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from mechanism.canonical import canonical_bytes, digest_bytes
from mechanism.formation._silo import is_portable_path, is_text

from .test_silo_support import (
    OPAQUE_ROLE,
    SiloObject,
    certificate_for,
    commit_value,
    evidence_for,
    facets,
    inspect,
    standard_silo,
)

Mutation = Callable[[dict[str, Any]], None]


def _set(key: str, value: Any) -> Mutation:
    def mutate(commit: dict[str, Any]) -> None:
        commit[key] = value

    return mutate


def _census(index: int, key: str, value: Any) -> Mutation:
    def mutate(commit: dict[str, Any]) -> None:
        commit["census"][index][key] = value

    return mutate


def _object(index: int, key: str, value: Any) -> Mutation:
    def mutate(commit: dict[str, Any]) -> None:
        commit["census"][index]["object"][key] = value

    return mutate


def _self(key: str, value: Any) -> Mutation:
    def mutate(commit: dict[str, Any]) -> None:
        commit["self_derivation_record"][key] = value

    return mutate


def _drop(key: str) -> Mutation:
    def mutate(commit: dict[str, Any]) -> None:
        del commit[key]

    return mutate


def _reverse_census(commit: dict[str, Any]) -> None:
    commit["census"].reverse()


def _duplicate_census_entry(commit: dict[str, Any]) -> None:
    commit["census"].insert(1, copy.deepcopy(commit["census"][0]))


def _too_many_census_entries(commit: dict[str, Any]) -> None:
    commit["census"] = [
        {
            "path": f"object-{index:03d}.bin",
            "necessity": "DISPENSABLE",
            "object": {
                "schema_version": "VSTD-OBJECT-0.1",
                "object_digest": digest_bytes(b"%d" % index),
                "size_bytes": 1,
                "media_type": "application/octet-stream",
                "artifact_kind": "opaque",
                "declared_schema_id": "NOT_DECLARED",
            },
        }
        for index in range(257)
    ]


DIGEST_A = digest_bytes(b"a")
DIGEST_B = digest_bytes(b"b")
LOW, HIGH = sorted([DIGEST_A, DIGEST_B])

MALFORMED: dict[str, Mutation] = {
    "missing-key": _drop("created_at"),
    "extra-key": _set("status", "CHECKED"),
    "publisher-not-prefixed": _set("publisher_id", "b" * 64),
    "publisher-upper-hex": _set("publisher_id", "publisher:sha256:" + "B" * 64),
    "three-parents": _set("parents", [digest_bytes(b"%d" % i) for i in range(3)]),
    "parents-unsorted": _set("parents", [HIGH, LOW]),
    "parents-duplicate": _set("parents", [LOW, LOW]),
    "parent-not-digest": _set("parents", ["sha256:xyz"]),
    "census-empty": _set("census", []),
    "census-not-list": _set("census", {}),
    "census-unsorted": _reverse_census,
    "census-duplicate-path": _duplicate_census_entry,
    "census-257-entries": _too_many_census_entries,
    "census-extra-key": _census(0, "checked", True),
    "census-necessity-foreign": _census(0, "necessity", "OPTIONAL"),
    # Unhashable enum values must be refused, not raise TypeError (§6: never raises).
    "census-necessity-list": _census(0, "necessity", ["NECESSARY"]),
    "census-path-parent": _census(0, "path", "../certificate.json"),
    "census-path-absolute": _census(0, "path", "/certificate.json"),
    "census-path-backslash": _census(0, "path", "a\\certificate.json"),
    "census-path-device": _census(0, "path", "aux.json"),
    "object-schema-foreign": _object(0, "schema_version", "VSTD-OBJECT-0.2"),
    "object-digest-bare-hex": _object(0, "object_digest", "a" * 64),
    "object-size-bool": _object(0, "size_bytes", True),
    "object-size-over-4mib": _object(0, "size_bytes", 4_194_305),
    "object-media-empty": _object(0, "media_type", ""),
    "object-media-edge-space": _object(0, "media_type", "text/plain "),
    "object-kind-control": _object(0, "artifact_kind", "opaque\u0007"),
    "object-kind-c1-control": _object(0, "artifact_kind", "opaque\u0085"),
    "object-kind-129-chars": _object(0, "artifact_kind", "k" * 129),
    "object-schema-id-257-chars": _object(0, "declared_schema_id", "s" * 257),
    "object-extra-key": _object(0, "verified", True),
    "ground-path-not-in-census": _set("ground_paths", ["elsewhere.txt"]),
    "ground-paths-unsorted": _set("ground_paths", ["unrelated.txt", "ground.txt"]),
    "derivations-not-list": _set("derivations", {}),
    "derivation-not-object": _set("derivations", ["x"]),
    "relations-257": _set("relations", [{}] * 257),
    "obligations-unsorted": _set("residual_obligations", ["b", "a"]),
    "obligations-duplicate": _set("residual_obligations", ["a", "a"]),
    "obligation-empty-text": _set("residual_obligations", [""]),
    "exclusions-not-text": _set("exclusions", [1]),
    "completeness-foreign": _set("completeness_kind", "TOTAL"),
    "completeness-object": _set("completeness_kind", {"kind": "SILO_CENSUS"}),
    "coverage-4097-items": _set("coverage_universe", [f"u{index:05d}" for index in range(4097)]),
    "coverage-item-513-chars": _set("coverage_universe", ["u" * 513]),
    "agency-unsorted": _set("authority_axiom_agency", ["B", "A"]),
    "agency-action-129-chars": _set("authority_axiom_agency", ["A" * 129]),
    "agency-version-empty": _set("authority_axiom_agency_version", ""),
    "agency-digest-malformed": _set("authority_axiom_agency_digest", "sha256:"),
    "model-path-not-in-census": _set("authority_model_path", "model.json"),
    "model-path-not-portable": _set("authority_model_path", "./model.json"),
    "self-record-missing-key": lambda commit: commit["self_derivation_record"].pop("ground_self"),
    "self-flag-int": _self("ground_self", 0),
    "self-subject-not-in-census": _self("subject_path", "absent.txt"),
    "self-retained-empty": _self("retained_path", []),
    "self-retained-starts-outside-ground": _self("retained_path", ["unrelated.txt", "ground.txt"]),
    "self-retained-ends-elsewhere": _self("retained_path", ["ground.txt", "unrelated.txt"]),
    "self-ground-paths-unsorted": _self("ground_paths", ["unrelated.txt", "ground.txt"]),
    "self-evidence-path-not-in-census": _self("ground_self_evidence_path", "absent.txt"),
    "self-strength-empty": _self("relation_strength", ""),
    "created-at-65-chars": _set("created_at", "t" * 65),
    "created-at-not-text": _set("created_at", 20260101),
    "root-not-object": lambda commit: commit.clear(),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_commit_is_commit_invalid_and_nothing_else_is_examined(name: str) -> None:
    silo = standard_silo()
    commit = commit_value(silo)
    MALFORMED[name](commit)
    result = inspect(canonical_bytes(commit), evidence_for(silo))
    assert result["reason_codes"] == ["COMMIT_INVALID"]
    assert facets(result) == ("INVALID", "INVALID", "UNKNOWN", None)
    assert result["coordinates"] == {} and result["commit_digest"] is None


def test_unsorted_keys_are_refused_by_canonical_admission() -> None:
    silo = standard_silo()
    data = canonical_bytes(commit_value(silo))
    reordered = data.replace(b'{"authority_axiom_agency":', b'{"zz":0,"authority_axiom_agency":')
    assert inspect(reordered, evidence_for(silo))["reason_codes"] == ["COMMIT_INVALID"]


ACCEPTED: dict[str, Mutation] = {
    "two-sorted-parents": _set("parents", [LOW, HIGH]),
    "model-path-in-census": _set("authority_model_path", "unrelated.txt"),
    "null-self-evidence-path": _self("ground_self_evidence_path", None),
    "true-self-flags": _self("deriver_cycle_closed", True),
    "coverage-universe-4096": _set("coverage_universe", [f"u{index:05d}" for index in range(4096)]),
    "every-completeness-kind": _set("completeness_kind", "LOGICAL_DECIDABILITY"),
    "two-ground-paths": _set("ground_paths", ["ground.txt", "unrelated.txt"]),
    "unicode-text": _set("residual_obligations", ["naïve grounding", "résumé"]),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_grammar_edges_are_accepted(name: str) -> None:
    silo = standard_silo()
    commit = commit_value(silo)
    ACCEPTED[name](commit)
    result = inspect(canonical_bytes(commit), evidence_for(silo))
    assert facets(result) == ("BOUND", "COMPLETE", "MATCHED", "CHECKED"), result["reason_codes"]


def test_empty_object_of_size_zero_is_retained() -> None:
    silo = standard_silo()
    silo["empty.bin"] = SiloObject(b"", OPAQUE_ROLE)
    result = inspect(canonical_bytes(commit_value(silo)), evidence_for(silo))
    assert facets(result) == ("BOUND", "COMPLETE", "MATCHED", "CHECKED")


def test_census_of_exactly_256_entries_is_accepted() -> None:
    silo = standard_silo()
    for index in range(256 - len(silo)):
        silo[f"object-{index:03d}.bin"] = SiloObject(b"%d" % index, OPAQUE_ROLE)
    result = inspect(canonical_bytes(commit_value(silo)), evidence_for(silo))
    assert facets(result) == ("BOUND", "COMPLETE", "MATCHED", "CHECKED")


# --- derivations and relations (§6.3: "derivations (sorted by target_path), relations (≤ 256,
# sorted by type/source/target)", "Every path referenced anywhere must be a census path") ------
# docs/spec/formation.md §6.3 (a declared CHECKS link records a relationship, not proof that
# checking ran)
# has the inspector look at commits that declare links, and §6.3 keeps
# COMMIT_UNSUPPORTED_OR_LIMITED for a foreign schema or a size/scan limit only: such a commit is
# either COMMIT_INVALID or inspected like any other. Field names follow the text: a derivation's
# ``target_path``; a relation's ``type``, ``source``, ``target``; any ``*_path``/``*_paths``.

CHECKS = {"type": "CHECKS", "source": "certificate.json", "target": "subject.json"}
DERIVES = {"type": "DERIVES", "source": "ground.txt", "target": "subject.json"}
DERIVATION = {
    "target_path": "subject.json",
    "source_paths": ["ground.txt"],
    "mechanism_path": "certificate.json",
    "note": "declared, not checked",
}
DERIVATION_2 = {"target_path": "unrelated.txt", "source_paths": ["ground.txt"]}

LINKS_ACCEPTED: dict[str, dict[str, Any]] = {
    "one-checks-relation": {"relations": [CHECKS]},
    "relations-sorted-by-type": {"relations": [CHECKS, DERIVES]},
    "relations-same-type-sorted-by-source": {
        "relations": [CHECKS, {**CHECKS, "source": "profile.json"}]
    },
    "relations-same-type-and-source-sorted-by-target": {
        "relations": [{**CHECKS, "target": "profile.json"}, CHECKS]
    },
    "one-derivation": {"derivations": [DERIVATION]},
    "derivations-sorted-by-target-path": {"derivations": [DERIVATION, DERIVATION_2]},
    "derivation-null-optional-path": {"derivations": [{**DERIVATION, "mechanism_path": None}]},
    "both": {"derivations": [DERIVATION], "relations": [CHECKS, DERIVES]},
    "relation-fields-in-path-style": {
        "relations": [
            {
                "relation_type": "CHECKS",
                "source_path": "certificate.json",
                "target_path": "subject.json",
            },
            {"type": "DERIVES", "source_path": "ground.txt", "target": "subject.json"},
        ]
    },
    "256-relations": {
        "relations": sorted(
            ({**CHECKS, "type": f"T{index:03d}"} for index in range(256)),
            key=lambda relation: relation["type"],
        )
    },
}


@pytest.mark.parametrize("name", sorted(LINKS_ACCEPTED))
def test_declared_links_are_inspected_like_any_other_commit(name: str) -> None:
    silo = standard_silo()
    result = inspect(
        canonical_bytes(commit_value(silo, **LINKS_ACCEPTED[name])), evidence_for(silo)
    )
    assert facets(result) == ("BOUND", "COMPLETE", "MATCHED", "CHECKED")
    assert result["reason_codes"] == []


def test_a_declared_checks_link_is_not_proof_that_checking_ran() -> None:
    # docs/spec/formation.md §6.3: the certificate below does not bind the subject; the CHECKS
    # link changes nothing.
    silo = standard_silo()
    subject = silo["subject.json"].data
    silo["certificate.json"] = SiloObject(
        certificate_for(subject, root=1), silo["certificate.json"].role
    )
    result = inspect(canonical_bytes(commit_value(silo, relations=[CHECKS])), evidence_for(silo))
    assert result["formation_report"]["status"] == "INVALID"
    assert result["snapshot_retention"] == "COMPLETE"


LINKS_MALFORMED: dict[str, dict[str, Any]] = {
    "derivations-unsorted": {"derivations": [DERIVATION_2, DERIVATION]},
    "derivation-without-target-path": {"derivations": [{"source_paths": ["ground.txt"]}]},
    "derivation-target-path-null": {"derivations": [{**DERIVATION, "target_path": None}]},
    "derivation-target-not-in-census": {
        "derivations": [{**DERIVATION, "target_path": "absent.json"}]
    },
    "derivation-target-not-portable": {
        "derivations": [{**DERIVATION, "target_path": "../subject.json"}]
    },
    "derivation-path-field-not-in-census": {
        "derivations": [{**DERIVATION, "mechanism_path": "absent.py"}]
    },
    "derivation-paths-field-not-in-census": {
        "derivations": [{**DERIVATION, "source_paths": ["ground.txt", "absent.txt"]}]
    },
    "derivation-paths-field-not-list": {
        "derivations": [{**DERIVATION, "source_paths": "ground.txt"}]
    },
    "relations-unsorted-by-type": {"relations": [DERIVES, CHECKS]},
    "relations-unsorted-by-source": {"relations": [{**CHECKS, "source": "profile.json"}, CHECKS]},
    "relations-unsorted-by-target": {"relations": [CHECKS, {**CHECKS, "target": "profile.json"}]},
    "relation-without-type": {"relations": [{"source": "ground.txt", "target": "subject.json"}]},
    "relation-type-not-text": {"relations": [{**CHECKS, "type": 1}]},
    "relation-type-empty": {"relations": [{**CHECKS, "type": ""}]},
    "relation-without-source": {"relations": [{"type": "CHECKS", "target": "subject.json"}]},
    "relation-source-not-in-census": {"relations": [{**CHECKS, "source": "absent.json"}]},
    "relation-target-not-in-census": {"relations": [{**CHECKS, "target": "absent.json"}]},
    "relation-target-not-portable": {"relations": [{**CHECKS, "target": "Z:/subject.json"}]},
    "relation-path-field-not-in-census": {"relations": [{**CHECKS, "evidence_path": "absent"}]},
    "relation-target-list": {"relations": [{**CHECKS, "target": ["subject.json"]}]},
    "relation-source-spelt-twice": {"relations": [{**CHECKS, "source_path": "certificate.json"}]},
    "relation-type-spelt-twice": {"relations": [{**CHECKS, "relation_type": "CHECKS"}]},
    "relation-path-style-source-not-in-census": {
        "relations": [{"type": "CHECKS", "source_path": "absent.json", "target": "subject.json"}]
    },
}


@pytest.mark.parametrize("name", sorted(LINKS_MALFORMED))
def test_malformed_declared_links_are_commit_invalid(name: str) -> None:
    silo = standard_silo()
    commit = commit_value(silo, **LINKS_MALFORMED[name])
    result = inspect(canonical_bytes(commit), evidence_for(silo))
    assert result["reason_codes"] == ["COMMIT_INVALID"]
    assert facets(result) == ("INVALID", "INVALID", "UNKNOWN", None)


PATHS_OK = [
    "a",
    "subject.json",
    "dir/sub/file.tar.gz",
    "A-b_c.9",
    ".hidden",
    "console.json",
    "COM0.txt",
    "LPT10",
    "x" * 240,
]
PATHS_BAD = [
    "",
    " a",
    "a ",
    "/a",
    "a/",
    "a//b",
    ".",
    "..",
    "a/./b",
    "a/../b",
    "file.",
    "dir./file",
    "CON",
    "con.txt",
    "Nul.tar.gz",
    "dir/aux",
    "com1",
    "LPT9.log",
    "Z:/x",
    "a\\b",
    "a b",
    "ä",
    "a\n",
    "x" * 241,
]


@pytest.mark.parametrize("path", PATHS_OK)
def test_portable_path_accepts(path: str) -> None:
    assert is_portable_path(path)


@pytest.mark.parametrize("path", PATHS_BAD)
def test_portable_path_refuses(path: str) -> None:
    assert not is_portable_path(path)


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("ok", True),
        ("x" * 8, True),
        ("x" * 9, False),
        ("", False),
        ("\ttab", False),
        ("in\u007fside", False),
        ("in\u009fside", False),
        ("in\u00a0side", True),
        ("\ud800", False),
        (b"bytes", False),
    ],
)
def test_text_rule(text: object, ok: bool) -> None:
    assert is_text(text, 8) is ok
