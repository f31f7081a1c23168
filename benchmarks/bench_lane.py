"""The durable HTTP decision in the running server: decisions/s, p99 and CPU per decision by stage.

Runs the real daemon (``evidenced serve --config``, one process, or ``--workers N``) twice
side by side — with the fast lane (``daemon.server._lane``) and with ``EVIDENCED_FAST_LANE=0``
(every request on the general path) — each with an HTTP listener on loopback and a fsync'd
audit log, one ``bytes-sha256`` session (the peer comparison's job: 256 distinct honest
requests, a 64-byte payload each, base64 in a JSON body), and drives them in interleaved
rounds (the order rotating) with the peer comparison's closed-loop load generator
(``loadgen``: ``c`` keep-alive connections, one request in flight on each; it reads the
server's CPU time from /proc). Prints, per daemon and concurrency (``--concs``, default
``1 64``):

* durable decisions/s (median of the rounds, spread min-max), p99, and the server's CPU per
  decision (utime+stime of the daemon and its descendants over the window), with the
  issue's goals (p99 ≤ 10 ms and ≤ 100 µs at c=64, ≤ 400 µs at c=1); and the lane over
  the general path (medians of the per-round ratios);
* with py-spy installed (``.venv/bin/pip install py-spy``: a measuring tool, never a project
  dependency), one sampled profile of each daemon at the highest concurrency, every CPU
  sample put in the stage of the deepest frame a stage rule matches (:data:`STAGES`), the
  stages' shares and their µs per decision (share × CPU per decision). Without py-spy the
  profile is skipped and the script says so. (py-spy's samples lean towards system calls;
  the /proc CPU figures are the measure, the profile says where it goes.)

The load generator is not part of this project: build it with the peer comparison's
``build.sh`` (Go standard library only). Its location: ``--loadgen PATH``, else the
environment's ``EVIDENCED_LOADGEN``, else ``<tempdir>/evidenced-peer/bin/loadgen`` (where
that build puts it; ``tempfile.gettempdir()``). Without it the script says so and measures
nothing.

Never asserts on time. Usage: ``python benchmarks/bench_lane.py [--quick] [--json PATH]
[--loadgen PATH] [--concs "1 64"] [--rounds N] [--seconds S] [--workers N]
[--only lane|general] [--profile-out PATH]``.
"""

from __future__ import annotations

import argparse
import base64
import collections
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from _harness import Report, at_most, main

from session import NoOptions
from session._bytes_provider import PROVIDER

ROOT = Path(__file__).resolve().parents[1]
PORT = 19276  # unusual, so as not to take a port other work may use
SESSION = "bytes"

#: (stage, rule): a sample belongs to the stage of its deepest frame that a rule matches; a
#: rule is ``(file fragment, function or "")``. Order matters only between rules matching
#: the same frame (the first wins).
STAGES: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("audit writer thread (write+fsync)", (("_audit.py", "_write_batch"), ("_audit.py", "fsync"),
                                           ("_audit.py", "write"), ("_audit.py", "_check_file"),
                                           ("_audit_files.py", ""), ("_thread_cache.py", ""))),
    ("transparency leaf + index", (("tlog/", ""), ("_lookup.py", ""), ("_audit.py", "_into_tree"))),
    ("audit line render+chain", (("_audit_format.py", ""), ("_audit.py", "_render"))),
    ("audit record (group commit)", (("_audit.py", ""),)),
    ("answer encode", (("_protocol.py", "encode_header"), ("_protocol.py", "to_header"),
                       ("_http_codec.py", "respond"), ("_http_codec.py", "_frame"))),
    ("head parse", (("_http_codec.py", ""),)),
    ("body decode (JSON, base64)", (("_http_body.py", ""),)),
    ("binding decode", (("wire/_binding.py", ""),)),
    ("mechanism + evaluation", (("_evaluation.py", ""), ("session/", ""), ("mechanism/", ""),
                                ("canon/", ""))),
    ("metrics", (("_metrics.py", ""),)),
    ("socket I/O", (("_fastpath.py", ""), ("trio/_socket.py", ""),
                    ("_http_server.py", "_receive"))),
    ("pipeline + front end glue", (("_pipeline.py", ""), ("_http_server.py", ""),
                                   ("_connection.py", ""), ("_lane.py", ""))),
    ("trio scheduler / I/O wait", (("trio/", ""), ("outcome/", ""))),
)  # fmt: skip


def default_loadgen() -> Path:
    """Where the peer comparison's build puts the load generator."""
    return Path(tempfile.gettempdir()) / "evidenced-peer" / "bin" / "loadgen"


