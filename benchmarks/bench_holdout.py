"""Holdout instrument benchmark: strict reader, scorer and adapter, each against a floor
measured in the same run (medians of several runs; ratios printed, nothing asserted)."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import holdout
from holdout.adapter import observe

REPO = Path(__file__).resolve().parents[1]
CHALLENGES = REPO / "fixtures" / "holdout" / "challenges" / "public-s.json"


def median_seconds(action: Callable[[], Any], runs: int = 7) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    base = holdout.read_challenge_array(CHALLENGES.read_bytes())
    emission = observe(base)
    # Scale the S-series 100x (ids S1..S2200) to measure the scorer on a realistic-size run.
    challenges: list[Any] = []
    observations: dict[str, Any] = {}
    for copy_number in range(100):
        for challenge in base:
            cid = f"S{copy_number * len(base) + int(challenge['id'][1:])}"
            challenges.append({**challenge, "id": cid})
            observations[cid] = emission.document["observations"][challenge["id"]]
    document = {**emission.document, "observations": observations}
    data = json.dumps(document).encode()
    schemas = holdout.project_schemas()
    release = document["spec_release_id"]

    floor_read = median_seconds(lambda: json.loads(data))
    strict_read = median_seconds(lambda: holdout.read_json(data))
    scoring = median_seconds(
        lambda: holdout.score_bytes(challenges, data, schemas=schemas, expect_release=release),
        runs=3,
    )
    parsed = holdout.read_json(data)

    def validate_only() -> None:
        for challenge in challenges:
            holdout.validate_challenge(challenge, schemas)
        holdout.validate_observation_document(parsed, schemas)

    validation = median_seconds(validate_only, runs=3)
    predicates = sum(len(c["predicates"]) for c in challenges)
    print(f"document: {len(data)} bytes, {len(challenges)} challenges, {predicates} predicates")

    def line(label: str, seconds: float, ratio: str) -> None:
        print(f"{label:<26} median {seconds * 1e3:9.2f} ms  {ratio}")

    line("json.loads (floor)", floor_read, "")
    line("strict read", strict_read, f"({strict_read / floor_read:.1f}x floor)")
    line("strict read + score", scoring, f"({scoring / floor_read:.1f}x floor)")
    line("  of which jsonschema", validation, f"({validation / scoring:.0%} of scoring)")

    adapter = median_seconds(lambda: observe(base), runs=3)
    print(
        f"adapter (real sessions) {len(base)} challenges median {adapter * 1e3:8.2f} ms "
        f"({adapter / len(base) * 1e3:.2f} ms per challenge)"
    )


if __name__ == "__main__":
    main()
