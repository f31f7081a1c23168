"""What ``formation explain`` draws of a large subject, and its text rendering.

Rules (the contract):

1. :func:`plan_view` never selects more than ``max_nodes`` nodes (≥ 1). It picks, in this
   order, until the budget is spent: the failing node, the premises its broken rule looked
   at, the root, the path from the failing node up to the root (nearest first), then the
   root's dependency closure breadth-first (references in table order). Nodes outside the
   root's closure are drawn only when they are the failing node or its premises.
2. Nothing is left out silently: every drawn node whose references are not all drawn gets one
   *collapsed* entry naming the hidden references and how many nodes below it are not drawn,
   and :attr:`View.left_out` / :attr:`View.outside` count what the picture omits.
3. :func:`render_text` prints the verdict, the rule broken (in the words of
   ``docs/spec/formation.md``), a tree from the root (down to ``tree_depth`` levels; a node
   already printed is referenced, not repeated), the failing node when the root does not
   reach it, and the certificate steps of the drawn nodes in order (runs of undrawn steps are
   summarised). It is plain UTF-8 text ending with a newline.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import attrs

from mechanism.formation._explain import Explanation, NodeFacts
from mechanism.formation._wire import NODE_REFERENCE_FIELDS

__all__ = ["Collapsed", "View", "plan_view", "render_text"]

DEFAULT_MAX_NODES = 200
DEFAULT_TREE_DEPTH = 12


@attrs.frozen
class Collapsed:
    """Under drawn node ``parent``: references ``hidden`` are not drawn, and ``below`` nodes of
    its closure are not drawn in all."""

    parent: int
    hidden: tuple[int, ...]
    below: int


@attrs.frozen
class View:
    explanation: Explanation
    shown: tuple[int, ...]  # source order
    collapsed: tuple[Collapsed, ...]
    left_out: int  # nodes of the root's closure not drawn
    outside: int  # nodes outside the root's closure not drawn
    max_nodes: int

    def summary(self) -> str:
        total = len(self.explanation.nodes)
        reached = len(self.explanation.reached())
        text = f"drew {len(self.shown)} of {total} nodes ({reached} reached from the root)"
        omitted = []
        if self.left_out:
            omitted.append(
                f"{self.left_out} reached node(s) collapsed (over --max-nodes {self.max_nodes})"
            )
        if self.outside:
            omitted.append(f"{self.outside} node(s) outside the root's closure not drawn")
        return text + ("; " + "; ".join(omitted) if omitted else "")


def _closure_bits(nodes: tuple[NodeFacts, ...]) -> list[int]:
    bits: list[int] = []
    for node in nodes:
        value = 1 << node.index
        for reference in node.references:
            value |= bits[reference]
        bits.append(value)
    return bits


def plan_view(explanation: Explanation, max_nodes: int = DEFAULT_MAX_NODES) -> View:
    if max_nodes < 1:
        raise ValueError("max_nodes must be at least 1")
    nodes = explanation.nodes
    chosen: dict[int, None] = {}

    def take(index: int | None) -> None:
        if index is not None and 0 <= index < len(nodes) and len(chosen) < max_nodes:
            chosen.setdefault(index, None)

    failing = explanation.index
    if failing is not None and failing < len(nodes):
        take(failing)
        for reference in nodes[failing].references:
            take(reference)
    take(explanation.root)
    for index in reversed(explanation.failing_path):
        take(index)
    if explanation.root is not None:
        seen = {explanation.root}
        queue = deque([explanation.root])
        while queue and len(chosen) < max_nodes:
            current = queue.popleft()
            take(current)
            for reference in nodes[current].references:
                if reference not in seen:
                    seen.add(reference)
                    queue.append(reference)
    shown = tuple(sorted(chosen))
    shown_set = set(shown)
    bits = _closure_bits(nodes)
    shown_bits = sum(1 << index for index in shown)
    collapsed = []
    for index in shown:
        hidden = tuple(r for r in nodes[index].references if r not in shown_set)
        if hidden:
            below = (bits[index] & ~shown_bits).bit_count()
            collapsed.append(Collapsed(index, tuple(dict.fromkeys(hidden)), below))
    reached = set(explanation.reached())
    return View(
        explanation=explanation,
        shown=shown,
        collapsed=tuple(collapsed),
        left_out=len(reached - shown_set),
        outside=len(set(range(len(nodes))) - reached - shown_set),
        max_nodes=max_nodes,
    )


# --------------------------------------------------------------------------- text


def node_label(node: NodeFacts) -> str:
    """``5 COMPOSE(left=3, right=4)`` (an ATOM shows its payload digest, shortened)."""
    if node.tag == "ATOM":
        return f"{node.index} ATOM({_short(node.record['payload_digest'])})"
    fields = NODE_REFERENCE_FIELDS[node.tag]
    inner = ", ".join(f"{field}={node.record[field]}" for field in fields)
    return f"{node.index} {node.tag}({inner})"


def _short(digest: str) -> str:
    return digest[:15] + "…" if len(digest) > 16 else digest


def node_type(explanation: Explanation, node: NodeFacts) -> str:
    """The node's inferred type, or why it has none."""
    if node.state == "failed":
        return "✗ no type: the rule failed here"
    if node.type is not None:
        return node.type
    return "not typed"


