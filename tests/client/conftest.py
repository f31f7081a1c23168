"""The client tests: every ``async def`` test here is marked ``anyio`` and runs twice, under
asyncio and under trio (anyio's pytest plugin), against real daemons.

pytest-trio's ``trio_mode = true`` (pyproject.toml) marks every coroutine test of the suite
``trio`` at collection, and its ``pytest_runtest_call`` then swaps the test for a ``trio.run``
wrapper: an anyio test would run under trio whatever its backend. So, after pytest-trio has
marked the items (``trylast``), the ``trio`` mark is taken off the items that carry ``anyio``,
and only those: anyio's plugin runs them on the backend of their ``anyio_backend``
parameter, every other test of the suite stays pytest-trio's. The fixtures here are plain
(synchronous) ones, so pytest-trio, which in trio mode turns every async fixture into a trio
fixture, never takes part in an anyio test's setup.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))  # the daemon testkits


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("anyio") is not None:
            item.own_markers[:] = [mark for mark in item.own_markers if mark.name != "trio"]


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


@pytest.fixture(scope="module")
def module_dir() -> Iterator[Path]:
    """A short directory for a module's daemon (Unix socket paths are limited to ~107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="evc", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
