"""Worst adversarial cost per parser, in ns/byte and against sha256 of the same bytes.

Every parser of untrusted bytes is fed the adversarial inputs of ``tests/linear/_cases.py``
(unterminated strings, escape runs, deep brackets, many keys, long digit runs, combining
marks ...) at its two growth-test sizes. Rounds are interleaved (each round times every case
once, then sha256 of the same bytes) and each figure is the median over rounds of the thread's
CPU time; the ratio is the median of the per-round ratios parser / sha256, so the floor is
measured in the same run.

Prints one line per case and, per parser, the worst case at the large size.
Run: ``python benchmarks/bench_adversarial.py [--rounds N] [--sizes small,large] [--match TEXT]
[--exclude TEXT]``
(``--sizes`` replaces every case's sizes, e.g. to measure a quadratic parser at sizes it can
finish).

A minimal standalone harness: the shared ``benchmarks/_harness.py`` was not on main when this
was written; move to it when it lands.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.linear._cases import Case, all_cases


def _seconds(action: object, data: bytes) -> float:
    """CPU time of this thread (time slices given to other processes are not counted)."""
    assert callable(action)
    start = time.thread_time()
    action(data)
    return time.thread_time() - start


def measure(case: Case, size: int, rounds: int) -> tuple[float, float, int]:
    """(median ns/byte of the parser, median ratio parser/sha256, input length)."""
    data = case.data(size)
    per_byte: list[float] = []
    ratios: list[float] = []
    case.run(data)  # warm up (imports, caches)
    gc.collect()
    for _ in range(rounds):
        parser = _seconds(case.run, data)
        floor = _seconds(lambda raw: hashlib.sha256(raw).digest(), data)
        per_byte.append(parser * 1e9 / len(data))
        ratios.append(parser / floor)
    return statistics.median(per_byte), statistics.median(ratios), len(data)


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--rounds", type=int, default=7)
    options.add_argument("--sizes", default=None, help="small,large in bytes for every case")
    options.add_argument("--match", default="", help="only cases whose name contains TEXT")
    options.add_argument("--exclude", default=None, help="skip cases whose name contains TEXT")
    args = options.parse_args()
    sizes = None if args.sizes is None else tuple(int(part) for part in args.sizes.split(","))
    worst: dict[str, tuple[float, float, str]] = {}
    print(f"{'parser: attack':<72} {'size':>7} {'ns/byte':>10} {'x sha256':>10}")
    for case in all_cases():
        if args.match not in case.name or (args.exclude and args.exclude in case.name):
            continue
        for size in sizes or (case.small, case.large):
            try:
                ns_per_byte, ratio, length = measure(case, size, args.rounds)
            except Exception as error:  # a parser that lets an exception escape is a finding
                print(f"{case.name:<72} {size:>7}   escaped: {type(error).__name__}")
                break
            print(f"{case.name:<72} {length:>7} {ns_per_byte:>10.1f} {ratio:>10.1f}")
            if size == (sizes or (case.small, case.large))[-1]:
                known = worst.get(case.parser)
                if known is None or ns_per_byte > known[0]:
                    worst[case.parser] = (ns_per_byte, ratio, case.attack)
    print()
    print(f"worst case per parser at the large size ({args.rounds} interleaved rounds, median)")
    for parser, (ns_per_byte, ratio, attack) in worst.items():
        print(f"{parser:<36} {ns_per_byte:>10.1f} ns/byte {ratio:>9.1f}x sha256  ({attack})")


if __name__ == "__main__":
    main()
