"""The ``evidenced`` command line: one dispatcher for every package's subcommands (its public
face is :mod:`daemon.cli`: ``main``, ``build_parser``, ``SUMMARIES``, ``installed_version``).

The contract every subcommand keeps is the :mod:`cli` package's (docs/cli.md): exactly one
JSON document on stdout on every path (an error is ``{"error": {"code", "message", "exit"}}``),
one-line messages on stderr prefixed ``evidenced <command>:``, and the exit-code table
(0 PASS/CHECKED, 1 FAIL/INVALID, 2 usage, 3 UNKNOWN, 65 rejected input, 66 input missing or
unreadable, 69 unreachable, 70 internal, 73 cannot write output, 75 busy/timeout, 130
interrupted). ``evidenced --version`` prints ``evidenced <version>`` (text, the installed
distribution's metadata) and exits 0; ``--help`` prints text and exits 0.

:func:`main` never raises ``SystemExit`` for a usage error or ``--help``: it returns the exit
code, so it can be called in-process with an argument list.

``--log-format console|json`` and ``--log-level debug|info|warning|error`` (before the command
or after it, on every leaf) choose the one structlog configuration of :mod:`daemon.wire._logs` for
the whole invocation, before anything is parsed (each invocation chooses anew, so in-process
calls never inherit one another's); under ``json`` the :func:`cli.say` lines become
``cli_message`` events. The top-level parser takes no abbreviated options (``replay --log``
is never ``--log-format``).

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

from session import cli

# Top-level command → the module(s) contributing it, in help order (a later module may add
# subcommands to an earlier one's command). Only the modules of the command being run are
# imported (the others pull in numpy, jsonschema, ...); ``--help`` imports all.
_COMMANDS: dict[str, str | tuple[str, ...]] = {
    "serve": "daemon.commands._serve_cli",
    "submit": "daemon.commands._client_cli",
    "sessions": "daemon.commands._client_cli",
    "health": "daemon.commands._client_cli",
    "audit": "daemon.commands._audit_cli",
    "config": ("daemon.commands._config_cli", "daemon.commands._systemd_unit_cli"),
    "log": "daemon.commands._log_cli",
    "replay": "daemon.commands._retention_cli",
    "store": "daemon.commands._retention_cli",
    "mechanisms": "daemon.commands._mechanisms_cli",
    "mechanism": "daemon.commands._mechanisms_cli",
    "formation": "mechanism.formation.cli",
    "descriptor": "mechanism.descriptor.cli",
    "catalog": "catalog.cli",
    "holdout": "mechanism.holdout.cli",
    "demo": "daemon.commands.demo",
    "completion": "daemon.commands._completion_cli",
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
    "completion": "print a shell completion script (bash, zsh, tcsh, fish)",
}


def _modules(names: str | tuple[str, ...]) -> tuple[str, ...]:
    return (names,) if isinstance(names, str) else names


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


#: The operational-log options (docs/operations.md), accepted before or after the command.
_LOG_OPTIONS = ("--log-format", "--log-level")


def _log_choices(arguments: Sequence[str]) -> dict[str, str]:
    """``{"format": ..., "level": ...}`` as the arguments give them (the last one wins); a
    value that is not a known name is left to the parser to refuse (usage, 2)."""
    found: dict[str, str] = {}
    for index, argument in enumerate(arguments):
        if argument == "--":
            break
        option, equals, value = argument.partition("=")
        if option in _LOG_OPTIONS:
            if not equals:
                value = arguments[index + 1] if index + 1 < len(arguments) else ""
            found[option.removeprefix("--log-")] = value
    return found


def _command_of(arguments: Sequence[str]) -> str | None:
    """The first argument that is not a top-level option (the command to import)."""
    skip = False
    for argument in arguments:
        if skip:
            skip = False
        elif argument in _LOG_OPTIONS:
            skip = True
        elif argument != "--pretty" and argument.partition("=")[0] not in _LOG_OPTIONS:
            return argument
    return None


def _add_log_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    default = None if top else argparse.SUPPRESS
    parser.add_argument(
        "--log-format",
        choices=("console", "json"),
        default=default,
        help="operational messages on stderr: console text, or one JSON object per line "
        "(default: json under systemd, i.e. when $JOURNAL_STREAM is set, else console)",
    )
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default=default,
        help="the least severe operational message written (default: info)",
    )


def build_parser(arguments: Sequence[str] | str | None = None) -> argparse.ArgumentParser:
    """The finished parser for the command ``arguments`` name when it is known; for
    ``None``, every command's full parser; for an argument list naming no known command
    (``--help``, none, a typo), a parser whose commands are the one-line :data:`SUMMARIES`
    (no command's module imported: ``evidenced --help`` stays fast)."""
    command = (
        arguments if isinstance(arguments, str) or arguments is None else _command_of(arguments)
    )
    parser = cli.Parser(
        prog="evidenced", description="Evidence-bound verification sessions.", allow_abbrev=False
    )
    parser.add_argument("--version", action=_VersionAction)
    parser.add_argument(
        "--pretty", action="store_true", help="indent the JSON document (any command)"
    )
    _add_log_options(parser, top=True)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=cli.Parser)
    if command in _COMMANDS:
        modules = list(_modules(_COMMANDS[command]))
    elif command == "--version":
        modules = []
    elif arguments is not None:
        for name, summary in SUMMARIES.items():
            subparsers.add_parser(name, help=summary)
        modules = []
    else:
        modules = list(dict.fromkeys(m for names in _COMMANDS.values() for m in _modules(names)))
    for name in modules:
        importlib.import_module(name).register(subparsers)
    finished = cli.finish(parser)
    for node in cli.walk(finished)[1:]:
        if not node._subparsers and "--log-format" not in node._option_string_actions:
            _add_log_options(node, top=False)
    return finished


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``evidenced ARGV`` (default: ``sys.argv[1:]``); return the exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    _configure_logs(arguments)
    try:
        return cli.run(build_parser, arguments, classify=_exit_code)
    finally:  # an in-process caller's next command line (another package's) prints as before
        sys.modules["session.cli._contract"].STATE.sink = None


def _exit_code(error: BaseException) -> int | None:
    """The exit code of an error no handler translated: the daemon's tree
    (:func:`daemon.wire._errors.exit_code`), and a feature whose extra is not installed
    (:class:`session.ExtraMissing`, code ``EXTRA_MISSING``): 69, ``EX_UNAVAILABLE``."""
    from daemon.wire._errors import exit_code
    from session import ExtraMissing

    return cli.Exit.UNREACHABLE if isinstance(error, ExtraMissing) else exit_code(error)


def _configure_logs(arguments: Sequence[str]) -> None:
    """One structlog configuration for the whole invocation (docs/operations.md): under
    ``json`` the command's own one-line messages become ``cli_message`` events too."""
    from daemon.wire import _logs as logs

    chosen = _log_choices(arguments)
    format_, level = chosen.get("format"), chosen.get("level")
    settings = logs.configure(
        format_ if format_ in logs.FORMATS else None, level if level in logs.LEVELS else None
    )
    cli_state = sys.modules["session.cli._contract"].STATE
    if settings.format == "json":
        cli_state.sink = lambda command, line, level: logs.log(
            level, "cli_message", line, command=command
        )
    else:
        cli_state.sink = None
