"""The independent typed-formation checker: ``check_formation(subject, certificate) -> report``.

Contract (``shared/spec/formation.md`` §3.4–§3.6; seed 002 §2–§3). The checker trusts nothing
the certificate says beyond what it recomputes, never imports or calls the producer, reads no
files and touches no network. For any input it returns a report; it raises only for ceilings
that are not lowered-only ints (``TypeError``/``ValueError``, before any checking).

Check order, first failure stops and nothing partial is promoted:

1. admit the subject (wire admission + subject grammar): UNSUPPORTED schema → UNKNOWN
   ``FORMATION_PROFILE_UNSUPPORTED``; LIMIT → UNKNOWN ``FORMATION_LIMIT_EXCEEDED``;
   otherwise INVALID ``FORMATION_RECORD_INVALID``;
2. from here on the report carries ``subject_digest`` (digest of the exact subject bytes) and
   the subject's ``root``;
3. admit the certificate with the same mapping (before the subject's profile is compared);
4. subject ``profile_digest`` ≠ compiled digest → UNKNOWN ``FORMATION_PROFILE_UNSUPPORTED``;
5. certificate ``subject_digest``/``profile_digest``/``root`` ≠ subject digest / compiled
   digest / subject root → INVALID ``FORMATION_CERTIFICATE_BINDING_INVALID``;
6. step count ≠ node count, or step *i* has ``node`` ≠ *i*, ``rule`` ≠ tag, or ``premises`` ≠
   the node's ordered references → INVALID ``FORMATION_CERTIFICATE_STEP_INVALID``;
7. every node in source order (nodes outside the root's closure included): dependency depth
   above ``max_depth`` → UNKNOWN ``FORMATION_LIMIT_EXCEEDED`` (before typing the node); a
   typing-rule failure → INVALID ``FORMATION_RULE_INVALID``; an APPLY_STEP/COMPOSE whose step
   count would exceed ``max_path_steps`` → UNKNOWN ``FORMATION_LIMIT_EXCEEDED`` (tested before
   concatenating);
8. CHECKED with the root observation.

The report has exactly ``status``, ``subject_digest``, ``profile_digest`` (always the compiled
digest), ``root``, ``observation`` (CHECKED only), ``reason_codes`` (``[]`` or one code) and
``residual_obligations`` (the fixed eight, always).

Denotation identities (``H`` = digest of canonical bytes) are encoded by the small fixed-shape
encoders below; each emits exactly the canonical bytes of its dict (keys in sorted order, all
values digests, ASCII tags or ints), a fact the test-suite checks against the general codec.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from mechanism.formation._wire import (
    MAX_DEPTH,
    MAX_NODES,
    MAX_PATH_STEPS,
    NODE_REFERENCE_FIELDS,
    PROFILE_DIGEST,
    RESIDUAL_OBLIGATIONS,
    FormationError,
    FormationLimitError,
    UnsupportedFormation,
    admit_certificate,
    admit_subject,
    validate_ceilings,
)

__all__ = ["REASON_CODES", "check_formation"]

RECORD_INVALID: Final = "FORMATION_RECORD_INVALID"
BINDING_INVALID: Final = "FORMATION_CERTIFICATE_BINDING_INVALID"
STEP_INVALID: Final = "FORMATION_CERTIFICATE_STEP_INVALID"
RULE_INVALID: Final = "FORMATION_RULE_INVALID"
PROFILE_UNSUPPORTED: Final = "FORMATION_PROFILE_UNSUPPORTED"
LIMIT_EXCEEDED: Final = "FORMATION_LIMIT_EXCEEDED"

# Closed vocabulary: reason code → the only status it can accompany.
REASON_CODES: Final[dict[str, str]] = {
    RECORD_INVALID: "INVALID",
    BINDING_INVALID: "INVALID",
    STEP_INVALID: "INVALID",
    RULE_INVALID: "INVALID",
    PROFILE_UNSUPPORTED: "UNKNOWN",
    LIMIT_EXCEEDED: "UNKNOWN",
}

_FORM: Final = "FORM"
_PATH: Final = "PATH"


def _h(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()


def _atom_denotation(payload_digest: str) -> str:
    return _h('{"kind":"ATOM","payload_digest":"' + payload_digest + '"}')


def _apply_denotation(argument_digest: str) -> str:
    return _h('{"argument_digest":"' + argument_digest + '","kind":"APPLY"}')


def _path_denotation(source: str, target: str, steps: tuple[tuple[str, str], ...]) -> str:
    encoded = ",".join(
        '{"source_digest":"' + a + '","target_digest":"' + b + '"}' for a, b in steps
    )
    return _h(
        '{"kind":"PATH","path_steps":['
        + encoded
        + '],"source_digest":"'
        + source
        + '","target_digest":"'
        + target
        + '"}'
    )


def _code_denotation(subject_digest: str, node: int, dependency_nodes: list[int]) -> str:
    return _h(
        '{"dependency_nodes":['
        + ",".join(map(str, dependency_nodes))
        + '],"kind":"CODE","node":'
        + str(node)
        + ',"subject_digest":"'
        + subject_digest
        + '"}'
    )


def _formation_digest(subject_digest: str, node: int) -> str:
    return _h('{"node":' + str(node) + ',"subject_digest":"' + subject_digest + '"}')


def _members(bits: int) -> list[int]:
    """The sorted indices of the set bits of ``bits``."""
    binary = bin(bits)[:1:-1]  # least significant bit first, without the "0b" prefix
    return [index for index, bit in enumerate(binary) if bit == "1"]


class _Value:
    """A typed value: its type, denotation, PATH endpoints/steps, and the quoted value."""

    __slots__ = ("denotation", "quoted", "source", "steps", "target", "type")

    def __init__(
        self,
        type_: str,
        denotation: str,
        source: str | None = None,
        target: str | None = None,
        steps: tuple[tuple[str, str], ...] = (),
        quoted: _Value | None = None,
    ) -> None:
        self.type = type_
        self.denotation = denotation
        self.source = source
        self.target = target
        self.steps = steps
        self.quoted = quoted


class _Stop(Exception):
    """Internal: inference stopped with ``(status, reason)``."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _report(
    status: str,
    reason: str | None,
    subject_digest: str | None = None,
    root: int | None = None,
    observation: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "status": status,
        "subject_digest": subject_digest,
        "profile_digest": PROFILE_DIGEST,
        "root": root,
        "observation": observation,
        "reason_codes": [] if reason is None else [reason],
        "residual_obligations": list(RESIDUAL_OBLIGATIONS),
    }


