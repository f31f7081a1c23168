"""The storage checklist of ``docs/spec/formation.md`` §8 (``test_formation_storage``), one test per
case, each named after what it defends against. Facet tuples read
(coordinate_binding, snapshot_retention, agency_declaration, formation report status)."""

from __future__ import annotations

import copy
import inspect as pyinspect
import sys
from typing import Any

import pytest

from mechanism.canonical import canonical_bytes, digest_bytes
from mechanism.formation import (
    PROFILE_DIGEST,
    check_formation,
    inspect_silo_formation,
    profile_bytes,
)

from .test_silo_support import (
    OPAQUE_ROLE,
    UNRELATED,
    SiloObject,
    agency_digest,
    assert_well_formed,
    certificate_for,
    commit_bytes,
    commit_value,
    evidence_for,
    facets,
    inspect,
    standard_silo,
    subject_value,
    with_object,
)

SILO = "mechanism.formation._silo"
ROLE_PATHS_KW = ("subject_path", "certificate_path", "profile_path", "ground_path")
ROLE_PATHS = {
    "subject": "subject.json",
    "certificate": "certificate.json",
    "profile": "profile.json",
    "ground": "ground.txt",
}


def _digest(silo: dict[str, SiloObject], path: str) -> str:
    return silo[path].digest


# --- availability and the happy path ---------------------------------------------------------


def test_inspector_is_public_pure_and_keyword_only() -> None:
    parameters = pyinspect.signature(inspect_silo_formation).parameters
    assert list(parameters) == [
        "commit_bytes",
        "evidence",
        "subject_path",
        "certificate_path",
        "profile_path",
        "ground_path",
    ]
    assert all(parameters[name].kind is pyinspect.Parameter.KEYWORD_ONLY for name in ROLE_PATHS_KW)
    assert all(parameters[name].default is pyinspect.Parameter.empty for name in parameters)


def test_happy_path_is_complete_checked_matched_without_silo_axis_keys_or_mutation() -> None:
    silo = standard_silo()
    commit = commit_bytes(silo)
    evidence = evidence_for(silo)
    before = copy.deepcopy(evidence)
    result = inspect(commit, evidence)
    assert facets(result) == ("BOUND", "COMPLETE", "MATCHED", "CHECKED")
    assert result["reason_codes"] == []
    assert result["commit_digest"] == digest_bytes(commit)
    assert result["coordinates"] == {
        role: {"path": path, "object_digest": _digest(silo, path)}
        for role, path in ROLE_PATHS.items()
    }
    # Nothing is promoted into a silo assessment: no assessment axis appears.
    assert not {"assessment", "silo_status", "completeness", "status"} & set(result)
    assert evidence == before
    assert_well_formed(result)


# --- retention of unrelated objects ------------------------------------------------------------


def _unrelated_case(kind: str) -> tuple[bytes, dict[str, Any]]:
    silo = standard_silo()
    evidence: dict[str, Any] = evidence_for(silo)
    unrelated = _digest(silo, "unrelated.txt")
    if kind == "missing":
        del evidence[unrelated]
    elif kind == "substituted":
        evidence[unrelated] = UNRELATED.upper()
    elif kind == "none":
        evidence[unrelated] = None
    elif kind == "size":
        silo = with_object(silo, "unrelated.txt", declared_size=len(UNRELATED) + 1)
    return commit_bytes(silo), evidence


@pytest.mark.parametrize(
    ("kind", "retention", "reason"),
    [
        ("missing", "INCOMPLETE", "CENSUS_OBJECT_MISSING"),
        ("substituted", "INVALID", "OBJECT_DIGEST_MISMATCH"),
        ("none", "INVALID", "OBJECT_BYTES_INVALID"),
        ("size", "INVALID", "OBJECT_SIZE_MISMATCH"),
    ],
)
def test_unrelated_object_failure_touches_only_retention(
    kind: str, retention: str, reason: str
) -> None:
    commit, evidence = _unrelated_case(kind)
    result = inspect(commit, evidence)
    assert facets(result) == ("BOUND", retention, "MATCHED", "CHECKED")
    assert result["reason_codes"] == [reason]


