"""The growth measurement of ``test_linear_growth.py``, run in a process of its own.

``python -m tests.linear._growth`` (from the repository root) measures every growth case of
``_cases.py`` and prints one JSON object: case name -> the ratios of its attempts, or the
exception a parser let escape (``{"escaped": "TypeError: ..."}``). A fresh process keeps the
measurement off the heap of the rest of the test suite (thousands of tests leave it large
and fragmented, which slows large allocations more than small ones).

Rules of one measurement (:func:`growth_ratio`):

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
* a ratio above :data:`MAX_RATIO` is measured again, up to twice (:data:`ATTEMPTS`): noise
  does not repeat, a super-linear parser does (256 times is far above 24 whatever the load);
* the process's allocator keeps large blocks in its heap, as the daemon's evaluation workers
  do (``daemon.server._resources.keep_heap``): otherwise each large call maps, faults in and unmaps
  its buffers (377 page faults per 256 KiB header refusal, none at 16 KiB), a kernel cost
  that grows with the machine's load, not with the parser, and pushed a linear parser's
  ratio from ~14 alone to 24-25 in a loaded full suite.
"""

from __future__ import annotations

import gc
import json
import time

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


def measure(case: Case) -> dict[str, object]:
    """``{"ratios": [...]}`` (attempts until one is within the bound) or ``{"escaped": ...}``."""
    ratios: list[float] = []
    try:
        for _ in range(ATTEMPTS):
            ratios.append(growth_ratio(case))
            if ratios[-1] <= MAX_RATIO:
                break
    except Exception as error:  # a parser let something other than its refusal escape
        return {"escaped": f"{type(error).__name__}: {error}"[:500]}
    return {"ratios": ratios}


def main() -> None:
    from daemon.server._resources import keep_heap

    keep_heap()
    print(json.dumps({case.name: measure(case) for case in all_cases() if case.growth}))


if __name__ == "__main__":
    main()
