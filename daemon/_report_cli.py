"""``evidenced audit report LOG [--since T] [--until T] [--format html|json] [--out FILE]``.

Contract:

* Streams LOG once to aggregate it and once more to verify its hash chain (``verify_log``),
  in bounded memory whatever its size (``daemon/_report.py``), then writes the page
  (``--format html``, the default) or the aggregates as one JSON document (``--format json``)
  to ``--out`` (default: stdout; for ``json`` it is the command's one JSON document).
* A progress bar (tqdm, on stderr) only when stderr is a terminal; otherwise stderr gets the
  usual single summary line.
* Exit 0 when the report was written, whatever the log says (the chain status is *in* the
  report); 2 for a bad ``--since``/``--until``; 65 if LOG cannot be read or ``--out`` cannot
  be written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ._report import ReportError, aggregate, parse_instant

__all__ = ["add_report_command"]

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_REJECTED = 65


def _say(message: str) -> None:
    sys.stderr.write(f"evidenced: {message}\n")
    sys.stderr.flush()


def _report(args: argparse.Namespace) -> int:
    try:
        since = None if args.since is None else parse_instant(args.since)
        until = None if args.until is None else parse_instant(args.until)
    except ReportError as error:
        _say(f"usage error: {error}")
        return EXIT_USAGE
    path = Path(args.path)
    bar: Any = None
    try:
        size = path.stat().st_size
        if sys.stderr.isatty():
            from tqdm import tqdm

            bar = tqdm(total=size, unit="B", unit_scale=True, desc="audit report", leave=False)
        result = aggregate(path, since=since, until=until, progress=bar.update if bar else None)
    except OSError as error:
        _say(f"cannot read {args.path}: {error.strerror or error}")
        return EXIT_REJECTED
    finally:
        if bar is not None:
            bar.close()
    if args.format == "json":
        output = json.dumps(result, ensure_ascii=False, sort_keys=True) + "\n"
    else:
        from ._report_html import render_report_html

        output = render_report_html(result)
    try:
        if args.out is None or args.out == "-":
            sys.stdout.write(output)
            sys.stdout.flush()
        else:
            Path(args.out).write_text(output, encoding="utf-8")
    except OSError as error:
        _say(f"cannot write {args.out}: {error.strerror or error}")
        return EXIT_REJECTED
    chain = result["integrity"]["chain"]
    totals = result["totals"]["decisions"]
    _say(
        f"report of {result['lines']['in_range']} lines ({totals['PASS']} PASS, "
        f"{totals['FAIL']} FAIL, {totals['UNKNOWN']} UNKNOWN); chain {chain['status']}"
        + (f"; written to {args.out}" if args.out not in (None, "-") else "")
    )
    return EXIT_OK


def add_report_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``report`` under ``evidenced audit``."""
    report = commands.add_parser(
        "report", help="an HTML (or JSON) report of a log: status, plots, failures"
    )
    report.add_argument("path", metavar="LOG")
    report.add_argument("--since", metavar="T", help="RFC 3339 instant or date (inclusive)")
    report.add_argument("--until", metavar="T", help="RFC 3339 instant or date (exclusive)")
    report.add_argument("--format", choices=("html", "json"), default="html")
    report.add_argument("--out", metavar="FILE", help="write here (default: stdout)")
    report.set_defaults(handler=_report)
