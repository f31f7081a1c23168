"""Canonical admission of a ~256 KiB record against sha256 + json.loads of the same bytes.

Figure: ``admit_canonical`` per call as a ratio to the baseline ``sha256`` + ``json.loads`` of
the same bytes, measured in interleaved rounds (benchmarks/_harness.py). It is a baseline, not
a floor: admission parses with orjson, which can beat ``json.loads``.
Run: ``python benchmarks/bench_canonical.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json

from _harness import Report, main

from mechanism.canonical import admit_canonical, canonical_bytes

TARGET_BYTES = 256 * 1024


def build_record() -> bytes:
    """A formation-like record: many small objects with digests, ints and short strings."""
    nodes = []
    index = 0
    while True:
        nodes.append(
            {
                "tag": "ATOM",
                "payload_digest": "sha256:" + hashlib.sha256(str(index).encode()).hexdigest(),
                "note": f"node {index} é",
                "index": index,
            }
        )
        index += 1
        if index % 64 == 0 and len(canonical_bytes({"nodes": nodes})) >= TARGET_BYTES - 200:
            break
    return canonical_bytes({"schema_version": "BENCH", "nodes": nodes})


def run(report: Report, args: argparse.Namespace) -> None:
    record = build_record()
    print(f"record: {len(record)} bytes")
    report.compare(
        f"canonical admission {len(record) // 1024} KiB",
        lambda: admit_canonical(record, max_bytes=len(record)),
        lambda: (hashlib.sha256(record).digest(), json.loads(record)),
        floor_name="sha256 + json.loads",
        true_floor=False,
        rounds=31,
    )


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