def _admission_failure(error: FormationError) -> tuple[str, str]:
    if isinstance(error, UnsupportedFormation):
        return "UNKNOWN", PROFILE_UNSUPPORTED
    if isinstance(error, FormationLimitError):
        return "UNKNOWN", LIMIT_EXCEEDED
    return "INVALID", RECORD_INVALID


def check_formation(
    subject_bytes: bytes,
    certificate_bytes: bytes,
    *,
    max_nodes: int = MAX_NODES,
    max_depth: int = MAX_DEPTH,
    max_path_steps: int = MAX_PATH_STEPS,
) -> dict[str, Any]:
    """Recheck a subject/certificate pair; return the exact §3.5 report (see module rules)."""
    validate_ceilings(max_nodes=max_nodes, max_depth=max_depth, max_path_steps=max_path_steps)
    try:
        return _check(subject_bytes, certificate_bytes, max_nodes, max_depth, max_path_steps)
    except (RecursionError, MemoryError):
        # A resource of this process ran out: the bounded check could not finish.
        return _report("UNKNOWN", LIMIT_EXCEEDED)


def _check(
    subject_bytes: bytes,
    certificate_bytes: bytes,
    max_nodes: int,
    max_depth: int,
    max_path_steps: int,
) -> dict[str, Any]:
    try:
        subject = admit_subject(subject_bytes, max_nodes=max_nodes)
    except FormationError as error:
        return _report(*_admission_failure(error))
    subject_digest = "sha256:" + hashlib.sha256(subject_bytes).hexdigest()
    root: int = subject["root"]
    try:
        certificate = admit_certificate(certificate_bytes, max_nodes=max_nodes)
    except FormationError as error:
        return _report(*_admission_failure(error), subject_digest, root)
    if subject["profile_digest"] != PROFILE_DIGEST:
        return _report("UNKNOWN", PROFILE_UNSUPPORTED, subject_digest, root)
    if (
        certificate["subject_digest"] != subject_digest
        or certificate["profile_digest"] != PROFILE_DIGEST
        or certificate["root"] != root
    ):
        return _report("INVALID", BINDING_INVALID, subject_digest, root)
    nodes: list[dict[str, Any]] = subject["nodes"]
    steps: list[dict[str, Any]] = certificate["steps"]
    if len(steps) != len(nodes):
        return _report("INVALID", STEP_INVALID, subject_digest, root)
    for index, (node, step) in enumerate(zip(nodes, steps, strict=True)):
        tag = node["tag"]
        if (
            step["node"] != index
            or step["rule"] != tag
            or step["premises"] != [node[field] for field in NODE_REFERENCE_FIELDS[tag]]
        ):
            return _report("INVALID", STEP_INVALID, subject_digest, root)
    try:
        observation = _infer(nodes, root, subject_digest, max_depth, max_path_steps)
    except _Stop as stop:
        return _report(stop.status, stop.reason, subject_digest, root)
    return _report("CHECKED", None, subject_digest, root, observation)


