"""``formation explain``: where and why a typed-formation check decided what it decided.

Rules (the contract):

1. The verdict is the checker's. :func:`explain_formation` calls
   :func:`~mechanism.formation._checker.trace_formation` once and copies its report unchanged
   into :attr:`Explanation.report`; nothing here re-runs or re-implements a typing rule.
   Everything else is read off the same run's :class:`CheckTrace`.
2. The failure is located exactly where the checker stopped: ``index`` is the checker's own
   node/step index (``None`` for failures that have none: admission, profile, binding, step
   count), ``rule`` its rule identifier, ``stage`` the check-order step of
   ``docs/spec/formation.md`` §3.6 that decided.
3. ``why`` states the broken rule in the words of ``docs/spec/formation.md`` and ``spec`` cites
   the sections; values quoted in ``why`` (types, digests, premises) are those the checker saw.
4. Per node (``nodes``, source order): its record, its certificate step (when the certificate
   was admitted), the type inference computed for it (``None`` when inference never reached
   it: it stopped earlier, or the check stopped before inference), and whether the root reaches
   it. ``failing_path`` runs from the root down to the failing node along references (a
   shortest one), or is ``()`` when the root does not reach it.
5. Only display helpers read the records themselves: the certificate is admitted here for
   display when the checker's exact-bytes fast path skipped admitting it (admission is a pure
   function of the bytes, so this shows what the checker would have admitted).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Final

import attrs

from mechanism.formation._checker import CheckTrace, trace_formation
from mechanism.formation._wire import (
    MAX_DEPTH,
    MAX_PATH_STEPS,
    NODE_REFERENCE_FIELDS,
    PROFILE_DIGEST,
    FormationError,
    admit_certificate,
)

__all__ = ["Explanation", "NodeFacts", "explain_formation"]

SPEC: Final = "docs/spec/formation.md"

#: Per rule identifier: the check-order step (§3.6) and the sections that state the rule.
_SECTIONS: Final[dict[str, tuple[int, str]]] = {
    "SUBJECT_ADMISSION": (1, "§3.6 step 1; §2.2, §3.2"),
    "CERTIFICATE_ADMISSION": (3, "§3.6 step 3; §2.2, §3.3"),
    "SUBJECT_PROFILE": (4, "§3.6 step 4; §3.1"),
    "BINDING_SUBJECT_DIGEST": (5, "§3.6 step 5; §3.3"),
    "BINDING_PROFILE_DIGEST": (5, "§3.6 step 5; §3.3"),
    "BINDING_ROOT": (5, "§3.6 step 5; §3.3"),
    "STEP_COUNT": (6, "§3.6 step 6; §3.3"),
    "STEP_NODE": (6, "§3.6 step 6; §3.3"),
    "STEP_RULE": (6, "§3.6 step 6; §3.3"),
    "STEP_PREMISES": (6, "§3.6 step 6; §3.3"),
    "DEPTH_LIMIT": (7, "§3.6 step 7; §3.4"),
    "APPLY_ARGUMENT": (7, "§3.6 step 7; §3.2"),
    "ID_AT": (7, "§3.6 step 7; §3.2"),
    "APPLY_STEP_TYPES": (7, "§3.6 step 7; §3.2"),
    "APPLY_STEP_TARGET": (7, "§3.6 step 7; §3.2, §3.4"),
    "COMPOSE_TYPES": (7, "§3.6 step 7; §3.2"),
    "COMPOSE_ENDPOINTS": (7, "§3.6 step 7; §3.2, §3.4"),
    "PATH_STEPS_LIMIT": (7, "§3.6 step 7; §3.1"),
    "READ_CODE": (7, "§3.6 step 7; §3.2"),
    "RESOURCE_LIMIT": (7, "§3.6"),
}


@attrs.frozen
class NodeFacts:
    """One subject node as the check saw it (see module rule 4)."""

    index: int
    tag: str
    references: tuple[int, ...]
    record: dict[str, Any]
    step: dict[str, Any] | None
    type: str | None
    depth: int | None
    rank: int | None
    reached: bool
    state: str  # "typed" | "failed" | "not typed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "tag": self.tag,
            "references": list(self.references),
            "record": self.record,
            "step": self.step,
            "type": self.type,
            "depth": self.depth,
            "quote_rank": self.rank,
            "reached": self.reached,
            "state": self.state,
        }


@attrs.frozen
class Explanation:
    """The checker's report and where/why it decided (module rules 1–4)."""

    report: dict[str, Any]
    rule: str | None
    stage: int | None
    index: int | None
    why: str
    spec: str | None
    root: int | None
    nodes: tuple[NodeFacts, ...]
    steps: tuple[dict[str, Any], ...] | None
    step_states: tuple[str, ...]
    failing_path: tuple[int, ...]
    blamed: tuple[int, ...]

    @property
    def status(self) -> str:
        status: str = self.report["status"]
        return status

    @property
    def reason(self) -> str | None:
        codes: list[str] = self.report["reason_codes"]
        return codes[0] if codes else None

    def reached(self) -> list[int]:
        """Indices of the nodes the root reaches, in source order."""
        return [node.index for node in self.nodes if node.reached]

    def to_dict(self) -> dict[str, Any]:
        return {
            "report": self.report,
            "failure": None
            if self.rule is None
            else {
                "rule": self.rule,
                "check_step": self.stage,
                "index": self.index,
                "why": self.why,
                "spec": self.spec,
                "failing_path": list(self.failing_path),
                "blamed_premises": list(self.blamed),
            },
            "root": self.root,
            "nodes": [node.to_dict() for node in self.nodes],
            "steps": None
            if self.steps is None
            else [
                {"index": index, "record": step, "state": state}
                for index, (step, state) in enumerate(
                    zip(self.steps, self.step_states, strict=True)
                )
            ],
        }


