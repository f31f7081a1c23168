"""Second-reader checks of the recipe operators against docs/spec/holdout.md.

Defends against: a RESEAL that aborts a challenge when an identity cannot be recomputed (§2.2:
"left as it is and the step continues"; the JS wraps each recompute in try/catch), a
CHECK_WITH_OPTIONS that cannot tighten the evidence *item* bound (Part II C: options cover
"bounds"), and a wire splice whose octets cannot be encoded escaping as a traceback.
"""

from __future__ import annotations

from typing import Any

import pytest

from mechanism import holdout
from mechanism.holdout.adapter import Corpus, EmissionRefused, observe, observe_challenge

CORPUS = Corpus.load(holdout.corpus_index_path().parent)
FORMATION, DESCRIPTOR = "formation-identity", "descriptor-tisc"
BOTH = [FORMATION, DESCRIPTOR]


def run(name: str, recipe: list[dict[str, Any]], role: str = "artifact") -> dict[str, Any]:
    challenge = {
        "id": "S1",
        "name": "probe",
        "fixture": {role: name, "root": getattr(CORPUS.case(name), role)},
        "recipe": recipe,
        "predicates": [],
    }
    assert holdout.validate_challenge(challenge, holdout.project_schemas()) is None
    return observe_challenge(challenge, CORPUS)


def verdict(observation: dict[str, Any]) -> tuple[str, list[str]]:
    return observation["candidate"]["artifact"]["verdict"], observation["refusal_set"]


# ------------------------------------------------------------------ RESEAL (§2.2)


@pytest.mark.parametrize("name", BOTH)
def test_reseal_with_no_working_artifact_continues(name: str) -> None:
    """After RECOMPOSE_DAG there is nothing to reseal: the step is a no-op, not an error."""
    plain = run(name, [{"op": "RECOMPOSE_DAG"}], role="leaf")
    resealed = run(name, [{"op": "RECOMPOSE_DAG"}, {"op": "RESEAL"}], role="leaf")
    assert resealed == plain
    assert verdict(resealed) == ("PASS", [])


def test_reseal_leaves_an_identity_whose_input_is_missing_and_continues() -> None:
    """An unrenderable payload view cannot be resealed against; the citation is left as it
    stands, and a later step that repairs the view is still applied and evaluated."""
    recipe: list[dict[str, Any]] = [
        {"op": "SET", "path": "leaf.hex", "value": "not hex"},
        {"op": "RESEAL"},
        {"op": "SET", "path": "leaf.hex", "value": "00"},
    ]
    observation = run(DESCRIPTOR, recipe, role="leaf")
    candidate = observation["candidate"]
    # The citation was not recomputed: it still names the pristine payload.
    assert (
        candidate["artifact"]["cited_digest"] == observation["baseline"]["leaf"]["content_digest"]
    )
    assert candidate["leaf"]["size"] == 1
    assert candidate["artifact"]["verdict"] in ("FAIL", "UNKNOWN")


# ------------------------------------------------------------------ CHECK_WITH_OPTIONS (Part II C)


@pytest.mark.parametrize("name", BOTH)
def test_tighter_evidence_item_bound_is_honoured(name: str) -> None:
    observation = run(name, [{"op": "CHECK_WITH_OPTIONS", "options": {"max_evidence_items": 1}}])
    assert verdict(observation) == ("UNKNOWN", ["SESSION_EVIDENCE_ITEM_BOUND_EXCEEDED"])


@pytest.mark.parametrize("name", BOTH)
def test_equal_evidence_item_bound_is_honoured(name: str) -> None:
    observation = run(name, [{"op": "CHECK_WITH_OPTIONS", "options": {"max_evidence_items": 2}}])
    assert verdict(observation) == ("PASS", [])


@pytest.mark.parametrize("name", BOTH)
@pytest.mark.parametrize(
    ("items", "code"),
    [
        (3, "CHECK_OPTIONS_WEAKENED"),
        (True, "CHECK_OPTIONS_UNSUPPORTED"),
        (-1, "CHECK_OPTIONS_UNSUPPORTED"),
    ],
)
def test_looser_or_ill_typed_item_bound_is_refused(name: str, items: Any, code: str) -> None:
    observation = run(
        name, [{"op": "CHECK_WITH_OPTIONS", "options": {"max_evidence_items": items}}]
    )
    assert verdict(observation) == ("UNKNOWN", [code])


# ------------------------------------------------------------------ WIRE (Part II C)


@pytest.mark.parametrize("name", BOTH)
def test_splice_of_a_lone_surrogate_is_an_outcome_not_a_crash(name: str) -> None:
    """Octets are octets: a value the strict reader would never yield still gives an outcome."""
    step = {"op": "WIRE_PREPEND_DUPLICATE_MEMBER", "name": "schema", "value": "\udc00"}
    observation = run(name, [step])
    assert observation["resolve"] == {"outcome": "invalid-utf8"}


# ------------------------------------------------------------------ emission (§3.7, Part II A)


@pytest.mark.parametrize(
    "value",
    [float("nan"), ("a", "tuple"), "\ud800", b"bytes"],
    ids=["nan", "tuple", "lone-surrogate", "bytes"],
)
def test_a_challenge_the_strict_reader_could_not_yield_refuses_the_emission(value: Any) -> None:
    challenge = {
        "id": "S1",
        "name": "probe",
        "fixture": {"root": CORPUS.case(FORMATION).artifact},
        "recipe": [{"op": "SET", "path": "artifact.x", "value": value}],
        "predicates": [],
    }
    with pytest.raises(EmissionRefused) as refused:
        observe([challenge])
    assert refused.value.code == "challenge-unreadable"


def test_a_value_deeper_than_the_reader_allows_refuses_the_emission() -> None:
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    challenge = {
        "id": "S1",
        "name": "probe",
        "fixture": {"root": CORPUS.case(FORMATION).artifact},
        "recipe": [{"op": "SET", "path": "artifact.x", "value": deep}],
        "predicates": [],
    }
    with pytest.raises(EmissionRefused) as refused:
        observe([challenge])
    assert refused.value.code == "challenge-unreadable"
