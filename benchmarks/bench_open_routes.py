"""Open routes cannot hold the door: 1,024 keep-alive ``/health`` connections without a token.

Runs the real daemon (``evidenced serve --config``, the same configuration as
``bench_refusals.py``: HTTP on loopback with a ``tokens_file``, fsync-ed audit log) as a child
process. In each round, 4 loopback addresses (127.0.0.2-5) open 256 keep-alive connections
each and send ``GET /health`` without a token on every one (the attack: a probe's connection
kept open to hold a connection slot), from a process of their own; then an authenticated client
(127.0.0.1, its token, a fresh keep-alive connection) makes decisions for ``--window`` seconds
while the attackers keep whatever connections the daemon left them and, every 5 s, re-open and
re-probe every one it closed (harsher than re-probing held ones every 25 s).

Prints, per round and as medians: how many of the 1,024 probe connections the daemon still
held once they were answered (the open routes' rule: none, a probe ends its connection), the
probes answered by status, the authenticated client's refused submits (goal: 0) and its
decision latency p50 under the attack over a quiet window's (no goal is set against it; the
attackers share this machine's two cores). Never asserts on time.

Usage: ``python benchmarks/bench_open_routes.py [--quick] [--json PATH] [--window S]
[--rounds R]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import trio
from _harness import Report, at_most, main
from bench_refusals import decide, p99, start

ATTACKERS = [f"127.0.0.{host}" for host in range(2, 6)]
PER_ADDRESS = 256
REPROBE = 5.0  # seconds between re-opening the connections the daemon closed


async def _probe(
    host: str, port: int, source: str, statuses: Counter[str], held: list[trio.SocketStream]
) -> None:
    """One keep-alive ``GET /health`` without a token; the connection is kept if left open."""
    try:
        stream = await trio.open_tcp_stream(host, port, local_address=source)
    except OSError:
        statuses["connect failed"] += 1
        return
    request = f"GET /health HTTP/1.1\r\nHost: {host}\r\nConnection: keep-alive\r\n\r\n"
    answer = b""
    try:
        await stream.send_all(request.encode())
        with trio.move_on_after(10):
            while b"\r\n\r\n" not in answer:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    break
                answer += chunk
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    statuses[answer[9:12].decode("latin-1") if len(answer) >= 12 else "reset"] += 1
    # Still open? A read that returns b"" within a moment means the daemon closed it.
    with trio.move_on_after(0.5):
        try:
            while await stream.receive_some(65536):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        await stream.aclose()
        return
    held.append(stream)


async def attack(url: str, seconds: float) -> dict[str, Any]:
    """Open and probe 4 x 256 connections, then every ``REPROBE`` seconds re-open and re-probe
    each one the daemon closed, for ``seconds`` (module doc)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    statuses: Counter[str] = Counter()
    held: list[trio.SocketStream] = []
    first_held = -1
    end = trio.current_time() + seconds
    while trio.current_time() < end:
        wanted = {source: PER_ADDRESS for source in ATTACKERS}
        for stream in held:  # the ones still open keep their slot
            wanted[stream.socket.getsockname()[0]] -= 1
        async with trio.open_nursery() as nursery:
            for source, count in wanted.items():
                for _ in range(count):
                    nursery.start_soon(_probe, host, int(port), source, statuses, held)
        if first_held < 0:
            first_held = len(held)
        await trio.sleep(REPROBE)
    for stream in held:
        await stream.aclose()
    return {"held": first_held, "statuses": dict(statuses)}


def _window(url: str, seconds: float) -> tuple[dict[str, Any], list[float], int]:
    """The attack (its own process) and the authenticated client's decisions side by side."""
    attacker = subprocess.Popen(
        [sys.executable, __file__, "--attack-only", url, str(seconds + 3)],
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(2.0)  # the 1,024 connections are opened and probed first
    refused = 0
    latencies: list[float] = []
    try:
        latencies = trio.run(decide, url, seconds)
    except Exception as error:  # a refused or failed submit: what the door cost
        print(f"  the authenticated client failed: {error!r}", flush=True)
        refused = 1
    out, _ = attacker.communicate(timeout=seconds + 120)
    return json.loads(out), latencies, refused


def run(report: Report, args: argparse.Namespace) -> None:
    seconds = 2.0 if args.quick else args.window
    rounds = 1 if args.quick else args.rounds
    with tempfile.TemporaryDirectory(prefix="evo", dir="/tmp") as folder:
        process, url, _ = start(Path(folder))
        ratios: list[float] = []
        held: list[int] = []
        failures = 0
        try:
            trio.run(decide, url, 1.0)  # warm-up
            for _ in range(rounds):
                quiet = trio.run(decide, url, seconds)
                outcome, loud, refused = _window(url, seconds)
                failures += refused
                held.append(outcome["held"])
                if loud:
                    ratios.append(statistics.median(loud) / statistics.median(quiet))
                print(
                    f"  round: probe connections held after their answer {outcome['held']} of "
                    f"{len(ATTACKERS) * PER_ADDRESS}, probes by status {outcome['statuses']}; "
                    f"client quiet p50 {statistics.median(quiet) * 1e3:.2f} ms, under attack "
                    f"p50 {statistics.median(loud) * 1e3 if loud else float('nan'):.2f} ms "
                    f"p99 {p99(loud) * 1e3 if loud else float('nan'):.2f} ms "
                    f"max {max(loud) * 1e3 if loud else float('nan'):.2f} ms "
                    f"({len(loud)} decisions)",
                    flush=True,
                )
                time.sleep(1)
        finally:
            process.terminate()
            process.wait(60)
    report.value("probe connections held after their answer", statistics.median(held), "conns")
    report.value("authenticated client's failed windows", failures, "windows", goal=at_most(0))
    if ratios:
        report.value(
            "authenticated decision latency p50, under attack / quiet",
            statistics.median(ratios),
            "x",
            spread=ratios,
        )


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--window", type=float, default=5.0, help="seconds per window")
    parser.add_argument("--rounds", type=int, default=3, help="quiet/attack window pairs")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--attack-only":
        print(json.dumps(trio.run(attack, sys.argv[2], float(sys.argv[3]))))
        sys.exit(0)
    sys.exit(main(run, __doc__, configure=configure))
