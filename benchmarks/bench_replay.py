"""``evidenced replay --all`` over 10,000 decisions, against the in-process evaluation floor.

A real daemon (``evidenced serve``, ``retain = "all"`` into a filesystem store) is driven at
c=64 with the four formation example pairs (PASS, PASS, FAIL, UNKNOWN) in turn until it has
answered 10,000 decisions (1,000 with ``--quick``). Then, in interleaved rounds
(benchmarks/_harness.py), three costs per decision:

* floor: the same decisions evaluated in this process exactly as the daemon evaluates them
  (fresh evidence store + session + evaluate, evidence already in memory), one process;
* replay with 2 workers: :func:`daemon.replay._replay_run.run_replay` as the CLI runs it
  (verify the log, stream it, fetch and re-hash every item from the store, rebuild and
  evaluate each decision in a pool of two processes, compare) — wall-clock time;
* replay with 1 worker (the same, in this process).

Prints the rates per second and the wall-clock ratios to the floor (a *baseline*, not a true
floor: two workers may beat one process), and the CPU ratio: CPU seconds per decision of the
replay (this process and its workers) over the floor's (a true floor: a replay does that
evaluation and more). On a machine shared with other work the CPU ratio is the steadier
figure. Never asserts on time.

Usage: ``python benchmarks/bench_replay.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio
from _harness import Op, Report, main

from daemon import open_client
from daemon.replay._replay_run import ReplayRequest, run_replay
from mechanism.formation import FormationPathCertificateMechanism, formation_binding
from session import BoundProposition, EvidenceStore, VerificationSession

ROOT = Path(__file__).resolve().parents[1]
QUICK = "--quick" in sys.argv
DECISIONS = 1_000 if QUICK else 10_000
CASES = ("atom", "compose", "tampered", "unsupported-profile")


def pairs() -> list[tuple[BoundProposition, list[bytes]]]:
    folder = ROOT / "fixtures" / "formation"
    digest = FormationPathCertificateMechanism().mechanism_digest
    found = []
    for name in CASES:
        subject = (folder / f"{name}.subject.json").read_bytes()
        certificate = (folder / f"{name}.certificate.json").read_bytes()
        found.append(
            (
                formation_binding(subject, certificate, mechanism_digest=digest),
                [subject, certificate],
            )
        )
    return found


def write_log(directory: Path) -> tuple[Path, str]:
    """Drive a retaining daemon until it answered DECISIONS decisions: (log, store spec)."""
    config = directory / "evidenced.toml"
    sock = directory / "sock"
    config.write_text(
        f'[server]\nlisten = ""\nsocket = "{sock}"\nmax_in_flight = 512\n'
        f'[audit]\npath = "{directory}/audit.jsonl"\ndurability = "none"\n'
        '[sessions.formation]\nmechanisms = ["formation"]\n'
        'retain = "all"\nstore = "fs:evidence"\n'
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    assert process.stdout is not None
    json.loads(process.stdout.readline())
    cases = pairs()
    remaining = DECISIONS

    async def drive() -> None:
        async def worker(offset: int) -> None:
            nonlocal remaining
            async with open_client(unix=str(sock), request_timeout=120) as client:
                turn = offset
                while remaining > 0:
                    remaining -= 1
                    binding, items = cases[turn % len(cases)]
                    await client.submit("formation", binding, items)
                    turn += 1

        async with trio.open_nursery() as nursery:
            for offset in range(64):
                nursery.start_soon(worker, offset)

    began = time.perf_counter()
    trio.run(drive)
    print(f"daemon answered {DECISIONS} decisions in {time.perf_counter() - began:.1f} s")
    process.send_signal(signal.SIGTERM)
    process.wait(60)
    process.stdout.close()
    return directory / "audit.jsonl", f"fs:{directory}/evidence"


CPU: dict[str, list[float]] = {"floor": [], "replay 2": [], "replay 1": []}


def _cpu() -> float:
    """CPU seconds of this process and of its reaped children (the replay workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def floor(cases: list[tuple[BoundProposition, list[bytes]]]) -> float:
    """Seconds per decision: evaluate DECISIONS decisions in this process."""
    mechanism = FormationPathCertificateMechanism()
    cpu = _cpu()
    began = time.perf_counter()
    for number in range(DECISIONS):
        binding, items = cases[number % len(cases)]
        store = EvidenceStore()
        for item in items:
            store.add(item)
        session = VerificationSession(store)
        session.register(mechanism)
        session.evaluate(binding)
    elapsed = time.perf_counter() - began
    CPU["floor"].append((_cpu() - cpu) / DECISIONS)
    return elapsed / DECISIONS


def replay(log: Path, spec: str, workers: int) -> float:
    """Seconds per decision (wall clock) of a whole replay; checks it reproduced them all."""
    cpu = _cpu()
    began = time.perf_counter()
    document = run_replay(ReplayRequest(logs=(log,), store=spec, workers=workers))
    elapsed = time.perf_counter() - began
    CPU[f"replay {workers}"].append((_cpu() - cpu) / DECISIONS)
    assert document["status"] == "REPRODUCED", document["counts"]
    assert document["decisions"] == DECISIONS
    return elapsed / DECISIONS


def run(report: Report, args: argparse.Namespace) -> None:
    cases = pairs()
    with tempfile.TemporaryDirectory(prefix="evbench", dir="/tmp") as name:
        log, spec = write_log(Path(name))
        results = report.compare_many(
            lambda: floor(cases),
            [
                Op(
                    "replay --all, 2 workers, per decision",
                    lambda: replay(log, spec, 2),
                    true_floor=False,
                ),
                Op(
                    "replay --all, 1 worker, per decision",
                    lambda: replay(log, spec, 1),
                    true_floor=False,
                ),
            ],
            floor_name="in-process evaluation per decision",
            rounds=3 if QUICK else 5,
            max_seconds=600.0,
            sampled=True,
        )
        floor_seconds = results[0].floor_seconds or 0.0
        report.value(f"in-process evaluation floor, {DECISIONS} decisions", 1 / floor_seconds, "/s")
        for result in results:
            assert result.op_seconds is not None
            label = result.name.removesuffix(", per decision")
            report.value(f"{label}, {DECISIONS} decisions", 1 / result.op_seconds, "/s")
        for workers in (2, 1):
            report.paired_ratio(
                f"replay CPU per decision / floor CPU per decision, {workers} worker(s)",
                CPU[f"replay {workers}"],
                CPU["floor"],
            )


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
