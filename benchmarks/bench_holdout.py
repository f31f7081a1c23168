"""Holdout instrument benchmark: strict reader, scorer and adapter.

The scorer's figure (goal: read + score <= 3x, docs/benchmarks.md) is the strict read + score of a
2,200-challenge observation document as a ratio to ``json.loads`` of the same document,
measured in interleaved rounds (benchmarks/_harness.py). ``json.loads`` is a baseline, not a
floor: the strict reader may parse with a faster decoder. Also the strict read alone, schema
validation alone (both schemas, every challenge and the document), and the adapter per
challenge (real sessions). Nothing asserted.
Run: ``python benchmarks/bench_holdout.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from _harness import Op, Report, at_most, main

import holdout
from holdout.adapter import observe

REPO = Path(__file__).resolve().parents[1]
CHALLENGES = REPO / "fixtures" / "holdout" / "challenges" / "public-s.json"


def run(report: Report, args: argparse.Namespace) -> None:
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
    # As a scoring run gets them: read from a file, no object shared between challenges.
    challenges = holdout.read_challenge_array(json.dumps(challenges).encode())
    schemas = holdout.project_schemas()
    release = document["spec_release_id"]
    parsed = holdout.read_json(data)
    scored = holdout.score_bytes(challenges, data, schemas=schemas, expect_release=release)
    assert scored.refusal is None, scored.detail
    predicates = sum(len(c["predicates"]) for c in challenges)
    print(f"document: {len(data)} bytes, {len(challenges)} challenges, {predicates} predicates")

    def validate_only() -> None:
        for challenge in challenges:
            holdout.validate_challenge(challenge, schemas)
        holdout.validate_observation_document(parsed, schemas)

    report.compare_many(
        lambda: json.loads(data),
        [
            Op("strict read", lambda: holdout.read_json(data), true_floor=False),
            Op(
                "strict read + score",
                lambda: holdout.score_bytes(
                    challenges, data, schemas=schemas, expect_release=release
                ),
                goal=at_most(3.0),
                true_floor=False,
            ),
            Op("schema validation only", validate_only, true_floor=False),
        ],
        floor_name="json.loads",
        max_seconds=30.0,
    )
    adapter = report.time("adapter (real sessions), 22 challenges", lambda: observe(base))
    assert adapter.value is not None
    print(f"adapter: {adapter.value / len(base) * 1e3:.2f} ms per challenge")


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
