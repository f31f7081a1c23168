"""Second-reader checks of the scorer's public API against docs/spec/holdout.md §3.

Defends against: an in-memory document or challenge whose objects run code (a dict subclass
whose methods raise) escaping ``score``/``interop`` as an exception instead of a refusal
(§3.7: "the whole run is refused"; the module contract: nothing raises for bad input), and a
value handed in as a Python int beyond 2**53 comparing differently from the same JSON text
read by the strict reader (§3.6: parse integers above 2**53 as floats, as JS does).
"""

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
        {"op": "LT", "left": "candidate.artifact.size", "right": "baseline.artifact.size"},
    ],
}


def document(candidate_size: int, baseline_size: int) -> dict[str, Any]:
    return {
        "type": "EVIDENCED-HOLDOUT-OBSERVATION-v1",
        "implementation": "evidenced-python",
        "spec_release_id": RELEASE,
        "observations": {
            "S1": {
                "fixture_root": ROOT,
                "baseline": {"artifact": {"size": baseline_size}},
                "candidate": {"artifact": {"size": candidate_size, "verdict": "PASS"}},
            }
        },
    }


class _Raising(dict[str, Any]):
    def items(self) -> Any:
        raise RuntimeError("a caller's object ran code")

    def keys(self) -> Any:
        raise RuntimeError("a caller's object ran code")

    def __iter__(self) -> Any:
        raise RuntimeError("a caller's object ran code")


def test_a_document_object_that_raises_is_refused_not_raised() -> None:
    honest = document(1, 2)
    hostile = _Raising(honest)
    report = holdout.score([CHALLENGE], hostile, schemas=SCHEMAS, expect_release=RELEASE)
    assert (report.verdict, report.refusal, report.by_challenge) == (
        "REFUSED",
        "observation-unreadable",
        {},
    )


def test_a_challenge_object_that_raises_is_refused_not_raised() -> None:
    report = holdout.score(
        [_Raising(CHALLENGE)], document(1, 2), schemas=SCHEMAS, expect_release=RELEASE
    )
    assert (report.verdict, report.refusal) == ("REFUSED", "challenge-unreadable")


def test_interop_refuses_a_document_object_that_raises() -> None:
    report = holdout.interop([document(1, 2), _Raising(document(1, 2))])
    assert report.status == "REFUSED"


def test_the_honest_in_memory_document_still_scores() -> None:
    report = holdout.score([CHALLENGE], document(1, 2), schemas=SCHEMAS, expect_release=RELEASE)
    assert report.to_dict()["by_challenge"] == {"S1": {"pass": 1, "fail": 0, "unresolved": 0}}


@pytest.mark.parametrize(
    ("candidate", "baseline"),
    [(2**53, 2**53 + 1), (2**60, 2**60 + 1)],
)
def test_unsafe_integers_compare_as_the_strict_reader_reads_them(
    candidate: int, baseline: int
) -> None:
    """JS holds both as the same double, so ``left < right`` is false, whether the document
    arrives as bytes or as parsed Python values."""
    parsed = document(candidate, baseline)
    text = (
        b'{"type":"EVIDENCED-HOLDOUT-OBSERVATION-v1","implementation":"evidenced-python",'
        b'"spec_release_id":"'
        + RELEASE.encode()
        + b'","observations":{"S1":{"fixture_root":"'
        + ROOT.encode()
        + b'","baseline":{"artifact":{"size":'
        + str(baseline).encode()
        + b'}},"candidate":{"artifact":{"size":'
        + str(candidate).encode()
        + b',"verdict":"PASS"}}}}}'
    )
    from_bytes = holdout.score_bytes([CHALLENGE], text, schemas=SCHEMAS, expect_release=RELEASE)
    from_values = holdout.score([CHALLENGE], parsed, schemas=SCHEMAS, expect_release=RELEASE)
    expected = {"S1": {"pass": 0, "fail": 1, "unresolved": 0}}
    assert from_bytes.to_dict()["by_challenge"] == expected
    assert from_values.to_dict()["by_challenge"] == expected


def test_scoring_never_mutates_the_callers_values() -> None:
    challenges = [copy.deepcopy(CHALLENGE)]
    doc = document(1, 2)
    before = (copy.deepcopy(challenges), copy.deepcopy(doc))
    holdout.score(challenges, doc, schemas=SCHEMAS, expect_release=RELEASE)
    assert (challenges, doc) == before


# ------------------------------------------------------------------ schemas as data (Part II A)

_VALID_CHALLENGE = {
    "id": "S1",
    "name": "n",
    "fixture": {"root": ROOT},
    "recipe": [],
    "predicates": [],
}


@pytest.mark.parametrize(
    "broken",
    [
        {"$ref": "#/$defs/missing"},
        {"$ref": "https://example.invalid/elsewhere.json"},
        # reached only through a member the instance has (both documents have "id"/"type")
        {"type": "object", "properties": {"id": {"$ref": "#/a"}, "type": {"$ref": "#/b"}}},
    ],
    ids=["dangling-pointer", "remote-reference", "nested-dangling"],
)
@pytest.mark.parametrize("which", ["recipe", "observation"])
def test_a_schema_whose_reference_cannot_resolve_refuses_the_run(
    broken: dict[str, Any], which: str
) -> None:
    honest = holdout.project_schemas()
    schemas = holdout.Schemas(
        recipe=broken if which == "recipe" else honest.recipe,
        observation=broken if which == "observation" else honest.observation,
    )
    report = holdout.score(
        [_VALID_CHALLENGE], document(1, 2), schemas=schemas, expect_release=RELEASE
    )
    assert (report.verdict, report.refusal, report.by_challenge) == (
        "REFUSED",
        "schemas-invalid",
        {},
    )


# ------------------------------------------------------------------ REFUSAL_SET_EQ (§3.4/§3.5)


@pytest.mark.parametrize("value", [None, "a-code", 1, {"a-code": True}], ids=repr)
@pytest.mark.parametrize("refusals", [[], ["a-code"]], ids=repr)
def test_refusal_set_eq_with_a_present_non_array_value_fails(value: Any, refusals: Any) -> None:
    """§3.5 lists every UNRESOLVED case, and a non-array *value* is not one (only an absent or
    non-array ``refusal_set`` is). A present value is not "missing" (§3.4 distinguishes a
    present null from a missing member), and no array equals a non-array: FAIL."""
    predicate = {"op": "REFUSAL_SET_EQ", "value": value}
    assert holdout.evaluate_predicate(predicate, {"refusal_set": refusals}) is False


def test_refusal_set_eq_with_a_non_array_refusal_set_is_still_unresolved() -> None:
    predicate = {"op": "REFUSAL_SET_EQ", "value": None}
    assert holdout.evaluate_predicate(predicate, {"refusal_set": "a-code"}) is None
    assert holdout.evaluate_predicate(predicate, {}) is None
