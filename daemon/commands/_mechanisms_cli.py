"""CLI commands ``mechanisms`` and ``mechanism check`` (mechanism providers and their authors).

Contract: the :mod:`cli` contract (stdout: exactly one JSON document, a failure being the error
document ``{"error": {"code", "message", "exit"}}``; stderr: one-line messages):

* ``mechanisms`` lists the installed providers (entry points ``evidenced.mechanisms``), sorted by
  name: ``{"mechanisms": [{"name", "value", "distribution", "version", "mechanism_id",
  "mechanism_digest"}]}`` — id and digest of a mechanism created with default options (as
  ``create`` makes it, without the host's ``prepare``: listing the descriptor provider never
  imports numpy). A provider whose extra is not installed (``session.ExtraMissing``) is listed
  with its ``mechanism_id``, ``"unavailable"`` (the one line naming the install command) and
  ``"extra"`` instead of a digest, and that line goes to stderr; one that cannot be loaded or
  created for another reason is listed with ``"error"`` instead (and named on stderr); a name
  two distributions register is listed twice. Exit 0.
* ``mechanism check TARGET [--repeats N] [--time-budget SECONDS] [--seed N]`` runs the
  conformance battery (:mod:`daemon.kit._conformance`: under the default options and
  every option set the provider declares) against an entry-point name or ``module:attribute``
  and prints its report (``--seed``: the random cases' seed, 0 by default). Exit 0 when
  every check passes, 1 when one fails (each failing check and its first finding on stderr),
  65 when the target cannot be loaded (``TARGET_UNLOADABLE``), 2 for a usage error.
"""

from __future__ import annotations

import argparse
from typing import Any, Final

from session import cli
from session.cli import Exit, RejectedInput

EXIT_OK: Final = Exit.OK
EXIT_FAIL: Final = Exit.FAIL

_emit = cli.emit
_say = cli.say


def _list(args: argparse.Namespace) -> int:
    from session import ExtraMissing, provider_entries

    listed = []
    for entry in provider_entries():
        item: dict[str, Any] = entry.to_dict()
        try:
            provider = entry.load()
            mechanism = provider.create(provider.default_options())
            item["mechanism_id"] = mechanism.mechanism_id
            item["mechanism_digest"] = mechanism.mechanism_digest
        except ExtraMissing as missing:
            item.update(mechanism_id=provider.mechanism_id, extra=missing.extra)
            item["unavailable"] = str(missing)
            _say(f"mechanism provider {entry.name!r}: {missing}")
        except Exception as error:
            item["error"] = f"{type(error).__name__}: {error}"
            _say(f"mechanism provider {entry.name!r}: {item['error']}")
        listed.append(item)
    _emit({"mechanisms": listed})
    return EXIT_OK


def _seconds(text: str) -> float:
    # the client commands' parser type, imported when used: listing loads no client
    from daemon.commands._client_cli import _positive_seconds

    return _positive_seconds(text)


def _repeats(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 2 <= value <= 100:
        raise argparse.ArgumentTypeError("between 2 and 100")
    return value


def _check(args: argparse.Namespace) -> int:
    from daemon.kit._conformance import TargetError, check_mechanism

    try:
        report = check_mechanism(
            args.target, repeats=args.repeats, time_budget=args.time_budget, seed=args.seed
        )
    except TargetError as error:
        raise RejectedInput(
            f"cannot load {args.target}: {error}", code="TARGET_UNLOADABLE"
        ) from None
    _emit(report.to_dict())
    if report.passed:
        _say(f"{args.target}: {report.mechanism_id} passes all {len(report.checks)} checks")
        return EXIT_OK
    for name, findings in report.failed().items():
        more = f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""
        _say(f"{args.target}: {name}: {findings[0]}{more}")
    return EXIT_FAIL


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``mechanisms`` and ``mechanism check``."""
    listing = subparsers.add_parser("mechanisms", help="list the installed mechanism providers")
    listing.set_defaults(handler=_list)
    mechanism = subparsers.add_parser("mechanism", help="tools for mechanism authors")
    commands = mechanism.add_subparsers(dest="mechanism_command", metavar="COMMAND")
    check = commands.add_parser("check", help="run the conformance battery against a mechanism")
    check.add_argument(
        "target", metavar="ENTRYPOINT_OR_MODULE:FACTORY", help="provider name or module:attribute"
    )
    check.add_argument(
        "--repeats", type=_repeats, default=3, metavar="N", help="evaluations per sample (2-100)"
    )
    check.add_argument(
        "--time-budget",
        type=_seconds,
        default=5.0,
        metavar="SECONDS",
        help="the longest one evaluation may take",
    )
    check.add_argument(
        "--seed", type=int, default=0, metavar="N", help="seed of the random cases (default 0)"
    )
    check.set_defaults(handler=_check)
