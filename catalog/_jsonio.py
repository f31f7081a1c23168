"""Strict JSON file reading for catalog records (package manifests, indexes, planning inputs).

Rules: the bytes must be at most ``max_bytes``, then :func:`canon.loads_strict_json` (strict
UTF-8, one JSON document, no duplicate object keys, no NaN/Infinity) with floats refused
(catalog records never carry them); violations raise the caller-chosen error type with a
one-line message.

Every file the catalog reads goes through :func:`read_file_capped`: at most ``cap + 1`` bytes
are read, more than ``cap`` raise the caller's error naming the cap. (The catalog keeps its own
capped read instead of ``session.read_capped``: it must load no session or mechanism module at
all, which its non-execution test checks.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from session.canon import StrictJSONError, loads_strict_json

from ._errors import CatalogError

__all__ = ["MAX_RECORD_FILE_BYTES", "loads_strict", "read_file_capped", "read_json_file"]

MAX_RECORD_FILE_BYTES = 16 * 1024 * 1024


def loads_strict(data: bytes, error: type[CatalogError], what: str) -> Any:
    """Parse one strict JSON document from exact bytes, raising ``error`` on any violation."""
    if len(data) > MAX_RECORD_FILE_BYTES:
        raise error(f"{what} exceeds {MAX_RECORD_FILE_BYTES} bytes")
    try:
        return loads_strict_json(data, refuse_floats=True)
    except StrictJSONError as failure:
        raise error(f"{what} is not strict JSON: {failure}") from None


def read_file_capped(
    path: Path, error: type[CatalogError], what: str, cap: int = MAX_RECORD_FILE_BYTES
) -> bytes:
    """The whole file, or ``error`` when it holds more than ``cap`` bytes (never reads more
    than ``cap + 1``)."""
    with path.open("rb") as handle:
        data = handle.read(cap + 1)
    if len(data) > cap:
        raise error(f"{what} {path} exceeds {cap} bytes")
    return data


def read_json_file(path: Path, error: type[CatalogError], what: str) -> Any:
    """Read and strictly parse a JSON file (size checked before reading the whole file)."""
    with path.open("rb") as handle:
        data = handle.read(MAX_RECORD_FILE_BYTES + 1)
    return loads_strict(data, error, f"{what} {path}")
