"""Straight-line code: the product's branching stays bounded.

radon measures the cyclomatic complexity of every function, method and class of the product's
packages, as ``radon cc canon catalog cli daemon holdout mechanism session`` does:

1. No block is above :data:`CEILING` but the ones :data:`EXCEPTIONS` names, each no more
   complex than the figure it was named with (an exception can shrink, never grow).
2. An exception that is no longer above the ceiling is taken off the list (the list only
   shrinks).
3. At most :data:`MAX_ABOVE_BOUND` blocks are above :data:`BOUND`.

A function that needs more branches is split along its stages (docs/architecture.md: small
modules, contract-stating docstrings), not added to the list.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("catalog", "daemon", "mechanism", "session")
CEILING = 25
BOUND = 15
MAX_ABOVE_BOUND = 33
#: (module, block) -> the complexity it may not exceed.
EXCEPTIONS: dict[tuple[str, str], int] = {
    ("daemon/server/_frontend.py", "FrontEnd._converse"): 35,
    ("daemon/server/_routes.py", "check"): 34,
    ("daemon/wire/_protocol.py", "_FrameReader.next_unit"): 29,
}


def _measure(source: str, module: str) -> dict[tuple[str, str], int]:
    """Every block of ``source`` by (module, name), with its complexity."""
    return {(module, block.fullname): block.complexity for block in cc_visit(source)}


@pytest.fixture(scope="module")
def measured() -> dict[tuple[str, str], int]:
    found: dict[tuple[str, str], int] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = path.relative_to(ROOT).as_posix()
            found.update(_measure(path.read_text(encoding="utf-8"), module))
    assert len(found) > 1000, "the product's packages were not found"
    return found


def _above(measured: dict[tuple[str, str], int], limit: int) -> dict[tuple[str, str], int]:
    return {key: value for key, value in measured.items() if value > limit}


def test_no_new_function_branches_past_the_ceiling(measured: dict[tuple[str, str], int]) -> None:
    over = {
        key: value
        for key, value in _above(measured, CEILING).items()
        if value > EXCEPTIONS.get(key, CEILING)
    }
    assert over == {}, f"split these along their stages (rule 1): {over}"


def test_a_straightened_exception_leaves_the_list(measured: dict[tuple[str, str], int]) -> None:
    stale = [key for key in EXCEPTIONS if measured.get(key, 0) <= CEILING]
    assert stale == [], f"take these off EXCEPTIONS (rule 2): {stale}"


def test_branchy_functions_stay_few(measured: dict[tuple[str, str], int]) -> None:
    above = _above(measured, BOUND)
    assert len(above) <= MAX_ABOVE_BOUND, (
        f"{len(above)} blocks above {BOUND} (at most {MAX_ABOVE_BOUND}, rule 3): "
        f"{sorted(above.items(), key=lambda item: -item[1])}"
    )


def test_a_function_of_26_branches_is_caught() -> None:
    """The measurement the gate relies on sees a function past the ceiling (not a check that
    cannot fail): 25 ``if``s and the function itself."""
    body = "".join(f"    if x == {n}:\n        return {n}\n" for n in range(CEILING))
    measured = _measure(f"def branchy(x):\n{body}    return -1\n", "m.py")
    assert measured == {("m.py", "branchy"): CEILING + 1}
    assert _above(measured, CEILING) == {("m.py", "branchy"): CEILING + 1}