def test_known_digest_mismatch_dominates_a_missing_object() -> None:
    silo = standard_silo()
    silo["other.txt"] = SiloObject(b"another object", OPAQUE_ROLE)
    evidence = evidence_for(silo)
    del evidence[_digest(silo, "other.txt")]
    evidence[_digest(silo, "unrelated.txt")] = b"substituted bytes"
    result = inspect(commit_bytes(silo), evidence)
    assert facets(result) == ("BOUND", "INVALID", "MATCHED", "CHECKED")
    assert result["reason_codes"] == ["CENSUS_OBJECT_MISSING", "OBJECT_DIGEST_MISMATCH"]


# --- selected objects ------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["subject", "certificate", "profile", "ground"])
def test_missing_selected_object_is_unavailable_not_invalid(role: str) -> None:
    silo = standard_silo()
    evidence = evidence_for(silo)
    del evidence[_digest(silo, ROLE_PATHS[role])]
    result = inspect(commit_bytes(silo), evidence)
    binding, retention, _, report = facets(result)
    assert (binding, retention) == ("UNKNOWN", "INCOMPLETE")
    assert "SELECTED_OBJECT_UNAVAILABLE" in result["reason_codes"]
    assert (report is None) == (role in ("subject", "certificate"))


@pytest.mark.parametrize("role", ["subject", "certificate", "profile", "ground"])
@pytest.mark.parametrize("replacement", [b"substituted", None], ids=["substituted", "none"])
def test_substituted_or_non_bytes_selected_object_is_invalid(
    role: str, replacement: bytes | None
) -> None:
    silo = standard_silo()
    evidence: dict[str, Any] = evidence_for(silo)
    evidence[_digest(silo, ROLE_PATHS[role])] = replacement
    result = inspect(commit_bytes(silo), evidence)
    binding, retention, _, report = facets(result)
    assert (binding, retention) == ("INVALID", "INVALID")
    if role in ("subject", "certificate"):
        assert report is None  # never checked from bytes that are not the declared ones
    else:
        assert report == "CHECKED"


@pytest.mark.parametrize("role", ["subject", "certificate", "profile"])
@pytest.mark.parametrize("field", [0, 1, 2], ids=["kind", "schema", "media"])
def test_foreign_role_declaration_is_invalid_binding_beside_complete_checked(
    role: str, field: int
) -> None:
    path = ROLE_PATHS[role]
    silo = standard_silo()
    declared = list(silo[path].role)
    declared[field] = "foreign"
    silo = with_object(silo, path, role=tuple(declared))
    result = inspect(commit_bytes(silo), evidence_for(silo))
    assert facets(result) == ("INVALID", "COMPLETE", "MATCHED", "CHECKED")
    assert result["reason_codes"] == ["SELECTED_ROLE_DECLARATION_INVALID"]


def test_ground_bytes_stay_opaque_whatever_their_declaration() -> None:
    silo = with_object(standard_silo(), "ground.txt", role=("anything", "X", "image/png"))
    result = inspect(commit_bytes(silo), evidence_for(silo))
    assert facets(result) == ("BOUND", "COMPLETE", "MATCHED", "CHECKED")


def test_subject_ground_context_mismatch_is_invalid_binding_but_checked() -> None:
    subject = canonical_bytes(subject_value(ground=digest_bytes(b"some other ground")))
    silo = standard_silo(subject)
    result = inspect(commit_bytes(silo), evidence_for(silo))
    assert facets(result) == ("INVALID", "COMPLETE", "MATCHED", "CHECKED")
    assert result["reason_codes"] == ["SUBJECT_GROUND_CONTEXT_MISMATCH"]


def test_subject_agency_context_mismatch_invalidates_agency_and_binding() -> None:
    subject = canonical_bytes(subject_value(agency=digest_bytes(b"foreign agency")))
    silo = standard_silo(subject)
    result = inspect(commit_bytes(silo), evidence_for(silo))
    assert facets(result) == ("INVALID", "COMPLETE", "INVALID", "CHECKED")
    assert result["reason_codes"] == ["SUBJECT_AGENCY_CONTEXT_MISMATCH"]


