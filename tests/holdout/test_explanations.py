"""The scorer says why: every failed or unresolved predicate is explained with its challenge,
its operator, the paths it read (from the observation root), the value observed or how far the
path resolved, and a hint when the path resolves from another root.

Defends: a silent UNRESOLVED on a wrong guess of a predicate's root; a FAIL that does not say
what was observed; an explanation that disagrees with the decision (or a non-passing
predicate left unexplained); a missing challenge reported only as counts; a release id that
does not bind the module that explains.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import clirun
import pytest
import testdata
from hypothesis import given
from hypothesis import strategies as st

from mechanism import holdout
from mechanism.holdout._commitment import SCORER_SOURCES, load_schemas

ROOT = "root-" + "a" * 64
OBSERVATION: dict[str, Any] = {
    "fixture_root": ROOT,
    "baseline": {"artifact": {"artifact_root": ROOT, "size": 10, "type": "NAT"}},
    "candidate": {
        "artifact": {"artifact_root": ROOT, "size": 12, "type": "NAT", "verdict": "FAIL"},
        "leaf": {"size": 3},
    },
    "refusal_set": ["B_CODE", "C_CODE"],
    "resolve": {"outcome": "non-canonical-wire"},
}
SYNTHETIC = testdata.data("holdout/trvm-synthetic", directory=True)
SYNTHETIC_RELEASE = "srel-" + "0" * 64


def _one(predicate: dict[str, Any]) -> dict[str, Any]:
    """Score one predicate against OBSERVATION (this project's schemas); its one explanation."""
    challenge = {"id": "S1", "name": "n", "fixture": {"root": ROOT}, "recipe": [],
                 "predicates": [predicate]}  # fmt: skip
    document = {
        "type": "EVIDENCED-HOLDOUT-OBSERVATION-v1",
        "implementation": "test",
        "spec_release_id": SYNTHETIC_RELEASE,
        "observations": {"S1": OBSERVATION},
    }
    report = holdout.score(
        [challenge], document, schemas=holdout.project_schemas(), expect_release=SYNTHETIC_RELEASE
    )
    assert report.refusal is None, report.detail
    (explanation,) = report.explanations
    assert explanation.position == 0
    return explanation.to_dict()


def test_wrong_root_guess_for_verdict_eq_is_not_a_silent_unresolved() -> None:
    # VERDICT_EQ reads candidate.<path>: spelling the root again reads candidate.candidate...
    found = _one({"op": "VERDICT_EQ", "path": "candidate.artifact.verdict", "value": "PASS"})
    assert found["result"] == "unresolved"
    (read,) = found["reads"]
    assert read["path"] == "candidate.candidate.artifact.verdict"
    assert (read["resolved"], read["nearest"], read["missing"]) == (False, "candidate", "candidate")
    assert read["members"] == ["artifact", "leaf"]
    assert "'artifact.verdict' would resolve" in found["hint"]


def test_wrong_root_guess_for_eq_names_the_path_that_resolves() -> None:
    # EQ reads from the observation root: a path written relative to candidate is absent there.
    found = _one({"op": "EQ", "path": "artifact.size", "value": 12})
    assert found["result"] == "unresolved"
    assert found["reads"][0]["nearest"] == "" and "candidate" in found["reads"][0]["members"]
    assert "'candidate.artifact.size' would resolve" in found["hint"]


def test_wrong_root_guess_for_holds_names_the_path_that_resolves() -> None:
    found = _one({"op": "HOLDS", "path": "candidate.artifact.size"})
    assert [read["path"] for read in found["reads"]] == [
        "baseline.candidate.artifact.size",
        "candidate.candidate.artifact.size",
    ]
    assert "'artifact.size' would resolve" in found["hint"]


@pytest.mark.parametrize(
    ("predicate", "observed", "why"),
    [
        ({"op": "VERDICT_EQ", "path": "artifact.verdict", "value": "PASS"},
         [("candidate.artifact.verdict", "FAIL")], "observed 'FAIL', expected 'PASS'"),
        ({"op": "OUTCOME_EQ", "path": "resolve.outcome", "value": "ok"},
         [("resolve.outcome", "non-canonical-wire")], "expected 'ok'"),
        ({"op": "HOLDS", "path": "artifact.size"},
         [("baseline.artifact.size", 10), ("candidate.artifact.size", 12)], "differ"),
        ({"op": "MOVES", "path": "artifact.type"},
         [("baseline.artifact.type", "NAT"), ("candidate.artifact.type", "NAT")], "equal"),
        ({"op": "EQ", "path": "candidate.leaf.size", "value": 4},
         [("candidate.leaf.size", 3)], "differs from the literal"),
        ({"op": "NEQ", "path": "candidate.leaf.size", "right": "candidate.leaf.size"},
         [("candidate.leaf.size", 3), ("candidate.leaf.size", 3)], "equal"),
        ({"op": "LT", "left": "candidate.artifact.size", "right": "baseline.artifact.size"},
         [("candidate.artifact.size", 12), ("baseline.artifact.size", 10)],
         "12 is not less than 10"),
        ({"op": "REFUSAL_SET_EQ", "value": ["A_CODE", "B_CODE"]},
         [("refusal_set", ["B_CODE", "C_CODE"])], "extra ['C_CODE'], lacking ['A_CODE']"),
        ({"op": "VERDICT_EQ", "path": "artifact.verdict"},
         [("candidate.artifact.verdict", "FAIL")], "no value"),
        ({"op": "VERDICT_EQ", "path": "artifact.verdict", "value": ["FAIL"]},
         [("candidate.artifact.verdict", "FAIL")], "never ==="),
    ],
)  # fmt: skip
def test_failed_predicate_names_the_value_it_observed(
    predicate: dict[str, Any], observed: list[tuple[str, Any]], why: str
) -> None:
    found = _one(predicate)
    assert found["result"] == "fail"
    assert found["op"] == predicate["op"]
    assert [(read["path"], read["value"]) for read in found["reads"]] == observed
    assert why in found["why"]


def test_lt_over_a_string_says_which_side_is_not_a_number() -> None:
    found = _one({"op": "LT", "left": "candidate.artifact.type", "right": "candidate.leaf.size"})
    assert found["result"] == "unresolved"
    assert found["why"] == "left is a string, not a number"


def test_unresolved_path_says_how_far_it_resolved() -> None:
    found = _one({"op": "EQ", "path": "candidate.leaf.size.bits", "value": 1})
    (read,) = found["reads"]
    assert (read["nearest"], read["missing"], read["holds"]) == (
        "candidate.leaf.size",
        "bits",
        "number",
    )
    found = _one({"op": "EQ", "path": "refusal_set.2", "value": 1})
    assert (found["reads"][0]["nearest"], found["reads"][0]["length"]) == ("refusal_set", 2)


def test_absent_refusal_set_says_nothing_was_evaluated() -> None:
    saved = OBSERVATION.pop("refusal_set")
    try:
        found = _one({"op": "REFUSAL_SET_EQ", "value": []})
    finally:
        OBSERVATION["refusal_set"] = saved
    assert (found["result"], found["why"]) == (
        "unresolved",
        "no refusal_set: nothing was evaluated",
    )


def _synthetic() -> holdout.ScoreReport:
    challenges = holdout.read_challenge_array(
        (SYNTHETIC / "synthetic-challenges.json").read_bytes()
    )
    document = holdout.read_json((SYNTHETIC / "synthetic-observations.json").read_bytes())
    return holdout.score(
        challenges, document, schemas=load_schemas(SYNTHETIC), expect_release=SYNTHETIC_RELEASE
    )


def test_every_non_passing_predicate_is_explained_once_and_agrees_with_its_result() -> None:
    report = _synthetic()
    wanted = [
        (cid, index, "fail" if result is False else "unresolved")
        for cid, tally in report.by_challenge.items()
        for index, result in enumerate(tally.results)
        if result is not True
    ]
    assert len(wanted) == 11  # S2: 8 failures, S3: 3 unresolved
    assert [(e.challenge, e.position, e.result) for e in report.explanations] == wanted


def test_missing_challenge_is_explained_not_only_counted() -> None:
    challenges = holdout.read_challenge_array(
        (SYNTHETIC / "synthetic-challenges.json").read_bytes()
    )
    document = holdout.read_json((SYNTHETIC / "synthetic-observations.json").read_bytes())
    del document["observations"]["S1"]
    report = holdout.score(
        challenges, document, schemas=load_schemas(SYNTHETIC), expect_release=SYNTHETIC_RELEASE
    )
    first = report.explanations[0].to_dict()
    assert (first["challenge"], first["result"]) == ("S1", "missing")
    assert "no observation" in first["why"] and "8 predicates" in first["why"]


def test_passing_predicates_are_not_explained() -> None:
    report = _synthetic()
    assert "S1" not in {explanation.challenge for explanation in report.explanations}


def test_cli_score_prints_explanations_in_the_document_and_on_stderr() -> None:
    result = clirun.in_process(
        [
            "holdout", "score",
            "--challenges", str(SYNTHETIC / "synthetic-challenges.json"),
            "--observations", str(SYNTHETIC / "synthetic-observations.json"),
            "--schemas", str(SYNTHETIC),
            "--release", SYNTHETIC_RELEASE,
        ]
    )  # fmt: skip
    document = result.document()
    assert result.returncode == 1
    assert len(document["explanations"]) == 11
    assert all("why" in explanation for explanation in document["explanations"])
    assert "S3 predicate 0" in result.err and "does not resolve" in result.err
    json.dumps(document)  # plain JSON throughout


_SEGMENTS = st.sampled_from(
    ["baseline", "candidate", "artifact", "leaf", "size", "refusal_set", "0", "1", "01",
     "length", "resolve", "outcome", "verdict", "", "type"]
)  # fmt: skip


@given(st.lists(_SEGMENTS, min_size=1, max_size=5))
def test_explained_walk_agrees_with_the_scorers_walk(segments: list[str]) -> None:
    path = ".".join(segments)
    found = holdout.resolve_path(OBSERVATION, path)
    read = holdout.trace(OBSERVATION, path)
    if read.resolved:
        assert found is read.value
    else:
        assert holdout._scorer.is_absent(found)
        assert path.startswith(read.nearest)
        assert not read.nearest or holdout.trace(OBSERVATION, read.nearest).resolved


def test_every_module_the_scorer_loads_is_bound_by_the_release_id() -> None:
    # The release id must move when any code that decides or explains a score moves. The
    # package loads each name on first use: every public name is asked for.
    script = (
        "import sys; from mechanism import holdout; "
        "[getattr(holdout, name) for name in holdout.__all__]; "
        "print(sorted(m for m in sys.modules if m.startswith('mechanism.holdout')))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = {
        name.removeprefix("mechanism.holdout.")
        for name in json.loads(completed.stdout.replace("'", '"'))
    }
    bound = {name.removesuffix(".py") for name in SCORER_SOURCES}
    assert loaded - {"mechanism.holdout"} == bound - {"__init__"}
    assert "scorer/_explain.py" in holdout.RELEASE_FILES


def test_both_sides_absent_are_both_named() -> None:
    found = _one({"op": "EQ", "path": "candidate.leaf.verdict", "right": "baseline.leaf.size"})
    assert found["why"] == "candidate.leaf.verdict and baseline.leaf.size do not resolve"
    nearest = [(read["nearest"], read["missing"]) for read in found["reads"]]
    assert nearest == [("candidate.leaf", "verdict"), ("baseline", "leaf")]


def test_predicate_without_its_path_is_explained_not_crashed() -> None:
    found = _one({"op": "LT", "left": "candidate.leaf.size"})
    assert (found["result"], found["why"]) == ("unresolved", "a path the operator needs is missing")
