"""Decode the reference's cross-language formation corpus (vendored under ``tests/data/``)."""

from __future__ import annotations

import base64
import json
from functools import cache
from typing import Any, Final

import testdata

CORPUS_PATH: Final = testdata.data("formation/formation-interoperability-corpus.json")
RECEIPT_CORPUS_PATH: Final = testdata.data("formation/formation-receipt-corpus.json")


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
