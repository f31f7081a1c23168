"""Daemon throughput, latency, overhead over in-process evaluation, and peak RSS.

Runs the real daemon (``evidenced serve --config``) as a child process on a Unix socket and
drives it with the real async client from this process (both share this machine's cores).

Prints, for the minimal formation pair (atom) and a 2 x 256 KiB pair (two maximum-size
canonical records the checker refuses as INVALID), with durable audit on (fsync) and off
(none), at concurrency 1, 8 and 64: decisions/s and p50/p99 latency (median of RUNS runs).
Then the in-process floor (fresh store + session + evaluate, as the server does) in the same
run and the daemon's per-decision overhead over it, and the daemon's peak RSS (VmHWM) after
64 concurrent maximum-size submissions. Never asserts on time.

Usage: ``python benchmarks/bench_daemon.py [--quick]``.
"""

from __future__ import annotations

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

from daemon import open_client
from mechanism.formation import (
    PROFILE_DIGEST,
    SUBJECT_SCHEMA,
    FormationPathCertificateMechanism,
    formation_binding,
)
from session import BoundProposition, EvidenceBounds, EvidenceStore, VerificationSession

ROOT = Path(__file__).resolve().parents[1]
QUICK = "--quick" in sys.argv
RUNS = 1 if QUICK else 3
REQUESTS = {1: 200, 8: 800, 64: 2000} if not QUICK else {1: 50, 8: 200, 64: 500}
LARGE_REQUESTS = {1: 40, 8: 120, 64: 256} if not QUICK else {1: 10, 8: 32, 64: 64}
MAX_RECORD = 262_144


def atom_pair() -> tuple[bytes, bytes]:
    folder = ROOT / "fixtures" / "formation"
    return (
        (folder / "atom.subject.json").read_bytes(),
        (folder / "atom.certificate.json").read_bytes(),
    )


def max_record(fill: str) -> bytes:
    """A canonical JSON record of exactly 262,144 bytes (admissible bytes, invalid subject)."""
    head = json.dumps({"pad": "", "schema_version": SUBJECT_SCHEMA}, separators=(",", ":"))
    pad = fill * (MAX_RECORD - len(head))
    data = json.dumps({"pad": pad, "schema_version": SUBJECT_SCHEMA}, separators=(",", ":"))
    assert len(data) == MAX_RECORD
    return data.encode()


def large_binding(subject: bytes, certificate: bytes, digest: str) -> BoundProposition:
    import hashlib

    refs = tuple("sha256:" + hashlib.sha256(item).hexdigest() for item in (subject, certificate))
    ground = "sha256:" + "1" * 64
    agency = "sha256:" + "2" * 64
    return BoundProposition(
        subject_id=refs[0],
        predicate="vstd.typed_formation.checked.0.1",
        expected="CHECKED",
        mechanism_id="vstd.typed_formation.checked.0.1",
        mechanism_digest=digest,
        evidence_refs=refs,
        trust_roots=(ground, agency, PROFILE_DIGEST),
        bounds=EvidenceBounds(2, 2 * MAX_RECORD),
        parameters={
            "profile_digest": PROFILE_DIGEST,
            "ground_artifact_digest": ground,
            "authority_axiom_agency_digest": agency,
        },
    )


def start_daemon(directory: Path, durability: str) -> tuple[subprocess.Popen[str], str]:
    sock = directory / f"{durability}.sock"
    config = directory / f"{durability}.toml"
    audit = directory / f"{durability}.jsonl"
    if audit.exists():
        audit.unlink()
    config.write_text(
        f'[server]\nlisten = ""\nsocket = "{sock}"\nmax_in_flight = 512\n'
        f'[audit]\npath = "{audit}"\ndurability = "{durability}"\n'
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


def stop_daemon(process: subprocess.Popen[str]) -> int:
    """SIGTERM; return the daemon's peak RSS in KiB (VmHWM) read just before."""
    peak = 0
    try:
        for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1])
    except OSError:
        pass
    process.send_signal(signal.SIGTERM)
    process.wait(60)
    return peak


