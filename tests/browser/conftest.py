"""Browser tests: one headless Chromium for the whole folder (``make browser`` installs it).

Puts ``driver/headless`` (the DevTools-pipe driver) on the path. When no Chromium can be found,
every test here is skipped with the reason and the command that installs it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "driver"))

from headless import Chromium, find_chromium


@pytest.fixture(scope="session")
def browser() -> Iterator[Chromium]:
    if find_chromium() is None:
        pytest.skip(
            "Chromium is not installed and could not be: run `make browser` as root "
            "(apt-get install chromium), or set CHROMIUM=/path/to/chromium"
        )
    with Chromium() as chromium:
        yield chromium
