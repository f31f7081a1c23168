"""``evidenced formation explain SUBJECT CERTIFICATE``: where and why a check decided.

Contract:

* Runs the independent checker once (traced) and prints the explanation in the chosen
  ``--format`` on stdout: ``text`` (default: a readable tree, ``--tree-depth`` levels),
  ``json`` (one document: the checker's report unchanged, the failure, every node and step,
  and what was drawn), ``dot`` (Graphviz source), ``svg`` or ``html`` (the DAG laid out
  top-down, the failing path in red). This is the one ``formation`` command whose stdout is
  not necessarily JSON: it is the rendering asked for.
* ``--max-nodes N`` (default 200, at least 1) bounds the nodes drawn or listed; what is left
  out is always said. ``--layout auto|dot|grandalf`` picks the layout engine for svg/html.
* The exit code is the check's, as for ``formation check``: 0 CHECKED, 1 INVALID, 3 UNKNOWN;
  65 if a file cannot be read; 2 for a usage error. ``explain`` never changes the answer.
* One line on stderr names the verdict and the rule broken.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mechanism.formation._explain import explain_formation
from mechanism.formation._explain_graph import (
    ENGINES,
    describe,
    render_dot,
    render_html,
    render_svg,
)
from mechanism.formation._explain_view import (
    DEFAULT_MAX_NODES,
    DEFAULT_TREE_DEPTH,
    plan_view,
    render_text,
)

__all__ = ["add_explain_command"]

_EXIT = {"CHECKED": 0, "INVALID": 1, "UNKNOWN": 3}
EXIT_USAGE = 2
EXIT_REJECTED = 65
FORMATS = ("text", "json", "dot", "svg", "html")


def _message(text: str) -> None:
    sys.stderr.write("evidenced formation: " + " ".join(text.split()) + "\n")


def _explain(args: argparse.Namespace) -> int:
    if args.max_nodes < 1 or args.tree_depth < 1:
        _message("usage error: --max-nodes and --tree-depth must be at least 1")
        return EXIT_USAGE
    try:
        subject = Path(args.subject).read_bytes()
        certificate = Path(args.certificate).read_bytes()
    except OSError as error:
        _message(f"cannot read {error.filename}: {error.strerror or error}")
        return EXIT_REJECTED
    explanation = explain_formation(subject, certificate)
    view = plan_view(explanation, args.max_nodes)
    if args.format == "text":
        output = render_text(view, args.tree_depth)
    elif args.format == "json":
        output = json.dumps(describe(view), ensure_ascii=False, sort_keys=True) + "\n"
    elif args.format == "dot":
        output = render_dot(view)
    elif args.format == "svg":
        output = render_svg(view, args.layout)
    else:
        output = render_html(view, args.layout)
    sys.stdout.buffer.write(output.encode("utf-8"))
    sys.stdout.buffer.flush()
    if explanation.rule is not None:
        where = "" if explanation.index is None else f" at node {explanation.index}"
        _message(f"{explanation.status}: {explanation.reason}{where}: {explanation.why}")
    return _EXIT[explanation.status]


def add_explain_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``explain`` under ``evidenced formation``."""
    explain = commands.add_parser(
        "explain", help="recheck a pair and show where and why it failed (text, dot, svg, html)"
    )
    explain.add_argument("subject", metavar="SUBJECT", help="subject record file")
    explain.add_argument("certificate", metavar="CERTIFICATE", help="certificate record file")
    explain.add_argument("--format", choices=FORMATS, default="text", help="output (text)")
    explain.add_argument(
        "--max-nodes",
        type=int,
        default=DEFAULT_MAX_NODES,
        metavar="N",
        help=f"draw or list at most N nodes ({DEFAULT_MAX_NODES}); the rest is collapsed",
    )
    explain.add_argument(
        "--tree-depth",
        type=int,
        default=DEFAULT_TREE_DEPTH,
        metavar="N",
        help=f"text tree depth ({DEFAULT_TREE_DEPTH})",
    )
    explain.add_argument(
        "--layout",
        choices=ENGINES,
        default="auto",
        help="svg/html layout engine (auto: dot if installed)",
    )
    explain.set_defaults(handler=_explain)
