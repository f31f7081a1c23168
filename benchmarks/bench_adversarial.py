"""Worst adversarial cost of every parser of untrusted bytes, in ns/byte and against sha256.

Every parser is fed the adversarial inputs of ``tests/linear/_cases.py`` (unterminated strings,
escape runs, deep brackets, many keys, long digit runs, combining marks, tiny elements ...) at
the case's large size (256 KiB, or the parser's own cap). Each case is one ratio figure: the
parser on the input against the baseline ``sha256`` of the same bytes, in interleaved rounds
(benchmarks/_harness.py). It is a baseline, not a floor: a parser that refuses at the first
bytes is faster than hashing them all. Then, per parser, the worst ns/byte over its cases.
Growth (linearity) is asserted by ``tests/linear``, never here.

Run: ``python benchmarks/bench_adversarial.py [--quick] [--clock cpu] [--json PATH]
[--match TEXT] [--exclude TEXT] [--size N]``; ``--size`` replaces every case's size (e.g. to
time a quadratic parser at a size it can finish).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

from _harness import Report, main

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.linear._cases import all_cases


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--match", default="", help="only cases whose name contains TEXT")
    parser.add_argument("--exclude", default=None, help="skip cases whose name contains TEXT")
    parser.add_argument("--size", type=int, default=None, help="input size for every case")


def run(report: Report, args: argparse.Namespace) -> None:
    worst: dict[str, tuple[float, str]] = {}
    for case in all_cases():
        if args.match not in case.name or (args.exclude and args.exclude in case.name):
            continue
        data = case.data(args.size or case.large)
        result = report.compare(
            f"{case.name} ({len(data) // 1024} KiB)",
            lambda case=case, data=data: case.run(data),  # type: ignore[misc]
            lambda data=data: hashlib.sha256(data).digest(),  # type: ignore[misc]
            floor_name="sha256 of the same bytes",
            true_floor=False,
            rounds=9,
            max_seconds=2.0,
        )
        assert result.op_seconds is not None
        per_byte = result.op_seconds * 1e9 / len(data)
        if per_byte > worst.get(case.parser, (-1.0, ""))[0]:
            worst[case.parser] = (per_byte, case.attack)
    for parser, (per_byte, attack) in worst.items():
        report.value(f"{parser}: worst ns/byte ({attack})", per_byte, "ns/B")


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__, configure=configure))
