"""The HTTP/JSON API against the binary protocol, and the cost of a /metrics scrape.

Runs the real daemon (``evidenced serve --config``) as a child process with both listeners on
loopback TCP and a durable (fsync) audit log, and drives it from this process with the real
clients: the binary protocol (``tcp://``) and the HTTP API (``http://``, JSON bodies with
base64 evidence), 64 concurrent keep-alive connections each, the minimal formation pair.

Prints, measured in interleaved rounds (benchmarks/_harness.py) against the same daemon:

* HTTP submit throughput as a share of the binary protocol's (time per decision, binary over
  HTTP; goal >= 0.70), and the daemon's CPU per decision over HTTP over binary (its own
  work, robust to load; context).
* ``GET /metrics`` with 20 sessions that have all decided (every histogram populated), over
  one keep-alive connection: wall time per scrape (goal < 5 ms) and the daemon's CPU per
  scrape.

Never asserts on time. Usage: ``python benchmarks/bench_http.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import trio
from _harness import Report, at_least, below, main
from bench_daemon import atom_pair, cpu_seconds

from daemon import open_client
from mechanism.formation import FormationPathCertificateMechanism, formation_binding
from session import BoundProposition

ROOT = Path(__file__).resolve().parents[1]
QUICK = "--quick" in sys.argv
CONCURRENCY = 64
SCRAPE_SESSIONS = 20


def start(
    directory: Path, name: str, sessions: str
) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """A daemon with a binary TCP listener and an HTTP listener on loopback, fsync-ed audit."""
    config = directory / f"{name}.toml"
    config.write_text(
        '[server]\nlisten = "127.0.0.1:0"\nmax_in_flight = 512\n'
        '[http]\nlisten = "127.0.0.1:0"\n'
        f'[audit]\npath = "{directory / name}.jsonl"\ndurability = "fsync"\n' + sessions
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
    return process, {"binary": f"tcp://{ready['tcp']}", "http": f"http://{ready['http']}"}


def stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(60)
    if process.stdout is not None:
        process.stdout.close()


async def drive(
    url: str, session: str, binding: BoundProposition, items: list[bytes], total: int
) -> float:
    """``total`` submits over CONCURRENCY keep-alive connections; decisions per second."""
    remaining = total

    async def worker() -> None:
        nonlocal remaining
        async with open_client(url, request_timeout=120) as client:
            while remaining > 0:
                remaining -= 1
                await client.submit(session, binding, items)

    begin = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(CONCURRENCY):
            nursery.start_soon(worker)
    return total / (time.perf_counter() - begin)


def throughput(report: Report, directory: Path) -> None:
    subject, certificate = atom_pair()
    items = [subject, certificate]
    digest = FormationPathCertificateMechanism().mechanism_digest
    binding = formation_binding(subject, certificate, mechanism_digest=digest)
    process, urls = start(
        directory, "throughput", '[sessions.formation]\nmechanisms = ["formation"]\n'
    )
    total = 400 if QUICK else 1500
    rounds = 5 if QUICK else 9

    def run(kind: str) -> Callable[[], object]:
        return lambda: trio.run(drive, urls[kind], "formation", binding, items, total)

    def cpu(kind: str) -> Callable[[], float]:
        def sample() -> float:
            before = cpu_seconds(process.pid)
            trio.run(drive, urls[kind], "formation", binding, items, total)
            return max(cpu_seconds(process.pid) - before, 1e-9) / total

        return sample

    try:
        for kind in ("binary", "http"):  # warm-up: connections, workers, caches
            trio.run(drive, urls[kind], "formation", binding, items, 300)
        report.compare(
            "HTTP submit throughput / binary protocol's, minimal fsync c=64",
            run("binary"),  # time per decision, binary over HTTP: the throughput share
            run("http"),
            floor_name="time per decision over HTTP",
            goal=at_least(0.70),
            true_floor=False,
            rounds=rounds,
            max_seconds=120.0,
        )
        report.compare(
            "daemon CPU per decision, HTTP / binary, minimal fsync c=64",
            cpu("http"),
            cpu("binary"),
            floor_name="daemon CPU per binary decision",
            true_floor=False,
            sampled=True,
            rounds=rounds,
            max_seconds=120.0,
        )
    finally:
        stop(process)


def scrape(report: Report, directory: Path) -> None:
    tables = "".join(
        f'[sessions.s{index:02d}]\nmechanisms = ["formation"]\n' for index in range(SCRAPE_SESSIONS)
    )
    process, urls = start(directory, "scrape", tables)
    subject, certificate = atom_pair()
    digest = FormationPathCertificateMechanism().mechanism_digest
    binding = formation_binding(subject, certificate, mechanism_digest=digest)
    scrapes = 50 if QUICK else 200

    async def populate() -> None:
        async with open_client(urls["http"]) as client:
            for index in range(SCRAPE_SESSIONS):
                for _ in range(3):
                    await client.submit(f"s{index:02d}", binding, [subject, certificate])

    async def timed() -> list[float]:
        async with open_client(urls["http"]) as client:
            metrics = getattr(client, "metrics")  # noqa: B009 (HttpClient only)
            text = await metrics()
            assert text.count("evidenced_request_stage_seconds_count") >= SCRAPE_SESSIONS * 4
            seconds = []
            for _ in range(scrapes):
                begin = time.perf_counter()
                await metrics()
                seconds.append(time.perf_counter() - begin)
            return seconds

    try:
        trio.run(populate)
        runs = 3 if QUICK else 5
        medians, cpu = [], []
        for _ in range(runs):
            before = cpu_seconds(process.pid)
            seconds = trio.run(timed)
            cpu.append((cpu_seconds(process.pid) - before) / (scrapes + 1))
            medians.append(sorted(seconds)[len(seconds) // 2])
        medians.sort()
        cpu.sort()
        report.value(
            f"GET /metrics with {SCRAPE_SESSIONS} sessions (wall time per scrape, keep-alive)",
            medians[len(medians) // 2],
            "s",
            goal=below(0.005),
            spread=medians,
        )
        report.value(
            f"GET /metrics with {SCRAPE_SESSIONS} sessions (daemon CPU per scrape)",
            cpu[len(cpu) // 2],
            "s",
            spread=cpu,
        )
    finally:
        stop(process)


def run(report: Report, args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="evdhttp") as folder:
        directory = Path(folder)
        throughput(report, directory)
        scrape(report, directory)


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
