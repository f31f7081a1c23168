"""Test-side builders: subjects, the naive certificate, and hand-written digest oracles.

Everything here is written from the spec text (docs/spec/formation.md §3.2–§3.4), independently
of the producer and the checker, so a test comparing them with the implementation can fail.
"""

from __future__ import annotations

import hashlib
from typing import Any

from mechanism.canonical import canonical_bytes, canonical_digest

PROFILE = "sha256:271760d604e1ade55cba4974c658b92263bd3ee8ae343677dd91d0e713fb677f"
SUBJECT_SCHEMA = "VSTD-TYPED-FORMATION-0.1"
CERTIFICATE_SCHEMA = "VSTD-TYPED-FORMATION-CERTIFICATE-0.1"
RESIDUALS = [
    "SOURCE_INTERPRETATION_NOT_ESTABLISHED",
    "GROUND_DERIVATION_NOT_ESTABLISHED",
    "SOURCE_TRACE_RELATION_NOT_ESTABLISHED",
    "SOURCE_LAYER_BOUNDARY_NOT_ESTABLISHED",
    "SELF_STATUS_NOT_ESTABLISHED",
    "GLOBAL_CYCLE_NOT_ESTABLISHED",
    "COMPLETENESS_NOT_ESTABLISHED",
    "AGENCY_NOT_CHECKED",
]
REFERENCE_FIELDS = {
    "ATOM": (),
    "APPLY": ("argument",),
    "ID": ("at",),
    "APPLY_STEP": ("source", "target"),
    "COMPOSE": ("left", "right"),
    "QUOTE": ("value",),
    "READ": ("code",),
}


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


GROUND = digest(b"synthetic ground")
AGENCY = "sha256:41e3a27c8322874bb5634890d33cff2a9170f2906c83d45d9c7968836d7e482c"
PAYLOAD = digest(b"unretrieved synthetic atom")
OTHER_PAYLOAD = digest(b"another unretrieved atom")


def atom(payload: str = PAYLOAD) -> dict[str, Any]:
    return {"tag": "ATOM", "payload_digest": payload}


def apply(argument: int) -> dict[str, Any]:
    return {"tag": "APPLY", "argument": argument}


def ident(at: int) -> dict[str, Any]:
    return {"tag": "ID", "at": at}


def apply_step(source: int, target: int) -> dict[str, Any]:
    return {"tag": "APPLY_STEP", "source": source, "target": target}


def compose(left: int, right: int) -> dict[str, Any]:
    return {"tag": "COMPOSE", "left": left, "right": right}


def quote(value: int) -> dict[str, Any]:
    return {"tag": "QUOTE", "value": value}


def read(code: int) -> dict[str, Any]:
    return {"tag": "READ", "code": code}


def subject_record(
    nodes: list[dict[str, Any]],
    root: int | None = None,
    *,
    profile: str = PROFILE,
    ground: str = GROUND,
    agency: str = AGENCY,
) -> dict[str, Any]:
    return {
        "schema_version": SUBJECT_SCHEMA,
        "profile_digest": profile,
        "context": {"ground_artifact_digest": ground, "authority_axiom_agency_digest": agency},
        "nodes": nodes,
        "root": len(nodes) - 1 if root is None else root,
    }


def subject(nodes: list[dict[str, Any]], root: int | None = None, **context: str) -> bytes:
    return canonical_bytes(subject_record(nodes, root, **context))


def certificate_record(subject_bytes: bytes, record: dict[str, Any]) -> dict[str, Any]:
    """The naive certificate of §3.3: one step per node, premises = ordered references."""
    return {
        "schema_version": CERTIFICATE_SCHEMA,
        "subject_digest": digest(subject_bytes),
        "profile_digest": PROFILE,
        "steps": [
            {
                "node": index,
                "rule": node["tag"],
                "premises": [node[field] for field in REFERENCE_FIELDS[node["tag"]]],
            }
            for index, node in enumerate(record["nodes"])
        ],
        "root": record["root"],
    }


def pair(
    nodes: list[dict[str, Any]], root: int | None = None, **context: str
) -> tuple[bytes, bytes]:
    """A subject and its naive certificate."""
    record = subject_record(nodes, root, **context)
    subject_bytes = canonical_bytes(record)
    return subject_bytes, canonical_bytes(certificate_record(subject_bytes, record))


# Hand-written identity oracles (docs/spec/formation.md §3.4), via the general canonical codec.
def h_atom(payload: str) -> str:
    return canonical_digest({"kind": "ATOM", "payload_digest": payload})


def h_apply(argument: str) -> str:
    return canonical_digest({"kind": "APPLY", "argument_digest": argument})


def h_path(source: str, target: str, steps: list[tuple[str, str]]) -> str:
    return canonical_digest(
        {
            "kind": "PATH",
            "source_digest": source,
            "target_digest": target,
            "path_steps": [{"source_digest": a, "target_digest": b} for a, b in steps],
        }
    )


def h_code(subject_digest: str, node: int, dependency_nodes: list[int]) -> str:
    return canonical_digest(
        {
            "kind": "CODE",
            "subject_digest": subject_digest,
            "node": node,
            "dependency_nodes": dependency_nodes,
        }
    )


def h_formation(subject_digest: str, node: int) -> str:
    return canonical_digest({"subject_digest": subject_digest, "node": node})