def _infer(
    nodes: list[dict[str, Any]],
    root: int,
    subject_digest: str,
    max_depth: int,
    max_path_steps: int,
) -> dict[str, Any]:
    """Type every node in source order; return the root observation or raise ``_Stop``."""
    values: list[_Value] = []
    depths: list[int] = []
    ranks: list[int] = []
    closures: list[int] = []  # dependency closure of each node, as a bit set
    origins: list[int] = []  # quotation origins of each node, as a bit set
    for index, node in enumerate(nodes):
        tag = node["tag"]
        inputs = [node[field] for field in NODE_REFERENCE_FIELDS[tag]]
        depth = 1 + max((depths[i] for i in inputs), default=0)
        if depth > max_depth:
            raise _Stop("UNKNOWN", LIMIT_EXCEEDED)
        rank = max((ranks[i] for i in inputs), default=0)
        closure = 1 << index
        origin = 0
        for i in inputs:
            closure |= closures[i]
            origin |= origins[i]
        value: _Value
        if tag == "ATOM":
            value = _Value(_FORM, _atom_denotation(node["payload_digest"]))
        elif tag == "APPLY":
            argument = values[inputs[0]]
            if argument.type != _FORM:
                raise _Stop("INVALID", RULE_INVALID)
            value = _Value(_FORM, _apply_denotation(argument.denotation))
        elif tag == "ID":
            at = values[inputs[0]]
            if at.type != _FORM:
                raise _Stop("INVALID", RULE_INVALID)
            point = at.denotation
            value = _Value(_PATH, _path_denotation(point, point, ()), point, point)
        elif tag == "APPLY_STEP":
            source, target = values[inputs[0]], values[inputs[1]]
            if source.type != _FORM or target.type != _FORM:
                raise _Stop("INVALID", RULE_INVALID)
            if target.denotation != _apply_denotation(source.denotation):
                raise _Stop("INVALID", RULE_INVALID)
            if max_path_steps < 1:
                raise _Stop("UNKNOWN", LIMIT_EXCEEDED)
            s, t = source.denotation, target.denotation
            path_steps = ((s, t),)
            value = _Value(_PATH, _path_denotation(s, t, path_steps), s, t, path_steps)
        elif tag == "COMPOSE":
            left, right = values[inputs[0]], values[inputs[1]]
            if left.type != _PATH or right.type != _PATH or left.target != right.source:
                raise _Stop("INVALID", RULE_INVALID)
            if len(left.steps) + len(right.steps) > max_path_steps:
                raise _Stop("UNKNOWN", LIMIT_EXCEEDED)
            s, t = left.source, right.target
            assert s is not None and t is not None
            path_steps = left.steps + right.steps
            value = _Value(_PATH, _path_denotation(s, t, path_steps), s, t, path_steps)
        elif tag == "QUOTE":
            quoted_index = inputs[0]
            quoted = values[quoted_index]
            rank += 1
            origin |= 1 << index
            denotation = _code_denotation(
                subject_digest, quoted_index, _members(closures[quoted_index])
            )
            value = _Value("CODE(" + quoted.type + ")", denotation, quoted=quoted)
        else:  # READ (the wire admitted only the seven tags)
            code = values[inputs[0]]
            if code.quoted is None:
                raise _Stop("INVALID", RULE_INVALID)
            value = code.quoted
        values.append(value)
        depths.append(depth)
        ranks.append(rank)
        closures.append(closure)
        origins.append(origin)
    result = values[root]
    is_path = result.type == _PATH
    return {
        "type": result.type,
        "denotation_digest": result.denotation,
        "source_digest": result.source if is_path else None,
        "target_digest": result.target if is_path else None,
        "path_steps": (
            [{"source_digest": a, "target_digest": b} for a, b in result.steps] if is_path else []
        ),
        "quote_rank": ranks[root],
        "required_depth": depths[root],
        "formation_digest": _formation_digest(subject_digest, root),
        "dependency_nodes": _members(closures[root]),
        "quote_origins": _members(origins[root]),
    }