def explain_formation(
    subject_bytes: bytes,
    certificate_bytes: bytes,
    *,
    max_depth: int = MAX_DEPTH,
    max_path_steps: int = MAX_PATH_STEPS,
) -> Explanation:
    """Check the pair once (traced) and explain the result; never raises for any bytes."""
    report, trace = trace_formation(
        subject_bytes, certificate_bytes, max_depth=max_depth, max_path_steps=max_path_steps
    )
    subject = trace.subject
    certificate = trace.certificate
    if certificate is None and subject is not None and trace.rule != "CERTIFICATE_ADMISSION":
        try:
            certificate = admit_certificate(certificate_bytes)
        except FormationError:
            certificate = None
    nodes_raw: list[dict[str, Any]] = [] if subject is None else subject["nodes"]
    root: int | None = None if subject is None else subject["root"]
    steps: list[dict[str, Any]] | None = None if certificate is None else certificate["steps"]
    reached = _closure(nodes_raw, root)
    stage = None if trace.rule is None else _SECTIONS[trace.rule][0]
    failing = trace.index
    path = _path(nodes_raw, root, failing) if failing is not None else ()
    blamed = _blamed(trace, nodes_raw)
    nodes = tuple(
        _facts(index, node, steps, trace, index in reached) for index, node in enumerate(nodes_raw)
    )
    return Explanation(
        report=report,
        rule=trace.rule,
        stage=stage,
        index=failing,
        why=_why(trace, report, nodes_raw, certificate, max_depth, max_path_steps),
        spec=None if trace.rule is None else f"{SPEC} {_SECTIONS[trace.rule][1]}",
        root=root,
        nodes=nodes,
        steps=None if steps is None else tuple(steps),
        step_states=() if steps is None else tuple(_step_states(len(steps), trace)),
        failing_path=path,
        blamed=blamed,
    )


# --------------------------------------------------------------------------- graph facts


def _references(node: dict[str, Any]) -> tuple[int, ...]:
    return tuple(node[field] for field in NODE_REFERENCE_FIELDS[node["tag"]])