def _foreign_profile() -> bytes:
    profile: dict[str, Any] = silo_json(profile_bytes())
    profile["limits"] = {**profile["limits"], "max_nodes": 2048}
    return canonical_bytes(profile)


def silo_json(data: bytes) -> Any:
    import json

    return json.loads(data)


def test_foreign_profile_bytes_bound_exactly_are_unknown_not_checked() -> None:
    foreign = _foreign_profile()
    subject = canonical_bytes(subject_value(profile=digest_bytes(foreign)))
    silo = standard_silo(subject)
    silo = with_object(silo, "profile.json", data=foreign)
    result = inspect(commit_bytes(silo), evidence_for(silo))
    assert facets(result) == ("UNKNOWN", "COMPLETE", "MATCHED", "UNKNOWN")
    assert result["reason_codes"] == ["FORMATION_PROFILE_UNSUPPORTED"]
    assert result["formation_report"]["reason_codes"] == ["FORMATION_PROFILE_UNSUPPORTED"]


def test_profile_coordinate_mismatch_dominates_a_missing_ground() -> None:
    silo = with_object(standard_silo(), "profile.json", data=_foreign_profile())
    evidence = evidence_for(silo)
    del evidence[_digest(silo, "ground.txt")]
    result = inspect(commit_bytes(silo), evidence)
    assert facets(result) == ("INVALID", "INCOMPLETE", "MATCHED", "CHECKED")
    assert result["reason_codes"] == [
        "CENSUS_OBJECT_MISSING",
        "FORMATION_PROFILE_UNSUPPORTED",
        "SELECTED_OBJECT_UNAVAILABLE",
        "SUBJECT_PROFILE_COORDINATE_MISMATCH",
    ]


@pytest.mark.parametrize("record", ["subject", "certificate"])
def test_publisher_checked_flag_is_not_adopted(record: str) -> None:
    subject_fields = subject_value()
    if record == "subject":
        subject_fields["checked"] = True
    subject = canonical_bytes(subject_fields)
    silo = standard_silo(subject)
    if record == "certificate":
        honest = certificate_for(canonical_bytes(subject_value()))
        claim = silo_json(honest)
        claim["checked"] = True
        silo = with_object(silo, "certificate.json", data=canonical_bytes(claim))
    result = inspect(commit_bytes(silo), evidence_for(silo))
    binding, retention, _, report = facets(result)
    assert (binding, retention, report) == ("INVALID", "COMPLETE", "INVALID")
    assert "FORMATION_RECORD_INVALID" in result["reason_codes"]
    assert result["formation_report"]["reason_codes"] == ["FORMATION_RECORD_INVALID"]


TWO_ATOMS = [
    {"tag": "ATOM", "payload_digest": digest_bytes(b"first")},
    {"tag": "ATOM", "payload_digest": digest_bytes(b"second")},
]


@pytest.mark.parametrize(
    "override",
    [
        {"subject_digest": digest_bytes(b"another subject")},
        {"profile_digest": digest_bytes(b"another profile")},
        {"root": 1},
    ],
    ids=["subject_digest", "profile_digest", "root"],
)
def test_certificate_coordinate_mismatch_is_invalid(override: dict[str, Any]) -> None:
    subject = canonical_bytes(subject_value(nodes=TWO_ATOMS))
    silo = standard_silo(subject)
    silo = with_object(silo, "certificate.json", data=certificate_for(subject, **override))
    result = inspect(commit_bytes(silo), evidence_for(silo))
    binding, retention, _, report = facets(result)
    assert (binding, retention, report) == ("INVALID", "COMPLETE", "INVALID")
    assert "CERTIFICATE_COORDINATE_MISMATCH" in result["reason_codes"]


def test_selected_ground_must_be_declared_in_ground_paths() -> None:
    silo = standard_silo()
    commit = commit_value(silo, ground_paths=["unrelated.txt"])
    result = inspect(canonical_bytes(commit), evidence_for(silo))
    assert facets(result) == ("INVALID", "COMPLETE", "MATCHED", "CHECKED")
    assert result["reason_codes"] == ["SELECTED_GROUND_NOT_DECLARED"]


