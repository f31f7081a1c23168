"""Batches against single submits, over HTTP and over the binary protocol (EVD1): decisions
per second and daemon CPU per decision.

Runs the real daemon (``evidenced serve --config``, HTTP and EVD1 on loopback, fsync-ed audit
log, session ``bytes`` with the built-in ``bytes-sha256`` mechanism: the peer comparison's job,
a 64-byte payload and its honest binding) and drives it with the real client over one
keep-alive connection per driver, for each transport:

* single: 64 pairs as 64 submits (``POST .../decisions``; EVD1 ``submit`` frames), at ``c``
  concurrent connections;
* batch: the same 64 pairs as one batch per connection (``POST .../decisions:batch``; one EVD1
  ``submit_batch`` frame).

Prints, in interleaved rounds (benchmarks/_harness.py), per transport, the time per decision of
the singles over the batch's (the batch's decisions/s over the singles'; goal >= 3x at c=1 over
HTTP) and the daemon CPU per decision, single over batch. Never asserts on time.

Usage: ``python benchmarks/bench_batch.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio
from _harness import Report, at_least, main
from bench_daemon import cpu_seconds
from bench_http import start, stop

from daemon import open_client
from session import NoOptions
from session._bytes_provider import PROVIDER

QUICK = "--quick" in sys.argv
PAIRS = 64
SESSION = (
    '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\n'
    "max_evidence_items = 1\nmax_evidence_bytes = 4096\n"
)


def pairs() -> list[tuple[dict[str, Any], list[bytes]]]:
    payloads = [bytes([n]) * 64 for n in range(PAIRS)]
    return [(PROVIDER.honest_binding([p], NoOptions()).to_dict(), [p]) for p in payloads]


async def drive(
    url: str, work: list[tuple[dict[str, Any], list[bytes]]], batch: bool, c: int
) -> None:
    """Every connection decides all of ``work``: one batch, or one submit per pair."""

    async def connection() -> None:
        async with open_client(url, request_timeout=120) as client:
            if batch:
                results = await client.submit_batch("bytes", work)
                bad = [r for r in results if getattr(r, "outcome", None) != "PASS"]
                assert not bad, bad[:2]
                return
            for binding, items in work:
                await client.submit("bytes", binding, items)

    async with trio.open_nursery() as nursery:
        for _ in range(c):
            nursery.start_soon(connection)


def run(report: Report, args: argparse.Namespace) -> None:
    work = pairs()
    rounds = 5 if QUICK else 11
    with tempfile.TemporaryDirectory(prefix="evdbatch") as folder:
        process, urls = start(Path(folder), "batch", SESSION)
        try:
            for transport in ("http", "binary"):
                url = urls[transport]
                label = "" if transport == "http" else " (EVD1)"
                for batch in (False, True):  # warm-up
                    trio.run(drive, url, work, batch, 1)
                for c in (1, 4):  # 4 x 64 pairs in flight: within the per-peer cap (448 here)
                    measure(report, process.pid, url, work, c, label, rounds)
        finally:
            stop(process)


def measure(
    report: Report,
    pid: int,
    url: str,
    work: list[tuple[dict[str, Any], list[bytes]]],
    c: int,
    label: str,
    rounds: int,
) -> None:
    """The two figures of one transport at ``c`` connections."""

    def timed(batch: bool) -> Callable[[], object]:
        return lambda: trio.run(drive, url, work, batch, c)

    def cpu(batch: bool) -> Callable[[], float]:
        def sample() -> float:
            before = cpu_seconds(pid)
            trio.run(drive, url, work, batch, c)
            return max(cpu_seconds(pid) - before, 1e-9) / (PAIRS * c)

        return sample

    report.compare(
        f"batch of {PAIRS} decisions/s / single-pair decisions/s{label}, fsync, c={c}",
        timed(False),  # time per decision, single over batch: the throughput ratio
        timed(True),
        floor_name=f"time per decision in batches{label}",
        goal=at_least(3.0) if c == 1 and not label else None,
        true_floor=False,
        rounds=rounds,
        max_seconds=60.0,
    )
    report.compare(
        f"daemon CPU per decision, single / batch of {PAIRS}{label}, fsync, c={c}",
        cpu(False),
        cpu(True),
        floor_name=f"daemon CPU per decision in batches{label}",
        true_floor=False,
        sampled=True,
        rounds=rounds,
        max_seconds=60.0,
    )


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
