"""Benchmark the retained-silo inspector (docs/spec/formation.md §6) at its declared bounds.

A commit with 256 census entries (the four formation roles plus 252 opaque objects) whose
evidence totals 16 MiB, all retained. Prints ``inspect_silo_formation`` as a ratio to the floor
measured in the same interleaved rounds (benchmarks/_harness.py): SHA-256 over the same 16 MiB
in the same per-object pieces (the hashing the inspector cannot avoid). Also the receipt build
and recheck, which hash everything again on top of the inspection.

Run: ``.venv/bin/python benchmarks/bench_silo.py [--rounds N] [--quick] [--json PATH]``
"""

from __future__ import annotations

import argparse
import hashlib

from _harness import Op, Report, main

from mechanism.canonical import canonical_bytes, digest_bytes
from mechanism.formation import (
    build_formation_receipt,
    inspect_silo_formation,
    produce_formation_certificate,
    profile_bytes,
    recheck_formation_receipt,
)
from mechanism.formation._silo import (
    AGENCY_VERSION,
    CANONICAL_AGENCY_ACTIONS,
    CANONICAL_AGENCY_DIGEST,
    MAX_SNAPSHOT_BYTES,
)

CENSUS_ENTRIES = 256
GROUND = b"benchmark ground bytes\n"
PATHS = {
    "subject_path": "subject.json",
    "certificate_path": "certificate.json",
    "profile_path": "profile.json",
    "ground_path": "ground.txt",
}


def _record(path: str, data: bytes, role: tuple[str, str, str]) -> dict[str, object]:
    return {
        "path": path,
        "necessity": "DISPENSABLE",
        "object": {
            "schema_version": "VSTD-OBJECT-0.1",
            "object_digest": digest_bytes(data),
            "size_bytes": len(data),
            "artifact_kind": role[0],
            "declared_schema_id": role[1],
            "media_type": role[2],
        },
    }


def build_silo() -> tuple[bytes, dict[str, bytes]]:
    subject = canonical_bytes(
        {
            "schema_version": "VSTD-TYPED-FORMATION-0.1",
            "profile_digest": digest_bytes(profile_bytes()),
            "context": {
                "ground_artifact_digest": digest_bytes(GROUND),
                "authority_axiom_agency_digest": CANONICAL_AGENCY_DIGEST,
            },
            "nodes": [{"tag": "ATOM", "payload_digest": digest_bytes(b"bench atom")}],
            "root": 0,
        }
    )
    objects = {
        "subject.json": (subject, ("typed-formation-subject", "VSTD-TYPED-FORMATION-0.1")),
        "certificate.json": (
            produce_formation_certificate(subject),
            ("typed-formation-certificate", "VSTD-TYPED-FORMATION-CERTIFICATE-0.1"),
        ),
        "profile.json": (
            profile_bytes(),
            ("typed-formation-profile", "VSTD-TYPED-FORMATION-PROFILE-0.1"),
        ),
        "ground.txt": (GROUND, ("opaque-ground", "NOT_DECLARED")),
    }
    small = sum(len(data) for data, _ in objects.values())
    fillers = CENSUS_ENTRIES - len(objects)
    size = (MAX_SNAPSHOT_BYTES - small) // fillers
    for index in range(fillers):
        data = index.to_bytes(2, "big") * (size // 2) + b"\0" * (size % 2)
        objects[f"data/object-{index:03d}.bin"] = (data, ("opaque", "NOT_DECLARED"))
    census = []
    for path in sorted(objects):
        data, (kind, schema) = objects[path]
        media = "application/json" if path.endswith(".json") else "application/octet-stream"
        census.append(_record(path, data, (kind, schema, media)))
    commit = canonical_bytes(
        {
            "schema_version": "VSTD-SILO-COMMIT-0.1",
            "publisher_id": "publisher:sha256:" + "c" * 64,
            "parents": [],
            "census": census,
            "ground_paths": ["ground.txt"],
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
                "subject_path": "ground.txt",
                "ground_paths": ["ground.txt"],
                "mechanism_path": "ground.txt",
                "retained_path": ["ground.txt"],
                "relation_strength": "DERIVES",
                "ground_self": False,
                "derivation_reflexivity": False,
                "reflexion_identity": False,
                "deriver_cycle_closed": False,
                "ground_self_evidence_path": "ground.txt",
                "derivation_reflexivity_evidence_path": "ground.txt",
                "reflexion_identity_evidence_path": "ground.txt",
                "deriver_cycle_closure_evidence_path": "ground.txt",
                "residual_obligations": ["self status not established"],
            },
            "created_at": "2026-01-01T00:00:00Z",
        }
    )
    evidence = {digest_bytes(data): data for data, _ in objects.values()}
    return commit, evidence


def run(report: Report, args: argparse.Namespace) -> None:
    commit, evidence = build_silo()
    total = sum(len(data) for data in evidence.values())
    result = inspect_silo_formation(commit, evidence, **PATHS)
    facets = (
        result["coordinate_binding"],
        result["snapshot_retention"],
        result["agency_declaration"],
        result["formation_report"]["status"],
    )
    assert facets == ("BOUND", "COMPLETE", "MATCHED", "CHECKED"), result["reason_codes"]
    selection = canonical_bytes(
        {"schema_version": "VSTD-SILO-FORMATION-SELECTION-0.1",
         "commit_digest": digest_bytes(commit), **PATHS}
    )  # fmt: skip
    receipt = build_formation_receipt(selection, commit, evidence)
    print(
        f"census entries: {CENSUS_ENTRIES}, evidence: {total:,} bytes "
        f"({total / 2**20:.2f} MiB), commit: {len(commit):,} bytes"
    )
    pieces = list(evidence.values())
    # Every operation hashes every retained byte at least once: sha256 of them is a true floor.
    floor = report.compare_many(
        lambda: [hashlib.sha256(piece).digest() for piece in pieces],
        [
            Op("inspect_silo_formation", lambda: inspect_silo_formation(commit, evidence, **PATHS)),
            Op("build_formation_receipt",
               lambda: build_formation_receipt(selection, commit, evidence)),
            Op("recheck_formation_receipt",
               lambda: recheck_formation_receipt(receipt, selection, commit, evidence)),
        ],
        floor_name="sha256 of the same bytes",
        rounds=args.rounds,
    )[0].floor_seconds  # fmt: skip
    assert floor is not None
    report.value("sha256 throughput (floor)", total / floor / 2**20, "MiB/s")


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=11, help="interleaved rounds")


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__, configure=_options))
