"""The honest-caller arm: ``CHECK_WITH_OPTIONS {"pins": "working"}`` pins the mutated bytes.

Without it every mutation fails the caller's pinned identity first (the pins are the pristine
pair's), so the descriptor codec's own refusals could never be observed. With it the caller
pins and references exactly the bytes it submits, and the mechanism's own parsing decides.

Defends: a descriptor codec whose refusals are unreachable through the seven operators (RESEAL
fails the pinned identity first); an arm that silently changes what the default (forger) arm
observes; a ``pins`` value the instrument does not define being taken as either arm.
"""

from __future__ import annotations

from typing import Any

import pytest

from mechanism import holdout
from mechanism.holdout.adapter import Corpus, observe

CORPUS = Corpus.load(holdout.corpus_index_path().parent)
TISC, WEIGHTS, FORMATION = "descriptor-tisc", "descriptor-safetensors", "formation-apply"


def _challenge(
    cid: str,
    case: str,
    sets: list[tuple[str, Any]],
    options: dict[str, Any],
    code: str,
    verdict: str = "FAIL",
) -> dict[str, Any]:
    role = sets[0][0].split(".")[0] if sets else "artifact"
    return {
        "id": cid,
        "name": "honest-caller-probe",
        "fixture": {role: case, "root": getattr(CORPUS.case(case), role)},
        "recipe": [
            *({"op": "SET", "path": path, "value": value} for path, value in sets),
            {"op": "CHECK_WITH_OPTIONS", "options": options},
        ],
        "predicates": [
            {"op": "REFUSAL_SET_EQ", "value": [code]},
            {"op": "VERDICT_EQ", "path": "artifact.verdict", "value": verdict},
        ],
    }


def _observe_and_score(challenges: list[dict[str, Any]]) -> tuple[Any, holdout.ScoreReport]:
    emission = observe(challenges)
    assert emission.problems == ()
    document = emission.document
    report = holdout.score(
        challenges,
        document,
        schemas=holdout.project_schemas(),
        expect_release=document["spec_release_id"],
    )
    return document, report


# (case, the SETs on the working view, the descriptor codec's refusal an honest caller meets)
CODEC_REFUSALS: list[tuple[str, list[tuple[str, Any]], str]] = [
    (TISC, [("artifact.schema", "T81-DESCRIPTOR-v9")], "DESCRIPTOR_SCHEMA_INVALID"),
    (TISC, [("artifact.schema", "")], "DESCRIPTOR_EMPTY_LINE"),
    (TISC, [("artifact.extra", "x")], "DESCRIPTOR_TRAILING_LINES"),
    (TISC, [("artifact.profile", "é")], "DESCRIPTOR_NON_ASCII"),
    (TISC, [("artifact.payload_reference", "zz")], "DESCRIPTOR_PAYLOAD_REFERENCE_MALFORMED"),
    (TISC, [("artifact.representation", "tisc-9")], "DESCRIPTOR_REPRESENTATION_UNKNOWN"),
    (TISC, [("artifact.provider", "nobody")], "DESCRIPTOR_PROVIDER_UNKNOWN"),
    (TISC, [("artifact.operations", ["run", "run"])], "DESCRIPTOR_OPERATIONS_NOT_SINGLETON"),
    (TISC, [("artifact.profile", "x")], "DESCRIPTOR_PROFILE_INVALID"),
    (WEIGHTS, [("artifact.representation", "x y")], "DESCRIPTOR_WHITESPACE"),
]


def test_honest_caller_reaches_and_scores_the_descriptor_codec_refusals() -> None:
    challenges = [
        _challenge(f"S{n}", case, sets, {"pins": "working"}, code)
        for n, (case, sets, code) in enumerate(CODEC_REFUSALS, start=1)
    ]
    document, report = _observe_and_score(challenges)
    observed = {cid: obs["refusal_set"] for cid, obs in document["observations"].items()}
    assert observed == {f"S{n}": [code] for n, (_, _, code) in enumerate(CODEC_REFUSALS, 1)}
    assert (report.verdict, report.explanations) == ("PASS", ())


def test_forger_arm_is_unchanged_and_never_reaches_the_codec() -> None:
    # The default pins (and pins: "pristine") are the pristine pair's: the mutated descriptor
    # is unavailable under them, or, resealed, fails the pinned identity before any decoding.
    for options in ({}, {"pins": "pristine"}):
        challenges = [
            _challenge(f"S{n}", case, sets, options, "SESSION_EVIDENCE_UNAVAILABLE", "UNKNOWN")
            for n, (case, sets, _) in enumerate(CODEC_REFUSALS, start=1)
        ]
        _, report = _observe_and_score(challenges)
        assert report.verdict == "PASS", [e.line() for e in report.explanations]
    resealed = _challenge("S1", TISC, CODEC_REFUSALS[0][1], {}, "DESCRIPTOR_IDENTITY_MISMATCH")
    resealed["recipe"].insert(1, {"op": "RESEAL"})
    _, report = _observe_and_score([resealed])
    assert report.verdict == "PASS", [e.line() for e in report.explanations]


def test_honest_caller_on_formation_meets_the_checker_not_the_session() -> None:
    sets = [("leaf.nodes.0.payload_digest", "sha256:" + "1" * 64)]
    challenge = _challenge("S1", FORMATION, sets, {"pins": "working"}, "")
    challenge["predicates"] = [{"op": "VERDICT_EQ", "path": "artifact.verdict", "value": "FAIL"}]
    document, report = _observe_and_score([challenge])
    refusals = document["observations"]["S1"]["refusal_set"]
    assert report.verdict == "PASS"
    assert refusals and not any(code.startswith("SESSION_") for code in refusals)


def test_honest_caller_of_an_unmutated_pair_passes() -> None:
    challenge = _challenge("S1", TISC, [], {"pins": "working"}, "")
    challenge["predicates"] = [
        {"op": "REFUSAL_SET_EQ", "value": []},
        {"op": "VERDICT_EQ", "path": "artifact.verdict", "value": "PASS"},
    ]
    _, report = _observe_and_score([challenge])
    assert report.verdict == "PASS", [e.line() for e in report.explanations]


@pytest.mark.parametrize("value", ["both", "WORKING", True, None, ["working"]])
def test_undefined_pins_value_is_unsupported_not_an_arm(value: Any) -> None:
    challenge = _challenge(
        "S1", TISC, CODEC_REFUSALS[0][1], {"pins": value}, "CHECK_OPTIONS_UNSUPPORTED", "UNKNOWN"
    )
    _, report = _observe_and_score([challenge])
    assert report.verdict == "PASS", [e.line() for e in report.explanations]


def test_unbindable_working_pair_is_reported_not_an_internal_error() -> None:
    # The formation binding builder refuses a subject whose declared context is malformed:
    # an honest caller can pin nothing, which is binding-impossible, not an adapter defect.
    challenge = _challenge(
        "S1", "formation-identity", [("leaf.context", {})], {"pins": "working"}, ""
    )
    emission = observe([challenge])
    assert emission.document["observations"] == {}
    (problem,) = emission.problems
    assert (problem["id"], problem["code"]) == ("S1", "binding-impossible")
