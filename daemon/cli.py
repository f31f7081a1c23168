"""The ``evidenced`` command line: one dispatcher for every package's subcommands.

Contract for every subcommand:

* stdout carries exactly one JSON document (or the raw bytes a command is documented to emit);
  human messages go to stderr, one line each, never a traceback.
* Exit codes: 0 PASS/CHECKED, 1 FAIL/INVALID, 3 UNKNOWN, 2 usage, 65 rejected or unreadable
  input, 69 daemon unreachable, 75 busy/timeout, 70 internal error.
* ``evidenced --version`` prints ``evidenced <version>`` (one line, the installed distribution's
  metadata) and exits 0; ``evidenced demo`` prints the demo's human-readable report.

:func:`main` never raises ``SystemExit`` for a usage error or ``--help``: it returns the exit
code, so it can be called in-process with an argument list.

Each package contributes a module exposing ``register(subparsers)``; it adds one top-level
command whose leaf parsers set ``handler=<callable(argparse.Namespace) -> int>``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

EXIT_USAGE = 2
EXIT_REJECTED = 65
EXIT_INTERNAL = 70

# Top-level command → the module contributing it, in help order. Only the module of the command
# being run is imported (the others pull in numpy, jsonschema, ...); ``--help`` imports all.
_COMMANDS = {
    "serve": "daemon._serve_cli",
    "submit": "daemon._serve_cli",
    "sessions": "daemon._serve_cli",
    "health": "daemon._serve_cli",
    "audit": "daemon._serve_cli",
    "log": "daemon._log_cli",
    "replay": "daemon.retention._cli",
    "store": "daemon.retention._cli",
    "mechanisms": "daemon._mechanisms_cli",
    "mechanism": "daemon._mechanisms_cli",
    "formation": "mechanism.formation.cli",
    "descriptor": "mechanism.descriptor.cli",
    "catalog": "catalog.cli",
    "holdout": "holdout.cli",
    "demo": "daemon.demo",
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


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose usage errors are one line on stderr and exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: usage error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser for ``command`` alone when it is known, else for every command."""
    parser = _Parser(prog="evidenced", description="Evidence-bound verification sessions.")
    parser.add_argument("--version", action=_VersionAction)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    if command in _COMMANDS:
        modules = [_COMMANDS[command]]
    elif command == "--version":
        modules = []
    else:
        modules = list(dict.fromkeys(_COMMANDS.values()))
    for name in modules:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(arguments[0] if arguments else None)
    try:
        args = parser.parse_args(arguments)
    except SystemExit as stop:  # usage error (2), --help or --version (0)
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_usage(sys.stderr)
        return EXIT_USAGE
    try:
        return handler(args)
    except OSError as error:
        name = error.filename if error.filename is not None else "input"
        sys.stderr.write(f"evidenced: cannot read {name}: {error.strerror or error}\n")
        return EXIT_REJECTED
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # the CLI never shows a traceback
        sys.stderr.write(f"evidenced: internal error: {type(error).__name__}: {error}\n")
        return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
