"""Canonical admission of a ~256 KiB record against the floor sha256 + json.loads (same run).

Prints the median of several runs for each and their ratio.
Run: ``python benchmarks/bench_canonical.py``.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from collections.abc import Callable

from mechanism.canonical import admit_canonical, canonical_bytes

RUNS = 31
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


def median_seconds(action: Callable[[], object]) -> float:
    samples = []
    for _ in range(RUNS):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    record = build_record()
    admission = median_seconds(lambda: admit_canonical(record, max_bytes=len(record)))
    floor = median_seconds(lambda: (hashlib.sha256(record).digest(), json.loads(record)))
    print(f"record: {len(record)} bytes, {RUNS} runs each (median)")
    print(f"canonical admission:        {admission * 1e3:8.3f} ms")
    print(f"floor sha256 + json.loads:  {floor * 1e3:8.3f} ms")
    print(f"ratio admission / floor:    {admission / floor:8.2f}x")


if __name__ == "__main__":
    main()