@pytest.mark.parametrize("role", ["subject", "certificate", "profile", "ground"])
@pytest.mark.parametrize(
    ("selector", "reason"),
    [
        ("absent.json", "SELECTED_PATH_NOT_IN_CENSUS"),
        ("../x", "SELECTED_PATH_INVALID"),
        ("Z:/x", "SELECTED_PATH_INVALID"),
        (None, "SELECTED_PATH_INVALID"),
        ("nul.json", "SELECTED_PATH_INVALID"),
        (b"subject.json", "SELECTED_PATH_INVALID"),
    ],
)
def test_bad_selector_is_invalid_with_its_reason(role: str, selector: object, reason: str) -> None:
    silo = standard_silo()
    result = inspect(commit_bytes(silo), evidence_for(silo), **{f"{role}_path": selector})
    binding, retention, _, report = facets(result)
    assert (binding, retention) == ("INVALID", "COMPLETE")
    assert reason in result["reason_codes"]
    expected_path = selector if reason == "SELECTED_PATH_NOT_IN_CENSUS" else None
    assert result["coordinates"][role] == {"path": expected_path, "object_digest": None}
    if role in ("subject", "certificate"):
        assert report is None
    if role == "ground":
        assert "SELECTED_GROUND_NOT_DECLARED" in result["reason_codes"]


def test_str_subclass_selector_is_refused_without_calling_it() -> None:
    class Hostile(str):
        def __eq__(self, other: object) -> bool:
            raise AssertionError("selector hook called")

        def __hash__(self) -> int:
            raise AssertionError("selector hook called")

    silo = standard_silo()
    result = inspect(commit_bytes(silo), evidence_for(silo), ground_path=Hostile("ground.txt"))
    assert result["coordinates"]["ground"] == {"path": None, "object_digest": None}
    assert "SELECTED_PATH_INVALID" in result["reason_codes"]


# --- agency declaration ----------------------------------------------------------------------


def test_foreign_agency_version_is_unsupported() -> None:
    silo = standard_silo()
    # The version is judged before the digest: even a digest that no longer matches anything
    # cannot make a foreign declaration INVALID rather than unsupported.
    commit = commit_value(silo, authority_axiom_agency_version="VSTD-AUTHORITY-AXIOM-AGENCY-9.9")
    result = inspect(canonical_bytes(commit), evidence_for(silo))
    assert facets(result) == ("UNKNOWN", "COMPLETE", "UNKNOWN", "CHECKED")
    assert result["reason_codes"] == ["AGENCY_DECLARATION_UNSUPPORTED"]


def test_inconsistent_agency_digest_is_invalid() -> None:
    silo = standard_silo()
    actions = commit_value()["authority_axiom_agency"][:-1]
    commit = commit_value(silo, authority_axiom_agency=actions)  # digest left canonical
    result = inspect(canonical_bytes(commit), evidence_for(silo))
    assert facets(result) == ("INVALID", "COMPLETE", "INVALID", "CHECKED")
    assert result["reason_codes"] == ["AGENCY_DECLARATION_DIGEST_MISMATCH"]


@pytest.mark.parametrize("change", ["reduced", "extended"])
def test_self_consistent_foreign_action_set_is_unsupported_not_a_new_ground(change: str) -> None:
    actions = list(commit_value()["authority_axiom_agency"])
    actions = actions[1:] if change == "reduced" else sorted([*actions, "ZZZ_NEW_POWER"])
    digest = agency_digest(actions)
    subject = canonical_bytes(subject_value(agency=digest))
    silo = standard_silo(subject)
    commit = commit_value(
        silo, authority_axiom_agency=actions, authority_axiom_agency_digest=digest
    )
    result = inspect(canonical_bytes(commit), evidence_for(silo))
    assert facets(result) == ("UNKNOWN", "COMPLETE", "UNKNOWN", "CHECKED")
    assert result["reason_codes"] == ["AGENCY_DECLARATION_UNSUPPORTED"]


# --- commit admission ------------------------------------------------------------------------