def _header(explanation: Explanation) -> list[str]:
    report = explanation.report
    lines = [f"{explanation.status}" + (f" {explanation.reason}" if explanation.reason else "")]
    if explanation.rule is not None:
        where = "" if explanation.index is None else f" at node/step {explanation.index}"
        lines.append(
            f"  failed §3.6 check step {explanation.stage}{where} (rule {explanation.rule})"
        )
        lines.append(f"  why:  {explanation.why}")
        lines.append(f"  spec: {explanation.spec}")
    else:
        lines.append(f"  {explanation.why}")
    if report["subject_digest"] is not None:
        lines.append(f"subject {report['subject_digest']}  root {explanation.root}")
    return lines


def render_text(view: View, tree_depth: int = DEFAULT_TREE_DEPTH) -> str:
    explanation = view.explanation
    lines = _header(explanation)
    nodes = explanation.nodes
    if nodes:
        lines.append(view.summary())
        if explanation.stage is not None and explanation.stage < 7:
            lines.append(
                f"types: none inferred (the check stopped at §3.6 step {explanation.stage}, "
                "before typing)"
            )
        elif explanation.stage == 7:
            lines.append(
                f"types: inferred for the nodes before node {explanation.index} (source order)"
            )
        lines.append("")
        printed: set[int] = set()
        collapsed = {entry.parent: entry for entry in view.collapsed}
        assert explanation.root is not None
        _tree(view, explanation.root, 0, tree_depth, printed, collapsed, lines, "", "")
        failing = explanation.index
        if failing is not None and failing < len(nodes) and failing not in printed:
            lines.append("")
            lines.append("not reached from the root, but checked (§3.6 step 7 types every node):")
            _tree(view, failing, 0, tree_depth, printed, collapsed, lines, "", "")
        lines.append("")
        lines.extend(_steps(view))
    return "\n".join(lines) + "\n"


def _marker(explanation: Explanation, index: int) -> str:
    if index == explanation.index:
        return "✗ "
    if index in explanation.failing_path:
        return "→ "
    return ""


def _tree(
    view: View,
    index: int,
    depth: int,
    limit: int,
    printed: set[int],
    collapsed: dict[int, Collapsed],
    lines: list[str],
    lead: str,
    branch: str,
) -> None:
    explanation = view.explanation
    node = explanation.nodes[index]
    root = " (root)" if index == explanation.root else ""
    if index in printed:
        lines.append(f"{lead}{branch}{index} ↑ shown above")
        return
    printed.add(index)
    kind = node_type(explanation, node)
    lines.append(f"{lead}{branch}{_marker(explanation, index)}{node_label(node)}{root} : {kind}")
    child_lead = lead + ("" if not branch else "│   " if branch == "├── " else "    ")
    children = list(dict.fromkeys(r for r in node.references if r in view.shown))
    entry = collapsed.get(index)
    count = len(children) + (1 if entry else 0)
    if depth + 1 >= limit and count:
        lines.append(f"{child_lead}└── ⋯ (tree depth limit {limit}; raise --tree-depth)")
        return
    for position, reference in enumerate(children):
        last = position == count - 1
        _tree(
            view,
            reference,
            depth + 1,
            limit,
            printed,
            collapsed,
            lines,
            child_lead,
            "└── " if last else "├── ",
        )
    if entry:
        hidden = ", ".join(str(r) for r in entry.hidden)
        lines.append(f"{child_lead}└── ⋯ node(s) {hidden}: {entry.below} node(s) below not drawn")


def _steps(view: View) -> list[str]:
    explanation = view.explanation
    steps = explanation.steps
    if steps is None:
        return ["certificate steps: none (the certificate was not admitted)"]
    lines = [f"certificate steps ({len(steps)} for {len(explanation.nodes)} nodes), in order:"]
    wanted = set(view.shown)
    if explanation.rule == "STEP_COUNT":
        wanted |= {len(steps) - 1, len(explanation.nodes) - 1}
    skipped = 0
    for index, (step, state) in enumerate(zip(steps, explanation.step_states, strict=True)):
        if index not in wanted:
            skipped += 1
            continue
        if skipped:
            lines.append(f"  ⋯ {skipped} step(s) not shown")
            skipped = 0
        mark = "✗" if state == "failed" else " "
        lines.append(
            f"{mark} {index:>4} {step['rule']:<10} node {step['node']:<4} "
            f"premises {_premises(step)}  {state}{_expected(explanation, index, state)}"
        )
    if skipped:
        lines.append(f"  ⋯ {skipped} step(s) not shown")
    return lines


def _premises(step: dict[str, Any]) -> str:
    return "[" + ", ".join(str(p) for p in step["premises"]) + "]"


def _expected(explanation: Explanation, index: int, state: str) -> str:
    if state != "failed" or index >= len(explanation.nodes):
        return ""
    node = explanation.nodes[index]
    expected = "[" + ", ".join(str(r) for r in node.references) + "]"
    return f" (node {index} is {node.tag}, premises {expected})"
