"""Every parser of untrusted bytes is linear in its input, by measurement.

For each adversarial case (``_cases.py``: unterminated strings, escape runs, deep brackets,
many keys, long digit runs, combining marks ...) the parser is timed on the case's input at
its small size and at 16 times that size. A linear parser takes about 16 times as long; a
quadratic one 256 times. The test fails above :data:`MAX_RATIO` (24, so 1.5 times the linear
slope).

This is the one kind of timing assertion the project allows: the same code on two sizes of
the same input, in the same process, with repeats. What keeps it honest on a shared machine
(none of it tuned to one):

* each timed chunk is one large call, or 16 small calls: chunks of equal duration for a
  linear parser, so preemption by other processes is as likely for both sizes; chunks
  alternate for at least three rounds and until the case has been timed for a fixed budget,
  and each size's time is its minimum over the rounds;
* the 16 small inputs are distinct (other key names where a parser caches by content:
  orjson reuses the key strings it has seen), so a small run is not flattered by a cache the
  large run overflows;
* the cyclic garbage collector is paused while timing (its full collections cost in
  proportion to the whole heap, not to the input being parsed);
* time is the thread's CPU time, so time slices given to other processes are not counted;
* a ratio above the bound is measured again, up to twice: noise does not repeat, a
  super-linear parser does (256 times is far above 24 whatever the load).

A refusal the parser documents is swallowed by the case; anything else escapes and fails.
"""

from __future__ import annotations

import gc
import time

import pytest

from . import _cases
from ._cases import Case, all_cases

MAX_RATIO = 24.0
MIN_ROUNDS = 3
MAX_ROUNDS = 40
CASE_SECONDS = 0.02  # rounds continue until a case has been timed this long (CPU time)
ATTEMPTS = 3
MIN_CHUNK_SECONDS = 0.002


def _time(case: Case, inputs: list[bytes]) -> float:
    run = case.run
    start = time.thread_time()
    for data in inputs:
        run(data)
    return time.thread_time() - start


def growth_ratio(case: Case) -> float:
    """Time per byte at the large size over time per byte at the small size, times 16."""
    step = case.large // case.small
    large = case.data(case.large)
    case.run(large)  # warm up: imports, caches, the allocator's arenas
    repeat = max(1, min(50, int(MIN_CHUNK_SECONDS / max(_time(case, [large]), 1e-6))))
    smalls = case.variants(case.small, step) * repeat
    larges = [large] * repeat
    best_small = best_large = float("inf")
    spent = 0.0
    rounds = 0
    gc.disable()
    try:
        while rounds < MIN_ROUNDS or (spent < CASE_SECONDS and rounds < MAX_ROUNDS):
            small_seconds, large_seconds = _time(case, smalls), _time(case, larges)
            best_small = min(best_small, small_seconds)
            best_large = min(best_large, large_seconds)
            spent += small_seconds + large_seconds
            rounds += 1
    finally:
        gc.enable()
    _cases.forget_inputs()  # keep the heap of later cases free of this one's inputs
    # Normalised to bytes: builders round to whole attack units.
    small_bytes = sum(map(len, smalls))
    large_bytes = sum(map(len, larges))
    return (best_large / large_bytes) / (best_small / small_bytes) * step


GROWTH_CASES = [case for case in all_cases() if case.growth]


@pytest.mark.parametrize("case", GROWTH_CASES, ids=lambda case: case.name)
def test_adversarial_input_costs_linear_time(case: Case) -> None:
    ratios = []
    for _ in range(ATTEMPTS):
        ratios.append(growth_ratio(case))
        if ratios[-1] <= MAX_RATIO:
            return
    pytest.fail(
        f"{case.name}: {case.large // case.small}x the bytes took {min(ratios):.1f}x the time"
    )


def test_growth_measure_catches_a_quadratic_parser() -> None:
    """The measure itself can fail: a deliberately quadratic parser is caught."""

    def quadratic(data: bytes) -> object:
        return sum(data.count(data[index : index + 1]) for index in range(0, len(data), 16))

    case = Case("test", "quadratic loop", lambda size: b"a" * size, quadratic, 1024, 16 * 1024)
    assert growth_ratio(case) > MAX_RATIO
