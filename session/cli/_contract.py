"""The command-line contract every ``evidenced`` command keeps (docs/cli.md).

Rules:

1. **One JSON document on stdout**, on every path: a command's answer, or, when it fails, the
   error document ``{"error": {"code", "message", "exit"}}`` (extra keys allowed, e.g. a
   server's ``decision_id``). :func:`emit` writes it compact with sorted keys
   (``{"a":1,"b":2}``), indented under ``--pretty``, with the terminal-hostile code points
   (:data:`HOSTILE`) as ``\\u`` escapes: the same value, and nothing a terminal acts on. A
   second :func:`emit` in one invocation is a programming error (``RuntimeError``, reported
   as exit 70 on stderr only). ``--help`` and ``--version`` print text for humans (exit 0); a
   command documented to write an artifact (``descriptor make --raw``, an explicit
   ``--format`` rendering) writes exactly what was asked for instead; one whose stdout is a
   stream of its own (``serve`` with a ``console`` decision-log sink) hands it over
   (:func:`hand_over_stdout`): then no document is written, the stderr line says it all.
2. **Human messages go to stderr**, one line each, prefixed ``evidenced <command>:`` with the
   full command path (``evidenced audit verify: ...``): :func:`say` (whitespace runs become
   one space, :data:`HOSTILE` code points ``\\u`` escapes). Never a traceback. Each
   has a level for a structured sink (:attr:`_Invocation.sink`): ``info``, but the message
   an error ends a command with is ``warning`` when the input or the request was refused (a
   verdict, usage, rejected input, interrupted: exits 1, 2, 3, 65, 130) and ``error`` when
   the command could not do its work (66, 69, 70, 73, 75): :func:`failure_level`.
3. **Exit codes** (:class:`Exit`, :data:`EXIT_TABLE`): 0 PASS/CHECKED/done, 1 FAIL/INVALID,
   2 usage, 3 UNKNOWN, 65 rejected input (malformed, over a cap, refused by a server), 66
   input missing or unreadable, 69 unavailable (daemon unreachable, cannot listen, a
   feature's extra not installed), 70 internal error,
   73 cannot write output (an ``--out`` file, or stdout itself), 75 busy / timeout / held by
   another process, 130 interrupted.
4. **Errors are raised, not printed**: a handler raises :class:`CliError` (or
   :class:`UsageError`, :class:`InputError`, :class:`OutputError`, :class:`RejectedInput`)
   and :func:`cli.run <cli._run.run>` prints the error document and the stderr line.
5. **Files are read with** :func:`read_input` (``-`` is stdin; at most ``cap + 1`` bytes are
   read, more is 65 naming the cap; missing or unreadable is 66) and **written with**
   :func:`write_output` (``-`` is stdout; failure is 73).

This package imports nothing of the project but the error tree (``canon._errors``), so every
package's command line (the catalog's, the holdout instrument's, a mechanism's) may use it;
library modules never import it (the architecture test checks both).
"""

from __future__ import annotations

import enum
import errno
import io
import json
import os
import re
import sys
from collections.abc import Callable
from typing import Any, BinaryIO, Final

from session.canon._errors import EvidencedError

__all__ = [
    "EXIT_TABLE",
    "MAX_INPUT_BYTES",
    "CliError",
    "Exit",
    "InputError",
    "OutputError",
    "RejectedInput",
    "UsageError",
    "emit",
    "emit_bytes",
    "error_document",
    "failure_level",
    "read_input",
    "say",
    "write_output",
]

#: The default input cap: 16 MiB, the same as ``session.MAX_INPUT_FILE_BYTES`` (a test checks).
MAX_INPUT_BYTES: Final = 16 * 1024 * 1024

#: Code points never printed raw (rules 1-2): DEL and the C1 controls, the line and paragraph
#: separators, the bidirectional controls. The audit log escapes the same set in its lines
#: (``daemon/audit/_audit_format.py`` rule 5, which this package may not import; a test holds
#: the two equal).
HOSTILE: Final = (
    (0x7F, 0x9F),
    (0x61C, 0x61C),
    (0x200E, 0x200F),
    (0x2028, 0x202E),
    (0x2066, 0x2069),
)
_HOSTILE_RE: Final = re.compile(
    "[" + "".join(f"\\u{first:04x}-\\u{last:04x}" for first, last in HOSTILE) + "]"
)


def escape_hostile_text(text: str) -> str:
    """``text`` with each :data:`HOSTILE` code point as ``\\u`` + 4 lower-case hex digits (in
    JSON text, which is ASCII outside its strings, the same value)."""
    if text.isascii() and "\x7f" not in text:
        return text
    return _HOSTILE_RE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


