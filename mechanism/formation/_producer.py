"""The typed-formation certificate producer: ``produce_formation_certificate(subject) -> bytes``.

Contract (``docs/spec/formation.md`` §4):

* Takes exactly one argument, the subject bytes, and admits them with the wire's subject
  admission (its ``FormationError``/``FormationLimitError``/``UnsupportedFormation`` pass
  through). A subject naming another profile raises ``UnsupportedFormation``.
* Builds typed terms in source order on its own: it shares no inference code with the checker
  and never calls it. Terms are structural (an APPLY term contains its argument term), so the
  APPLY_STEP rule compares terms, not digests. Dependency depth above 64 raises
  ``FormationLimitError`` before the node is typed; an APPLY/ID/APPLY_STEP input that is not a
  FORM, an APPLY_STEP target that is not exactly APPLY(source), a COMPOSE of non-paths or of
  unequal endpoints, and a READ of a non-quotation raise ``FormationError``; a path of more
  than 4,096 steps raises ``FormationLimitError``.
* Returns the canonical bytes of the one certificate the subject admits (one step per node,
  ``premises`` = the node's ordered references, the subject's digest, the compiled profile
  digest and the subject's root); more than 262,144 bytes raises ``FormationLimitError``.
  Never a partial certificate, never a verdict.
"""

from __future__ import annotations

import json
from typing import Any

from mechanism.canonical import digest_bytes
from mechanism.formation._wire import (
    CERTIFICATE_SCHEMA,
    MAX_DEPTH,
    MAX_PATH_STEPS,
    MAX_RECORD_BYTES,
    PROFILE_DIGEST,
    FormationError,
    FormationLimitError,
    UnsupportedFormation,
    admit_subject,
    node_references,
)

__all__ = ["produce_formation_certificate"]

# Typed terms, as plain tuples compared structurally:
#   ("FORM", form)            form = ("ATOM", payload_digest) | ("APPLY", form)
#   ("PATH", source_form, target_form, step_count)
#   ("CODE", quoted_term)
Term = tuple[Any, ...]


def _form(term: Term, index: int, role: str) -> Term:
    if term[0] != "FORM":
        raise FormationError(f"node {index}: {role} is not a FORM")
    form: Term = term[1]
    return form


def _path(term: Term, index: int, role: str) -> Term:
    if term[0] != "PATH":
        raise FormationError(f"node {index}: {role} is not a PATH")
    return term


def _build(tag: str, node: dict[str, Any], inputs: list[Term], index: int) -> Term:
    if tag == "ATOM":
        return ("FORM", ("ATOM", node["payload_digest"]))
    if tag == "APPLY":
        return ("FORM", ("APPLY", _form(inputs[0], index, "argument")))
    if tag == "ID":
        point = _form(inputs[0], index, "at")
        return ("PATH", point, point, 0)
    if tag == "APPLY_STEP":
        source = _form(inputs[0], index, "source")
        target = _form(inputs[1], index, "target")
        if target != ("APPLY", source):
            raise FormationError(f"node {index}: target is not APPLY(source)")
        return ("PATH", source, target, 1)
    if tag == "COMPOSE":
        left = _path(inputs[0], index, "left")
        right = _path(inputs[1], index, "right")
        if left[2] != right[1]:
            raise FormationError(f"node {index}: left target differs from right source")
        count = left[3] + right[3]
        if count > MAX_PATH_STEPS:
            raise FormationLimitError(f"node {index}: path exceeds {MAX_PATH_STEPS} steps")
        return ("PATH", left[1], right[2], count)
    if tag == "QUOTE":
        return ("CODE", inputs[0])
    # READ
    code = inputs[0]
    if code[0] != "CODE":
        raise FormationError(f"node {index}: READ input is not a quotation")
    quoted: Term = code[1]
    return quoted


def produce_formation_certificate(subject_bytes: bytes) -> bytes:
    """Produce the canonical certificate bytes for an admitted, well-typed subject."""
    subject = admit_subject(subject_bytes)
    if subject["profile_digest"] != PROFILE_DIGEST:
        raise UnsupportedFormation("subject names a profile other than the compiled one")
    terms: list[Term] = []
    depths: list[int] = []
    steps: list[dict[str, Any]] = []
    for index, node in enumerate(subject["nodes"]):
        tag: str = node["tag"]
        references = node_references(node)
        depth = 1 + max((depths[reference] for reference in references), default=0)
        if depth > MAX_DEPTH:
            raise FormationLimitError(f"node {index}: dependency depth exceeds {MAX_DEPTH}")
        terms.append(_build(tag, node, [terms[reference] for reference in references], index))
        depths.append(depth)
        steps.append({"node": index, "rule": tag, "premises": references})
    # Every value here is a constant, or a tag, digest or index taken from the admitted
    # subject, so the canonical value-model walk could only agree; encode with the codec's
    # defining json.dumps call directly.
    certificate = json.dumps(
        {
            "schema_version": CERTIFICATE_SCHEMA,
            "subject_digest": digest_bytes(subject_bytes),
            "profile_digest": PROFILE_DIGEST,
            "steps": steps,
            "root": subject["root"],
        },
        ensure_ascii=False,
        allow_nan=False,
        sort_keys=True,
        separators=(",", ":"),
    ).encode("utf-8")
    if len(certificate) > MAX_RECORD_BYTES:
        raise FormationLimitError(f"certificate exceeds {MAX_RECORD_BYTES} bytes")
    return certificate
