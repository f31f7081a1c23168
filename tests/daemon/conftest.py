"""Daemon test configuration: puts ``daemon_testkit`` on the path; short temp dirs."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short directory (Unix socket paths are limited to ~107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="evd", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def module_short_dir() -> Iterator[Path]:
    """:func:`short_dir` for a module's shared fixtures (one daemon for the module's tests)."""
    path = Path(tempfile.mkdtemp(prefix="evm", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