def _valid_commit() -> bytes:
    return commit_bytes(standard_silo())


def _future_schema() -> bytes:
    return canonical_bytes(commit_value(schema_version="VSTD-SILO-COMMIT-0.2"))


def _duplicate_key() -> bytes:
    data = _valid_commit()
    return data.replace(
        b'{"authority_axiom_agency":', b'{"created_at":"x","authority_axiom_agency":', 1
    )


def _whitespace() -> bytes:
    return _valid_commit().replace(b'":', b'": ', 1)


def _depth_17() -> bytes:
    return b"[" * 17 + b"]" * 17


def _oversized() -> bytes:
    value = commit_value(exclusions=[f"exclusion {index:06d}" for index in range(16_000)])
    return canonical_bytes(value)


@pytest.mark.parametrize(
    ("make", "limited"),
    [
        (_future_schema, True),
        (_duplicate_key, False),
        (_whitespace, False),
        (_depth_17, True),
        (_oversized, True),
        (lambda: b"null", False),
        (lambda: bytearray(_valid_commit()), False),
        (lambda: memoryview(_valid_commit()), False),
        (lambda: _valid_commit().decode(), False),
        (lambda: None, False),
    ],
    ids=[
        "future-schema",
        "duplicate-key",
        "whitespace",
        "depth-17",
        "oversized",
        "null",
        "bytearray",
        "memoryview",
        "str",
        "none",
    ],
)
def test_commit_admission_table(make: Any, limited: bool) -> None:
    silo = standard_silo()
    result = inspect(make(), evidence_for(silo))
    assert result["commit_digest"] is None
    assert result["formation_report"] is None
    assert result["coordinates"] == {}
    if limited:
        assert facets(result) == ("UNKNOWN", "UNKNOWN", "UNKNOWN", None)
        assert result["reason_codes"] == ["COMMIT_UNSUPPORTED_OR_LIMITED"]
    else:
        assert facets(result) == ("INVALID", "INVALID", "UNKNOWN", None)
        assert result["reason_codes"] == ["COMMIT_INVALID"]
    assert_well_formed(result)


def test_oversized_fixture_really_exceeds_the_commit_bound() -> None:
    assert len(_oversized()) > 262_144


def test_case_colliding_census_paths_are_refused_before_evidence_is_looked_at() -> None:
    silo = standard_silo()
    silo["Unrelated.txt"] = SiloObject(b"collides", OPAQUE_ROLE)

    class Hostile(dict[str, bytes]):
        def items(self) -> Any:
            raise AssertionError("evidence examined")

    result = inspect(commit_bytes(silo), Hostile(evidence_for(silo)))
    assert result["reason_codes"] == ["COMMIT_INVALID"]


# --- the evidence snapshot -------------------------------------------------------------------


def test_snapshot_byte_budget_skips_an_object_without_touching_the_binding() -> None:
    silo = standard_silo()
    size = 3_460_000  # five of these exceed 16 MiB, any four plus the small objects do not
    for index in range(5):
        silo[f"big{index}.bin"] = SiloObject(bytes([index]) * size, OPAQUE_ROLE)
    result = inspect(commit_bytes(silo), evidence_for(silo))
    assert facets(result) == ("BOUND", "UNKNOWN", "MATCHED", "CHECKED")
    assert result["reason_codes"] == ["SNAPSHOT_BYTE_LIMIT"]


def test_object_over_four_mib_is_skipped_as_unknown() -> None:
    silo = standard_silo()
    huge = b"h" * (4_194_304 + 1)
    silo["huge.bin"] = SiloObject(huge, OPAQUE_ROLE, declared_size=4_194_304)
    result = inspect(commit_bytes(silo), evidence_for(silo))
    assert facets(result) == ("BOUND", "UNKNOWN", "MATCHED", "CHECKED")
    assert result["reason_codes"] == ["SNAPSHOT_BYTE_LIMIT"]


