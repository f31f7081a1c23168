"""Commitment of a challenge folder, loading it in INDEX order, and the instrument's release id.

Rules:

* A challenge folder is a directory of regular files (no symlinks, nothing else) containing
  ``INDEX.json``. Its **commitment** is the lowercase hex SHA-256 of the concatenation, sorted
  by path (UTF-8 bytes), of the lines ``<path>\\n<sha256 hex of the file>\\n`` for every file in
  it, recursively, ``path`` relative to the folder with ``/`` separators (INDEX.json included).
* :func:`load_challenge_folder` snapshots every file's bytes once, recomputes the commitment
  over that snapshot, refuses (``commitment-mismatch``) when it differs from the caller's, and
  only then parses ``INDEX.json`` (``{"entries": [{"file": ...}, ...]}``) and each named file
  through the strict reader, in INDEX order. So the bytes scored are the bytes committed.
* The **release id** is ``srel-`` + SHA-256 over the same kind of sorted lines for the
  instrument: the two schemas (``schemas/<name>``), the scorer's own source files
  (``scorer/<name>``, :data:`SCORER_SOURCES`) and the public corpus index
  (``corpus/INDEX.json``). Changing one byte of any of them changes the id.
* Every file is read with a cap, :data:`MAX_FILE_BYTES` (16 MiB, twice the strict reader's
  document bound); a larger file raises ``OSError`` (``EFBIG``, the message names the cap)
  before more than one byte over the cap is read, and a folder holding more than
  :data:`MAX_FOLDER_BYTES` in all is ``challenge-folder-invalid``. (The command line's capped
  read lives in ``session``, which the scorer may not import.)
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from pathlib import Path
from typing import Any, Final

from ._reader import StrictReadError, read_json
from ._scorer import Refusal, Schemas

RECIPE_SCHEMA_NAME: Final = "holdout-recipe-v1.schema.json"
OBSERVATION_SCHEMA_NAME: Final = "holdout-observation-v1.schema.json"
SCORER_SOURCES: Final = (
    "__init__.py",
    "_commitment.py",
    "_explain.py",
    "_jcs.py",
    "_reader.py",
    "_scorer.py",
)
_PACKAGE_DIR: Final = Path(__file__).resolve().parent
_COMMITMENT_RE: Final = re.compile(r"[0-9a-f]{64}\Z")
MAX_FOLDER_FILES: Final = 10_000
MAX_FILE_BYTES: Final = 16 * 1024 * 1024
MAX_FOLDER_BYTES: Final = 64 * 1024 * 1024


def read_file(path: str | os.PathLike[str]) -> bytes:
    """The whole file, or ``OSError`` (``EFBIG``) when it holds more than ``MAX_FILE_BYTES``."""
    with open(path, "rb") as handle:
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise OSError(
            errno.EFBIG, f"larger than the {MAX_FILE_BYTES:,}-byte input cap", os.fspath(path)
        )
    return data


def schema_dir() -> Path:
    """The folder holding this project's two holdout schemas (the package directory)."""
    return _PACKAGE_DIR


def corpus_dir() -> Path:
    """This project's public corpus folder: package data (``holdout/corpus``), installed with
    the scorer it is bound to. Found next to this module, not through ``importlib``, which the
    scorer never imports."""
    return _PACKAGE_DIR / "corpus"


def corpus_index_path() -> Path:
    return corpus_dir() / "INDEX.json"


def load_schemas(directory: Path) -> Schemas:
    """Read ``holdout-recipe-v1.schema.json`` and ``holdout-observation-v1.schema.json``."""
    return Schemas.from_bytes(
        read_file(directory / RECIPE_SCHEMA_NAME),
        read_file(directory / OBSERVATION_SCHEMA_NAME),
    )


def project_schemas() -> Schemas:
    return load_schemas(schema_dir())


