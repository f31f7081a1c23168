"""Fixtures for the descriptor tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ._support import OPEN_EVENTS


@pytest.fixture
def opened_files() -> Iterator[list[tuple[str, Any, Any]]]:
    """``(path, mode, flags)`` of every ``open`` audit event while the test body runs."""
    events: list[tuple[str, Any, Any]] = []
    OPEN_EVENTS["events"] = events
    OPEN_EVENTS["active"] = True
    try:
        yield events
    finally:
        OPEN_EVENTS["active"] = False
