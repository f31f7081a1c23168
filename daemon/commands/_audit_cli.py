"""CLI command ``audit`` (``verify``, ``rotate``, ``tail``; ``report`` is
:mod:`daemon.commands._report_cli`).

The :mod:`cli` contract applies (one JSON document on stdout on every path, errors as
``{"error": {"code", "message", "exit"}}``, one-line messages on stderr); per command:

* ``audit verify PATH... [--anchor SEQ:DIGEST]...``: one file, or rotated files oldest
  first (the chain must continue from each file into the next); ``-`` is standard input
  (streamed, not capped: a log may be gigabytes). Exit 0 intact, 1 broken
  (naming ``bad_file``, ``first_bad_line`` and ``reason``; or an anchor recorded earlier that
  the files contradict, which is how a rewritten or cut-back log shows). A malformed anchor
  is a usage error (exit 2); a missing path is 66, one that is not a regular file 65.
  ``audit tail PATH [-n N]``: the last N lines as a JSON array (unverified; ``-`` is stdin),
  exit 0.
  ``audit report LOG``: a JSON (or HTML) report of the log (``daemon/commands/_report_cli.py``).
  ``audit rotate PATH``: with the daemon stopped, give the current file its archive name and
  start a new one whose first line (``audit_rotated``) links it; exit 0, 65 when the log
  does not verify, 75 when a daemon holds it, 73 when it cannot be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import trio

from daemon.commands._report_cli import add_report_command
from session import cli
from session.cli import CliError, Exit, RejectedInput, UsageError

# The audit log's modules load when a subcommand runs (docs/benchmarks.md, "The CLI's imports").


def _regular_files(paths: list[str]) -> None:
    """Refuse the first path that is not a readable regular file: missing or unreadable is
    66, another kind of file (a directory, a FIFO) is 65."""
    import stat

    for name in paths:
        try:
            mode = Path(name).stat().st_mode
        except OSError as error:
            raise cli.InputError(name, error.strerror or str(error)) from None
        if not stat.S_ISREG(mode):
            raise RejectedInput(f"{name} is not a regular file", code="NOT_A_FILE")


def _audit_verify(args: argparse.Namespace) -> int:
    from daemon.audit._audit import parse_anchor, verify_log

    try:
        anchors = tuple(parse_anchor(text) for text in args.anchors)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if args.paths.count("-") > 1:
        raise UsageError("standard input (-) can be given once")
    _regular_files([name for name in args.paths if name != "-"])
    files = [sys.stdin.buffer if name == "-" else name for name in args.paths]
    report = verify_log(*files, anchors=anchors)
    cli.emit(report.to_dict())
    if report.intact:
        cli.say(
            f"audit log intact: {report.lines} lines in {report.files} file(s), seq "
            f"{report.first_seq or 0}..{report.last_seq}, anchor {report.last_seq}:{report.head}"
        )
        return Exit.OK
    cli.say(report.describe_failure())
    return Exit.FAIL


def _audit_rotate(args: argparse.Namespace) -> int:
    from daemon.audit._audit import AuditLog, AuditLogError, AuditLogInUse, tail

    _regular_files([args.path])

    async def main() -> tuple[AuditLog, bool]:
        log = AuditLog.open(args.path)
        async with trio.open_nursery() as nursery:
            await nursery.start(log.run)
            started = log.rotate()
            await log.close()
        return log, started

    try:
        log, started = trio.run(main)
    except AuditLogInUse as error:
        raise CliError(
            f"{error}; stop the daemon first, or set [audit] rotate_bytes",
            exit=Exit.BUSY,
            code="AUDIT_LOG_IN_USE",
        ) from None
    except AuditLogError as error:
        raise RejectedInput(str(error), code="AUDIT_LOG_REFUSED") from None
    if not started:
        raise RejectedInput(f"audit log {args.path} is empty; nothing to rotate", code="EMPTY")
    if log.failure_reason is not None or log.rotations != 1:
        raise CliError(
            f"audit log {args.path} could not be rotated: {log.failure_reason}",
            exit=Exit.CANNOT_WRITE,
            code="ROTATE_FAILED",
        )
    first = tail(args.path, 1)[0]
    cli.emit(
        {
            "status": "ROTATED",
            "path": args.path,
            "previous_file": first["previous_file"],
            "previous_seq": first["previous_seq"],
            "previous_head": first["previous_head"],
            "anchor": log.durable.anchor,
        }
    )
    cli.say(f"rotated: {first['previous_file']} holds seq ..{first['previous_seq']}")
    return Exit.OK


def _non_negative(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be non-negative: {text!r}")
    return value


def _audit_tail(args: argparse.Namespace) -> int:
    from daemon.audit._audit import tail

    if args.path != "-":
        _regular_files([args.path])
    cli.emit(tail(sys.stdin.buffer if args.path == "-" else args.path, args.lines))
    return Exit.OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``audit`` (``verify``, ``rotate``, ``tail``, ``report``)."""
    audit = subparsers.add_parser("audit", help="verify or read an audit log")
    audit_commands = audit.add_subparsers(dest="audit_command", metavar="COMMAND")
    verify = audit_commands.add_parser("verify", help="verify the hash chain")
    verify.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="the log, or rotated files oldest first (-: standard input)",
    )
    verify.add_argument(
        "--anchor",
        dest="anchors",
        action="append",
        default=[],
        metavar="SEQ:DIGEST",
        help="a head recorded earlier (health's audit.anchor, a decision's seq:line_digest) "
        "that the log must still contain; a bare DIGEST is checked anywhere in the chain",
    )
    verify.set_defaults(handler=_audit_verify)
    rotate = audit_commands.add_parser(
        "rotate", help="start a new file linked to the current one (daemon stopped)"
    )
    rotate.add_argument("path", metavar="PATH", help="the audit log")
    rotate.set_defaults(handler=_audit_rotate)
    tail_parser = audit_commands.add_parser("tail", help="print the last lines as JSON")
    tail_parser.add_argument("path", metavar="PATH", help="the audit log (-: standard input)")
    tail_parser.add_argument(
        "-n", dest="lines", type=_non_negative, default=10, metavar="N", help="how many lines"
    )
    tail_parser.set_defaults(handler=_audit_tail)
    add_report_command(audit_commands)