def _lines_digest(entries: dict[str, bytes]) -> str:
    hasher = hashlib.sha256()
    for path in sorted(entries, key=lambda name: name.encode("utf-8")):
        digest = hashlib.sha256(entries[path]).hexdigest()
        hasher.update(f"{path}\n{digest}\n".encode())
    return hasher.hexdigest()


def _snapshot(directory: Path) -> dict[str, bytes]:
    if not directory.is_dir():
        raise Refusal("challenge-folder-invalid", f"{directory} is not a directory")
    files: dict[str, bytes] = {}
    total = 0
    for path in sorted(directory.rglob("*")):
        mode = path.lstat().st_mode
        if stat.S_ISDIR(mode):
            continue
        if not stat.S_ISREG(mode):
            raise Refusal("challenge-folder-invalid", f"{path.name} is not a regular file")
        if len(files) >= MAX_FOLDER_FILES:
            raise Refusal("challenge-folder-invalid", "too many files")
        data = read_file(path)
        total += len(data)
        if total > MAX_FOLDER_BYTES:
            raise Refusal("challenge-folder-invalid", f"more than {MAX_FOLDER_BYTES:,} bytes")
        files[path.relative_to(directory).as_posix()] = data
    return files


def commitment_of_files(files: dict[str, bytes]) -> str:
    """The commitment of an in-memory folder snapshot (``relative/path`` -> bytes)."""
    return _lines_digest(files)


def challenge_commitment(directory: Path) -> str:
    """The commitment of a challenge folder (raises :class:`Refusal` for a malformed folder)."""
    return commitment_of_files(_snapshot(directory))


def load_challenge_folder(directory: Path, commitment: str) -> list[Any]:
    """Verify the folder against ``commitment`` and return its challenges in INDEX order."""
    if not isinstance(commitment, str) or not _COMMITMENT_RE.match(commitment):
        raise Refusal("commitment-invalid", "a commitment is 64 lowercase hex digits")
    files = _snapshot(directory)
    actual = commitment_of_files(files)
    if actual != commitment:
        raise Refusal("commitment-mismatch", f"folder commits to {actual}, not {commitment}")
    if "INDEX.json" not in files:
        raise Refusal("index-invalid", "the folder has no INDEX.json")
    try:
        index = read_json(files["INDEX.json"])
    except StrictReadError as error:
        raise Refusal("index-invalid", str(error)) from None
    entries = index.get("entries") if isinstance(index, dict) else None
    if not isinstance(entries, list):
        raise Refusal("index-invalid", "INDEX.json needs an 'entries' array")
    challenges: list[Any] = []
    for position, entry in enumerate(entries):
        name = entry.get("file") if isinstance(entry, dict) else None
        if not isinstance(name, str) or name not in files or name == "INDEX.json":
            raise Refusal("index-invalid", f"entry {position} names no challenge file")
        try:
            challenges.append(read_json(files[name]))
        except StrictReadError as error:
            raise Refusal("challenge-unreadable", f"{name}: {error}") from None
    return challenges


def release_files(
    schema_directory: Path | None = None, corpus_index: Path | None = None
) -> dict[str, Path]:
    """The instrument files the release id binds, by label."""
    schemas = schema_directory if schema_directory is not None else schema_dir()
    return {
        f"schemas/{RECIPE_SCHEMA_NAME}": schemas / RECIPE_SCHEMA_NAME,
        f"schemas/{OBSERVATION_SCHEMA_NAME}": schemas / OBSERVATION_SCHEMA_NAME,
        **{f"scorer/{name}": _PACKAGE_DIR / name for name in SCORER_SOURCES},
        "corpus/INDEX.json": corpus_index if corpus_index is not None else corpus_index_path(),
    }


RELEASE_FILES: Final = tuple(release_files())


def release_id(schema_directory: Path | None = None, corpus_index: Path | None = None) -> str:
    """``srel-`` + the digest of the instrument (raises ``OSError`` if a file is missing)."""
    files = {
        label: read_file(path)
        for label, path in release_files(schema_directory, corpus_index).items()
    }
    return "srel-" + _lines_digest(files)
