"""The ``evidenced`` command-line contract: exit codes, one JSON document, errors, file I/O.

Every command line of the project (``daemon``, ``mechanism.*``, ``catalog``, ``holdout``)
builds on these names; library modules never import them. Rules: :mod:`cli._contract` (the
document, the stderr line, the exit table, reads and writes) and :mod:`cli._run` (parsing and
the mapping of every way out). The guide is docs/cli.md.
"""

from ._contract import (
    EXIT_TABLE,
    MAX_INPUT_BYTES,
    CliError,
    Exit,
    InputError,
    OutputError,
    RejectedInput,
    UsageError,
    emit,
    emit_bytes,
    error_document,
    hand_over_stdout,
    read_input,
    say,
    write_output,
)
from ._run import HelpFormatter, Parser, epilog, finish, run, walk

__all__ = [
    "EXIT_TABLE",
    "MAX_INPUT_BYTES",
    "CliError",
    "Exit",
    "HelpFormatter",
    "InputError",
    "OutputError",
    "Parser",
    "RejectedInput",
    "UsageError",
    "emit",
    "emit_bytes",
    "epilog",
    "error_document",
    "finish",
    "hand_over_stdout",
    "read_input",
    "run",
    "say",
    "walk",
    "write_output",
]