def test_more_than_256_evidence_entries_discard_the_snapshot() -> None:
    silo = standard_silo()
    evidence = evidence_for(silo)
    for index in range(257 - len(evidence)):
        evidence[digest_bytes(b"extra %d" % index)] = b"extra %d" % index
    assert len(evidence) == 257
    result = inspect(commit_bytes(silo), evidence)
    assert facets(result) == ("UNKNOWN", "UNKNOWN", "UNKNOWN", None)
    assert result["reason_codes"] == ["EVIDENCE_ENTRY_LIMIT", "SELECTED_OBJECT_UNAVAILABLE"]


def test_exactly_256_evidence_entries_are_accepted() -> None:
    silo = standard_silo()
    evidence = evidence_for(silo)
    for index in range(256 - len(evidence)):
        evidence[digest_bytes(b"extra %d" % index)] = b"extra %d" % index
    result = inspect(commit_bytes(silo), evidence)
    assert facets(result) == ("BOUND", "COMPLETE", "MATCHED", "CHECKED")


class _HostileDict(dict[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise AssertionError("mapping hook called")

    def get(self, key: str, default: Any = None) -> Any:
        raise AssertionError("mapping hook called")

    def items(self) -> Any:
        raise AssertionError("mapping hook called")

    def keys(self) -> Any:
        raise AssertionError("mapping hook called")

    def __iter__(self) -> Any:
        raise AssertionError("mapping hook called")

    def __len__(self) -> int:
        raise AssertionError("mapping hook called")

    def __contains__(self, key: object) -> bool:
        raise AssertionError("mapping hook called")


@pytest.mark.parametrize(
    "make",
    [
        lambda evidence: _HostileDict(evidence),
        lambda evidence: __import__("types").MappingProxyType(evidence),
        lambda evidence: list(evidence.items()),
        lambda evidence: None,
    ],
    ids=["dict-subclass", "mappingproxy", "pairs", "none"],
)
def test_foreign_mapping_is_unsupported_and_never_called(make: Any) -> None:
    silo = standard_silo()
    result = inspect(commit_bytes(silo), make(evidence_for(silo)))
    assert facets(result) == ("UNKNOWN", "UNKNOWN", "UNKNOWN", None)
    assert result["reason_codes"] == ["EVIDENCE_MAPPING_UNSUPPORTED", "SELECTED_OBJECT_UNAVAILABLE"]


def test_non_str_evidence_key_is_unsupported() -> None:
    silo = standard_silo()
    evidence: dict[Any, Any] = evidence_for(silo)
    evidence[1] = b"x"
    result = inspect(commit_bytes(silo), evidence)
    assert result["reason_codes"] == ["EVIDENCE_MAPPING_UNSUPPORTED", "SELECTED_OBJECT_UNAVAILABLE"]
    assert result["snapshot_retention"] == "UNKNOWN"


@pytest.mark.parametrize(
    "key", ["sha256:" + "A" * 64, "f" * 64, "sha256:" + "f" * 64 + "\n", "sha256:" + "f" * 63]
)
def test_non_digest_evidence_key_invalidates_the_whole_snapshot(key: str) -> None:
    silo = standard_silo()
    evidence = evidence_for(silo)
    evidence[key] = b"x"
    result = inspect(commit_bytes(silo), evidence)
    binding, retention, agency, report = facets(result)
    assert (retention, agency, report) == ("INVALID", "UNKNOWN", None)
    assert binding == "UNKNOWN"  # the selected bytes were never examined
    assert result["reason_codes"] == ["EVIDENCE_MAPPING_INVALID", "SELECTED_OBJECT_UNAVAILABLE"]


def test_value_hooks_are_never_called() -> None:
    class HostileBytes(bytes):
        def __len__(self) -> int:
            raise AssertionError("value hook called")

        def __eq__(self, other: object) -> bool:
            raise AssertionError("value hook called")

        def __hash__(self) -> int:
            raise AssertionError("value hook called")

    silo = standard_silo()
    evidence: dict[str, Any] = evidence_for(silo)
    unrelated = _digest(silo, "unrelated.txt")
    evidence[unrelated] = HostileBytes(UNRELATED)
    result = inspect(commit_bytes(silo), evidence)
    assert facets(result) == ("BOUND", "INVALID", "MATCHED", "CHECKED")
    assert result["reason_codes"] == ["OBJECT_BYTES_INVALID"]


@pytest.mark.parametrize("wrap", [bytearray, memoryview], ids=["bytearray", "memoryview"])
def test_mutable_byte_buffers_are_invalid_values(wrap: Any) -> None:
    silo = standard_silo()
    evidence: dict[str, Any] = evidence_for(silo)
    subject = _digest(silo, "subject.json")
    evidence[subject] = wrap(evidence[subject])
    result = inspect(commit_bytes(silo), evidence)
    assert facets(result) == ("INVALID", "INVALID", "UNKNOWN", None)
    assert result["reason_codes"] == ["OBJECT_BYTES_INVALID"]


def test_checker_uses_the_captured_bytes_even_if_the_caller_clears_the_mapping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    silo = standard_silo()
    evidence = evidence_for(silo)
    real_check = check_formation
    calls: list[int] = []

    def clearing_check(subject: bytes, certificate: bytes) -> dict[str, Any]:
        evidence.clear()  # the caller's store changes while the check runs
        calls.append(1)
        return real_check(subject, certificate)

    monkeypatch.setattr(f"{SILO}.check_formation", clearing_check)
    result = inspect(commit_bytes(silo), evidence)
    assert calls == [1]
    assert facets(result) == ("BOUND", "COMPLETE", "MATCHED", "CHECKED")


# --- sizes, aliases and mixed failures -------------------------------------------------------


def test_selected_size_mismatch_is_invalid_binding_and_retention_but_still_checked() -> None:
    silo = standard_silo()
    silo = with_object(silo, "subject.json", declared_size=len(silo["subject.json"].data) - 1)
    result = inspect(commit_bytes(silo), evidence_for(silo))
    assert facets(result) == ("INVALID", "INVALID", "MATCHED", "CHECKED")
    assert result["reason_codes"] == ["OBJECT_SIZE_MISMATCH"]


def test_missing_certificate_keeps_the_ground_context_mismatch() -> None:
    subject = canonical_bytes(subject_value(ground=digest_bytes(b"elsewhere")))
    silo = standard_silo(subject)
    evidence = evidence_for(silo)
    del evidence[_digest(silo, "certificate.json")]
    result = inspect(commit_bytes(silo), evidence)
    assert facets(result) == ("INVALID", "INCOMPLETE", "MATCHED", None)
    assert result["reason_codes"] == [
        "CENSUS_OBJECT_MISSING",
        "SELECTED_OBJECT_UNAVAILABLE",
        "SUBJECT_GROUND_CONTEXT_MISMATCH",
    ]


def test_malformed_certificate_sits_beside_incomplete_retention() -> None:
    silo = with_object(standard_silo(), "certificate.json", data=b'{"not":"a certificate"}')
    evidence = evidence_for(silo)
    del evidence[_digest(silo, "unrelated.txt")]
    result = inspect(commit_bytes(silo), evidence)
    assert facets(result) == ("INVALID", "INCOMPLETE", "MATCHED", "INVALID")
    assert result["reason_codes"] == ["CENSUS_OBJECT_MISSING", "FORMATION_RECORD_INVALID"]


def test_digest_consistent_malformed_certificate_coexists_with_complete_retention() -> None:
    silo = with_object(standard_silo(), "certificate.json", data=b"[]")
    result = inspect(commit_bytes(silo), evidence_for(silo))
    assert facets(result) == ("INVALID", "COMPLETE", "MATCHED", "INVALID")


def test_same_digest_aliases_are_hashed_once_but_each_size_is_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    silo = standard_silo()
    silo["alias-a.txt"] = SiloObject(UNRELATED, OPAQUE_ROLE)
    silo["alias-b.txt"] = SiloObject(UNRELATED, OPAQUE_ROLE, declared_size=len(UNRELATED) + 5)
    hashed: list[bytes] = []
    real_digest = digest_bytes

    def counting_digest(data: bytes) -> str:
        hashed.append(data)
        return real_digest(data)

    commit = commit_bytes(silo)
    monkeypatch.setattr(f"{SILO}.digest_bytes", counting_digest)
    result = inspect(commit, evidence_for(silo))
    monkeypatch.undo()
    assert hashed.count(UNRELATED) == 1
    census_objects = len({item.digest for item in silo.values()})
    assert len(hashed) == census_objects + 1  # + the commit digest itself
    assert facets(result) == ("BOUND", "INVALID", "MATCHED", "CHECKED")
    assert result["reason_codes"] == ["OBJECT_SIZE_MISMATCH"]


def test_objects_are_hashed_in_ascending_digest_order(monkeypatch: pytest.MonkeyPatch) -> None:
    silo = standard_silo()
    hashed: list[str] = []
    real_digest = digest_bytes

    def recording_digest(data: bytes) -> str:
        value = real_digest(data)
        hashed.append(value)
        return value

    commit = commit_bytes(silo)
    monkeypatch.setattr(f"{SILO}.digest_bytes", recording_digest)
    inspect(commit, evidence_for(silo))
    monkeypatch.undo()
    objects = hashed[1:]  # the first digest is the commit's
    assert objects == sorted(item.digest for item in silo.values())


def test_ground_may_alias_the_profile() -> None:
    silo = standard_silo()
    subject = canonical_bytes(subject_value(ground=PROFILE_DIGEST))
    silo = standard_silo(subject)
    del silo["ground.txt"]
    commit = commit_value(silo, ground_paths=["profile.json"])
    result = inspect(canonical_bytes(commit), evidence_for(silo), ground_path="profile.json")
    assert facets(result) == ("BOUND", "COMPLETE", "MATCHED", "CHECKED")
    assert result["coordinates"]["ground"] == {
        "path": "profile.json",
        "object_digest": PROFILE_DIGEST,
    }
    assert result["residual_obligations"] == result["formation_report"]["residual_obligations"]


def test_inputs_are_never_mutated_even_on_failure() -> None:
    silo = standard_silo()
    commit = commit_bytes(silo)
    evidence: dict[str, Any] = evidence_for(silo)
    evidence[_digest(silo, "certificate.json")] = None
    evidence["sha256:" + "0" * 64] = b"extra"
    before = copy.deepcopy(evidence)
    inspect(commit, evidence)
    assert evidence == before


def test_a_role_may_be_selected_by_an_unlabelled_alias_path() -> None:
    silo = standard_silo()
    silo["copy-of-subject.json"] = SiloObject(silo["subject.json"].data, OPAQUE_ROLE)
    result = inspect(commit_bytes(silo), evidence_for(silo), subject_path="copy-of-subject.json")
    assert facets(result) == ("INVALID", "COMPLETE", "MATCHED", "CHECKED")
    assert result["reason_codes"] == ["SELECTED_ROLE_DECLARATION_INVALID"]


def mutate_during_copy(evidence: dict[str, Any], function_name: str) -> tuple[Any, dict[str, bool]]:
    """A tracer that adds an entry to ``evidence`` once ``function_name`` is mid-iteration:
    the deterministic stand-in for another thread changing the caller's store."""
    state = {"fired": False}

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_name != function_name:
            return None

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line" and not state["fired"] and frame.f_locals.get("captured"):
                state["fired"] = True
                evidence[digest_bytes(b"late arrival")] = b"late arrival"
            return local

        return local

    return tracer, state


def test_store_changed_while_being_copied_is_snapshot_unavailable() -> None:
    silo = standard_silo()
    evidence = evidence_for(silo)
    commit = commit_bytes(silo)
    tracer, state = mutate_during_copy(evidence, "_snapshot")
    previous = sys.gettrace()  # a coverage tracer, when measuring: restored after
    sys.settrace(tracer)
    try:
        result = inspect(commit, evidence)
    finally:
        sys.settrace(previous)
    assert state["fired"]
    assert facets(result) == ("UNKNOWN", "UNKNOWN", "UNKNOWN", None)
    assert result["reason_codes"] == [
        "EVIDENCE_SNAPSHOT_UNAVAILABLE",
        "SELECTED_OBJECT_UNAVAILABLE",
    ]
