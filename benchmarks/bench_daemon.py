"""Daemon throughput, latency, overhead over in-process evaluation, and peak RSS.

Runs the real daemon (``evidenced serve --config``) as a child process on a Unix socket and
drives it with the real async client from this process (both share this machine's cores).

Prints, for the minimal formation pair (atom) and a 2 x 256 KiB pair (two maximum-size
canonical records the checker refuses as INVALID), with durable audit on (fsync) and off
(none), at concurrency 1, 8 and 64: decisions/s and p50/p99 latency (median of RUNS runs,
spread min-max). Then the daemon's CPU per decision at c=64 as a ratio to the in-process CPU
per decision (fresh store + session + evaluate, as the server does), measured in interleaved
rounds (benchmarks/_harness.py): a true floor, the daemon does that work and more. Then the
in-process decision time, and the daemon's peak RSS (VmHWM) after 64 concurrent maximum-size
submissions. Then durable c=64 with the transparency log on (tiles in the group commit, a
checkpoint signed at most every second) against the same daemon without it, both running,
in interleaved rounds: a ratio of time per decision.

Then the cost of evidence retention (docs/retention.md): daemons identical but for
``retain = "all"`` into a filesystem store, or into S3 (moto's S3 server in this process:
context only, it shares the load generator's cores and GIL), and without retention, each
measured at c=64 with fsync-ed audit in interleaved rounds: time per decision with retention
over time per decision without (the cost; goal <= 1.15 for the minimal pair on the
filesystem), for the minimal pair (the same evidence each time: the store verifies the
object it already holds) and for distinct evidence (a new 1 KiB item per decision in a
``bytes-sha256`` session: every decision writes and fsyncs a new object). Never asserts on
time.

Usage: ``python benchmarks/bench_daemon.py [--quick] [--json PATH] [--retention-only]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import trio
from _harness import Op, Report, at_least, at_most, below, main

from daemon import open_client
from daemon.tlog import SignerKey, write_key_file
from mechanism.formation import (
    PROFILE_DIGEST,
    SUBJECT_SCHEMA,
    FormationPathCertificateMechanism,
    formation_binding,
)
from session import (
    BoundProposition,
    BytesDigestMechanism,
    EvidenceBounds,
    EvidenceStore,
    VerificationSession,
)

ROOT = Path(__file__).resolve().parents[1]
QUICK = "--quick" in sys.argv
RUNS = 1 if QUICK else 3
REQUESTS = {1: 200, 8: 800, 64: 2000} if not QUICK else {1: 50, 8: 200, 64: 500}
LARGE_REQUESTS = {1: 40, 8: 120, 64: 256} if not QUICK else {1: 10, 8: 32, 64: 64}
GOAL_CASE = ("minimal", "fsync", 64)  # goals: >= 1,500 decisions/s, p99 < 50 ms
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


def start_daemon(
    directory: Path,
    durability: str,
    *,
    tree: bool = False,
    label: str | None = None,
    sessions: str | None = None,
    environment: dict[str, str] | None = None,
) -> tuple[subprocess.Popen[str], str]:
    """A daemon on a fresh audit log; ``tree``: with the transparency log (tiles, a
    checkpoint signed at most every second: docs/spec/transparency.md §6.2); ``sessions``:
    other session tables (files named after ``label``); ``environment``: added to its own."""
    name = label or durability + ("-tree" if tree else "")
    sock = directory / f"{name}.sock"
    config = directory / f"{name}.toml"
    audit = directory / f"{name}.jsonl"
    if audit.exists():  # a fresh chain: the log and its head sidecar (docs/audit-log.md §7)
        audit.unlink()
        audit.with_name(audit.name + ".head").unlink(missing_ok=True)
    transparency = ""
    if tree:
        shutil.rmtree(audit.with_name(audit.name + ".tlog"), ignore_errors=True)
        key = directory / f"{name}.key"
        key.unlink(missing_ok=True)
        write_key_file(key, SignerKey.generate("bench.example/evidenced"))
        transparency = f'[transparency]\nkey_file = "{key}"\norigin = "bench.example/evidenced"\n'
    config.write_text(
        f'[server]\nlisten = ""\nsocket = "{sock}"\nmax_in_flight = 512\n'
        f'[audit]\npath = "{audit}"\ndurability = "{durability}"\n'
        + transparency
        + (
            sessions
            or '[sessions.formation]\nmechanisms = ["formation"]\n'
            "max_evidence_items = 2\nmax_evidence_bytes = 524288\n"
        )
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        env=None if environment is None else {**os.environ, **environment},
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


def _own_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the daemon (from /proc), in seconds, with its live evaluation
    worker processes (its children): large pairs are evaluated there."""
    total = _own_cpu_seconds(pid)
    children: set[int] = set()
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            listed = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
            children.update(int(child) for child in listed)
    except OSError:
        pass
    for child in children:
        with contextlib.suppress(OSError):
            total += _own_cpu_seconds(child)
    return total


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
) -> dict[str, list[float]]:
    """Per-run figures (one list entry per run) of RUNS runs of ``total`` requests."""
    trio.run(drive, sock, binding, items, concurrency, max(concurrency, total // 10))  # warm-up
    figures: dict[str, list[float]] = {
        key: [] for key in ("rate", "p50_ms", "p99_ms", "cpu_us", "client_cpu_us")
    }
    for _ in range(RUNS):
        cpu_before = cpu_seconds(pid)
        client_before = time.process_time()
        rate, latencies = trio.run(drive, sock, binding, items, concurrency, total)
        figures["rate"].append(rate)
        figures["p50_ms"].append(percentile(latencies, 0.50) * 1000)
        figures["p99_ms"].append(percentile(latencies, 0.99) * 1000)
        figures["cpu_us"].append((cpu_seconds(pid) - cpu_before) / total * 1e6)
        figures["client_cpu_us"].append((time.process_time() - client_before) / total * 1e6)
    return figures


def in_process(binding: BoundProposition, items: list[bytes]) -> Callable[[], None]:
    """One decision exactly as the server evaluates it (fresh store + session + evaluate)."""
    mechanism = FormationPathCertificateMechanism()

    def one() -> None:
        store = EvidenceStore()
        for item in items:
            store.add(item)
        session = VerificationSession(store)
        session.register(mechanism)
        session.evaluate(binding)

    return one


def cpu_ratio(
    report: Report,
    label: str,
    pid: int,
    sock: str,
    binding: BoundProposition,
    items: list[bytes],
    batch: int,
) -> None:
    """Daemon CPU per decision at c=64 against in-process CPU per decision, interleaved."""
    one = in_process(binding, items)

    def daemon_cost() -> float:
        before = cpu_seconds(pid)
        trio.run(drive, sock, binding, items, 64, batch)
        return max(cpu_seconds(pid) - before, 1e-9) / batch

    def floor_cost() -> float:
        before = time.process_time()
        for _ in range(batch):
            one()
        return max(time.process_time() - before, 1e-9) / batch

    report.compare(
        f"{label} daemon CPU per decision at c=64 (no fsync)",
        daemon_cost,
        floor_cost,
        floor_name="in-process CPU per decision",
        goal=at_most(1.5),
        sampled=True,
        rounds=5 if QUICK else 9,
        max_seconds=60.0,
    )


async def rss_probe(sock: str, binding: BoundProposition, items: list[bytes]) -> None:
    async def one() -> None:
        async with open_client(unix=sock, request_timeout=120) as client:
            await client.submit("formation", binding, items)

    async with trio.open_nursery() as nursery:
        for _ in range(64):
            nursery.start_soon(one)


def transparency_cost(
    report: Report, directory: Path, binding: BoundProposition, items: list[bytes]
) -> None:
    """Durable c=64 with the transparency log on, as ratios to the same daemon with it off,
    both running, driven in interleaved rounds (the tree's goal: at most 10 % more): time per
    decision (what throughput sees, fsyncs included; noisy on a loaded machine) and the
    daemon's CPU per decision (its own work, robust to load)."""
    plain, plain_sock = start_daemon(directory, "fsync")
    tree, tree_sock = start_daemon(directory, "fsync", tree=True)
    total = 500 if QUICK else 1500
    rounds = 5 if QUICK else 9

    def cpu_cost(pid: int, sock: str) -> Callable[[], float]:
        def sample() -> float:
            before = cpu_seconds(pid)
            trio.run(drive, sock, binding, items, 64, total)
            return max(cpu_seconds(pid) - before, 1e-9) / total

        return sample

    try:
        for sock in (plain_sock, tree_sock):  # warm-up
            trio.run(drive, sock, binding, items, 64, 200)
        report.compare(
            "minimal fsync c=64 with transparency log (time per decision)",
            lambda: trio.run(drive, tree_sock, binding, items, 64, total),
            lambda: trio.run(drive, plain_sock, binding, items, 64, total),
            floor_name="the same daemon without it",
            goal=at_most(1.10),
            true_floor=False,
            rounds=rounds,
            max_seconds=90.0,
        )
        report.compare(
            "minimal fsync c=64 with transparency log (daemon CPU per decision)",
            cpu_cost(tree.pid, tree_sock),
            cpu_cost(plain.pid, plain_sock),
            floor_name="the same daemon without it",
            goal=at_most(1.10),
            true_floor=False,
            sampled=True,
            rounds=rounds,
            max_seconds=90.0,
        )
    finally:
        stop_daemon(plain)
        stop_daemon(tree)


def retention_sessions(retain: str, store: str) -> str:
    """A formation and a bytes session, both retaining (or not) into ``store``."""
    extra = f'retain = "{retain}"\nstore = "{store}"\n' if retain != "none" else ""
    return (
        '[sessions.formation]\nmechanisms = ["formation"]\n' + extra
        + '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n' + extra
    )  # fmt: skip


async def drive_distinct(sock: str, total: int, tag: str) -> float:
    """Decisions/s at c=64, each on a new 1 KiB item (a new object for a retaining store)."""
    import hashlib

    remaining = total
    padding = b"." * 1000

    async def worker(number: int) -> None:
        nonlocal remaining
        async with open_client(unix=sock, request_timeout=120) as client:
            while remaining > 0:
                remaining -= 1
                item = b"%s %d %d %d " % (tag.encode(), number, remaining, time.time_ns())
                item += padding
                ref = "sha256:" + hashlib.sha256(item).hexdigest()
                binding = BoundProposition(
                    subject_id="item",
                    predicate="bytes.sha256",
                    expected=ref,
                    mechanism_id="vstd.bytes.sha256",
                    mechanism_digest=BytesDigestMechanism.mechanism_digest,
                    evidence_refs=(ref,),
                    trust_roots=("bench",),
                    bounds=EvidenceBounds(1, 1 << 20),
                )
                await client.submit("bytes", binding, [item])

    begin = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for number in range(64):
            nursery.start_soon(worker, number)
    return total / (time.perf_counter() - begin)


def retention_cost(report: Report, directory: Path) -> None:
    """Time (and daemon CPU) per decision at c=64 with retention over without (module
    docstring)."""
    from moto.server import ThreadedMotoServer

    from daemon.retention._s3 import shared_session

    subject, certificate = atom_pair()
    items = [subject, certificate]
    binding = formation_binding(
        subject, certificate, mechanism_digest=FormationPathCertificateMechanism().mechanism_digest
    )
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no access-log line per request
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    environment = {
        "AWS_ENDPOINT_URL_S3": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    os.environ.update(environment)
    client = shared_session().client("s3")
    client.create_bucket(Bucket="evidenced-bench")
    client.close()
    (directory / "evidence").mkdir(mode=0o700)
    daemons = {}
    try:
        for label, sessions in (
            ("off", retention_sessions("none", "")),
            ("fs", retention_sessions("all", f"fs:{directory}/evidence")),
            ("s3", retention_sessions("all", "s3://evidenced-bench/evidence")),
        ):
            daemons[label] = start_daemon(
                directory, "fsync", label=label, sessions=sessions, environment=environment
            )
        total = 500 if QUICK else 2000
        for label, (_, sock) in daemons.items():  # warm-up: connections, caches, objects
            trio.run(drive, sock, binding, items, 64, 200)
            trio.run(drive_distinct, sock, 200, f"warm-{label}")

        cpu: dict[tuple[str, str], list[float]] = {}

        def minimal(label: str) -> float:
            process, sock = daemons[label]
            before = cpu_seconds(process.pid)
            rate, _ = trio.run(drive, sock, binding, items, 64, total)
            spent = (cpu_seconds(process.pid) - before) / total
            cpu.setdefault(("minimal pair", label), []).append(spent)
            return 1 / rate

        def distinct(label: str) -> float:
            process, sock = daemons[label]
            before = cpu_seconds(process.pid)
            rate = trio.run(drive_distinct, sock, total, label)
            spent = (cpu_seconds(process.pid) - before) / total
            cpu.setdefault(("distinct 1 KiB items", label), []).append(spent)
            return 1 / rate

        rounds = 3 if QUICK else 7
        for kind, sampler in (("minimal pair", minimal), ("distinct 1 KiB items", distinct)):
            results = report.compare_many(
                lambda sampler=sampler: sampler("off"),  # type: ignore[misc]
                [
                    Op(
                        f"retention fs, {kind}, c=64 fsync: time per decision",
                        lambda sampler=sampler: sampler("fs"),  # type: ignore[misc]
                        goal=at_most(1.15) if kind == "minimal pair" else None,
                    ),
                    Op(
                        f"retention s3 (moto, context), {kind}, c=64 fsync: time per decision",
                        lambda sampler=sampler: sampler("s3"),  # type: ignore[misc]
                    ),
                ],
                floor_name="no retention",
                rounds=rounds,
                max_seconds=600.0,
                sampled=True,
            )
            for result in results:
                if result.floor_seconds and result.op_seconds:
                    print(
                        f"  {result.name}: {1 / result.op_seconds:,.0f}/s with retention, "
                        f"{1 / result.floor_seconds:,.0f}/s without",
                        flush=True,
                    )
            for label in ("fs", "s3"):  # the daemon's own CPU: steadier on a loaded machine
                report.paired_ratio(
                    f"retention {label}, {kind}, c=64 fsync: daemon CPU per decision / without",
                    cpu[(kind, label)],
                    cpu[(kind, "off")],
                )
    finally:
        for process, _ in daemons.values():
            stop_daemon(process)
        moto.stop()


def run(report: Report, args: argparse.Namespace) -> None:
    if args.retention_only:
        with tempfile.TemporaryDirectory(prefix="evbench", dir="/tmp") as name:
            retention_cost(report, Path(name))
        return
    subject, certificate = atom_pair()
    small_items = [subject, certificate]
    large_items = [max_record("a"), max_record("b")]
    digest = FormationPathCertificateMechanism().mechanism_digest
    small = formation_binding(subject, certificate, mechanism_digest=digest)
    large = large_binding(large_items[0], large_items[1], digest)
    print(f"{RUNS} run(s) per figure (median, spread min-max), Unix socket")
    print("(CPU columns: CPU microseconds per decision, daemon process and this load generator)")
    print(
        f"{'pair':<14}{'audit':<7}{'conc':>5}{'decisions/s':>13}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'daemon CPU us':>15}{'client CPU us':>15}"
    )
    results: dict[tuple[str, str, int], dict[str, list[float]]] = {}
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
                        median = {key: statistics.median(v) for key, v in figures.items()}
                        print(
                            f"{label:<14}{durability:<7}{concurrency:>5}"
                            f"{median['rate']:>13.0f}{median['p50_ms']:>9.2f}"
                            f"{median['p99_ms']:>9.2f}{median['cpu_us']:>15.0f}"
                            f"{median['client_cpu_us']:>15.0f}",
                            flush=True,
                        )
                if durability == "none":
                    print()
                    pid = process.pid
                    cpu_ratio(
                        report, "minimal", pid, sock, small, small_items, 200 if QUICK else 600
                    )
                    cpu_ratio(
                        report, "2x256KiB", pid, sock, large, large_items, 16 if QUICK else 48
                    )
            finally:
                stop_daemon(process)
        for (label, durability, concurrency), figures in results.items():
            goal = at_least(1500) if (label, durability, concurrency) == GOAL_CASE else None
            report.value(
                f"{label} {durability} c={concurrency} decisions/s",
                statistics.median(figures["rate"]),
                "/s",
                goal=goal,
                spread=figures["rate"],
            )
        goal_case = results[GOAL_CASE]
        report.value(
            "minimal fsync c=64 p99",
            statistics.median(goal_case["p99_ms"]),
            "ms",
            goal=below(50),
            spread=goal_case["p99_ms"],
        )
        report.time("in-process minimal decision", in_process(small, small_items),
                    goal=at_most(80e-6))  # fmt: skip
        report.time("in-process 2x256KiB decision", in_process(large, large_items))
        transparency_cost(report, directory, small, small_items)
        process, sock = start_daemon(directory, "fsync")
        try:
            trio.run(rss_probe, sock, large, large_items)
        finally:
            peak = stop_daemon(process)
        report.value(
            "peak RSS after 64 concurrent 2x256KiB submissions", peak / 1024, "MiB",
            goal=below(300),
        )  # fmt: skip
        print()
        retention_cost(report, directory)


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--retention-only", action="store_true", help="measure only the cost of retention"
    )


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__, configure=_options))
