"""Every parser of untrusted bytes is linear in its input, by measurement.

For each adversarial case (``_cases.py``: unterminated strings, escape runs, deep brackets,
many keys, long digit runs, combining marks ...) the parser is timed on the case's input at
its small size and at 16 times that size. A linear parser takes about 16 times as long; a
quadratic one 256 times. The test fails above :data:`MAX_RATIO` (24, so 1.5 times the linear
slope), and when a parser lets anything but its documented refusal escape.

This is the one kind of timing assertion the project allows: the same code on two sizes of
the same input, in the same process, with repeats. The measurement runs in a process of its
own; its rules (equal chunks, CPU time, distinct small inputs, GC paused, minimum over rounds,
two remeasurements before failing) are in ``_growth.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ._cases import Case, all_cases
from ._growth import MAX_RATIO, growth_ratio

REPO = Path(__file__).resolve().parents[2]
GROWTH_CASES = [case for case in all_cases() if case.growth]


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, "-m", "tests.linear._growth"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    result: dict[str, Any] = json.loads(completed.stdout)
    return result


@pytest.mark.parametrize("case", GROWTH_CASES, ids=lambda case: case.name)
def test_adversarial_input_costs_linear_time(case: Case, measured: dict[str, Any]) -> None:
    outcome = measured[case.name]
    assert "escaped" not in outcome, f"{case.name}: {outcome.get('escaped')}"
    ratios = outcome["ratios"]
    assert min(ratios) <= MAX_RATIO, (
        f"{case.name}: {case.large // case.small}x the bytes took "
        f"{', '.join(f'{ratio:.1f}' for ratio in ratios)}x the time"
    )


def test_growth_measure_catches_a_quadratic_parser() -> None:
    """The measure itself can fail: a deliberately quadratic parser is caught."""

    def quadratic(data: bytes) -> object:
        return sum(data.count(data[index : index + 1]) for index in range(0, len(data), 16))

    case = Case("test", "quadratic loop", lambda size: b"a" * size, quadratic, 1024, 16 * 1024)
    assert growth_ratio(case) > MAX_RATIO
