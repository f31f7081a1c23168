"""The lookup index of ``GET /v1/log/entry`` (daemon/tlog/_lookup.py): its memory per line,
its rebuild at start, and a lookup by decision id, present and absent, against the offline scan
every lookup used to be.

Writes a hash-chained audit log of ``--lines`` realistic decision lines (default 1,000,000,
about 0.8 GB) in a temporary folder, then:

* the index's size, per line (``health``'s ``transparency.lookup_index.bytes``, the arrays'
  own sizes) and the process's resident-memory growth while it was built;
* the rebuild of the whole log (what a start does in the background);
* an absent decision id (answered from memory, no file read) and a present one (the line read
  from disk at its offset, parsed and checked), against ``find_line``'s scan for the absent id
  (what every lookup cost before the index; one call on the whole log).

The log is deleted at the end; nothing is written outside the temporary folder.

Run: ``.venv/bin/python benchmarks/bench_lookup.py [--lines N] [--quick] [--json PATH]``
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import shutil
import tempfile
import uuid
from pathlib import Path

from _harness import Report, main

from daemon.audit._audit_format import GENESIS, render_body, seal
from daemon.tlog._lookup import LineIndex, LineQuery, find_line


def generate(path: Path, count: int) -> list[str]:
    """Write ``count`` decision lines; return their decision ids."""
    ids = []
    head = GENESIS
    with path.open("wb") as handle:
        for seq in range(1, count + 1):
            decision_id = str(uuid.UUID(int=seq * 0x9E3779B97F4A7C15 % (1 << 122), version=4))
            ids.append(decision_id)
            fields = {
                "binding_digest": hashlib.sha256(seq.to_bytes(8, "big")).hexdigest(),
                "decision_id": decision_id,
                "details": "",
                "event": "decision",
                "evidence": [
                    {"digest": "sha256:" + "b2" * 32, "size": 478},
                    {"digest": "sha256:" + "4c" * 32, "size": 297},
                ],
                "mechanism_digest": "sha256:" + "56" * 32,
                "mechanism_id": "vstd.typed_formation.checked.0.1",
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
    return ids


def _resident() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096


def run(report: Report, args: argparse.Namespace) -> None:
    count = 20_000 if report.quick else args.lines
    folder = Path(tempfile.mkdtemp(prefix="evlookup-", dir=args.dir))
    try:
        path = folder / "audit.jsonl"
        ids = generate(path, count)
        size = path.stat().st_size
        print(f"log: {size / 2**20:.0f} MiB, {count:,} lines ({size // count} B/line)")

        def build() -> LineIndex:
            index = LineIndex(path, first_seq=1, durable_seq=count, durable_size=size)
            index.rebuild()
            return index

        before = _resident()
        index = build()
        grown = _resident() - before
        status = index.status()
        assert status["indexed"] == count and status["failed"] is None, status
        report.value("index size per line (its arrays)", status["bytes"] / count, "B")
        report.value("resident memory growth per line while built", grown / count, "B")
        report.value(f"index size for {count:,} lines", status["bytes"] / 2**20, "MiB")
        report.time(f"rebuild of {count:,} lines", build, rounds=3, max_seconds=60.0)
        present = itertools.cycle(ids[:: max(1, count // 1000)])
        absent = LineQuery(decision_id=str(uuid.UUID(int=7, version=4)))
        assert not index.candidates(absent)

        def find_present() -> None:
            query = LineQuery(decision_id=next(present))
            index.resolve(query, index.candidates(query))

        report.time("absent decision id (index, no read)", lambda: index.candidates(absent))
        report.time("present decision id (index + the line read from disk)", find_present)
        report.time(
            "absent decision id, offline scan of the whole log (the old lookup)",
            lambda: _not_found(path, absent),
            rounds=3,
            max_seconds=60.0,
            min_sample=0.0,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _not_found(path: Path, query: LineQuery) -> None:
    try:
        find_line([path], query)
    except LookupError:
        return
    raise AssertionError("an absent id was found")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lines", type=int, default=1_000_000, help="lines (default 1M)")
    parser.add_argument("--dir", default=None, help="folder for the temporary log")


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__, configure=configure))
