"""Audit log start-up: verifying the whole log vs verifying from the head sidecar.

Generates a valid hash-chained log of ``--mb`` MiB of realistic decision lines (default 64;
the figure in docs/audit-log.md is ``--mb 1024``) in a temporary folder, then measures in
interleaved rounds (benchmarks/_harness.py), against the floor of reading and SHA-256-hashing
the same file (work a full verification provably does):

* full verification (``verify_log``: what every start did before the sidecar, with the
  line check of this version);
* ``AuditLog.open`` without a sidecar (the first start after an upgrade: verifies everything,
  then writes the sidecar);
* ``AuditLog.open`` with the sidecar 4 MiB behind the end (a start after a crash: the
  sidecar is rewritten every 4 MiB);
* ``AuditLog.open`` with the sidecar at the end (a start after a clean stop).

The sidecar is restored before each call, so every call starts from the same state. The log
is deleted at the end; nothing is written outside the temporary folder.

Run: ``.venv/bin/python benchmarks/bench_audit_startup.py [--mb N] [--quick] [--json PATH]``
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import tempfile
from pathlib import Path

from _harness import Op, Report, main

from daemon import AuditLog, verify_log
from daemon.audit._audit import DEFAULT_CHECKPOINT_BYTES
from daemon.audit._audit_files import Checkpoint, sidecar_path
from daemon.audit._audit_format import GENESIS, render_body, seal


def generate(path: Path, megabytes: int) -> list[tuple[int, str, int]]:
    """Write the log; return (seq, digest, end offset) of every line."""
    target = megabytes * 1024 * 1024
    points: list[tuple[int, str, int]] = []
    seq, head, size = 0, GENESIS, 0
    with path.open("wb") as handle:
        while size < target:
            seq += 1
            fields = {
                "binding_digest": hashlib.sha256(seq.to_bytes(8, "big")).hexdigest(),
                "decision_id": f"{seq:08x}-feb2-40b1-9d76-94b705e3647a",
                "details": "",
                "event": "decision",
                "evidence": [
                    {"digest": "sha256:" + "b2" * 32, "size": 478},
                    {"digest": "sha256:" + "4c" * 32, "size": 297},
                ],
                "mechanism_digest": "sha256:" + "56" * 32,
                "mechanism_id": "vstd.typed_formation.checked.0.1",
                "metrics": {"evaluate_ns": 657092, "receive_ns": 186777, "total_ns": 893993},
                "observed_evidence_bytes": 775,
                "outcome": "PASS",
                "prev": head,
                "reason_codes": [],
                "request_id": seq,
                "requester": {"gid": 0, "pid": 5883, "transport": "unix", "uid": 0},
                "seq": seq,
                "session": "formation",
                "timestamp": "2026-11-29T20:56:22.690552Z",
            }
            line, head = seal(render_body(fields))
            handle.write(line + b"\n")
            size += len(line) + 1
            points.append((seq, head, size))
    return points


def sidecar_bytes(path: Path, point: tuple[int, str, int]) -> bytes:
    seq, head, offset = point
    return Checkpoint(path.name, 1, seq, head, offset).render()


def run(report: Report, args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="evaudit-", dir=args.dir))
    try:
        path = folder / "audit.jsonl"
        points = generate(path, args.mb)
        size = points[-1][2]
        behind = next(p for p in reversed(points) if p[2] <= size - DEFAULT_CHECKPOINT_BYTES)
        sidecar = sidecar_path(path)
        at_end, lagging = sidecar_bytes(path, points[-1]), sidecar_bytes(path, behind)
        print(f"log: {size / 2**20:.0f} MiB, {len(points):,} lines ({size // len(points)} B/line)")

        def start(state: bytes | None) -> None:
            if state is None:
                sidecar.unlink(missing_ok=True)
            else:
                sidecar.write_bytes(state)
            log = AuditLog.open(path)
            assert log.last_seq == len(points)
            log.close_sync()

        def floor() -> None:
            digest = hashlib.sha256()
            with path.open("rb") as handle:
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)

        report.compare_many(
            floor,
            [
                Op("full verification (verify_log)", lambda: verify_log(path)),
                Op("start-up without a sidecar (first start)", lambda: start(None)),
                Op("start-up, sidecar 4 MiB behind (after a crash)", lambda: start(lagging),
                   true_floor=False),
                Op("start-up after a clean stop (sidecar at the end)", lambda: start(at_end),
                   true_floor=False),
            ],
            floor_name=f"read + sha256 of the {size / 2**20:.0f} MiB log",
            rounds=7,
            max_seconds=60.0,
            min_sample=0.0,
        )  # fmt: skip
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mb", type=int, default=64, help="log size in MiB (default 64)")
    parser.add_argument("--dir", default=None, help="folder for the temporary log")


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__, configure=configure))
