"""A SIGHUP storm under load: 100 SIGHUPs at 20 a second to ``evidenced serve``.

One real daemon on loopback (``worker_processes = 2``, a fsync'd audit log, one session of
``bytes-sha256``) serves decisions on four connections all through the storm while this
process sends ``kill -HUP`` every 50 ms, counting the daemon's process tree (from ``/proc``)
after each signal. Prints: the most processes under the daemon during the storm (goal: at most
3 x ``worker_processes`` — the serving generation, one draining, one being built; before this
change each reload kept two more for a minute), reloads applied (SIGHUPs coalesce, so fewer
than 100 is expected), decisions answered during the storm and in as long a time just before
it (no signals), how long after the last SIGHUP
the tree was back to one generation, and the load average. Never asserts.

Usage: ``python benchmarks/bench_reload_storm.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import trio
from _harness import Report, at_most, main

from daemon import open_client
from daemon.audit._audit import tail
from session import BoundProposition, load_provider

WORKER_PROCESSES = 2


def descendants(pid: int) -> int:
    """How many live processes run under ``pid``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, frontier = 0, [pid]
    while frontier:
        for child in children.get(frontier.pop(), []):
            found += 1
            frontier.append(child)
    return found


def binding(evidence: bytes) -> BoundProposition:
    """The honest binding of ``evidence`` for the ``bytes-sha256`` session."""
    provider = load_provider("bytes-sha256")
    return provider.honest_binding([evidence], provider.default_options())


def run(report: Report, args: argparse.Namespace) -> None:
    signals = 30 if args.quick else 100
    with tempfile.TemporaryDirectory(prefix="evdstorm") as folder:
        config = Path(folder) / "evidenced.toml"
        config.write_text(
            '[server]\nlisten = "127.0.0.1:0"\n'
            f"worker_processes = {WORKER_PROCESSES}\n"
            '[audit]\npath = "audit.jsonl"\n'
            '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n'
            "max_evidence_bytes = 64\n"
        )
        process = subprocess.Popen(
            [sys.executable, "-m", "daemon.cli", "serve", "--config", str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=folder,
        )
        assert process.stdout is not None
        ready = json.loads(process.stdout.readline())
        stop, decided = threading.Event(), [0]
        evidence = b"under load"

        async def load() -> None:
            async def one() -> None:
                async with open_client(f"tcp://{ready['tcp']}") as client:
                    wire = binding(evidence)
                    while not stop.is_set():
                        await client.submit("bytes", wire, [evidence])
                        decided[0] += 1

            async with trio.open_nursery() as nursery:
                for _ in range(4):
                    nursery.start_soon(one)

        loader = threading.Thread(target=trio.run, args=(load,))
        try:
            while descendants(process.pid) < WORKER_PROCESSES:
                time.sleep(0.05)
            loader.start()
            load_start = os.getloadavg()[0]
            while decided[0] == 0:
                time.sleep(0.01)
            before = decided[0]
            time.sleep(signals * 0.05)  # the same time without signals: the baseline
            calm = decided[0] - before
            before = decided[0]
            most = 0
            for _ in range(signals):
                process.send_signal(signal.SIGHUP)
                most = max(most, descendants(process.pid))
                time.sleep(0.05)
            during = decided[0] - before
            last = time.monotonic()
            while descendants(process.pid) > WORKER_PROCESSES:
                time.sleep(0.02)
            settled = time.monotonic() - last
            stop.set()
            loader.join()
            reloads = [
                line
                for line in tail(str(Path(folder) / "audit.jsonl"), 100_000)
                if line.get("event") == "config_reload"
            ]
        finally:
            stop.set()
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=60)
        report.value(
            f"{signals} SIGHUPs at 20/s: most processes under the daemon",
            most,
            "",
            goal=at_most(3 * WORKER_PROCESSES),
        )
        report.value(f"{signals} SIGHUPs at 20/s: reloads applied", len(reloads), "")
        report.value(f"{signals} SIGHUPs at 20/s: decisions answered during the storm", during, "")
        report.value(
            f"the same {signals * 0.05:.0f} s without SIGHUPs: decisions answered", calm, ""
        )
        report.value("storm: back to one generation after the last SIGHUP", settled, "s")
        print(f"load average {load_start:.2f} -> {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