def _closure(nodes: list[dict[str, Any]], root: int | None) -> set[int]:
    if root is None:
        return set()
    seen = {root}
    stack = [root]
    while stack:
        for reference in _references(nodes[stack.pop()]):
            if reference not in seen:
                seen.add(reference)
                stack.append(reference)
    return seen


def _path(nodes: list[dict[str, Any]], root: int | None, target: int) -> tuple[int, ...]:
    """A shortest root → target path along references, or ``()`` if the root does not reach
    the target (or the target is not a node)."""
    if root is None or not 0 <= target < len(nodes):
        return ()
    parent: dict[int, int | None] = {root: None}
    queue = deque([root])
    while queue:
        current = queue.popleft()
        if current == target:
            path = [current]
            while (previous := parent[path[-1]]) is not None:
                path.append(previous)
            return tuple(reversed(path))
        for reference in _references(nodes[current]):
            if reference not in parent:
                parent[reference] = current
                queue.append(reference)
    return ()


def _blamed(trace: CheckTrace, nodes: list[dict[str, Any]]) -> tuple[int, ...]:
    """The failing node's premises the broken typing rule looked at (stage 7 only)."""
    if trace.index is None or trace.rule is None or _SECTIONS[trace.rule][0] != 7:
        return ()
    if not 0 <= trace.index < len(nodes):
        return ()
    return _references(nodes[trace.index])


def _facts(
    index: int,
    node: dict[str, Any],
    steps: list[dict[str, Any]] | None,
    trace: CheckTrace,
    reached: bool,
) -> NodeFacts:
    typed = index < len(trace.values)
    failed = trace.index == index and trace.rule is not None and _SECTIONS[trace.rule][0] == 7
    return NodeFacts(
        index=index,
        tag=node["tag"],
        references=_references(node),
        record=node,
        step=steps[index] if steps is not None and index < len(steps) else None,
        type=trace.values[index][0] if typed else None,
        depth=trace.depths[index] if typed else None,
        rank=trace.ranks[index] if typed else None,
        reached=reached,
        state="typed" if typed else "failed" if failed else "not typed",
    )


def _step_states(count: int, trace: CheckTrace) -> list[str]:
    """Per certificate step: ``ok`` (passed §3.6 step 6), ``failed``, or ``not checked``."""
    stage = 8 if trace.rule is None else _SECTIONS[trace.rule][0]
    if stage > 6:
        return ["ok"] * count
    if stage < 6 or trace.index is None:
        return ["not checked"] * count
    return ["ok"] * trace.index + ["failed"] + ["not checked"] * (count - trace.index - 1)


# --------------------------------------------------------------------------- the words


def _type_of(trace: CheckTrace, index: int) -> str:
    return trace.values[index][0] if index < len(trace.values) else "not typed"


def _why(
    trace: CheckTrace,
    report: dict[str, Any],
    nodes: list[dict[str, Any]],
    certificate: dict[str, Any] | None,
    max_depth: int,
    max_path_steps: int,
) -> str:
    rule, index = trace.rule, trace.index
    if rule is None:
        observation = report["observation"]
        return (
            f"every node has a type; the root (node {report['root']}) has type "
            f"{observation['type']}, dependency depth {observation['required_depth']} and "
            f"quote rank {observation['quote_rank']}"
        )
    if rule == "SUBJECT_ADMISSION":
        return f"the subject record is not admitted: {trace.message}"
    if rule == "CERTIFICATE_ADMISSION":
        return f"the certificate record is not admitted: {trace.message}"
    if rule == "RESOURCE_LIMIT":
        return "a resource of this process ran out: the bounded check could not finish"
    if rule == "SUBJECT_PROFILE":
        assert trace.subject is not None
        return (
            f"the subject names profile {trace.subject['profile_digest']}, not the compiled "
            f"profile {PROFILE_DIGEST}: unsupported, never loaded"
        )
    if rule.startswith("BINDING_"):
        assert certificate is not None and trace.subject is not None
        return _why_binding(rule, report, certificate, trace.subject)
    if rule.startswith("STEP_"):
        assert certificate is not None
        return _why_step(rule, index, nodes, certificate["steps"])
    assert index is not None
    return _why_rule(rule, index, nodes[index], trace, max_depth, max_path_steps)


