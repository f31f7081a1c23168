"""Benchmark: full descriptor-authorization evaluation of both fixture pairs.

Prints, for each pair, a full ``evaluate`` (direct and through a ``VerificationSession``) as a
ratio to the floor measured in the same interleaved rounds (benchmarks/_harness.py): hashing
the two items once with each algorithm. Then the share of evaluation time spent hashing
(SHA3-512 CanonFS + SHA-256 evidence references, timing every hash call during instrumented
runs) and a per-stage breakdown; and this machine's SHA3-512 throughput. No assertions.
Run: ``python benchmarks/bench_descriptor.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import time
from collections.abc import Callable
from typing import Any

from _harness import Op, Report, main

from mechanism.descriptor import (
    default_mechanism,
    descriptor_binding,
    encode_descriptor,
    safetensors_fixture_bytes,
    tisc_fixture_bytes,
)
from session import EvidenceStore, VerificationSession

RUNS = 400  # instrumented runs (hash share, stage breakdown)


class HashTimer:
    """Replaces hashlib.sha3_512/sha256 with timed wrappers while active."""

    def __init__(self) -> None:
        self.ns = 0
        self.calls = 0
        self._originals = (hashlib.sha3_512, hashlib.sha256)

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter_ns()
            result = original(*args, **kwargs)
            result.digest()  # include finalisation in the hashing share
            self.ns += time.perf_counter_ns() - start
            self.calls += 1
            return result

        return timed

    def __enter__(self) -> HashTimer:
        hashlib.sha3_512 = self._wrap(self._originals[0])
        hashlib.sha256 = self._wrap(self._originals[1])
        return self

    def __exit__(self, *exc: object) -> None:
        hashlib.sha3_512, hashlib.sha256 = self._originals


def stage_breakdown(
    mechanism: Any, binding: Any, evidence: tuple[bytes, bytes], runs: int
) -> dict[str, float]:
    names = [
        "_admit",  # the pair pre-check pipeline (binding steps, then storage admission)
        "_descriptor_stage",
        "_discovery_stage",
        "_authorization_stage",
        "_provider_stage",
    ]
    totals = dict.fromkeys(names, 0.0)
    originals = {name: getattr(mechanism, name) for name in names}

    def wrap(name: str) -> Callable[..., Any]:
        original = originals[name]

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter_ns()
            try:
                return original(*args, **kwargs)
            finally:
                totals[name] += time.perf_counter_ns() - start

        return timed

    for name in names:
        setattr(mechanism, name, wrap(name))
    try:
        for _ in range(runs):
            mechanism.evaluate(binding, evidence)
    finally:
        for name in names:
            delattr(mechanism, name)
    return {name.strip("_"): totals[name] / runs for name in names}


def run(report: Report, args: argparse.Namespace) -> None:
    runs = 40 if report.quick else RUNS
    big = bytes(8 * 1024 * 1024)
    start = time.perf_counter_ns()
    hashlib.sha3_512(big).digest()
    sha3_seconds = (time.perf_counter_ns() - start) / 1e9
    report.value("SHA3-512 throughput (8 MiB)", len(big) / sha3_seconds / 2**20, "MiB/s")

    for name, payload in (
        ("t81vm/run", tisc_fixture_bytes()),
        ("native-weights/inspect", safetensors_fixture_bytes()),
    ):
        descriptor = encode_descriptor(payload)
        mechanism = default_mechanism()
        binding = descriptor_binding(descriptor, payload, mechanism=mechanism)
        evidence = (descriptor, payload)
        assert mechanism.evaluate(binding, evidence).outcome.value == "PASS"
        store = EvidenceStore()
        store.add(descriptor)
        store.add(payload)
        session = VerificationSession(store)
        session.register(mechanism)
        print(f"\n{name}: descriptor {len(descriptor)} B, payload {len(payload)} B")

        def floor(d: bytes = descriptor, p: bytes = payload) -> None:
            hashlib.sha3_512(d).digest()
            hashlib.sha3_512(p).digest()
            hashlib.sha256(d).digest()
            hashlib.sha256(p).digest()

        # Evaluation hashes both items with both algorithms: a true floor.
        report.compare_many(
            floor,
            [
                Op(f"{name} evaluate (direct)",
                   functools.partial(mechanism.evaluate, binding, evidence)),
                Op(f"{name} evaluate (session)", functools.partial(session.evaluate, binding)),
            ],
            floor_name="hash both items once",
        )  # fmt: skip

        with HashTimer() as timer:
            start = time.perf_counter_ns()
            for _ in range(runs):
                mechanism.evaluate(binding, evidence)
            instrumented = time.perf_counter_ns() - start
        report.value(f"{name} hashing share (instrumented)", 100 * timer.ns / instrumented, "%")
        print(f"  {timer.calls / runs:.0f} hash calls per evaluation; stages (instrumented):")
        stages = stage_breakdown(mechanism, binding, evidence, runs)
        total = sum(stages.values())
        for stage, ns in stages.items():
            print(f"    {stage:<22} {ns / 1e3:9.1f} µs  {100 * ns / total:5.1f} %")


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