class Exit(enum.IntEnum):
    """Exit codes (rule 3). sysexits.h names where one applies."""

    OK = 0
    FAIL = 1
    USAGE = 2
    UNKNOWN = 3
    REJECTED = 65  # EX_DATAERR
    NO_INPUT = 66  # EX_NOINPUT
    UNREACHABLE = 69  # EX_UNAVAILABLE
    INTERNAL = 70  # EX_SOFTWARE
    CANNOT_WRITE = 73  # EX_CANTCREAT
    BUSY = 75  # EX_TEMPFAIL
    INTERRUPTED = 130  # 128 + SIGINT


#: (code, meaning) in order: the table every ``--help`` epilog and docs/cli.md show.
EXIT_TABLE: Final[tuple[tuple[int, str], ...]] = (
    (Exit.OK, "PASS / CHECKED / done"),
    (Exit.FAIL, "FAIL / INVALID / BROKEN"),
    (Exit.USAGE, "usage error"),
    (Exit.UNKNOWN, "UNKNOWN"),
    (Exit.REJECTED, "rejected input (malformed, over a cap, refused)"),
    (Exit.NO_INPUT, "input file missing or unreadable"),
    (Exit.UNREACHABLE, "unavailable: daemon unreachable, cannot listen, extra not installed"),
    (Exit.INTERNAL, "internal error"),
    (Exit.CANNOT_WRITE, "cannot write output (--out file or stdout)"),
    (Exit.BUSY, "busy, timeout, or held by another process"),
    (Exit.INTERRUPTED, "interrupted"),
)

#: The error code an exit implies when the raiser names none.
_DEFAULT_CODES: Final = {
    Exit.FAIL: "FAILED",
    Exit.USAGE: "USAGE",
    Exit.UNKNOWN: "UNKNOWN",
    Exit.REJECTED: "INPUT_REJECTED",
    Exit.NO_INPUT: "INPUT_UNREADABLE",
    Exit.UNREACHABLE: "UNREACHABLE",
    Exit.INTERNAL: "INTERNAL",
    Exit.CANNOT_WRITE: "OUTPUT_UNWRITABLE",
    Exit.BUSY: "BUSY",
    Exit.INTERRUPTED: "INTERRUPTED",
}


