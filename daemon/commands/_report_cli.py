"""``evidenced audit report LOG... [--since T] [--until T] [--format json|html] [--out FILE]
[--tlog DIR] [--key VKEY]``.

Contract (the :mod:`cli` contract applies):

* Streams the LOG files (a rotated series, oldest first, as ``audit verify`` takes them) once
  to aggregate them and once more to verify their hash chain (``verify_log``), in bounded
  memory whatever their size (``daemon/report/_report.py``).
* When a transparency directory holds a checkpoint (``--tlog DIR``, by default ``LOG.tlog``
  beside the newest LOG), its latest checkpoint is checked against the lines: signature,
  root and tiles under ``--key VKEY`` (a verifier key or a file holding one), else the root
  only; the report says which key, and what was and was not checked.
* Without ``--out`` the aggregates are the command's one JSON document on stdout (``--format
  json``, the default then); ``--format html`` without ``--out`` writes the page to stdout
  (the rendering explicitly asked for). With ``--out FILE`` the report goes to FILE (HTML by
  default, JSON with ``--format json``) and stdout carries ``{"written", "format", "chain",
  "lines", "decisions"}``.
* A progress bar (tqdm, on stderr) only when stderr is a terminal; otherwise stderr gets the
  usual single summary line.
* Exit 0 when the report was written, whatever the log says (the chain status is *in* the
  report); 2 for a bad ``--since``/``--until``; 66 if LOG cannot be read; 73 if ``--out``
  (or stdout) cannot be written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from session import cli
from session.cli import Exit, UsageError

__all__ = ["add_report_command"]


def _report(args: argparse.Namespace) -> int:
    from daemon.report._report import (  # lazily: orjson, the audit room
        ReportError,
        parse_instant,
    )

    try:
        since = None if args.since is None else parse_instant(args.since)
        until = None if args.until is None else parse_instant(args.until)
    except ReportError as error:
        raise UsageError(str(error)) from None
    to_file = args.out is not None and args.out != "-"
    form = args.format or ("html" if to_file else "json")
    paths = [Path(item) for item in args.path]
    key = None
    if args.key is not None:
        from daemon.commands._log_cli import read_verifier_key
        from daemon.tlog import SIG_ED25519

        key = read_verifier_key(args.key, sig_type=SIG_ED25519)
    result = _aggregated(args, paths, since, until, key)
    chain = result["integrity"]["chain"]
    totals = result["totals"]["decisions"]
    _output(args, result, form, to_file)
    tlog = result["integrity"]["transparency"]
    cli.say(
        f"report of {result['lines']['in_range']} lines ({totals['PASS']} PASS, "
        f"{totals['FAIL']} FAIL, {totals['UNKNOWN']} UNKNOWN); chain {chain['status']}"
        + (f"; transparency {tlog['status']}" if tlog else "")
        + (f"; written to {args.out}" if to_file else "")
    )
    return Exit.OK


def _aggregated(
    args: argparse.Namespace, paths: list[Path], since: Any, until: Any, key: Any
) -> dict[str, Any]:
    """The aggregate of the files, with a progress bar on a terminal; an unreadable file is
    the caller's input error."""
    from daemon.report._report import aggregate

    bar: Any = None
    try:
        size = sum(path.stat().st_size for path in paths)
        if sys.stderr.isatty():
            from tqdm import tqdm

            bar = tqdm(total=size, unit="B", unit_scale=True, desc="audit report", leave=False)
        return aggregate(
            *paths,
            since=since,
            until=until,
            progress=bar.update if bar else None,
            tlog=args.tlog,
            key=key,
        )
    except OSError as error:
        raise cli.InputError(
            str(error.filename or args.path[0]), error.strerror or str(error)
        ) from None
    finally:
        if bar is not None:
            bar.close()


def _output(args: argparse.Namespace, result: dict[str, Any], form: str, to_file: bool) -> None:
    """The report as JSON on stdout, or in ``form`` to ``--out`` (then a receipt on stdout)."""
    if form == "json" and not to_file:
        cli.emit(result)
        return
    if form == "json":
        output = json.dumps(result, ensure_ascii=False, sort_keys=True) + "\n"
    else:
        from daemon.report._report_html import render_report_html

        output = render_report_html(result)
    cli.write_output(args.out if to_file else "-", output.encode("utf-8"))
    if to_file:
        cli.emit(
            {
                "written": args.out,
                "format": form,
                "chain": result["integrity"]["chain"]["status"],
                "lines": result["lines"]["in_range"],
                "decisions": result["totals"]["decisions"],
            }
        )


def add_report_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``report`` under ``evidenced audit``."""
    report = commands.add_parser(
        "report", help="an HTML (or JSON) report of a log: status, plots, failures"
    )
    report.add_argument(
        "path", metavar="LOG", nargs="+", help="the audit log (rotated files: oldest first)"
    )
    report.add_argument("--since", metavar="T", help="RFC 3339 instant or date (inclusive)")
    report.add_argument("--until", metavar="T", help="RFC 3339 instant or date (exclusive)")
    report.add_argument(
        "--format",
        choices=("json", "html"),
        default=None,
        help="json or html (default: json on stdout, html with --out)",
    )
    report.add_argument(
        "--out", metavar="FILE", help="write the report here; stdout then gets a summary"
    )
    report.add_argument(
        "--tlog",
        metavar="DIR",
        help="the transparency directory to check (default: LOG.tlog beside the newest LOG)",
    )
    report.add_argument(
        "--key",
        metavar="VKEY",
        help="the log's verifier key (or a file holding it): check the checkpoint's signature",
    )
    report.set_defaults(handler=_report)
