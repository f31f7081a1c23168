"""Transparency log benchmark: proof generation from tiles at 10^6 leaves, and the cost of
hashing audit lines into the tree (``docs/spec/transparency.md §6``).

Figures:

1. Inclusion proof generation on a generated log of ``--leaves`` (default 1,000,000) leaves,
   served from its tile files exactly as the daemon serves them (tiles read from disk through
   the bounded tile cache): for one index (tiles cached) and for a new random index every
   call (mostly tile-cache misses, so file reads are included). Goal: <= 1 ms.
2. Consistency proof generation between random sizes of the same log (same goal).
3. Appending a line to the tree (leaf hash, edge update, amortised full-tile writes) as a
   ratio to its true floor: ``sha256`` of the same line bytes, in interleaved rounds.
The log is generated with ``sync=False`` (durability is not what is measured) into a temporary
directory and removed. Nothing asserted.
Run: ``python benchmarks/bench_tlog.py [--quick] [--leaves N] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from _harness import Report, at_most, main

from daemon.tlog._log import TransparencyLog
from daemon.tlog._note import SignerKey

LINE = b'{"event":"decision","outcome":"PASS","seq":%d,"session":"formation"}'


def _lines(first_seq: int) -> Iterator[bytes]:
    seq = first_seq
    while True:
        yield LINE % seq
        seq += 1


def run(report: Report, args: argparse.Namespace) -> None:
    leaves = args.leaves or (200_000 if args.quick else 1_000_000)
    signer = SignerKey.generate("bench.example/evidenced/audit")
    with tempfile.TemporaryDirectory(prefix="evd-bench-tlog-") as scratch:
        begin = time.perf_counter()
        log = TransparencyLog.open(
            Path(scratch) / "tlog", signer, log_size=leaves, lines=_lines, sync=False
        )
        took = time.perf_counter() - begin
        print(f"log: {leaves} leaves built from lines with tiles in {took:.1f} s")
        size = leaves
        assert log.checkpoint is not None and log.checkpoint.size == size
        chooser = random.Random(15)
        fixed = size // 3
        report.time(
            f"inclusion proof at {size} leaves (one index, tiles cached)",
            lambda: log.inclusion_proof(fixed, size),
            goal=at_most(0.001),
        )
        report.time(
            f"inclusion proof at {size} leaves (random index)",
            lambda: log.inclusion_proof(chooser.randrange(size), size),
            goal=at_most(0.001),
        )

        def consistency() -> object:
            old = chooser.randrange(1, size)
            return log.consistency_proof(old, size)

        report.time(
            f"consistency proof at {size} leaves (random old size)",
            consistency,
            goal=at_most(0.001),
        )
        line = LINE % (size + 1)
        batch = [line] * 64
        report.compare(
            "tree append per 64-line group commit (hash + edge + tiles)",
            lambda: log.append_lines(batch),
            lambda: [hashlib.sha256(item).digest() for item in batch],
            floor_name="sha256 of the 64 lines",
            rounds=9,
            max_seconds=10.0,
        )


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--leaves", type=int, default=None, help="leaves in the log (1e6)")


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__, configure=_options))
