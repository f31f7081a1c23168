"""``evidenced formation inspect-silo`` and ``evidenced formation receipt build|recheck``.

Evidence directories: every regular file named by a digest — the 64 lowercase hex digits, with
or without the ``sha256:`` prefix — is one evidence entry keyed ``sha256:<hex>``; the name is
only the *claimed* digest (the inspector and the receipt builder rehash the bytes, so a
substituted file shows up as a digest mismatch). Any other entry of the directory (a
differently named file, a sub-directory, one digest under both spellings) is refused with exit
65 rather than silently ignored. A file is read up to 4 MiB + 1 bytes: anything larger is over
the per-object bound either way, so the outcome is the same as reading it whole.

Output (the :mod:`cli` contract): stdout carries exactly one JSON document — the inspection
(``inspect-silo``), the exact canonical receipt bytes with no trailing newline (``receipt
build``, so that ``> receipt.json`` keeps them admissible) or the fresh inspection (``receipt
recheck``); a refusal prints the error document ``{"error": {"code": CODE, "message", "exit"}}``
and a one-line message on stderr. Files are read with :func:`cli.read_input` (``-`` is stdin;
missing or unreadable: 66).

Exit codes. ``inspect-silo``: 0 when the binding is BOUND, retention COMPLETE, agency MATCHED
and the formation report CHECKED; 1 when any of them is INVALID; 3 otherwise (UNKNOWN,
INCOMPLETE or no report). ``receipt``: 0 built / reproduced; 1
``FORMATION_RECEIPT_BINDING_INVALID`` or ``FORMATION_RECEIPT_NOT_REPRODUCED``; 3
``FORMATION_RECEIPT_LIMIT_EXCEEDED``; 65 for the selection/receipt/input refusals and
rejected files; 66 for missing or unreadable ones.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any, Final

from mechanism.formation._receipt import (
    BINDING_INVALID,
    LIMIT_EXCEEDED,
    NOT_REPRODUCED,
    FormationReceiptError,
    build_formation_receipt,
    recheck_formation_receipt,
)
from mechanism.formation._silo import (
    MAX_EVIDENCE_ENTRIES,
    MAX_OBJECT_BYTES,
    inspect_silo_formation,
)
from session import cli
from session.cli import CliError, Exit

__all__ = ["add_silo_commands", "read_evidence_dir"]

EXIT_OK: Final = Exit.OK
EXIT_INVALID: Final = Exit.FAIL
EXIT_UNKNOWN: Final = Exit.UNKNOWN
EXIT_REJECTED: Final = Exit.REJECTED

_DIGEST_NAME: Final = re.compile(r"(?:sha256:)?([0-9a-f]{64})")
_MAX_COMMIT_READ: Final = 262_145  # one byte over the commit bound is enough to refuse it
_MAX_SMALL_READ: Final = 1_048_577  # selections and receipts: one byte over the receipt bound


class _CliRefusal(CliError):
    """A one-line reason to exit 65 before anything is inspected."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit=Exit.REJECTED, code="EVIDENCE_DIRECTORY_REFUSED")


def _read(path: str, limit: int) -> bytes:
    return cli.read_input(path, cap=limit, prefix=True)


def read_evidence_dir(directory: str) -> dict[str, bytes]:
    """Read an evidence directory (naming rule in the module docstring) into a plain dict."""
    keys: dict[str, str] = {}  # digest -> file name
    try:
        names = sorted(os.listdir(directory))
    except OSError as error:
        raise cli.InputError(directory, error.strerror or str(error)) from None
    for name in names:
        match = _DIGEST_NAME.fullmatch(name)
        if match is None or not (Path(directory) / name).is_file():
            raise _CliRefusal(f"evidence entry {name!r} is not a file named by a digest")
        digest = f"sha256:{match.group(1)}"
        if digest in keys:
            raise _CliRefusal(f"evidence entries {keys[digest]!r} and {name!r} name one digest")
        keys[digest] = name
    if len(keys) > MAX_EVIDENCE_ENTRIES:
        # Both the inspector and the receipt builder refuse an oversized mapping by count
        # before looking at a single value, so there is no point reading the files.
        return dict.fromkeys(keys, b"")
    return {
        digest: _read(str(Path(directory) / name), MAX_OBJECT_BYTES + 1)
        for digest, name in keys.items()
    }


