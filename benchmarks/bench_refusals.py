"""Refusals cannot buy disk: an unauthenticated HTTP flood against a daemon with a tokens_file.

Runs the real daemon (``evidenced serve --config``) as a child process, its HTTP listener on
loopback with a ``tokens_file`` and a durable (fsync) audit log. In alternating windows, an
authenticated client (127.0.0.1, HTTP with its token, one keep-alive connection, the minimal
formation pair, one decision at a time) submits for the whole window, either alone (quiet) or
while a flood process sends ``--flood-total`` requests without a valid token in about
``--window`` seconds (10,000 in 10 s by default, the issue's attack): a submit without a
token, one with a wrong token, ``GET /`` and ``garbage``, each on a new connection, from 64
loopback addresses (127.0.1.1-64) so that every address gets refused on its merits before it is
cut off. The flood runs in its own process (it shares this machine's cores with the daemon
and the client: a real attacker on the same host would too).

Prints: the flood's achieved rate and its answers by status; the audit lines it added (every
line that is not a decision of the authenticated client nor ``daemon_stop``, per 10,000
requests; goal: a handful, at most 5); the authenticated client's decision latency under the
flood over its latency in the quiet windows (median and p99 of each window, the median of the
per-round ratios; goal for the median <= 1.10); and the daemon's own CPU per authenticated
decision and per unauthenticated request (a flood window with no decisions), robust to the
machine's load: at a rate R of unauthenticated requests, the flood takes R times the latter
of one core. Never asserts on time.

Usage: ``python benchmarks/bench_refusals.py [--quick] [--json PATH] [--window S]
[--flood-total N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
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
from bench_daemon import atom_pair, cpu_seconds

from daemon import open_client
from daemon.config._tokens import token_line
from mechanism.formation import FormationPathCertificateMechanism, formation_binding

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "bench-refusals-token-0123456789abcdef0123456789"
SOURCES = [f"127.0.1.{host}" for host in range(1, 65)]
FLOOD_CONCURRENCY = 32


def start(directory: Path) -> tuple[subprocess.Popen[str], str, Path]:
    """The daemon: HTTP on loopback with a tokens_file, fsync-ed audit; (process, url, log)."""
    tokens = directory / "tokens"
    tokens.write_text(token_line(TOKEN, "bench") + "\n")
    os.chmod(tokens, 0o600)
    log = directory / "audit.jsonl"
    config = directory / "daemon.toml"
    config.write_text(
        '[server]\nlisten = "127.0.0.1:0"\n'
        f'[http]\nlisten = "127.0.0.1:0"\ntokens_file = "{tokens}"\n'
        f'[audit]\npath = "{log}"\ndurability = "fsync"\n'
        '[sessions.formation]\nmechanisms = ["formation"]\n'
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
    return process, f"http://{ready['http']}", log


def flood_requests(host: str) -> list[bytes]:
    body = b'{"binding": {}, "evidence": []}'
    post = (
        "POST /v1/sessions/formation/decisions HTTP/1.1\r\nHost: {host}\r\n"
        "Content-Type: application/json\r\nContent-Length: {length}\r\n{auth}\r\n"
    )
    return [
        post.format(host=host, length=len(body), auth="").encode() + body,
        post.format(host=host, length=len(body), auth="Authorization: Bearer guess\r\n").encode()
        + body,
        f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode(),
        b"garbage\r\n\r\n",
    ]


async def flood(host: str, port: int, total: int, seconds: float) -> dict[str, Any]:
    """``total`` unauthenticated requests paced over ``seconds``; answers by status."""
    requests = flood_requests(host)
    statuses: Counter[str] = Counter()
    begin = trio.current_time()
    sent = 0

    async def one(number: int) -> None:
        source = SOURCES[number % len(SOURCES)]
        try:
            stream = await trio.open_tcp_stream(host, port, local_address=source)
        except OSError:
            statuses["connect failed"] += 1
            return
        answer = b""
        async with stream:
            try:
                await stream.send_all(requests[number % len(requests)])
                with trio.move_on_after(5):
                    while len(answer) < 12:
                        chunk = await stream.receive_some(4096)
                        if not chunk:
                            break
                        answer += chunk
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
        statuses[answer[9:12].decode("latin-1") if len(answer) >= 12 else "reset"] += 1

    async def worker(index: int) -> None:
        nonlocal sent
        while sent < total:
            number = sent
            sent += 1
            await trio.sleep_until(begin + seconds * number / total)
            await one(number)

    async with trio.open_nursery() as nursery:
        for index in range(FLOOD_CONCURRENCY):
            nursery.start_soon(worker, index)
    return {"seconds": trio.current_time() - begin, "statuses": dict(statuses)}


async def decide(url: str, seconds: float) -> list[float]:
    """Decisions one at a time for ``seconds``; each one's latency."""
    subject, certificate = atom_pair()
    digest = FormationPathCertificateMechanism().mechanism_digest
    binding = formation_binding(subject, certificate, mechanism_digest=digest)
    latencies = []
    async with open_client(url, token=TOKEN, request_timeout=60) as client:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            begin = time.perf_counter()
            result = await client.submit("formation", binding, [subject, certificate])
            latencies.append(time.perf_counter() - begin)
            assert result.outcome == "PASS"
    return latencies


