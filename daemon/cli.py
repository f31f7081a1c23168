"""The ``evidenced`` command line: one dispatcher for every package's subcommands.

The contract every subcommand keeps is the :mod:`cli` package's (docs/cli.md): exactly one
JSON document on stdout on every path (an error is ``{"error": {"code", "message", "exit"}}``),
one-line messages on stderr prefixed ``evidenced <command>:``, and the exit-code table
(0 PASS/CHECKED, 1 FAIL/INVALID, 2 usage, 3 UNKNOWN, 65 rejected input, 66 input missing or
unreadable, 69 unreachable, 70 internal, 73 cannot write output, 75 busy/timeout, 130
interrupted). ``evidenced --version`` prints ``evidenced <version>`` (text, the installed
distribution's metadata) and exits 0; ``--help`` prints text and exits 0.

:func:`main` never raises ``SystemExit`` for a usage error or ``--help``: it returns the exit
code, so it can be called in-process with an argument list.

Each package contributes a module exposing ``register(subparsers)``; it adds one top-level
command whose leaf parsers set ``handler=<callable(argparse.Namespace) -> int>``. A handler
prints its document with :func:`cli.emit` and reports failure by raising a
:class:`cli.CliError`; :func:`cli.run` does the rest.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

import cli

# Top-level command → the module contributing it, in help order. Only the module of the command
# being run is imported (the others pull in numpy, jsonschema, trio, ...).
_COMMANDS = {
    "serve": "daemon.commands._serve_cli",
    "submit": "daemon.commands._serve_cli",
    "sessions": "daemon.commands._serve_cli",
    "health": "daemon.commands._serve_cli",
    "audit": "daemon.commands._serve_cli",
    "config": "daemon.commands._config_cli",
    "log": "daemon.commands._log_cli",
    "replay": "daemon.commands._retention_cli",
    "store": "daemon.commands._retention_cli",
    "mechanisms": "daemon.commands._mechanisms_cli",
    "mechanism": "daemon.commands._mechanisms_cli",
    "formation": "mechanism.formation.cli",
    "descriptor": "mechanism.descriptor.cli",
    "catalog": "catalog.cli",
    "holdout": "holdout.cli",
    "demo": "daemon.commands.demo",
}


# Top-level command → its one-line help: ``evidenced --help`` (or no, or an unknown, command)
# lists these without importing any command's module (docs/benchmarks.md, "The CLI's imports");
# ``tests/test_cli_contract.py`` holds each to its module's own ``help``.
SUMMARIES = {
    "serve": "run the daemon",
    "submit": "submit an evidence pair to a session",
    "sessions": "list hosted sessions",
    "health": "server health",
    "audit": "verify or read an audit log",
    "config": "check a configuration, print the default",
    "log": "the transparency log: keys, receipts, verify",
    "replay": "re-evaluate logged decisions on their retained evidence",
    "store": "manage an evidence retention store",
    "mechanisms": "list the installed mechanism providers",
    "mechanism": "tools for mechanism authors",
    "formation": "VSTD typed formation 0.1: produce, check, evaluate",
    "descriptor": "T81 experiment descriptors: check, make, run-tisc",
    "catalog": "component registry, stored packages, exact discovery, planning, readiness",
    "holdout": "holdout challenges: observe, score, commit, release, interop",
    "demo": "start a daemon, submit seven example pairs, verify the audit chain",
}


def installed_version() -> str:
    """The version in the installed distribution's metadata (read only when asked for)."""
    from importlib.metadata import version

    return version("evidenced")


class _VersionAction(argparse.Action):
    """``--version``: print ``evidenced <version>`` on stdout and exit 0."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the version"
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        sys.stdout.write(f"evidenced {installed_version()}\n")
        parser.exit(0)


def _command_of(arguments: Sequence[str]) -> str | None:
    """The first argument that is not a top-level option (the command to import)."""
    for argument in arguments:
        if argument not in ("--pretty",):
            return argument
    return None


def build_parser(arguments: Sequence[str] | str | None = None) -> argparse.ArgumentParser:
    """The finished parser for the command ``arguments`` name when it is known; for
    ``None``, every command's full parser; for an argument list naming no known command
    (``--help``, none, a typo), a parser whose commands are the one-line :data:`SUMMARIES`
    (no command's module imported: ``evidenced --help`` stays fast)."""
    command = (
        arguments if isinstance(arguments, str) or arguments is None else _command_of(arguments)
    )
    parser = cli.Parser(prog="evidenced", description="Evidence-bound verification sessions.")
    parser.add_argument("--version", action=_VersionAction)
    parser.add_argument(
        "--pretty", action="store_true", help="indent the JSON document (any command)"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=cli.Parser)
    if command in _COMMANDS:
        modules = [_COMMANDS[command]]
    elif command == "--version":
        modules = []
    elif arguments is not None:
        for name, summary in SUMMARIES.items():
            subparsers.add_parser(name, help=summary)
        modules = []
    else:
        modules = list(dict.fromkeys(_COMMANDS.values()))
    for name in modules:
        importlib.import_module(name).register(subparsers)
    return cli.finish(parser)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``evidenced ARGV`` (default: ``sys.argv[1:]``); return the exit code."""
    return cli.run(build_parser, list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    raise SystemExit(main())
