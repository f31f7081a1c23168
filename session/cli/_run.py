"""Running one ``evidenced`` invocation under the contract (:mod:`cli._contract`).

Rules:

* :class:`Parser` is the one argparse parser class: a usage error raises
  :class:`~cli.UsageError` (exit 2) instead of printing and exiting; every parser shows the
  exit-code table as its epilog and each option's default in its help (:class:`HelpFormatter`).
* :func:`finish` walks a built parser tree once: every parser learns its command path (the
  stderr prefix) and every leaf command gets ``--pretty`` (also accepted before the command).
* :func:`run` parses, dispatches to the leaf's ``handler(args) -> int`` and maps every way out
  to the contract, in this order: ``--help``/``--version`` (exit 0, text); a
  :class:`~cli.CliError` (its exit, the error document unless the command already printed its
  document, one stderr line); no command (usage, 2); ``KeyboardInterrupt`` (130); an
  ``OSError`` nobody classified (66 "cannot read" when it names a file it could not open, 65
  when it is a capped read's refusal, 73 when it is a full or read-only disk, else 70); any
  other exception (70, ``internal error``). It never raises and never prints a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from ._contract import (
    EXIT_TABLE,
    STATE,
    CliError,
    Exit,
    InputError,
    OutputError,
    UsageError,
    emit,
    error_document,
    failure_level,
    reset,
    say,
)

__all__ = ["HelpFormatter", "Parser", "epilog", "finish", "run", "walk"]


def epilog() -> str:
    """The exit-code table, as every ``--help`` ends."""
    rows = "\n".join(f"  {code:>3}  {meaning}" for code, meaning in EXIT_TABLE)
    return (
        "stdout carries exactly one JSON document (compact; --pretty indents), errors as\n"
        '{"error": {"code", "message", "exit"}}; messages go to stderr.\n'
        f"exit codes:\n{rows}"
    )


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Epilogs verbatim; ``(default: X)`` after an option's help when it has a default worth
    showing and its help does not already say it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "%(default)" in text
            or "default" in text.lower()
            or default in (None, False, argparse.SUPPRESS)
            or default == []
            or not action.option_strings
        ):
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """The parser class of every ``evidenced`` command (module rules)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("epilog", epilog())
        super().__init__(*args, **kwargs)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:  # named after the command they were given to, not the top-level parser
            STATE.command = getattr(parsed, "_command", self.prog)
            raise UsageError(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def error(self, message: str) -> NoReturn:
        STATE.command = self.prog
        raise UsageError(message)


def walk(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every parser of the tree, parents before children."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found.extend(walk(child))
    return found


def _is_leaf(parser: argparse.ArgumentParser) -> bool:
    return not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def finish(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give every parser of the tree its command path and every leaf ``--pretty``."""
    for node in walk(parser):
        node.formatter_class = HelpFormatter
        if node.epilog is None:
            node.epilog = epilog()
        node.set_defaults(_command=node.prog)
        if node is parser:
            continue
        if _is_leaf(node) and "--pretty" not in node._option_string_actions:
            node.add_argument(
                "--pretty",
                action="store_true",
                default=argparse.SUPPRESS,
                help="indent the JSON document",
            )
    return parser


def _fail(error: CliError) -> int:
    if not STATE.emitted:
        with contextlib.suppress(OutputError):
            emit(error_document(error))
    level = failure_level(error.exit)
    if error.exit == Exit.USAGE:
        say(f"usage error: {error.message} (see --help)", level)
    else:
        say(error.message, level)
    if isinstance(error, OutputError) and error.name == "stdout":
        _silence_stdout()
    return error.exit


def _silence_stdout() -> None:
    """After stdout failed, point it at /dev/null so the interpreter's final flush does not
    print a second complaint (real processes only)."""
    try:
        descriptor = os.open(os.devnull, os.O_WRONLY)
        os.dup2(descriptor, sys.stdout.fileno())
        os.close(descriptor)
    except (OSError, ValueError, AttributeError):
        pass


def _unclassified(error: OSError) -> CliError:
    name = error.filename if error.filename is not None else None
    reason = error.strerror or str(error)
    if error.errno == errno.EFBIG and "input cap" in reason and name is not None:
        return InputError(str(name), reason, too_large=True)
    if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EPIPE):
        return OutputError(str(name) if name is not None else "output", reason)
    if name is not None and error.errno in (
        errno.ENOENT,
        errno.EACCES,
        errno.EISDIR,
        errno.ENOTDIR,
        errno.ELOOP,
        errno.EPERM,
    ):
        return InputError(str(name), reason)
    return CliError(f"internal error: {type(error).__name__}: {error}", exit=Exit.INTERNAL)


def run(
    build: Callable[[Sequence[str]], argparse.ArgumentParser],
    argv: Sequence[str],
    *,
    classify: Callable[[BaseException], int | None] | None = None,
) -> int:
    """One invocation (module rules): ``build(argv)`` returns the finished parser.
    ``classify`` maps a library's own errors to their exit code (``None``: not one of its
    errors), so an error no handler translated still exits with its code, not 70."""
    arguments = [str(argument) for argument in argv]
    reset()
    try:
        parser = build(arguments)
        try:
            args = parser.parse_args(arguments)
        except SystemExit as stop:  # --help, --version
            return stop.code if isinstance(stop.code, int) else Exit.USAGE
        reset(getattr(args, "_command", "evidenced"), pretty=bool(getattr(args, "pretty", False)))
        handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
        if handler is None:
            raise UsageError("a command is required")
        return int(handler(args))
    except CliError as error:
        return _fail(error)
    except KeyboardInterrupt:
        return _fail(CliError("interrupted", exit=Exit.INTERRUPTED))
    except OSError as error:
        return _fail(_unclassified(error))
    except Exception as error:  # the CLI never shows a traceback
        exit_code = classify(error) if classify is not None else None
        if exit_code is None:
            return _fail(_internal(error))
        code = getattr(error, "code", None)
        code = getattr(code, "name", code)
        return _fail(
            CliError(str(error), exit=exit_code, code=code if isinstance(code, str) else None)
        )


def _internal(error: BaseException) -> CliError:
    return CliError(f"internal error: {type(error).__name__}: {error}", exit=Exit.INTERNAL)
