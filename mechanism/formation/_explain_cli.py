"""``evidenced formation explain SUBJECT CERTIFICATE``: where and why a check decided.

Contract (the :mod:`cli` contract applies):

* Runs the independent checker once (traced) and renders the explanation in ``--format``:
  ``json`` (the default: one document: the checker's report unchanged, the failure, every
  node and step, and what was drawn), ``text`` (a readable tree, ``--tree-depth`` levels),
  ``dot`` (Graphviz source), ``svg`` or ``html`` (the DAG laid out top-down, the failing path
  in red). Without ``--out`` the rendering is stdout (a format other than json is a rendering
  explicitly asked for, the one case where stdout is not JSON); with ``--out FILE`` it is
  written to FILE and stdout carries ``{"written", "format", "status", "reason"}``.
* ``--max-nodes N`` (default 200, at least 1) bounds the nodes drawn or listed; what is left
  out is always said. ``--layout auto|dot|grandalf`` picks the layout engine for svg/html
  (``auto``: Graphviz's ``dot`` when on ``PATH``, else grandalf, which is the ``explain`` extra:
  without it, exit 69 ``EXTRA_MISSING``, the one line naming ``pip install
  'evidenced[explain]'``; json, text and dot need no layout).
* The exit code is the check's, as for ``formation check``: 0 CHECKED, 1 INVALID, 3 UNKNOWN;
  66 if a file cannot be read, 73 if the output cannot be written; 2 for a usage error.
  ``explain`` never changes the answer.
* One line on stderr names the verdict and the rule broken.
"""

from __future__ import annotations

import argparse
import json

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
from session import cli
from session.cli import UsageError

__all__ = ["add_explain_command"]

_EXIT = {"CHECKED": 0, "INVALID": 1, "UNKNOWN": 3}
FORMATS = ("json", "text", "dot", "svg", "html")


def _explain(args: argparse.Namespace) -> int:
    if args.max_nodes < 1 or args.tree_depth < 1:
        raise UsageError("--max-nodes and --tree-depth must be at least 1")
    subject = cli.read_input(args.subject)
    certificate = cli.read_input(args.certificate)
    explanation = explain_formation(subject, certificate)
    view = plan_view(explanation, args.max_nodes)
    to_file = args.out is not None and args.out != "-"
    if args.format == "json" and not to_file:
        cli.emit(describe(view))
    else:
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
        cli.write_output(args.out if to_file else "-", output.encode("utf-8"))
        if to_file:
            cli.emit(
                {
                    "written": args.out,
                    "format": args.format,
                    "status": explanation.status,
                    "reason": explanation.reason,
                }
            )
    if explanation.rule is not None:
        where = "" if explanation.index is None else f" at node {explanation.index}"
        cli.say(f"{explanation.status}: {explanation.reason}{where}: {explanation.why}")
    return _EXIT[explanation.status]


def add_explain_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``explain`` under ``evidenced formation``."""
    explain = commands.add_parser(
        "explain", help="recheck a pair and show where and why it failed (text, dot, svg, html)"
    )
    explain.add_argument("subject", metavar="SUBJECT", help="subject record file")
    explain.add_argument("certificate", metavar="CERTIFICATE", help="certificate record file")
    explain.add_argument(
        "--format", choices=FORMATS, default="json", help="json, or a rendering: text/dot/svg/html"
    )
    explain.add_argument(
        "--out", metavar="FILE", help="write the rendering here; stdout then gets a summary"
    )
    explain.add_argument(
        "--max-nodes",
        type=int,
        default=DEFAULT_MAX_NODES,
        metavar="N",
        help="draw or list at most N nodes; the rest is collapsed",
    )
    explain.add_argument(
        "--tree-depth",
        type=int,
        default=DEFAULT_TREE_DEPTH,
        metavar="N",
        help="text tree depth",
    )
    explain.add_argument(
        "--layout",
        choices=ENGINES,
        default="auto",
        help="svg/html layout engine (auto: dot if installed, else grandalf)",
    )
    explain.set_defaults(handler=_explain)
