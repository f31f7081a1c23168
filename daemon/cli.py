"""The ``evidenced`` command line: one dispatcher for every package's subcommands.

Contract for every subcommand:

* stdout carries exactly one JSON document (or the raw bytes a command is documented to emit);
  human messages go to stderr, one line each, never a traceback.
* Exit codes: 0 PASS/CHECKED, 1 FAIL/INVALID, 3 UNKNOWN, 2 usage, 65 rejected or unreadable
  input, 69 daemon unreachable, 75 busy/timeout, 70 internal error.

Each package contributes a module exposing ``register(subparsers)``; it adds one top-level
command whose leaf parsers set ``handler=<callable(argparse.Namespace) -> int>``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence

EXIT_USAGE = 2
EXIT_REJECTED = 65
EXIT_INTERNAL = 70

# Modules contributing subcommands, in help order.
_COMMAND_MODULES = (
    "daemon._serve_cli",
    "mechanism.formation.cli",
    "mechanism.descriptor.cli",
    "catalog.cli",
    "holdout.cli",
)


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose usage errors are one line on stderr and exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: usage error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="evidenced", description="Evidence-bound verification sessions.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in _COMMAND_MODULES:
        if importlib.util.find_spec(name) is None:
            continue
        module = importlib.import_module(name)
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