def _inspection_exit(inspection: dict[str, Any]) -> int:
    report = inspection["formation_report"]
    facets = [
        inspection["coordinate_binding"],
        inspection["snapshot_retention"],
        inspection["agency_declaration"],
        None if report is None else report["status"],
    ]
    if "INVALID" in facets:
        return EXIT_INVALID
    if facets == ["BOUND", "COMPLETE", "MATCHED", "CHECKED"]:
        return EXIT_OK
    return EXIT_UNKNOWN


def _run_inspect(args: argparse.Namespace) -> int:
    evidence = read_evidence_dir(args.evidence_dir)
    inspection = inspect_silo_formation(
        _read(args.commit, _MAX_COMMIT_READ),
        evidence,
        subject_path=args.subject_path,
        certificate_path=args.certificate_path,
        profile_path=args.profile_path,
        ground_path=args.ground_path,
    )
    cli.emit(inspection)
    return _inspection_exit(inspection)


def _receipt_refused(error: FormationReceiptError) -> CliError:
    if error.code in (BINDING_INVALID, NOT_REPRODUCED):
        exit_code = EXIT_INVALID
    elif error.code == LIMIT_EXCEEDED:
        exit_code = EXIT_UNKNOWN
    else:
        exit_code = EXIT_REJECTED
    return CliError(f"formation receipt refused: {error.code}", exit=exit_code, code=error.code)


def _receipt_inputs(args: argparse.Namespace) -> tuple[bytes, bytes, dict[str, bytes]]:
    return (
        _read(args.selection, _MAX_SMALL_READ),
        _read(args.commit, _MAX_COMMIT_READ),
        read_evidence_dir(args.evidence_dir),
    )


def _run_build(args: argparse.Namespace) -> int:
    try:
        selection, commit, evidence = _receipt_inputs(args)
        receipt = build_formation_receipt(selection, commit, evidence)
    except FormationReceiptError as error:
        raise _receipt_refused(error) from None
    if args.output is not None:
        cli.write_output(args.output, receipt)
    cli.emit_bytes(receipt)  # exact canonical bytes, no trailing newline
    return EXIT_OK


def _run_recheck(args: argparse.Namespace) -> int:
    try:
        selection, commit, evidence = _receipt_inputs(args)
        inspection = recheck_formation_receipt(
            _read(args.receipt, _MAX_SMALL_READ), selection, commit, evidence
        )
    except FormationReceiptError as error:
        raise _receipt_refused(error) from None
    cli.emit(inspection)
    return EXIT_OK


def add_silo_commands(
    formation_subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """Add ``inspect-silo`` and ``receipt`` (``build``/``recheck``) to ``formation``."""
    inspect = formation_subparsers.add_parser(
        "inspect-silo",
        help="inspect a retained silo commit's formation coordinates (pure, non-executing)",
    )
    inspect.add_argument("commit", metavar="COMMIT", help="VSTD-SILO-COMMIT-0.1 bytes")
    _add_evidence_dir(inspect)
    for role in ("subject", "certificate", "profile", "ground"):
        inspect.add_argument(
            f"--{role}-path", required=True, help=f"census path of the {role} record"
        )
    inspect.set_defaults(handler=_run_inspect)

    receipt = formation_subparsers.add_parser("receipt", help="portable formation receipts")
    receipt_commands = receipt.add_subparsers(dest="receipt_command", metavar="ACTION")
    build = receipt_commands.add_parser("build", help="build a receipt for a selection")
    _add_receipt_inputs(build)
    build.add_argument("--output", help="also write the receipt bytes to this file")
    build.set_defaults(handler=_run_build)
    recheck = receipt_commands.add_parser(
        "recheck", help="rebuild a receipt from your own inputs; byte equality or refusal"
    )
    recheck.add_argument("receipt", metavar="RECEIPT", help="receipt bytes to recheck")
    _add_receipt_inputs(recheck)
    recheck.set_defaults(handler=_run_recheck)


def _add_evidence_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--evidence-dir",
        required=True,
        help="directory of evidence files, each named by the 64 hex digits of its digest",
    )


def _add_receipt_inputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--selection", required=True, help="selection record bytes")
    parser.add_argument("--commit", required=True, help="silo commit bytes")
    _add_evidence_dir(parser)
