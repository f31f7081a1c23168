"""Streaming an audit log's lines for replay and gc (never the whole file in memory).

Rules: :func:`records` reads the files in the order given (oldest first, as ``audit verify``
takes them) in bounded chunks with the verifier's reader, and yields each complete line
parsed as a JSON object together with the number of bytes read so far over all files (for
progress). A line that is not a JSON object, or a final line without newline, is skipped:
callers verify the files first, so neither occurs in a log they act on.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from daemon.audit._audit_verify import iter_lines

__all__ = ["epoch_of", "records", "total_bytes"]


def total_bytes(paths: Sequence[str | os.PathLike[str]]) -> int:
    return sum(os.stat(path).st_size for path in paths)


def records(paths: Sequence[str | os.PathLike[str]]) -> Iterator[tuple[dict[str, Any], int]]:
    """(fields, bytes read so far) for each line (module rules)."""
    done = 0
    for path in paths:
        with Path(path).open("rb") as handle:
            for raw, had_newline in iter_lines(handle):
                done += len(raw) + 1
                if not had_newline:
                    continue
                try:
                    fields = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(fields, dict):
                    yield fields, done


def epoch_of(timestamp: object) -> float | None:
    """Unix seconds of an RFC 3339 timestamp with an offset (None when it is not one)."""
    if not isinstance(timestamp, str):
        return None
    try:
        value = datetime.fromisoformat(timestamp)
    except ValueError:
        return None
    return None if value.tzinfo is None else value.timestamp()