async def drive(
    sock: str, binding: BoundProposition, items: list[bytes], concurrency: int, total: int
) -> tuple[float, list[float]]:
    latencies: list[float] = []
    remaining = total

    async def worker() -> None:
        nonlocal remaining
        async with open_client(unix=sock, request_timeout=120) as client:
            while remaining > 0:
                remaining -= 1
                begin = time.perf_counter()
                await client.submit("formation", binding, items)
                latencies.append(time.perf_counter() - begin)

    begin = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)
    return total / (time.perf_counter() - begin), latencies


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (from /proc), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def measure(
    pid: int,
    sock: str,
    binding: BoundProposition,
    items: list[bytes],
    concurrency: int,
    total: int,
) -> dict[str, float]:
    trio.run(drive, sock, binding, items, concurrency, max(concurrency, total // 10))  # warm-up
    cpu_before = cpu_seconds(pid)
    client_before = time.process_time()
    runs = [trio.run(drive, sock, binding, items, concurrency, total) for _ in range(RUNS)]
    server_cpu = (cpu_seconds(pid) - cpu_before) / (total * RUNS)
    client_cpu = (time.process_time() - client_before) / (total * RUNS)
    rates = [rate for rate, _ in runs]
    p50 = [percentile(lat, 0.50) for _, lat in runs]
    p99 = [percentile(lat, 0.99) for _, lat in runs]
    return {
        "rate": statistics.median(rates),
        "p50_ms": statistics.median(p50) * 1000,
        "p99_ms": statistics.median(p99) * 1000,
        "server_cpu_us": server_cpu * 1e6,
        "client_cpu_us": client_cpu * 1e6,
    }


def in_process_floor(binding: BoundProposition, items: list[bytes], count: int) -> float:
    """Median seconds per decision in-process, exactly as the server evaluates."""
    mechanism = FormationPathCertificateMechanism()

    def one() -> None:
        store = EvidenceStore()
        for item in items:
            store.add(item)
        session = VerificationSession(store)
        session.register(mechanism)
        session.evaluate(binding)

    for _ in range(min(50, count)):
        one()
    samples = []
    for _ in range(count):
        begin = time.perf_counter()
        one()
        samples.append(time.perf_counter() - begin)
    return statistics.median(samples)


async def rss_probe(sock: str, binding: BoundProposition, items: list[bytes]) -> None:
    async def one() -> None:
        async with open_client(unix=sock, request_timeout=120) as client:
            await client.submit("formation", binding, items)

    async with trio.open_nursery() as nursery:
        for _ in range(64):
            nursery.start_soon(one)


def main() -> None:
    subject, certificate = atom_pair()
    small_items = [subject, certificate]
    large_items = [max_record("a"), max_record("b")]
    digest = FormationPathCertificateMechanism().mechanism_digest
    small = formation_binding(subject, certificate, mechanism_digest=digest)
    large = large_binding(large_items[0], large_items[1], digest)
    print(f"bench_daemon: {os.cpu_count()} CPUs, {RUNS} run(s) per figure (median), Unix socket")
    print("(CPU columns: CPU microseconds per decision, daemon process and this load generator)")
    print(
        f"{'pair':<14}{'audit':<7}{'conc':>5}{'decisions/s':>13}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'daemon CPU us':>15}{'client CPU us':>15}"
    )
    results: dict[tuple[str, str, int], dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="evbench", dir="/tmp") as name:
        directory = Path(name)
        for durability in ("fsync", "none"):
            process, sock = start_daemon(directory, durability)
            try:
                for label, binding, items, counts in (
                    ("minimal", small, small_items, REQUESTS),
                    ("2x256KiB", large, large_items, LARGE_REQUESTS),
                ):
                    for concurrency in (1, 8, 64):
                        figures = measure(
                            process.pid, sock, binding, items, concurrency, counts[concurrency]
                        )
                        results[(label, durability, concurrency)] = figures
                        print(
                            f"{label:<14}{durability:<7}{concurrency:>5}"
                            f"{figures['rate']:>13.0f}{figures['p50_ms']:>9.2f}"
                            f"{figures['p99_ms']:>9.2f}{figures['server_cpu_us']:>15.0f}"
                            f"{figures['client_cpu_us']:>15.0f}",
                            flush=True,
                        )
            finally:
                stop_daemon(process)
        floor_small = in_process_floor(small, small_items, 2000 if not QUICK else 300)
        floor_large = in_process_floor(large, large_items, 60 if not QUICK else 15)
        print("\nin-process floor (fresh EvidenceStore + VerificationSession + evaluate):")
        for label, floor, key in (
            ("minimal", floor_small, ("minimal", "fsync", 1)),
            ("2x256KiB", floor_large, ("2x256KiB", "fsync", 1)),
        ):
            cpu = results[(key[0], "none", 64)]["server_cpu_us"] / 1e6
            print(
                f"  {label:<10} daemon CPU per decision at c=64 (no fsync) {cpu * 1e6:7.0f} us = "
                f"{cpu / floor:4.2f}x the in-process floor (overhead {(cpu - floor) * 1e6:6.0f} us)"
            )
            daemon_p50 = results[key]["p50_ms"] / 1000
            nodurable = results[(key[0], "none", 1)]["p50_ms"] / 1000
            print(
                f"  {label:<10} in-process {floor * 1e6:8.0f} us/decision "
                f"({1 / floor:6.0f}/s);  daemon c=1 p50 {daemon_p50 * 1e6:8.0f} us (fsync), "
                f"{nodurable * 1e6:8.0f} us (no fsync);  overhead "
                f"{(daemon_p50 - floor) * 1e6:7.0f} us / {(nodurable - floor) * 1e6:7.0f} us;  "
                f"ratio {daemon_p50 / floor:5.1f}x / {nodurable / floor:5.1f}x"
            )
        process, sock = start_daemon(directory, "fsync")
        try:
            trio.run(rss_probe, sock, large, large_items)
        finally:
            peak = stop_daemon(process)
        print(
            "\npeak RSS of the daemon after 64 concurrent 2x256KiB submissions: "
            f"{peak / 1024:.1f} MiB"
        )
        goal = results[("minimal", "fsync", 64)]
        print(
            f"goal check (reported, not asserted): c=64 durable minimal {goal['rate']:.0f}/s "
            f"(goal >= 1500), p99 {goal['p99_ms']:.1f} ms (goal < 50), "
            f"peak RSS {peak / 1024:.0f} MiB (goal < 300)"
        )


if __name__ == "__main__":
    main()
