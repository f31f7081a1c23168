"""Builders for retained-silo tests, plus the tests that keep the builders honest.

A *silo* here is an ordered mapping ``path -> SiloObject`` (exact bytes plus the role
declaration its census record carries). :func:`commit_value` turns it into a complete,
valid ``VSTD-SILO-COMMIT-0.1`` value; tests then mutate that value, the objects or the evidence
to build exactly the situation they defend against.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any

from mechanism.canonical import canonical_bytes, canonical_digest, digest_bytes
from mechanism.formation import (
    CERTIFICATE_SCHEMA,
    PROFILE_DIGEST,
    RESIDUAL_OBLIGATIONS,
    SUBJECT_SCHEMA,
    inspect_silo_formation,
    profile_bytes,
)
from mechanism.formation._silo import (
    AGENCY_VERSION,
    CANONICAL_AGENCY_ACTIONS,
    CANONICAL_AGENCY_DIGEST,
    COMMIT_SCHEMA,
    INSPECTION_REASON_CODES,
)

GROUND = b"opaque ground bytes: never fetched, never derived\n"
UNRELATED = b"an unrelated census object\n"
ATOM_PAYLOAD = digest_bytes(b"unretrieved silo test atom")
PUBLISHER = "publisher:sha256:" + "b" * 64

SUBJECT_ROLE = ("typed-formation-subject", SUBJECT_SCHEMA, "application/json")
CERTIFICATE_ROLE = ("typed-formation-certificate", CERTIFICATE_SCHEMA, "application/json")
PROFILE_ROLE = ("typed-formation-profile", "VSTD-TYPED-FORMATION-PROFILE-0.1", "application/json")
OPAQUE_ROLE = ("opaque", "NOT_DECLARED", "text/plain")
GROUND_ROLE = ("opaque-ground", "NOT_DECLARED", "text/plain")

PATHS = {
    "subject_path": "subject.json",
    "certificate_path": "certificate.json",
    "profile_path": "profile.json",
    "ground_path": "ground.txt",
}
INSPECTION_KEYS = {
    "commit_digest",
    "profile_digest",
    "coordinates",
    "coordinate_binding",
    "snapshot_retention",
    "agency_declaration",
    "formation_report",
    "reason_codes",
    "residual_obligations",
}
_REFERENCES = {
    "ATOM": (),
    "APPLY": ("argument",),
    "ID": ("at",),
    "APPLY_STEP": ("source", "target"),
    "COMPOSE": ("left", "right"),
    "QUOTE": ("value",),
    "READ": ("code",),
}


@dataclass(frozen=True)
class SiloObject:
    data: bytes
    role: tuple[str, str, str]  # (artifact_kind, declared_schema_id, media_type)
    necessity: str = "DISPENSABLE"
    declared_size: int | None = None  # None: the true length
    declared_digest: str | None = None  # None: the true digest

    @property
    def digest(self) -> str:
        return self.declared_digest or digest_bytes(self.data)


def subject_value(
    *,
    ground: str | None = None,
    agency: str = CANONICAL_AGENCY_DIGEST,
    profile: str = PROFILE_DIGEST,
    nodes: list[dict[str, Any]] | None = None,
    root: int = 0,
) -> dict[str, Any]:
    return {
        "schema_version": SUBJECT_SCHEMA,
        "profile_digest": profile,
        "context": {
            "ground_artifact_digest": ground or digest_bytes(GROUND),
            "authority_axiom_agency_digest": agency,
        },
        "nodes": nodes or [{"tag": "ATOM", "payload_digest": ATOM_PAYLOAD}],
        "root": root,
    }


def certificate_for(subject: bytes, **overrides: Any) -> bytes:
    """The one certificate a subject admits, written out naively (no producer involved)."""
    value: dict[str, Any] = canonical_value(subject)
    certificate = {
        "schema_version": CERTIFICATE_SCHEMA,
        "subject_digest": digest_bytes(subject),
        "profile_digest": value["profile_digest"],
        "steps": [
            {
                "node": index,
                "rule": node["tag"],
                "premises": [node[field] for field in _REFERENCES[node["tag"]]],
            }
            for index, node in enumerate(value["nodes"])
        ],
        "root": value["root"],
    }
    certificate.update(overrides)
    return canonical_bytes(certificate)


def canonical_value(data: bytes) -> Any:
    import json

    return json.loads(data)


def standard_silo(subject: bytes | None = None) -> dict[str, SiloObject]:
    """subject/certificate/profile/ground plus one unrelated object, all honestly declared."""
    subject = subject if subject is not None else canonical_bytes(subject_value())
    return {
        "certificate.json": SiloObject(certificate_for(subject), CERTIFICATE_ROLE),
        "ground.txt": SiloObject(GROUND, GROUND_ROLE, necessity="NECESSARY"),
        "profile.json": SiloObject(profile_bytes(), PROFILE_ROLE),
        "subject.json": SiloObject(subject, SUBJECT_ROLE),
        "unrelated.txt": SiloObject(UNRELATED, OPAQUE_ROLE),
    }


def census(silo: dict[str, SiloObject]) -> list[dict[str, Any]]:
    return [
        {
            "path": path,
            "necessity": item.necessity,
            "object": {
                "schema_version": "VSTD-OBJECT-0.1",
                "object_digest": item.digest,
                "size_bytes": len(item.data) if item.declared_size is None else item.declared_size,
                "media_type": item.role[2],
                "artifact_kind": item.role[0],
                "declared_schema_id": item.role[1],
            },
        }
        for path, item in sorted(silo.items())
    ]


def commit_value(silo: dict[str, SiloObject] | None = None, **fields: Any) -> dict[str, Any]:
    """A complete valid commit over ``silo``; ``fields`` replace top-level keys."""
    silo = silo if silo is not None else standard_silo()
    ground_path = "ground.txt" if "ground.txt" in silo else sorted(silo)[0]
    value: dict[str, Any] = {
        "schema_version": COMMIT_SCHEMA,
        "publisher_id": PUBLISHER,
        "parents": [],
        "census": census(silo),
        "ground_paths": [ground_path],
        "derivations": [],
        "relations": [],
        "residual_obligations": ["source bridge not established"],
        "exclusions": [],
        "completeness_kind": "SILO_CENSUS",
        "coverage_universe": [],
        "authority_axiom_agency": list(CANONICAL_AGENCY_ACTIONS),
        "authority_axiom_agency_version": AGENCY_VERSION,
        "authority_axiom_agency_digest": CANONICAL_AGENCY_DIGEST,
        "authority_model_path": None,
        "self_derivation_record": {
            "subject_path": ground_path,
            "ground_paths": [ground_path],
            "mechanism_path": ground_path,
            "retained_path": [ground_path],
            "relation_strength": "DERIVES",
            "ground_self": False,
            "derivation_reflexivity": False,
            "reflexion_identity": False,
            "deriver_cycle_closed": False,
            "ground_self_evidence_path": ground_path,
            "derivation_reflexivity_evidence_path": ground_path,
            "reflexion_identity_evidence_path": ground_path,
            "deriver_cycle_closure_evidence_path": ground_path,
            "residual_obligations": ["self status not established"],
        },
        "created_at": "2026-01-01T00:00:00Z",
    }
    value.update(fields)
    return value


def commit_bytes(silo: dict[str, SiloObject] | None = None, **fields: Any) -> bytes:
    return canonical_bytes(commit_value(silo, **fields))


def evidence_for(silo: dict[str, SiloObject]) -> dict[str, bytes]:
    """Every census object's true bytes under its declared digest."""
    return {item.digest: item.data for item in silo.values()}