class CliError(EvidencedError):
    """A command's failure: ``exit`` code, stable ``code``, one-line ``message``, and extra
    members of the error document (``details``)."""

    def __init__(
        self,
        message: str,
        *,
        exit: int,
        code: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = " ".join(str(message).split())
        self.exit = int(exit)
        self.code = code or _DEFAULT_CODES.get(Exit(self.exit), "ERROR")
        self.details = dict(details or {})


class UsageError(CliError):
    """Wrong arguments (exit 2)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit=Exit.USAGE)


class RejectedInput(CliError):
    """Input that was read but cannot be used (exit 65)."""

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message, exit=Exit.REJECTED, code=code)


class InputError(CliError):
    """An input file that is missing or unreadable (exit 66), or over its cap (exit 65)."""

    def __init__(self, name: str, reason: str, *, too_large: bool = False) -> None:
        super().__init__(
            f"cannot read {name}: {reason}",
            exit=Exit.REJECTED if too_large else Exit.NO_INPUT,
            code="INPUT_TOO_LARGE" if too_large else "INPUT_UNREADABLE",
        )
        self.name = name


class OutputError(CliError):
    """Output that cannot be written (exit 73)."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"cannot write {name}: {reason}", exit=Exit.CANNOT_WRITE)
        self.name = name


class _Invocation:
    """What one invocation has done so far (reset by ``cli.run``)."""

    def __init__(self) -> None:
        self.command = "evidenced"
        self.pretty = False
        self.emitted = False
        #: Where :func:`say` sends ``(command, line, level)`` instead of stderr, when set (the
        #: daemon's ``--log-format json``: one structured event per line). Kept across resets.
        self.sink: Callable[[str, str, str], None] | None = None


STATE = _Invocation()


def reset(command: str = "evidenced", *, pretty: bool = False) -> None:
    """Start a new invocation (``cli.run`` calls it)."""
    STATE.command = command
    STATE.pretty = pretty
    STATE.emitted = False


def say(message: str, level: str = "info") -> None:
    """One line on stderr: ``evidenced <command>: message`` (rule 2); ``level`` is for the
    sink (``info``, ``warning``, ``error``)."""
    line = escape_hostile_text(" ".join(str(message).split()))
    if STATE.sink is not None:
        STATE.sink(STATE.command, line, level)
        return
    try:
        sys.stderr.write(f"{STATE.command}: {line}\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed: nothing left to tell
        pass


def failure_level(exit: int) -> str:
    """The level of the message that ends a command exiting ``exit`` (rule 2)."""
    refused = (Exit.FAIL, Exit.USAGE, Exit.UNKNOWN, Exit.REJECTED, Exit.INTERRUPTED)
    return "warning" if exit in refused else "error"


def encode(document: Any, *, pretty: bool | None = None, ordered: bool = False) -> bytes:
    """The bytes :func:`emit` writes for ``document``: UTF-8, one line unless pretty,
    :data:`HOSTILE` code points escaped (rule 1). A string holding a lone surrogate (no UTF-8
    form) is written with ``\\u`` escapes instead."""
    options: dict[str, Any] = {"sort_keys": not ordered}
    if STATE.pretty if pretty is None else pretty:
        options["indent"] = 2
    else:
        options["separators"] = (",", ":")
    try:
        text = json.dumps(document, ensure_ascii=False, **options)
        return escape_hostile_text(text).encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(document, ensure_ascii=True, **options).encode("ascii") + b"\n"


def emit(document: Any, *, ordered: bool = False) -> None:
    """Write the invocation's one JSON document to stdout (rule 1). Keys are sorted unless
    ``ordered``: for the few documents whose member order is part of their contract (the
    holdout score's ``by_challenge``, in INDEX order)."""
    emit_bytes(encode(document, ordered=ordered))


def emit_bytes(data: bytes, *, document: Any = None) -> None:
    """Write already-encoded output (a canonical report, an artifact asked for) as the
    invocation's one output. Under ``--pretty``, ``document`` (when given) is indented
    instead."""
    if STATE.emitted:
        raise RuntimeError("a command printed a second document")
    if STATE.pretty and document is not None:
        data = encode(document)
    STATE.emitted = True
    try:
        stream = sys.stdout.buffer
    except AttributeError:  # a text-only stdout
        stream = None
    try:
        if stream is None:
            sys.stdout.write(data.decode("utf-8", errors="replace"))
        else:
            sys.stdout.flush()
            stream.write(data)
            stream.flush()
        sys.stdout.flush()
    except (OSError, ValueError) as error:
        raise OutputError("stdout", _reason(error)) from None


def hand_over_stdout() -> None:
    """Rule 1: stdout is the command's own stream from now on: no document (not even an
    error document) is written to it; messages stay on stderr."""
    STATE.emitted = True


def error_document(error: CliError) -> dict[str, Any]:
    """``{"error": {"code", "message", "exit", ...details}}``."""
    return {
        "error": {**error.details, "code": error.code, "message": error.message, "exit": error.exit}
    }


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__


def read_input(
    name: str | os.PathLike[str], *, cap: int = MAX_INPUT_BYTES, prefix: bool = False
) -> bytes:
    """The bytes of input ``name`` (``-``: stdin), reading at most ``cap + 1`` bytes.

    More than ``cap`` bytes is :class:`InputError` exit 65 naming the cap, unless ``prefix``
    (then the first ``cap`` bytes are returned: for callers whose own bound is below ``cap``).
    A missing, unreadable or non-regular-data path is :class:`InputError` exit 66.
    """
    label = os.fspath(name)
    try:
        if label == "-":
            data = _read_stream(sys.stdin.buffer, cap + 1)
        else:
            with open(label, "rb") as handle:
                data = _read_stream(handle, cap + 1)
    except (OSError, ValueError) as error:
        raise InputError(label, _reason(error)) from None
    if len(data) > cap:
        if prefix:
            return data[:cap]
        raise InputError(label, f"larger than the {cap:,}-byte input cap", too_large=True)
    return data


def _read_stream(stream: BinaryIO | io.BufferedReader, limit: int) -> bytes:
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = stream.read(left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def write_output(name: str | os.PathLike[str], data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``name`` (``-``: stdout, as the invocation's output); failure is
    :class:`OutputError` (exit 73). ``mode`` creates the file with those permissions."""
    label = os.fspath(name)
    if label == "-":
        emit_bytes(data)
        return
    try:
        if mode is None:
            with open(label, "wb") as handle:
                handle.write(data)
        else:
            descriptor = os.open(label, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
    except OSError as error:
        raise OutputError(label, _reason(error)) from None


def is_missing(error: OSError) -> bool:
    """An ``OSError`` that means "this path cannot be opened for reading"."""
    return error.errno in (errno.ENOENT, errno.EACCES, errno.EISDIR, errno.ENOTDIR, errno.ELOOP)