def window(url: str, seconds: float, total: int) -> tuple[list[float], dict[str, Any] | None]:
    """One window: decisions for ``seconds``, with a flood of ``total`` (0: quiet)."""
    flooder = None
    if total:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        flooder = subprocess.Popen(
            [sys.executable, __file__, "--flood-only", f"{host}:{port}", str(total), str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        time.sleep(0.3)  # let it start flooding
    latencies = trio.run(decide, url, seconds)
    outcome = None
    if flooder is not None:
        out, _ = flooder.communicate(timeout=seconds + 120)
        outcome = json.loads(out)
    return latencies, outcome


async def flood_alone(url: str, total: int, seconds: float) -> dict[str, Any]:
    """The flood in its own process with no decisions alongside; its outcome."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    done = await trio.run_process(
        [sys.executable, __file__, "--flood-only", f"{host}:{port}", str(total), str(seconds)],
        capture_stdout=True,
        cwd=ROOT,
    )
    outcome: dict[str, Any] = json.loads(done.stdout)
    return outcome


def p99(values: list[float]) -> float:
    return sorted(values)[min(len(values) - 1, int(len(values) * 0.99))]


def run(report: Report, args: argparse.Namespace) -> None:
    seconds = 2.0 if args.quick else args.window
    total = int(args.flood_total * seconds / args.window)
    rounds = 2 if args.quick else args.rounds
    with tempfile.TemporaryDirectory(prefix="evr", dir="/tmp") as folder:
        directory = Path(folder)
        process, url, log = start(directory)
        medians: list[float] = []
        tails: list[float] = []
        sent = 0
        flood_seconds = 0.0
        statuses: Counter[str] = Counter()
        try:
            window(url, 1.0, 0)  # warm-up: connections, workers, caches
            # The daemon's own CPU: per decision (quiet) and per unauthenticated request
            # (a flood with no decisions), robust to the machine's load.
            cpu_before = cpu_seconds(process.pid)
            quiet, _ = window(url, seconds, 0)
            cpu_decision = (cpu_seconds(process.pid) - cpu_before) / len(quiet)
            cpu_before = cpu_seconds(process.pid)
            flood_only = trio.run(flood_alone, url, total, seconds)
            cpu_refusal = (cpu_seconds(process.pid) - cpu_before) / total
            sent += total
            flood_seconds += float(flood_only["seconds"])
            statuses.update(flood_only["statuses"])
            time.sleep(31)  # the strike window of the flood-only run passes
            for _ in range(rounds):
                quiet, _ = window(url, seconds, 0)
                loud, outcome = window(url, seconds, total)
                assert outcome is not None
                sent += total
                flood_seconds += float(outcome["seconds"])
                statuses.update(outcome["statuses"])
                medians.append(statistics.median(loud) / statistics.median(quiet))
                tails.append(p99(loud) / p99(quiet))
                print(
                    f"  round: quiet p50 {statistics.median(quiet) * 1e3:.2f} ms "
                    f"({len(quiet)} decisions), flood p50 {statistics.median(loud) * 1e3:.2f} ms "
                    f"({len(loud)} decisions), flood {outcome}",
                    flush=True,
                )
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(60)
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        bought = [
            line
            for line in lines
            if line["event"] not in ("decision", "daemon_start", "daemon_stop")
        ]
        print(f"  flood answers by status: {dict(statuses)}")
        print(f"  audit lines the flood added: {Counter(line['event'] for line in bought)}")
    report.value("flood rate (unauthenticated requests)", sent / flood_seconds, "/s")
    report.value("daemon CPU per authenticated decision (quiet)", cpu_decision, "s")
    report.value("daemon CPU per unauthenticated request (flood alone)", cpu_refusal, "s")
    report.value(
        "audit lines per 10,000 unauthenticated requests",
        len(bought) * 10_000 / sent,
        "lines",
        goal=at_most(5),
    )
    report.value(
        "authenticated decision latency p50, flood / quiet",
        statistics.median(medians),
        "x",
        goal=at_most(1.10),
        spread=medians,
    )
    report.value(
        "authenticated decision latency p99, flood / quiet",
        statistics.median(tails),
        "x",
        spread=tails,
    )


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--window", type=float, default=10.0, help="seconds per window")
    parser.add_argument("--flood-total", type=int, default=10_000, help="requests per window")
    parser.add_argument("--rounds", type=int, default=3, help="quiet/flood window pairs")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--flood-only":
        address, count, duration = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
        host, port = address.rsplit(":", 1)
        print(json.dumps(trio.run(flood, host, int(port), count, duration)))
        sys.exit(0)
    sys.exit(main(run, __doc__, configure=configure))
