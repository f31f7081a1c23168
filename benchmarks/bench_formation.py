"""Benchmark: ``check_formation`` and ``produce_formation_certificate`` against a parsing floor.

Run: ``.venv/bin/python benchmarks/bench_formation.py [--repeat N]``.

Pairs: (a) the minimal one-ATOM pair; (b) 1,024-node pairs — 1,024 ATOMs (the largest subject
1,024 nodes can make: every other constructor's node is smaller) and a mix of all seven
constructors; (c) a 64-deep APPLY chain (the deepest admissible). For each, the median time
per call is printed next to the floor measured in the same run — SHA-256 of both records plus
``json.loads`` of both — and the ratio. The goal is the checker on (b) within 3x of the floor.
``evaluate`` is the session adapter called directly with the honest binding (its preflight
rehashes both items and admits the subject once more before the pure check).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from mechanism.canonical import canonical_bytes
from mechanism.formation import (
    PROFILE_DIGEST,
    FormationPathCertificateMechanism,
    check_formation,
    formation_binding,
    produce_formation_certificate,
)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


GROUND = _digest(b"benchmark ground")
AGENCY = "sha256:41e3a27c8322874bb5634890d33cff2a9170f2906c83d45d9c7968836d7e482c"


def _subject(nodes: list[dict[str, Any]], root: int) -> bytes:
    return canonical_bytes(
        {
            "schema_version": "VSTD-TYPED-FORMATION-0.1",
            "profile_digest": PROFILE_DIGEST,
            "context": {"ground_artifact_digest": GROUND, "authority_axiom_agency_digest": AGENCY},
            "nodes": nodes,
            "root": root,
        }
    )


def _atom(n: int) -> dict[str, Any]:
    return {"tag": "ATOM", "payload_digest": _digest(n.to_bytes(4, "big"))}


def minimal() -> list[dict[str, Any]]:
    return [_atom(0)]


def atoms_1024() -> list[dict[str, Any]]:
    return [_atom(n) for n in range(1024)]


def mixed_1024() -> list[dict[str, Any]]:
    """Blocks of ATOM, APPLY, APPLY, APPLY_STEP x2, COMPOSE, ID, QUOTE, READ (9 nodes)."""
    nodes: list[dict[str, Any]] = []
    while len(nodes) + 9 <= 1024:
        b = len(nodes)
        nodes += [
            _atom(b),
            {"tag": "APPLY", "argument": b},
            {"tag": "APPLY", "argument": b + 1},
            {"tag": "APPLY_STEP", "source": b, "target": b + 1},
            {"tag": "APPLY_STEP", "source": b + 1, "target": b + 2},
            {"tag": "COMPOSE", "left": b + 3, "right": b + 4},
            {"tag": "ID", "at": b},
            {"tag": "QUOTE", "value": b + 5},
            {"tag": "READ", "code": b + 7},
        ]
    while len(nodes) < 1024:
        nodes.append(_atom(len(nodes)))
    return nodes


def chain_64() -> list[dict[str, Any]]:
    return [_atom(0), *({"tag": "APPLY", "argument": i} for i in range(63))]


def _interleaved(calls: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Seconds per call for each callable, measured round-robin so load drifts hit all alike."""
    # Calibrate calls per sample to ~2 ms per callable: short samples, many rounds.
    loops = 1
    while loops < 1 << 14:
        start = time.perf_counter()
        for _ in range(loops):
            for call in calls.values():
                call()
        if time.perf_counter() - start > 0.002 * len(calls):
            break
        loops *= 2
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            for _ in range(loops):
                call()
            samples[name].append((time.perf_counter() - start) / loops)
    return samples


def _floor(subject: bytes, certificate: bytes) -> None:
    hashlib.sha256(subject).digest()
    hashlib.sha256(certificate).digest()
    json.loads(subject)
    json.loads(certificate)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=61, help="interleaved samples per pair")
    rounds = parser.parse_args().rounds
    cases = [
        ("(a) minimal one-ATOM", minimal(), 0),
        ("(b) 1024 ATOMs", atoms_1024(), 1023),
        ("(b) 1024 mixed", mixed_1024(), 1016),
        ("(c) 64-deep chain", chain_64(), 63),
    ]
    print("median seconds per call; ratio = median of per-round ratios to the floor")
    print("floor = sha256(subject) + sha256(certificate) + json.loads(subject) + json.loads(cert)")
    print(
        f"{'pair':22} {'bytes s+c':>13} {'floor':>10} {'check':>10} {'ratio':>6} "
        f"{'produce':>10} {'ratio':>6} {'evaluate':>10} {'ratio':>6}"
    )
    for name, nodes, root in cases:
        subject = _subject(nodes, root)
        certificate = produce_formation_certificate(subject)
        report = check_formation(subject, certificate)
        assert report["status"] == "CHECKED", report
        samples = _interleaved(
            {
                "floor": functools.partial(_floor, subject, certificate),
                "check": functools.partial(check_formation, subject, certificate),
                "produce": functools.partial(produce_formation_certificate, subject),
                "evaluate": functools.partial(
                    FormationPathCertificateMechanism().evaluate,
                    formation_binding(subject, certificate),
                    (subject, certificate),
                ),
            },
            rounds,
        )
        floor = samples["floor"]
        median = {key: statistics.median(values) for key, values in samples.items()}
        ratio = {
            key: statistics.median(v / f for v, f in zip(values, floor, strict=True))
            for key, values in samples.items()
        }
        size = f"{len(subject)}+{len(certificate)}"
        print(
            f"{name:22} {size:>13} {median['floor'] * 1e6:>8.1f}us "
            f"{median['check'] * 1e6:>8.1f}us {ratio['check']:>5.2f}x "
            f"{median['produce'] * 1e6:>8.1f}us {ratio['produce']:>5.2f}x "
            f"{median['evaluate'] * 1e6:>8.1f}us {ratio['evaluate']:>5.2f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
