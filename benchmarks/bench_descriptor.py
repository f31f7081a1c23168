"""Benchmark: full descriptor-authorization evaluation of both fixture pairs.

Prints, for each pair, the median wall time of a full ``evaluate`` (direct and through a
``VerificationSession``), the share of that time spent hashing (SHA3-512 CanonFS + SHA-256
evidence references, measured by timing every hash call during instrumented runs) versus
everything else, a per-stage breakdown, and a floor measured in the same run: hashing the two
items once with each algorithm. Also prints this machine's SHA3-512 throughput. No assertions.
"""

from __future__ import annotations

import functools
import hashlib
import statistics
import time
from collections.abc import Callable
from typing import Any

from mechanism.descriptor import (
    default_mechanism,
    descriptor_binding,
    encode_descriptor,
    safetensors_fixture_bytes,
    tisc_fixture_bytes,
)
from session import EvidenceStore, VerificationSession

RUNS = 400
WARMUP = 20


def median_ns(function: Callable[[], Any], runs: int = RUNS) -> float:
    for _ in range(WARMUP):
        function()
    samples = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        function()
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples)


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
    mechanism: Any, binding: Any, evidence: tuple[bytes, bytes]
) -> dict[str, float]:
    names = [
        "_preflight_binding",
        "_admit_storage",
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
        for _ in range(RUNS):
            mechanism.evaluate(binding, evidence)
    finally:
        for name in names:
            delattr(mechanism, name)
    return {name.strip("_"): totals[name] / RUNS for name in names}


def main() -> None:
    big = bytes(8 * 1024 * 1024)
    start = time.perf_counter_ns()
    hashlib.sha3_512(big).digest()
    sha3_seconds = (time.perf_counter_ns() - start) / 1e9
    print(f"SHA3-512 throughput on 8 MiB: {len(big) / sha3_seconds / 1e9:.3f} GB/s")

    for name, payload in (
        ("t81vm/run", tisc_fixture_bytes()),
        ("native-weights/inspect", safetensors_fixture_bytes()),
    ):
        descriptor = encode_descriptor(payload)
        mechanism = default_mechanism()
        binding = descriptor_binding(descriptor, payload, mechanism=mechanism)
        evidence = (descriptor, payload)
        assert mechanism.evaluate(binding, evidence).outcome.value == "PASS"

        direct = median_ns(functools.partial(mechanism.evaluate, binding, evidence))
        store = EvidenceStore()
        store.add(descriptor)
        store.add(payload)
        session = VerificationSession(store)
        session.register(mechanism)
        via_session = median_ns(functools.partial(session.evaluate, binding))

        def floor(d: bytes = descriptor, p: bytes = payload) -> None:
            hashlib.sha3_512(d).digest()
            hashlib.sha3_512(p).digest()
            hashlib.sha256(d).digest()
            hashlib.sha256(p).digest()

        floor_ns = median_ns(floor)

        with HashTimer() as timer:
            start = time.perf_counter_ns()
            for _ in range(RUNS):
                mechanism.evaluate(binding, evidence)
            instrumented = time.perf_counter_ns() - start
        hashing_share = timer.ns / instrumented
        stages = stage_breakdown(mechanism, binding, evidence)

        print(f"\n== {name}: descriptor {len(descriptor)} B, payload {len(payload)} B ==")
        print(f"  full evaluate (direct)       median {direct / 1e3:9.1f} µs")
        print(f"  full evaluate (session)      median {via_session / 1e3:9.1f} µs")
        print(f"  floor: hash both items once  median {floor_ns / 1e3:9.1f} µs")
        print(f"  ratio evaluate / floor       {direct / floor_ns:9.1f}x")
        print(
            f"  hashing share (instrumented) {100 * hashing_share:5.1f} % "
            f"({timer.calls / RUNS:.0f} hash calls per evaluation); everything else "
            f"{100 * (1 - hashing_share):5.1f} %"
        )
        total = sum(stages.values())
        for stage, ns in stages.items():
            print(f"    {stage:<22} {ns / 1e3:9.1f} µs  {100 * ns / total:5.1f} %")


if __name__ == "__main__":
    main()
