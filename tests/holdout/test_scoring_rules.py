"""Refusal-before-scoring rules and schema semantics with this project's own schemas."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mechanism import holdout

ROOT = "root-" + "a" * 64
RELEASE = "srel-" + "b" * 64
SCHEMAS = holdout.project_schemas()

CHALLENGE: dict[str, Any] = {
    "id": "S1",
    "name": "n",
    "fixture": {"artifact": "formation-identity", "root": ROOT},
    "recipe": [{"op": "IDENTITY"}],
    "predicates": [
        {"op": "VERDICT_EQ", "path": "artifact.verdict", "value": "PASS"},
        {"op": "REFUSAL_SET_EQ", "value": []},
    ],
}
DOCUMENT: dict[str, Any] = {
    "type": "EVIDENCED-HOLDOUT-OBSERVATION-v1",
    "implementation": "evidenced-python",
    "spec_release_id": RELEASE,
    "observations": {
        "S1": {
            "fixture_root": ROOT,
            "candidate": {"artifact": {"artifact_root": ROOT, "verdict": "PASS"}},
            "refusal_set": [],
        }
    },
}


def score(challenges: list[Any], document: Any) -> holdout.ScoreReport:
    return holdout.score(challenges, document, schemas=SCHEMAS, expect_release=RELEASE)


def mutated(**changes: Any) -> dict[str, Any]:
    document = copy.deepcopy(DOCUMENT)
    observation = document["observations"]["S1"]
    observation.update(changes)
    return document


def test_the_honest_document_passes() -> None:
    report = score([CHALLENGE], DOCUMENT)
    assert (report.verdict, report.to_dict()["by_challenge"]) == (
        "PASS",
        {"S1": {"pass": 2, "fail": 0, "unresolved": 0}},
    )


@pytest.mark.parametrize(
    ("document", "refusal"),
    [
        (mutated(fixture_root=ROOT + "\n"), "observation-schema"),
        (mutated(refusal_set=["B_CODE", "A_CODE"]), "observation-schema"),
        (mutated(refusal_set=["lower-case-code"]), "observation-schema"),
        (mutated(resolve={"outcome": "fine"}), "observation-schema"),
        (mutated(candidate={"D": {}}), "observation-schema"),
        (mutated(candidate={"artifact": {"verdict": "VERIFIED"}}), "observation-schema"),
        (mutated(refusal_set=None), "observation-schema"),
        (mutated(candidate={"artifact": {"size": float("nan")}}), "observation-unreadable"),
        (mutated(fixture_root="root-" + "c" * 64), "fixture-root-mismatch"),
        (
            {**DOCUMENT, "observations": {"S1\n": DOCUMENT["observations"]["S1"]}},
            "observation-schema",
        ),
        ({**DOCUMENT, "type": "TRVM-HOLDOUT-OBSERVATION-v1"}, "observation-schema"),
        ({**DOCUMENT, "spec_release_id": "srel-" + "c" * 64}, "release-mismatch"),
        ([DOCUMENT], "observation-schema"),
    ],
    ids=[
        "trailing-newline-defeats-no-anchor",
        "unsorted-refusal-set",
        "refusal-code-outside-our-vocabulary-pattern",
        "resolve-outcome-outside-the-vocabulary",
        "trvm-node-name",
        "trvm-verdict",
        "null-instead-of-absent",
        "python-nan",
        "fixture-root-differs",
        "challenge-key-with-newline",
        "trvm-envelope-type",
        "release-differs",
        "not-an-object",
    ],
)
def test_refused_before_scoring(document: Any, refusal: str) -> None:
    report = score([CHALLENGE], document)
    assert (report.verdict, report.refusal, report.by_challenge) == ("REFUSED", refusal, {})


def test_duplicate_challenge_ids_are_refused() -> None:
    assert score([CHALLENGE, CHALLENGE], DOCUMENT).refusal == "duplicate-challenge-id"


def test_trvm_dag_labels_are_refused_by_our_recipe_schema() -> None:
    challenge = {**CHALLENGE, "fixture": {"artifact": "D", "root": ROOT}}
    assert score([challenge], DOCUMENT).refusal == "challenge-schema"


def test_a_missing_observation_fails_and_is_named() -> None:
    other = {**CHALLENGE, "id": "S2"}
    report = score([CHALLENGE, other], DOCUMENT)
    assert report.verdict == "FAIL"
    assert report.missing == ("S2",)
    assert report.to_dict()["by_challenge"]["S2"] == {"pass": 0, "fail": 0, "unresolved": 2}


def test_an_extra_observation_is_not_scored() -> None:
    document = copy.deepcopy(DOCUMENT)
    document["observations"]["S7"] = {"fixture_root": ROOT}
    report = score([CHALLENGE], document)
    assert report.verdict == "PASS"
    assert list(report.by_challenge) == ["S1"]


def test_the_expected_implementation_is_checked_only_when_named() -> None:
    report = holdout.score(
        [CHALLENGE], DOCUMENT, schemas=SCHEMAS, expect_release=RELEASE, expect_implementation="go"
    )
    assert report.refusal == "implementation-mismatch"


def test_a_broken_schema_refuses_the_run() -> None:
    broken = holdout.Schemas(recipe={"type": 12}, observation=SCHEMAS.observation)
    report = holdout.score([CHALLENGE], DOCUMENT, schemas=broken, expect_release=RELEASE)
    assert report.refusal == "schemas-invalid"


def test_deep_python_values_do_not_raise() -> None:
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    report = score([CHALLENGE], mutated(candidate={"artifact": {"size": deep}}))
    assert report.refusal == "observation-unreadable"