def _why_binding(
    rule: str, report: dict[str, Any], certificate: dict[str, Any], subject: dict[str, Any]
) -> str:
    if rule == "BINDING_SUBJECT_DIGEST":
        return (
            f"the certificate's subject_digest {certificate['subject_digest']} is not the "
            f"digest of the exact subject bytes {report['subject_digest']}: the certificate "
            "binds another subject"
        )
    if rule == "BINDING_PROFILE_DIGEST":
        return (
            f"the certificate's profile_digest {certificate['profile_digest']} is not the "
            f"compiled profile digest {PROFILE_DIGEST}"
        )
    return (
        f"the certificate's root {certificate['root']} is not the subject's root {subject['root']}"
    )


def _why_step(
    rule: str, index: int | None, nodes: list[dict[str, Any]], steps: list[dict[str, Any]]
) -> str:
    if rule == "STEP_COUNT":
        return (
            f"the certificate has {len(steps)} steps for {len(nodes)} nodes: the only valid "
            "certificate has one step per node, in order"
        )
    assert index is not None
    step, node = steps[index], nodes[index]
    if rule == "STEP_NODE":
        return f"step {index} names node {step['node']}: step i must name node i"
    if rule == "STEP_RULE":
        return (
            f"step {index} has rule {step['rule']} but node {index} is {node['tag']}: a step's "
            "rule must be its node's tag"
        )
    return (
        f"step {index} has premises {step['premises']} but node {index} ({node['tag']}) "
        f"references {list(_references(node))}: premises must be the node's references, in "
        "the table order"
    )


def _why_rule(
    rule: str,
    index: int,
    node: dict[str, Any],
    trace: CheckTrace,
    max_depth: int,
    max_path_steps: int,
) -> str:
    tag = node["tag"]
    refs = _references(node)
    at = f"node {index} ({tag}"
    if rule == "DEPTH_LIMIT":
        depth = 1 + max((trace.depths[r] for r in refs), default=0)
        return (
            f"{at}) has dependency depth {depth}, above max_depth {max_depth}: UNKNOWN, not a "
            "refutation (checked before the node is typed)"
        )
    if rule == "PATH_STEPS_LIMIT":
        return (
            f"{at}) would build a path of more than max_path_steps {max_path_steps} steps: "
            "UNKNOWN, not a refutation (checked before concatenating)"
        )
    described = ", ".join(
        f"{field} = node {node[field]} : {_type_of(trace, node[field])}"
        for field in NODE_REFERENCE_FIELDS[tag]
    )
    # The typing rules in the words of the docs/spec/formation.md §3.2 table.
    rules = {
        "APPLY_ARGUMENT": "the argument is a FORM",
        "ID_AT": "`at` is a FORM",
        "APPLY_STEP_TYPES": "both FORM",
        "APPLY_STEP_TARGET": (
            "the target's denotation equals the denotation APPLY(source) would have"
        ),
        "COMPOSE_TYPES": "both PATH",
        "COMPOSE_ENDPOINTS": "the left target equals the right source",
        "READ_CODE": "the input is a checked quotation CODE(T)",
    }
    why = f"{at}: {described}) breaks the {tag} typing rule: {rules[rule]}"
    if rule == "COMPOSE_ENDPOINTS":
        why += "; " + _endpoints(node, trace)
    return why


def _endpoints(node: dict[str, Any], trace: CheckTrace) -> str:
    left, right = trace.values[node["left"]], trace.values[node["right"]]
    return (
        f"the left path ends at the FORM built by node {left[2]} while the right path starts "
        f"at the FORM built by node {right[1]} (different denotations)"
    )
