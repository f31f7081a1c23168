"""Both cores: ``evidenced serve --workers 2`` against ``--workers 1`` (docs/adr/0015).

Two real daemons run side by side on Unix sockets, identical but for ``workers`` (1 and 2),
each with a durable (fsync) audit log of its own, hosting the minimal formation pair. This
process drives them with the real async client at concurrency 64, in interleaved rounds
(benchmarks/_harness.py ``interleave``: every round one batch on each daemon, the order
rotating), so load that drifts during the run hits both alike.

Prints per daemon: decisions/s, p99 latency, and the CPU per decision split into the serving
processes (the one process of ``--workers 1``; the two workers of ``--workers 2``, with their
evaluation workers), the sequencer (the parent of ``--workers 2``, which owns the audit log;
inside the one process for ``--workers 1``), and this load generator; then the median of the
per-round throughput ratios ``workers 2 / workers 1`` with its spread, and the load average.
Goals: ratio >= 1.5, >= 3,000 decisions/s and p99 < 50 ms for workers 2.
The load generator shares the machine's cores with the daemons: on a 2-core machine its CPU
is part of what the daemons cannot use. Never asserts on time.

Usage: ``python benchmarks/bench_workers.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio
from _harness import Report, at_least, below, interleave, load_average, main
from bench_daemon import atom_pair, drive, percentile

from mechanism.formation import FormationPathCertificateMechanism, formation_binding
from session import BoundProposition

ROOT = Path(__file__).resolve().parents[1]
QUICK = "--quick" in sys.argv
BATCH = 600 if QUICK else 2000
ROUNDS = 3 if QUICK else 7
CONCURRENCY = 64


def start(directory: Path, workers: int) -> tuple[subprocess.Popen[str], str]:
    sock = directory / f"w{workers}.sock"
    config = directory / f"w{workers}.toml"
    config.write_text(
        f'[server]\nlisten = ""\nsocket = "{sock}"\nmax_in_flight = 512\nworkers = {workers}\n'
        f'[audit]\npath = "{directory / f"w{workers}.jsonl"}"\ndurability = "fsync"\n'
        '[sessions.formation]\nmechanisms = ["formation"]\n'
        "max_evidence_items = 2\nmax_evidence_bytes = 524288\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    assert process.stdout is not None
    ready = json.loads(process.stdout.readline())
    return process, ready["unix"]


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    pending = [pid]
    while pending:
        current = pending.pop()
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{current}/task"):
                children = Path(f"/proc/{current}/task/{task}/children").read_text().split()
                for child in children:
                    found.append(int(child))
                    pending.append(int(child))
    return found


def split(pid: int) -> tuple[float, float]:
    """(serving CPU s, sequencer CPU s): the parent is the sequencer when it has workers."""
    parent = _cpu(pid)
    others = 0.0
    for child in _descendants(pid):
        with contextlib.suppress(OSError):
            others += _cpu(child)
    return parent, others


def run(report: Report, args: argparse.Namespace) -> None:
    subject, certificate = atom_pair()
    items = [subject, certificate]
    digest = FormationPathCertificateMechanism().mechanism_digest
    binding: BoundProposition = formation_binding(subject, certificate, mechanism_digest=digest)
    figures: dict[int, dict[str, list[float]]] = {
        w: {k: [] for k in ("rate", "p99", "serving", "sequencer", "client")} for w in (1, 2)
    }
    with tempfile.TemporaryDirectory(prefix="evbench", dir="/tmp") as name:
        directory = Path(name)
        daemons = {w: start(directory, w) for w in (1, 2)}
        try:
            for _, sock in daemons.values():  # warm-up
                trio.run(drive, sock, binding, items, CONCURRENCY, BATCH // 4)

            def sampler(workers: int) -> float:
                process, sock = daemons[workers]
                parent0, others0 = split(process.pid)
                client0 = time.process_time()
                rate, latencies = trio.run(drive, sock, binding, items, CONCURRENCY, BATCH)
                client = time.process_time() - client0
                parent1, others1 = split(process.pid)
                if workers == 1:  # one process: serving and sequencing together
                    serving, sequencer = parent1 - parent0 + others1 - others0, 0.0
                else:
                    serving, sequencer = others1 - others0, parent1 - parent0
                row = figures[workers]
                row["rate"].append(rate)
                row["p99"].append(percentile(latencies, 0.99) * 1000)
                row["serving"].append(serving / BATCH * 1e6)
                row["sequencer"].append(sequencer / BATCH * 1e6)
                row["client"].append(client / BATCH * 1e6)
                return 1.0 / rate

            load_start = load_average()
            interleave(
                [lambda: sampler(1), lambda: sampler(2)],
                rounds=ROUNDS,
                max_seconds=600.0,
                gc_off=False,
            )
            load_end = load_average()
        finally:
            for process, _ in daemons.values():
                process.send_signal(signal.SIGTERM)
                process.wait(60)
    print(f"c={CONCURRENCY}, fsync, minimal formation pair, {BATCH} decisions per sample, ")
    print(f"{len(figures[1]['rate'])} interleaved rounds; load average {load_start:.2f} -> "
          f"{load_end:.2f} on {os.cpu_count()} CPUs")  # fmt: skip
    print(
        f"{'workers':<9}{'decisions/s':>13}{'p99 ms':>9}{'serving us':>12}"
        f"{'sequencer us':>14}{'client us':>11}   (CPU per decision, medians)"
    )
    for workers, row in figures.items():
        median = {key: statistics.median(values) for key, values in row.items()}
        print(
            f"{workers:<9}{median['rate']:>13.0f}{median['p99']:>9.2f}{median['serving']:>12.0f}"
            f"{median['sequencer']:>14.0f}{median['client']:>11.0f}"
        )
    ratios = [two / one for one, two in zip(figures[1]["rate"], figures[2]["rate"], strict=True)]
    for workers, row in figures.items():
        report.value(
            f"workers {workers} minimal fsync c=64 decisions/s",
            statistics.median(row["rate"]),
            "/s",
            goal=at_least(3000) if workers == 2 else None,
            spread=row["rate"],
        )
        report.value(
            f"workers {workers} minimal fsync c=64 p99",
            statistics.median(row["p99"]),
            "ms",
            goal=below(50) if workers == 2 else None,
            spread=row["p99"],
        )
        for part in ("serving", "sequencer", "client"):
            report.value(
                f"workers {workers} CPU per decision: {part}",
                statistics.median(row[part]) * 1e-6,
                "s",
                spread=[value * 1e-6 for value in row[part]],
            )
    report.value(
        "workers 2 / workers 1 decisions/s (per-round ratio)",
        statistics.median(ratios),
        "x",
        goal=at_least(1.5),
        spread=ratios,
    )


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
