"""``evidenced formation``: produce, check and evaluate typed-formation pairs from files.

Commands (stdout carries exactly one document; messages are one line on stderr):

* ``formation produce SUBJECT`` — the certificate bytes, exactly (canonical JSON, no trailing
  newline: itself the one JSON document). Exit 0; 1 if the subject is invalid or ill-typed
  (``FORMATION_INVALID``); 3 if it is unsupported or exceeds a resource bound
  (``FORMATION_UNKNOWN``); both print the error document.
* ``formation check SUBJECT CERTIFICATE`` — the pure checker's report as canonical JSON plus
  one newline. Exit 0 CHECKED, 1 INVALID, 3 UNKNOWN.
* ``formation evaluate SUBJECT CERTIFICATE`` — builds the honest binding a caller would pin
  from the subject's declared context (:func:`formation_binding`), evaluates it in a fresh
  session holding both items, and prints the ``EvaluatedProposition`` as canonical JSON plus
  one newline. Exit 0 PASS, 1 FAIL, 3 UNKNOWN; 65 if the subject cannot be admitted (no
  honest binding exists, ``BINDING_UNBUILDABLE``).

Every file is read with :func:`cli.read_input` (``-`` is stdin): a missing or unreadable file
is 66; one of more than 16 MiB (far above the 256 KiB record bound, so every record the checker
could judge still gets its report) exits 65 with the cap in the message, whatever it is
(``/dev/zero`` included).

``check`` and ``evaluate`` accept ``--max-nodes``, ``--max-depth`` and ``--max-path-steps``,
which may only lower the compiled ceilings (anything else is a usage error, exit 2).
The silo commands (``inspect-silo``, ``receipt``) are added by ``_silo_cli``, ``explain`` by
``_explain_cli``.
"""

from __future__ import annotations

import argparse
import json

from mechanism.canonical import canonical_bytes, is_digest
from mechanism.formation._checker import check_formation
from mechanism.formation._explain_cli import add_explain_command
from mechanism.formation._mechanism import FormationPathCertificateMechanism, formation_binding
from mechanism.formation._silo_cli import add_silo_commands
from mechanism.formation._wire import (
    MAX_DEPTH,
    MAX_NODES,
    MAX_PATH_STEPS,
    FormationError,
    FormationLimitError,
    UnsupportedFormation,
    validate_ceilings,
)
from session import EvidenceStore, MechanismOutcome, VerificationSession, cli
from session.cli import CliError, Exit, RejectedInput, UsageError

__all__ = ["register"]

_STATUS_EXIT = {"CHECKED": Exit.OK, "INVALID": Exit.FAIL, "UNKNOWN": Exit.UNKNOWN}
_OUTCOME_EXIT = {
    MechanismOutcome.PASS: Exit.OK,
    MechanismOutcome.FAIL: Exit.FAIL,
    MechanismOutcome.UNKNOWN: Exit.UNKNOWN,
}


def _emit_canonical(value: object) -> None:
    """The canonical JSON bytes plus one newline (indented under ``--pretty``)."""
    cli.emit_bytes(canonical_bytes(value) + b"\n", document=value)


def _ceilings(args: argparse.Namespace) -> dict[str, int]:
    ceilings = {
        "max_nodes": args.max_nodes,
        "max_depth": args.max_depth,
        "max_path_steps": args.max_path_steps,
    }
    try:
        validate_ceilings(**ceilings)
    except (TypeError, ValueError) as error:
        raise UsageError(str(error)) from None
    return ceilings


def _produce(args: argparse.Namespace) -> int:
    subject = cli.read_input(args.subject)
    from mechanism.formation._producer import produce_formation_certificate

    try:
        certificate = produce_formation_certificate(subject)
    except (UnsupportedFormation, FormationLimitError) as error:
        raise CliError(f"UNKNOWN: {error}", exit=Exit.UNKNOWN, code="FORMATION_UNKNOWN") from None
    except FormationError as error:
        raise CliError(f"INVALID: {error}", exit=Exit.FAIL, code="FORMATION_INVALID") from None
    cli.emit_bytes(certificate, document=json.loads(certificate))
    return Exit.OK


def _check(args: argparse.Namespace) -> int:
    ceilings = _ceilings(args)
    subject, certificate = cli.read_input(args.subject), cli.read_input(args.certificate)
    report = check_formation(subject, certificate, **ceilings)
    _emit_canonical(report)
    if report["reason_codes"]:
        cli.say(f"{report['status']}: {report['reason_codes'][0]}")
    return _STATUS_EXIT[report["status"]]


def _evaluate(args: argparse.Namespace) -> int:
    ceilings = _ceilings(args)
    if args.mechanism_digest is not None and not is_digest(args.mechanism_digest):
        raise UsageError("--mechanism-digest must be sha256: and 64 lowercase hex digits")
    subject, certificate = cli.read_input(args.subject), cli.read_input(args.certificate)
    try:
        binding = formation_binding(subject, certificate, mechanism_digest=args.mechanism_digest)
    except FormationError as error:
        raise RejectedInput(
            f"no honest binding exists for this pair: {error}", code="BINDING_UNBUILDABLE"
        ) from None
    store = EvidenceStore()
    store.add(subject)
    store.add(certificate)
    session = VerificationSession(store)
    session.register(FormationPathCertificateMechanism(**ceilings))
    result = session.evaluate(binding)
    _emit_canonical(result.to_dict())
    if result.details:
        cli.say(f"{MechanismOutcome(result.outcome).value}: {result.details}")
    return _OUTCOME_EXIT[MechanismOutcome(result.outcome)]


def _add_ceiling_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-nodes", type=int, default=MAX_NODES, help="lower the node bound")
    parser.add_argument("--max-depth", type=int, default=MAX_DEPTH, help="lower the depth bound")
    parser.add_argument(
        "--max-path-steps",
        type=int,
        default=MAX_PATH_STEPS,
        help="lower the path-step bound",
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``formation`` command and its sub-commands to the ``evidenced`` dispatcher."""
    formation = subparsers.add_parser(
        "formation", help="VSTD typed formation 0.1: produce, check, evaluate"
    )
    commands = formation.add_subparsers(dest="formation_command", metavar="SUBCOMMAND")

    produce = commands.add_parser("produce", help="write the certificate for SUBJECT to stdout")
    produce.add_argument("subject", metavar="SUBJECT", help="subject record file ('-': stdin)")
    produce.set_defaults(handler=_produce)

    check = commands.add_parser("check", help="recheck a pair; print the formation report")
    check.add_argument("subject", metavar="SUBJECT", help="subject record file")
    check.add_argument("certificate", metavar="CERTIFICATE", help="certificate record file")
    _add_ceiling_options(check)
    check.set_defaults(handler=_check)

    evaluate = commands.add_parser(
        "evaluate", help="evaluate the honest binding in a session; print the result"
    )
    evaluate.add_argument("subject", metavar="SUBJECT", help="subject record file")
    evaluate.add_argument("certificate", metavar="CERTIFICATE", help="certificate record file")
    evaluate.add_argument(
        "--mechanism-digest",
        default=None,
        help="pin this mechanism digest instead of the local mechanism's",
    )
    _add_ceiling_options(evaluate)
    evaluate.set_defaults(handler=_evaluate)

    add_silo_commands(commands)
    add_explain_command(commands)