def agency_digest(actions: list[str], version: str = AGENCY_VERSION) -> str:
    return canonical_digest({"schema_version": version, "actions": sorted(actions)})


def inspect(commit: object, evidence: object, **paths: object) -> dict[str, Any]:
    return inspect_silo_formation(commit, evidence, **{**PATHS, **paths})


def facets(result: dict[str, Any]) -> tuple[str, str, str, str | None]:
    report = result["formation_report"]
    return (
        result["coordinate_binding"],
        result["snapshot_retention"],
        result["agency_declaration"],
        None if report is None else report["status"],
    )


def assert_well_formed(result: dict[str, Any]) -> None:
    """Shape invariants every inspection keeps, whatever the input."""
    assert set(result) == INSPECTION_KEYS
    assert result["profile_digest"] == PROFILE_DIGEST
    assert result["residual_obligations"] == list(RESIDUAL_OBLIGATIONS)
    assert result["reason_codes"] == sorted(set(result["reason_codes"]))
    assert set(result["reason_codes"]) <= INSPECTION_REASON_CODES
    assert result["coordinate_binding"] in {"BOUND", "INVALID", "UNKNOWN"}
    assert result["snapshot_retention"] in {"COMPLETE", "INCOMPLETE", "INVALID", "UNKNOWN"}
    assert result["agency_declaration"] in {"MATCHED", "INVALID", "UNKNOWN"}
    canonical_bytes(result)  # always a canonical value


def with_object(silo: dict[str, SiloObject], path: str, **changes: Any) -> dict[str, SiloObject]:
    changed = dict(silo)
    changed[path] = replace(silo[path], **changes)
    return changed


# --- the builders' own tests -----------------------------------------------------------------


def test_standard_silo_inspects_bound_complete_matched_checked() -> None:
    silo = standard_silo()
    result = inspect(commit_bytes(silo), evidence_for(silo))
    assert_well_formed(result)
    assert facets(result) == ("BOUND", "COMPLETE", "MATCHED", "CHECKED")
    assert result["reason_codes"] == []


def test_naive_certificate_matches_the_shipped_producer() -> None:
    from mechanism.formation import produce_formation_certificate

    subject = canonical_bytes(subject_value())
    assert certificate_for(subject) == produce_formation_certificate(subject)


def test_commit_builder_does_not_share_state_between_calls() -> None:
    first = commit_value()
    snapshot = copy.deepcopy(first)
    first["census"].clear()
    assert commit_value() == snapshot
