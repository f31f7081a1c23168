"""Locate and decode the reference's cross-language corpus in ``../shared`` (never copied)."""

from __future__ import annotations

import base64
import json
from functools import cache
from pathlib import Path
from typing import Any


def repo_root() -> Path:
    """The repository root: the nearest ancestor of this file holding ``pyproject.toml``."""
    for parent in Path(__file__).resolve().parents:
        if (parent / "pyproject.toml").is_file():
            return parent
    raise RuntimeError("repository root not found above the test-suite")


SHARED_FORMATION = repo_root().parent / "shared" / "data" / "formation"
CORPUS_PATH = SHARED_FORMATION / "formation-interoperability-corpus.json"


def b64url(text: str) -> bytes:
    """Decode unpadded base64url, refusing anything but the URL-safe alphabet."""
    return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)


@cache
def corpus() -> dict[str, Any]:
    value: dict[str, Any] = json.loads(CORPUS_PATH.read_bytes())
    return value


def pure_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = corpus()["pure_cases"]
    return cases
