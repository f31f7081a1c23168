"""The test-suite's one locator for data files: everything a test reads lives in this repository.

Imported as ``testdata`` (pytest's ``pythonpath`` and mypy's ``mypy_path`` name this folder).

Rules:

* :data:`REPO` is the checkout: the nearest ancestor of this file holding ``pyproject.toml``.
  Every path this module returns is inside it; nothing is read from beside the checkout, from a
  home directory or from an absolute machine path (``tests/test_data_manifest.py`` enforces it
  for every tracked file).
* Three roots, one job each: :func:`data` for test-only corpora vendored under ``tests/data/``,
  :func:`fixture` for the user-visible example data under ``fixtures/`` (shipped in the wheel as
  the package ``evidenced_fixtures``), :func:`repo` for any other tracked file (package data,
  sources).
* A lookup checks that the file exists and raises :class:`MissingTestData` naming the
  repository-relative path otherwise, so missing data is a test failure (or a collection error)
  that says which file, never a skip.
* :func:`reference_sha256` is the SHA-256 the manifest (``tests/data/MANIFEST.json``) records
  for a vendored file: the digest of the reference bytes it was copied from.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Final


def _find_repo() -> Path:
    for parent in Path(__file__).resolve().parents:
        if (parent / "pyproject.toml").is_file():
            return parent
    raise RuntimeError("repository root (a folder with pyproject.toml) not found above tests/")


REPO: Final = _find_repo()
DATA: Final = REPO / "tests" / "data"
FIXTURES: Final = REPO / "fixtures"
MANIFEST: Final = DATA / "MANIFEST.json"


class MissingTestData(Exception):
    """A data file the tests need is not in the checkout (the message names it)."""

    def __init__(self, path: Path) -> None:
        self.relative = path.relative_to(REPO).as_posix()
        super().__init__(
            f"test data missing: {self.relative} is not in the checkout "
            "(vendored data is tracked in git; see tests/data/MANIFEST.json)"
        )


def _existing(path: Path, *, directory: bool = False) -> Path:
    if not (path.is_dir() if directory else path.is_file()):
        raise MissingTestData(path)
    return path


def repo(relative: str, *, directory: bool = False) -> Path:
    """``REPO/relative`` (a tracked file, or folder with ``directory=True``); must exist."""
    return _existing(REPO / relative, directory=directory)


def data(relative: str, *, directory: bool = False) -> Path:
    """``tests/data/relative``: a vendored, test-only corpus file (or folder); must exist."""
    return _existing(DATA / relative, directory=directory)


def fixture(relative: str, *, directory: bool = False) -> Path:
    """``fixtures/relative``: user-visible example data (or a folder of it); must exist."""
    return _existing(FIXTURES / relative, directory=directory)


def read_data(relative: str) -> bytes:
    return data(relative).read_bytes()


def read_fixture(relative: str) -> bytes:
    return fixture(relative).read_bytes()


@cache
def manifest_entries() -> tuple[dict[str, str], ...]:
    """The manifest's ``files``: ``{"path", "sha256", "reference"}`` each, in file order."""
    document = json.loads(_existing(MANIFEST).read_bytes())
    return tuple(document["files"])


def reference_sha256(relative: str) -> str:
    """The reference digest the manifest records for the vendored file ``relative``."""
    for entry in manifest_entries():
        if entry["path"] == relative:
            return entry["sha256"]
    raise KeyError(f"{relative} is not a vendored file listed in tests/data/MANIFEST.json")
