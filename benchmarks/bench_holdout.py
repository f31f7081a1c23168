"""Holdout instrument benchmark: strict reader, scorer and adapter.

The scorer's goal figure (read + score <= 3x, docs/benchmarks.md) is ``holdout score``'s route:
the strict read of the 2,200-challenge set's bytes and of the observation document's bytes,
then scoring, as a ratio to ``json.loads`` of the same bytes (both files), measured in
interleaved rounds (benchmarks/_harness.py). ``json.loads`` is a baseline, not a floor: the
strict reader may parse with a faster decoder. Also: the API route with the challenges already
parsed by the caller (copied before scoring, as ``holdout.score`` promises) against
``json.loads`` of the document alone (the figure of record before the command read the
challenge set itself), the strict read alone, schema validation alone (both schemas, every
challenge and the document), the explanations of the run's 1,000 non-passing predicates
(computed on first use, after scoring), and the adapter per challenge (real sessions).
Nothing asserted.
Run: ``python benchmarks/bench_holdout.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from _harness import Op, Report, at_most, main

from mechanism import holdout
from mechanism.holdout.adapter import observe

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
    challenge_bytes = json.dumps(challenges).encode()
    challenges = holdout.read_challenge_array(challenge_bytes)
    schemas = holdout.project_schemas()
    release = document["spec_release_id"]
    parsed = holdout.read_json(data)
    scored = holdout.score_bytes(challenges, data, schemas=schemas, expect_release=release)
    assert scored.refusal is None, scored.detail
    predicates = sum(len(c["predicates"]) for c in challenges)
    print(f"document: {len(data)} bytes, {len(challenges)} challenges, {predicates} predicates")
    print(f"challenge set: {len(challenge_bytes)} bytes; {len(scored.pending)} not passing")

    def loads_both() -> None:
        json.loads(challenge_bytes)
        json.loads(data)

    def command_route() -> None:  # what ``holdout score`` does between reading and printing
        holdout.score_bytes(challenge_bytes, data, schemas=schemas, expect_release=release)

    report.compare_many(
        loads_both,
        [
            Op(
                "score command route: strict read of both files + score",
                command_route,
                goal=at_most(3.0),
                true_floor=False,
            ),
        ],
        floor_name="json.loads of both files",
        max_seconds=30.0,
    )

    def explain() -> None:  # on a fresh report each time: they are cached once computed
        fresh = holdout.ScoreReport("FAIL", None, None, {}, pending=scored.pending)
        assert len(fresh.explanations) == len(scored.pending)

    def validate_only() -> None:
        for challenge in challenges:
            holdout.validate_challenge(challenge, schemas)
        holdout.validate_observation_document(parsed, schemas)

    report.compare_many(
        lambda: json.loads(data),
        [
            Op("strict read", lambda: holdout.read_json(data), true_floor=False),
            Op(
                "strict read + score (challenges parsed by the caller, copied)",
                lambda: holdout.score_bytes(
                    challenges, data, schemas=schemas, expect_release=release
                ),
                true_floor=False,
            ),
            Op("schema validation only", validate_only, true_floor=False),
            Op("explanations of the non-passing predicates", explain, true_floor=False),
        ],
        floor_name="json.loads",
        max_seconds=30.0,
    )
    adapter = report.time("adapter (real sessions), 22 challenges", lambda: observe(base))
    assert adapter.value is not None
    print(f"adapter: {adapter.value / len(base) * 1e3:.2f} ms per challenge")


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
