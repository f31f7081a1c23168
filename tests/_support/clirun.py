"""Run the ``evidenced`` command line in-process or as a real subprocess, with one result type.

Imported as ``clirun`` (the same folder as ``testdata``).

Rules:

* :func:`in_process` calls ``daemon.cli.main(argv)`` with ``sys.stdin``, ``sys.stdout`` and
  ``sys.stderr`` swapped for in-memory byte streams (text written through at once, so text and
  raw ``sys.stdout.buffer`` writes keep their order), and restores them afterwards. A
  ``SystemExit`` raised by a handler becomes the exit code, as it would for the process.
  It runs ``trio.run`` inside some commands, so call it from synchronous tests only.
* :func:`subprocess_run` runs ``python -m daemon.cli`` for the smoke tests that prove the real
  process behaves the same (entry point, exit status, streams).
* Both return a :class:`CliResult` with the fields of a ``subprocess.CompletedProcess[bytes]``
  (``returncode``, ``stdout``, ``stderr``), so a test written against a subprocess reads the
  same. Neither interprets the output; :meth:`CliResult.document` parses stdout as the one JSON
  document (``None`` when stdout is empty) and :attr:`CliResult.err` is stderr as text.
* :func:`in_process_text` is :func:`in_process` for tests written against
  ``subprocess.run(..., text=True)``: it returns that very type, decoded as UTF-8.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from daemon.cli import main


@attrs.frozen
class CliResult:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8")

    def document(self) -> Any:
        return json.loads(self.stdout) if self.stdout.strip() else None


def _stream(data: bytes = b"") -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", write_through=True)


def in_process(argv: Sequence[str | Path], *, stdin: bytes = b"") -> CliResult:
    """``evidenced ARGV`` through ``daemon.cli.main`` in this process."""
    saved = sys.stdin, sys.stdout, sys.stderr
    stdout, stderr = _stream(), _stream()
    sys.stdin, sys.stdout, sys.stderr = _stream(stdin), stdout, stderr
    try:
        code = main([str(arg) for arg in argv])
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    out = stdout.buffer
    err = stderr.buffer
    assert isinstance(out, io.BytesIO) and isinstance(err, io.BytesIO)
    return CliResult(code, out.getvalue(), err.getvalue())


def subprocess_run(
    argv: Sequence[str | Path], *, stdin: bytes = b"", cwd: Path | None = None
) -> CliResult:
    """``python -m daemon.cli ARGV`` as a real child process."""
    completed = subprocess.run(
        [sys.executable, "-m", "daemon.cli", *map(str, argv)],
        input=stdin,
        capture_output=True,
        timeout=300,
        check=False,
        cwd=cwd,
    )
    return CliResult(completed.returncode, completed.stdout, completed.stderr)


def in_process_text(argv: Sequence[str | Path]) -> subprocess.CompletedProcess[str]:
    """:func:`in_process`, answered as ``subprocess.run(..., text=True)`` would answer."""
    result = in_process(argv)
    args = ["evidenced", *map(str, argv)]
    return subprocess.CompletedProcess(args, result.returncode, result.stdout.decode(), result.err)


def error_of(result: CliResult) -> dict[str, Any]:
    """The error member of ``result``'s one JSON document, after checking the contract's shape:
    exactly ``{"error": {"code", "message", "exit", ...}}`` with ``exit`` equal to the process's
    exit code, and one line on stderr."""
    document = result.document()
    assert isinstance(document, dict) and set(document) == {"error"}, result.stdout
    error = document["error"]
    assert {"code", "message", "exit"} <= set(error), error
    assert type(error["code"]) is str and error["code"]
    assert type(error["message"]) is str and error["message"]
    assert error["exit"] == result.returncode != 0
    assert result.err.count("\n") == 1 and "Traceback" not in result.err, result.err
    return dict(error)


def is_error(document: Any, exit_code: int) -> bool:
    """``document`` is the contract's error document for ``exit_code``."""
    return (
        isinstance(document, dict)
        and set(document) == {"error"}
        and document["error"].get("exit") == exit_code
        and isinstance(document["error"].get("code"), str)
        and isinstance(document["error"].get("message"), str)
    )