def write_bodies(path: Path, count: int = 256, size: int = 64) -> None:
    """``count`` distinct honest bodies, one JSON document a line (seeded)."""
    rng = random.Random(20261201)
    lines = []
    for _ in range(count):
        payload = rng.randbytes(size)
        binding = PROVIDER.honest_binding([payload], NoOptions()).to_dict()
        document = {
            "binding": binding,
            "evidence": [{"base64": base64.b64encode(payload).decode()}],
        }
        lines.append(json.dumps(document, separators=(",", ":")))
    path.write_text("\n".join(lines) + "\n")


def start(directory: Path, workers: int, port: int, *, lane: bool) -> subprocess.Popen[bytes]:
    """The daemon, on ``port``, with the fast lane on or off (``EVIDENCED_FAST_LANE``)."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "evidenced.toml"
    config.write_text(
        '[server]\nlisten = ""\nmax_in_flight = 512\n'
        f'[http]\nlisten = "127.0.0.1:{port}"\n'
        f'[audit]\npath = "{directory / "audit.jsonl"}"\ndurability = "fsync"\n'
        f'[sessions.{SESSION}]\nmechanisms = ["bytes-sha256"]\n'
        "max_evidence_items = 1\nmax_evidence_bytes = 4096\n"
    )
    command = [sys.executable, "-m", "daemon.cli", "serve", "--config", str(config)]
    if workers > 1:
        command[4:4] = ["--workers", str(workers)]
    environment = {**os.environ, "EVIDENCED_FAST_LANE": "1" if lane else "0"}
    process = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=(directory / "serve.err").open("wb"),
        env=environment,
    )
    for _ in range(300):
        if process.poll() is not None:
            raise SystemExit(f"the daemon exited: {(directory / 'serve.err').read_text()[-400:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=1) as answer:
                if answer.status == 200:
                    return process
        except OSError:
            pass
        time.sleep(0.1)
    process.kill()
    raise SystemExit("the daemon did not become ready")


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def load(
    loadgen: Path, bodies: Path, daemon: tuple[int, int], c: int, seconds: float
) -> dict[str, float]:
    """One closed-loop run against ``daemon`` (its port and pid)."""
    port, pid = daemon
    done = subprocess.run(
        [str(loadgen), "-url", f"http://127.0.0.1:{port}/v1/sessions/{SESSION}/decisions",
         "-bodies", str(bodies), "-c", str(c), "-d", f"{seconds}s", "-warmup", "1s",
         "-expect", '"outcome":"PASS"', "-pid", str(pid), "-label", f"c{c}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    result: dict[str, float] = json.loads(done.stdout)
    bad = result["non2xx"] + result["unexpected"] + result["errors"]
    if bad:
        raise SystemExit(f"bad answers at c={c}: {bad} ({done.stdout[:400]})")
    return result


def stage_of(stack: list[str]) -> str:
    """The stage of one sampled stack (frames outermost first)."""
    for frame in reversed(stack):
        for stage, rules in STAGES:
            for fragment, function in rules:
                name = frame.split(" ", 1)[0]  # py-spy: "Class.method (path:line)"
                if fragment in frame and (
                    not function or name == function or name.endswith("." + function)
                ):
                    return stage
    return "other"


def profile(
    spy: str,
    daemon: tuple[int, int],
    loadgen: Path,
    bodies: Path,
    c: int,
    seconds: float,
    out: Path,
) -> tuple[collections.Counter[str], float]:
    """Samples per stage while the load generator runs, and that run's CPU µs per decision."""
    raw = out / "profile.txt"
    recorder = subprocess.Popen(
        [spy, "record", "--format", "raw", "-r", "200", "-d", str(int(seconds)),
         "--subprocesses", "-o", str(raw), "--pid", str(daemon[1])],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    result = load(loadgen, bodies, daemon, c, seconds)
    recorder.wait(timeout=seconds + 60)
    stages: collections.Counter[str] = collections.Counter()
    if raw.exists():
        for line in raw.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if stack and count.isdigit():
                stages[stage_of(stack.split(";"))] += int(count)
    return stages, result["server_cpu_us_per_req"]


def run(report: Report, args: argparse.Namespace) -> None:
    loadgen = Path(args.loadgen or os.environ.get("EVIDENCED_LOADGEN") or default_loadgen())
    if not os.access(loadgen, os.X_OK):
        print(
            f"no load generator at {loadgen}: build the peer comparison's tools (build.sh) "
            "or pass --loadgen; nothing measured"
        )
        return
    concs = [int(c) for c in args.concs.split()]
    rounds = 1 if report.quick else args.rounds
    seconds = 3.0 if report.quick else args.seconds
    lanes = {"lane": True, "general": False}
    if args.only:
        lanes = {args.only: lanes[args.only]}
    with tempfile.TemporaryDirectory(prefix="bench-lane-") as scratch:
        directory = Path(scratch)
        bodies = directory / "bodies.jsonl"
        write_bodies(bodies)
        daemons: dict[str, tuple[int, int]] = {}
        processes = []
        try:
            for index, (name, lane) in enumerate(lanes.items()):
                port = PORT + index
                process = start(directory / name, args.workers, port, lane=lane)
                processes.append(process)
                daemons[name] = (port, process.pid)
                load(loadgen, bodies, daemons[name], 16, 2.0)  # warm-up, not recorded
            for c in concs:
                figures: dict[str, list[dict[str, float]]] = {name: [] for name in daemons}
                for r in range(rounds):  # interleaved, the order rotating
                    order = list(daemons)[r % len(daemons) :] + list(daemons)[: r % len(daemons)]
                    for name in order:
                        figures[name].append(load(loadgen, bodies, daemons[name], c, seconds))
                for name, runs in figures.items():
                    _report(report, f"{name}, workers {args.workers}", c, runs)
                if len(figures) == 2:
                    report.paired_ratio(
                        f"CPU per decision c={c}, lane / general path",
                        [f["server_cpu_us_per_req"] for f in figures["lane"]],
                        [f["server_cpu_us_per_req"] for f in figures["general"]],
                    )
                    report.paired_ratio(
                        f"decisions/s c={c}, lane / general path",
                        [f["rps"] for f in figures["lane"]],
                        [f["rps"] for f in figures["general"]],
                    )
            spy = (
                args.py_spy or shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
            )
            if not os.access(spy, os.X_OK):
                print(
                    "py-spy not installed (.venv/bin/pip install py-spy): the stage profile is "
                    "skipped"
                )
                return
            c = max(concs)
            for name, daemon in daemons.items():
                out = directory / name
                stages, cpu_us = profile(spy, daemon, loadgen, bodies, c, seconds, out)
                if args.profile_out:
                    shutil.copyfile(out / "profile.txt", f"{args.profile_out}.{name}")
                _stages(report, f"{name}, workers {args.workers}", c, stages, cpu_us)
        finally:
            for process in processes:
                stop(process)


def _report(report: Report, what: str, c: int, runs: list[dict[str, float]]) -> None:
    rps = [f["rps"] for f in runs]
    p99 = [f["p99_ms"] / 1e3 for f in runs]
    cpu = [f["server_cpu_us_per_req"] / 1e6 for f in runs]
    report.value(f"decisions/s c={c} ({what})", statistics.median(rps), "/s", spread=rps)
    report.value(
        f"p99 c={c} ({what})",
        statistics.median(p99),
        "s",
        goal=at_most(0.010) if c == 64 else None,
        spread=p99,
    )
    report.value(
        f"server CPU per decision c={c} ({what})",
        statistics.median(cpu),
        "s",
        goal=at_most(100e-6 if c >= 64 else 400e-6),
        spread=cpu,
    )


def _stages(
    report: Report, what: str, c: int, stages: collections.Counter[str], cpu_us: float
) -> None:
    total = sum(stages.values())
    if not total:
        print("py-spy took no samples (ptrace not permitted?): the profile is skipped")
        return
    print(f"\nstage profile at c={c} ({what}): {total} samples, {cpu_us:.0f} µs CPU per decision")
    for stage, count in stages.most_common():
        share = count / total
        print(f"  {stage:38s} {100 * share:5.1f} %  {share * cpu_us:6.1f} µs/decision")
        report.value(f"stage c={c} ({what}): {stage}", 100 * share, "%")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--loadgen", help="the load generator (default: $EVIDENCED_LOADGEN, "
                        "else <tempdir>/evidenced-peer/bin/loadgen)")  # fmt: skip
    parser.add_argument("--py-spy", help="py-spy (default: on PATH or beside this python)")
    parser.add_argument(
        "--profile-out", help="keep py-spy's raw stacks (collapsed) as PATH.lane, PATH.general"
    )
    parser.add_argument("--concs", default="1 64", help='concurrencies (default "1 64")')
    parser.add_argument("--rounds", type=int, default=3, help="runs per concurrency (3)")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per run (10)")
    parser.add_argument("--workers", type=int, default=1, help="serve --workers N (1)")
    parser.add_argument(
        "--only",
        choices=("lane", "general"),
        help="measure one daemon only (default: both, the lane and EVIDENCED_FAST_LANE=0, "
        "in interleaved rounds)",
    )


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__, configure=configure))
