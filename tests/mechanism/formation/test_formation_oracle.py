"""Differential test: the checker against a spec-literal inference oracle.

Normative behaviour: docs/spec/formation.md §3.4–§3.6.

The oracle below is written straight from the spec text — full typed values with their
denotation digests computed eagerly through the general canonical codec, node by node in
source order — and shares nothing with the checker's lazy, origin-based inference. Random
subjects (well-typed ones and arbitrary tag/reference soups) must give identical reports,
including the ceilings lowered as a test may lower them.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mechanism.formation import PROFILE_DIGEST, check_formation

from ._builders import (
    OTHER_PAYLOAD,
    PAYLOAD,
    REFERENCE_FIELDS,
    RESIDUALS,
    digest,
    h_apply,
    h_atom,
    h_code,
    h_formation,
    h_path,
    pair,
)
from .test_formation_properties import well_typed_nodes

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class _Stop(Exception):
    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


def _value_type(value: dict[str, Any]) -> str:
    return str(value["type"])


def oracle(
    subject_bytes: bytes,
    nodes: list[dict[str, Any]],
    root: int,
    *,
    max_depth: int = 64,
    max_path_steps: int = 4096,
) -> dict[str, Any]:
    """The §3.5 report for a subject whose records admit and whose certificate binds it."""
    subject_digest = digest(subject_bytes)
    values: list[dict[str, Any]] = []
    depth: list[int] = []
    rank: list[int] = []
    deps: list[set[int]] = []
    origins: list[set[int]] = []

    def report(status: str, reason: str | None, observation: Any = None) -> dict[str, Any]:
        return {
            "status": status,
            "subject_digest": subject_digest,
            "profile_digest": PROFILE_DIGEST,
            "root": root,
            "observation": observation,
            "reason_codes": [] if reason is None else [reason],
            "residual_obligations": RESIDUALS,
        }

    def path(source: str, target: str, steps: list[tuple[str, str]]) -> dict[str, Any]:
        return {
            "type": "PATH",
            "den": h_path(source, target, steps),
            "source": source,
            "target": target,
            "steps": steps,
        }

    try:
        for index, node in enumerate(nodes):
            tag = node["tag"]
            inputs = [node[field] for field in REFERENCE_FIELDS[tag]]
            depth.append(1 + max((depth[i] for i in inputs), default=0))
            if depth[index] > max_depth:
                raise _Stop("UNKNOWN", "FORMATION_LIMIT_EXCEEDED")
            rank.append(max((rank[i] for i in inputs), default=0))
            deps.append({index}.union(*(deps[i] for i in inputs)))
            origins.append(set().union(*(origins[i] for i in inputs)))
            args = [values[i] for i in inputs]
            if tag == "ATOM":
                value = {"type": "FORM", "den": h_atom(node["payload_digest"])}
            elif tag == "APPLY":
                if args[0]["type"] != "FORM":
                    raise _Stop("INVALID", "FORMATION_RULE_INVALID")
                value = {"type": "FORM", "den": h_apply(args[0]["den"])}
            elif tag == "ID":
                if args[0]["type"] != "FORM":
                    raise _Stop("INVALID", "FORMATION_RULE_INVALID")
                value = path(args[0]["den"], args[0]["den"], [])
            elif tag == "APPLY_STEP":
                source, target = args
                if source["type"] != "FORM" or target["type"] != "FORM":
                    raise _Stop("INVALID", "FORMATION_RULE_INVALID")
                if target["den"] != h_apply(source["den"]):
                    raise _Stop("INVALID", "FORMATION_RULE_INVALID")
                if max_path_steps < 1:  # one step
                    raise _Stop("UNKNOWN", "FORMATION_LIMIT_EXCEEDED")
                value = path(source["den"], target["den"], [(source["den"], target["den"])])
            elif tag == "COMPOSE":
                left, right = args
                if left["type"] != "PATH" or right["type"] != "PATH":
                    raise _Stop("INVALID", "FORMATION_RULE_INVALID")
                if left["target"] != right["source"]:
                    raise _Stop("INVALID", "FORMATION_RULE_INVALID")
                if len(left["steps"]) + len(right["steps"]) > max_path_steps:
                    raise _Stop("UNKNOWN", "FORMATION_LIMIT_EXCEEDED")
                value = path(left["source"], right["target"], left["steps"] + right["steps"])
            elif tag == "QUOTE":
                (quoted,) = inputs
                rank[index] += 1
                origins[index].add(index)
                value = {
                    "type": "CODE(" + _value_type(args[0]) + ")",
                    "den": h_code(subject_digest, quoted, sorted(deps[quoted])),
                    "quoted": args[0],
                }
            else:  # READ
                if not _value_type(args[0]).startswith("CODE("):
                    raise _Stop("INVALID", "FORMATION_RULE_INVALID")
                value = args[0]["quoted"]
            values.append(value)
    except _Stop as stop:
        return report(stop.status, stop.reason)
    result = values[root]
    is_path = result["type"] == "PATH"
    return report(
        "CHECKED",
        None,
        {
            "type": result["type"],
            "denotation_digest": result["den"],
            "source_digest": result["source"] if is_path else None,
            "target_digest": result["target"] if is_path else None,
            "path_steps": (
                [{"source_digest": a, "target_digest": b} for a, b in result["steps"]]
                if is_path
                else []
            ),
            "quote_rank": rank[root],
            "required_depth": depth[root],
            "formation_digest": h_formation(subject_digest, root),
            "dependency_nodes": sorted(deps[root]),
            "quote_origins": sorted(origins[root]),
        },
    )


@st.composite
def arbitrary_nodes(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Any admissible node list: random tags with in-range earlier references."""
    nodes: list[dict[str, Any]] = [
        {"tag": "ATOM", "payload_digest": draw(st.sampled_from([PAYLOAD, OTHER_PAYLOAD]))}
    ]
    for index in range(1, draw(st.integers(1, 16))):
        tag = draw(st.sampled_from(sorted(REFERENCE_FIELDS)))
        node: dict[str, Any]
        if tag == "ATOM":
            node = {"tag": tag, "payload_digest": draw(st.sampled_from([PAYLOAD, OTHER_PAYLOAD]))}
        else:
            node = {"tag": tag}
            for field in REFERENCE_FIELDS[tag]:
                node[field] = draw(st.integers(0, index - 1))
        nodes.append(node)
    return nodes


@st.composite
def subjects(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int]:
    nodes = draw(well_typed_nodes() | arbitrary_nodes())
    return nodes, draw(st.integers(0, len(nodes) - 1))


@SETTINGS
@given(subjects(), st.sampled_from([(64, 4096), (3, 4096), (64, 1), (64, 2), (2, 0)]))
def test_checker_report_equals_the_spec_literal_oracle(
    drawn: tuple[list[dict[str, Any]], int], ceilings: tuple[int, int]
) -> None:
    nodes, root = drawn
    max_depth, max_path_steps = ceilings
    subject_bytes, certificate_bytes = pair(nodes, root)
    expected = oracle(
        subject_bytes, nodes, root, max_depth=max_depth, max_path_steps=max_path_steps
    )
    report = check_formation(
        subject_bytes, certificate_bytes, max_depth=max_depth, max_path_steps=max_path_steps
    )
    assert report == expected
