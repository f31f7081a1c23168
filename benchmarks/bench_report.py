"""Audit report benchmark: streaming aggregation cost and bounded memory.

Figures:

1. ``aggregate`` of a 20,000-line synthetic log as a ratio to its true floor measured in the
   same interleaved rounds (benchmarks/_harness.py): reading the same file in the same 1 MiB
   chunks, splitting lines and ``orjson.loads`` of every line — work the report must do too.
   The chain verification pass (``verify_log``) is excluded from both sides.
2. Peak RSS and wall time of ``evidenced audit report --format json`` in a fresh process on
   logs of ``--lines`` (default 1,000,000, ~0.95 GB) and a tenth of that: bounded memory
   means the two peaks are close (their ratio is printed; the goal is <= 1.2x) while the line
   counts differ tenfold. Both logs are generated (``daemon.audit._synthetic``) into a temporary
   directory and removed. ``--quick`` uses 100,000 lines.
Nothing asserted. Run: ``python benchmarks/bench_report.py [--quick] [--lines N] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
from _harness import Report, at_most, main

from daemon.audit._synthetic import write_synthetic_log
from daemon.report import _report
from daemon.report._report import Aggregator

REPO = Path(__file__).resolve().parents[1]


def _floor(path: Path) -> None:
    for raw in _report._lines(path, lambda _: None):
        if raw is not None:
            orjson.loads(raw)


def _aggregate_only(path: Path) -> None:
    aggregator = Aggregator()
    for raw in _report._lines(path, lambda _: None):
        if raw is not None:
            aggregator.add(orjson.loads(raw))
    aggregator.result()


def _report_process(path: Path) -> tuple[float, float]:
    """(peak RSS in MiB, seconds) of the real command in a fresh process."""
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "audit", "report", str(path), "--format", "json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )
    _, status, usage = os.wait4(child.pid, 0)  # ru_maxrss: KiB on Linux
    elapsed = time.perf_counter() - start
    if status != 0:
        raise RuntimeError(f"audit report exited with status {status}")
    return usage.ru_maxrss / 1024, elapsed


def run(report: Report, args: argparse.Namespace) -> None:
    lines = 100_000 if args.quick and args.lines is None else (args.lines or 1_000_000)
    with tempfile.TemporaryDirectory(prefix="evd-bench-report-") as scratch:
        small = Path(scratch) / "small.jsonl"
        size = write_synthetic_log(small, 20_000)
        print(f"ratio log: 20000 lines, {size / 1e6:.1f} MB")
        report.compare(
            "audit report: aggregate (no chain pass)",
            lambda: _aggregate_only(small),
            lambda: _floor(small),
            floor_name="read + orjson.loads",
            goal=at_most(3.0),
            rounds=9,
            max_seconds=30.0,
        )
        small.unlink()
        peaks = []
        for count in (lines // 10, lines):
            log = Path(scratch) / f"audit-{count}.jsonl"
            begin = time.perf_counter()
            size = write_synthetic_log(log, count)
            took = time.perf_counter() - begin
            print(f"log: {count} lines, {size / 1e9:.2f} GB (generated in {took:.0f} s)")
            rss, seconds = _report_process(log)
            peaks.append(rss)
            report.value(f"audit report {count} lines: peak RSS", rss, "MiB")
            report.value(f"audit report {count} lines: wall time", seconds, "s")
            report.value(
                f"audit report {count} lines: throughput", count / seconds / 1000, "k lines/s"
            )
            log.unlink()
        report.value(
            f"audit report: peak RSS {lines} / {lines // 10} lines",
            peaks[1] / peaks[0],
            "x",
            goal=at_most(1.2),
        )


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lines", type=int, default=None, help="lines in the large log (1e6)")


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__, configure=_options))
