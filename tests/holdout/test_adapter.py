"""The adapter: each recipe operator on both mechanisms, through real sessions and the real
mechanisms, plus the S-series set scored as declared.

Defends against: an adapter that fixes a disagreeing label, skips an unknown operator, lets
RESEAL rewrite the caller's pins, honours a looser option, splices the mutated copy instead of
the pristine node, or recomposes with anything but the real producer.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import testdata

from mechanism import holdout
from mechanism.descriptor import canonfs_hash, encode_descriptor
from mechanism.formation import produce_formation_certificate
from mechanism.holdout.adapter import (
    HANDLERS,
    Corpus,
    EmissionRefused,
    StepError,
    observe,
    observe_challenge,
    resolve_octets,
    root_of,
)

REPO_ROOT = testdata.REPO
CHALLENGES = testdata.fixture("holdout/challenges", directory=True)
CORPUS = Corpus.load(holdout.corpus_index_path().parent)
H = "sha256:" + "1" * 64


def fixture(name: str, role: str = "artifact") -> dict[str, str]:
    case = CORPUS.case(name)
    return {role: name, "root": getattr(case, role)}


def run(name: str, recipe: list[dict[str, Any]], role: str = "artifact") -> dict[str, Any]:
    challenge = {
        "id": "S1",
        "name": "probe",
        "fixture": fixture(name, role),
        "recipe": recipe,
        "predicates": [],
    }
    assert holdout.validate_challenge(challenge, holdout.project_schemas()) is None
    return observe_challenge(challenge, CORPUS)


def verdict(observation: dict[str, Any]) -> tuple[str, list[str]]:
    return observation["candidate"]["artifact"]["verdict"], observation["refusal_set"]


FORMATION, DESCRIPTOR = "formation-identity", "descriptor-tisc"
BOTH = [FORMATION, DESCRIPTOR]


# ------------------------------------------------------------------ the S-series set


@pytest.fixture(scope="module")
def s_series() -> tuple[list[Any], Any]:
    challenges = holdout.read_challenge_array((CHALLENGES / "public-s.json").read_bytes())
    emission = observe(challenges)
    assert emission.problems == ()
    return challenges, emission.document


def test_s_series_scores_as_declared(s_series: tuple[list[Any], Any]) -> None:
    challenges, document = s_series
    report = holdout.score(
        challenges,
        document,
        schemas=holdout.project_schemas(),
        expect_release=holdout.release_id(),
        expect_implementation="evidenced-python",
    )
    expected = json.loads((CHALLENGES / "public-s-expected.json").read_bytes())
    assert report.to_dict()["by_challenge"] == expected["by_challenge"]
    assert report.verdict == "FAIL"  # the declared failing and unresolved arms


def test_s_series_has_failing_and_unresolved_arms() -> None:
    expected = json.loads((CHALLENGES / "public-s-expected.json").read_bytes())["by_challenge"]
    assert sum(split["fail"] for split in expected.values()) > 0
    assert sum(split["unresolved"] for split in expected.values()) > 0


def test_s_series_exercises_every_operator_on_both_mechanisms() -> None:
    challenges = json.loads((CHALLENGES / "public-s.json").read_bytes())
    used: dict[str, set[str]] = {"formation": set(), "descriptor": set()}
    predicates = set()
    for challenge in challenges:
        case, _ = CORPUS.lookup(challenge["fixture"]["root"])
        used[case.mechanism] |= {step["op"] for step in challenge["recipe"]}
        predicates |= {p["op"] for p in challenge["predicates"]}
    for ops in used.values():
        assert ops == set(holdout.adapter.RECIPE_OPS)
    assert predicates == set(holdout.PREDICATE_OPS)


def test_interop_finds_a_planted_unread_difference_in_our_observations(
    s_series: tuple[list[Any], Any],
) -> None:
    challenges, document = s_series
    planted = copy.deepcopy(document)
    planted["observations"]["S5"]["baseline"]["leaf"]["size"] += 1  # read by no predicate
    release = holdout.release_id()
    schemas = holdout.project_schemas()
    assert (
        holdout.score(challenges, planted, schemas=schemas, expect_release=release).to_dict()
        == holdout.score(challenges, document, schemas=schemas, expect_release=release).to_dict()
    )
    [finding] = holdout.interop([document, planted]).findings
    assert finding.path == "observations.S5.baseline.leaf.size"


# ------------------------------------------------------------------ IDENTITY


@pytest.mark.parametrize("name", BOTH)
def test_identity_evaluates_the_fixture_as_it_stands(name: str) -> None:
    observation = run(name, [{"op": "IDENTITY"}])
    assert verdict(observation) == ("PASS", [])
    candidate = dict(observation["candidate"]["artifact"])
    assert candidate.pop("verdict") == "PASS"
    assert candidate == observation["baseline"]["artifact"]
    assert "verdict" not in observation["baseline"]["artifact"]
    assert "resolve" not in observation


def test_identity_on_a_tampered_pair_fails() -> None:
    assert verdict(run("formation-tampered", [{"op": "IDENTITY"}]))[0] == "FAIL"


# ------------------------------------------------------------------ SET


@pytest.mark.parametrize(
    ("name", "path", "value"),
    [(FORMATION, "artifact.root", 0), (DESCRIPTOR, "artifact.profile", "other-profile-v1")],
)
def test_set_without_reseal_leaves_the_submission_stale(name: str, path: str, value: Any) -> None:
    observation = run(name, [{"op": "SET", "path": path, "value": value}])
    assert verdict(observation) == ("UNKNOWN", ["SESSION_EVIDENCE_UNAVAILABLE"])
    moved = observation["candidate"]["artifact"]["artifact_root"]
    assert moved != observation["baseline"]["artifact"]["artifact_root"]


@pytest.mark.parametrize(
    ("name", "path", "value"),
    [(FORMATION, "leaf.nodes.0.payload_digest", H), (DESCRIPTOR, "leaf.hex", "00")],
)
def test_set_on_the_leaf_changes_only_the_leaf(name: str, path: str, value: Any) -> None:
    observation = run(name, [{"op": "SET", "path": path, "value": value}])
    baseline, candidate = observation["baseline"], observation["candidate"]
    assert candidate["leaf"]["artifact_root"] != baseline["leaf"]["artifact_root"]
    assert candidate["artifact"]["artifact_root"] == baseline["artifact"]["artifact_root"]
    assert candidate["artifact"]["cited_digest"] != candidate["leaf"]["content_digest"]


@pytest.mark.parametrize(
    ("name", "path"),
    [
        (FORMATION, "artifact.nope.deeper"),
        (DESCRIPTOR, "artifact.operations.5"),
        (FORMATION, "x.y"),
    ],
)
def test_set_on_a_missing_intermediate_is_a_step_error(name: str, path: str) -> None:
    with pytest.raises(StepError):
        run(name, [{"op": "SET", "path": path, "value": 1}])


def test_set_creates_an_absent_member() -> None:
    observation = run(FORMATION, [{"op": "SET", "path": "artifact.smuggled", "value": True}])
    assert (
        observation["candidate"]["artifact"]["size"] > observation["baseline"]["artifact"]["size"]
    )


# ------------------------------------------------------------------ REVERSE


def test_reverse_formation_steps_is_refused_after_reseal() -> None:
    observation = run(FORMATION, [{"op": "REVERSE", "path": "artifact.steps"}, {"op": "RESEAL"}])
    result, codes = verdict(observation)
    assert result == "FAIL"
    assert "FORMATION_CERTIFICATE_STEP_INVALID" in codes


def test_reverse_descriptor_operations_changes_the_line() -> None:
    two = [{"op": "SET", "path": "artifact.operations", "value": ["run", "inspect"]}]
    forward = run(DESCRIPTOR, two)
    backward = run(DESCRIPTOR, [*two, {"op": "REVERSE", "path": "artifact.operations"}])
    assert (
        forward["candidate"]["artifact"]["artifact_root"]
        != backward["candidate"]["artifact"]["artifact_root"]
    )


@pytest.mark.parametrize(("name", "path"), [(FORMATION, "artifact.root"), (DESCRIPTOR, "leaf.hex")])
def test_reverse_of_a_non_array_is_a_step_error(name: str, path: str) -> None:
    with pytest.raises(StepError):
        run(name, [{"op": "REVERSE", "path": path}])


# ------------------------------------------------------------------ RESEAL


@pytest.mark.parametrize(
    ("name", "path", "value"),
    [(FORMATION, "leaf.nodes.0.payload_digest", H), (DESCRIPTOR, "leaf.hex", "00")],
)
def test_reseal_recomputes_the_citation_and_the_submission(
    name: str, path: str, value: Any
) -> None:
    observation = run(name, [{"op": "SET", "path": path, "value": value}, {"op": "RESEAL"}])
    candidate = observation["candidate"]
    assert candidate["artifact"]["cited_digest"] == candidate["leaf"]["content_digest"]
    # The submission now names the served bytes: no session-level unavailability.
    assert "SESSION_EVIDENCE_UNAVAILABLE" not in observation["refusal_set"]


def test_reseal_never_touches_the_formation_callers_pins() -> None:
    recipe = [
        {"op": "SET", "path": "leaf.context.ground_artifact_digest", "value": H},
        {"op": "RESEAL"},
    ]
    assert verdict(run(FORMATION, recipe, role="leaf")) == (
        "FAIL",
        ["FORMATION_CONTEXT_BINDING_INVALID"],
    )


@pytest.mark.parametrize(
    ("path", "value", "code"),
    [
        ("artifact.provider", "native-weights", "DESCRIPTOR_IDENTITY_MISMATCH"),
        # The resealed reference line changes the descriptor, whose identity the caller
        # pinned (checked before the payload hash).
        ("leaf.hex", "00", "DESCRIPTOR_IDENTITY_MISMATCH"),
    ],
)
def test_reseal_never_touches_the_descriptor_callers_pins(path: str, value: str, code: str) -> None:
    observation = run(DESCRIPTOR, [{"op": "SET", "path": path, "value": value}, {"op": "RESEAL"}])
    assert verdict(observation) == ("FAIL", [code])


# ------------------------------------------------------------------ CHECK_WITH_OPTIONS


@pytest.mark.parametrize(
    ("name", "options", "expected"),
    [
        (
            FORMATION,
            {"max_nodes": 1},
            ("UNKNOWN", ["FORMATION_CHECK_UNKNOWN", "FORMATION_LIMIT_EXCEEDED"]),
        ),
        (
            FORMATION,
            {"max_evidence_bytes": 10},
            ("UNKNOWN", ["SESSION_EVIDENCE_BYTE_BOUND_EXCEEDED"]),
        ),
        (FORMATION, {"max_depth": 10**6}, ("UNKNOWN", ["CHECK_OPTIONS_WEAKENED"])),
        (FORMATION, {"max_evidence_bytes": 10**9}, ("UNKNOWN", ["CHECK_OPTIONS_WEAKENED"])),
        (FORMATION, {"max_nodes": True}, ("UNKNOWN", ["CHECK_OPTIONS_UNSUPPORTED"])),
        (FORMATION, {"fast": 1}, ("UNKNOWN", ["CHECK_OPTIONS_UNSUPPORTED"])),
        (DESCRIPTOR, {"max_steps": 1}, ("UNKNOWN", ["PROVIDER_STEP_LIMIT_EXHAUSTED"])),
        (DESCRIPTOR, {"max_descriptor_bytes": 10}, ("UNKNOWN", ["DESCRIPTOR_LIMIT_EXCEEDED"])),
        (DESCRIPTOR, {"operation": "inspect"}, ("FAIL", ["DISCOVERY_OPERATION_NOT_OFFERED"])),
        (DESCRIPTOR, {"max_steps": 10**12}, ("UNKNOWN", ["CHECK_OPTIONS_WEAKENED"])),
        (DESCRIPTOR, {"allowlist": "[]"}, ("UNKNOWN", ["CHECK_OPTIONS_WEAKENED"])),
        (DESCRIPTOR, {"max_steps": -1}, ("UNKNOWN", ["CHECK_OPTIONS_UNSUPPORTED"])),
    ],
)
def test_options_only_tighten(name: str, options: dict[str, Any], expected: Any) -> None:
    observation = run(name, [{"op": "CHECK_WITH_OPTIONS", "options": options}])
    assert verdict(observation) == (expected[0], sorted(expected[1]))


@pytest.mark.parametrize("name", BOTH)
def test_the_last_options_win(name: str) -> None:
    recipe = [
        {"op": "CHECK_WITH_OPTIONS", "options": {"max_evidence_bytes": 10}},
        {"op": "CHECK_WITH_OPTIONS", "options": {}},
    ]
    assert verdict(run(name, recipe)) == ("PASS", [])


@pytest.mark.parametrize("name", BOTH)
def test_options_are_not_applied_to_the_recompose_evaluation(name: str) -> None:
    recipe: list[dict[str, Any]] = [
        {"op": "CHECK_WITH_OPTIONS", "options": {"max_evidence_bytes": 10}},
        {"op": "RECOMPOSE_DAG"},
    ]
    assert verdict(run(name, recipe, role="leaf")) == ("PASS", [])


# ------------------------------------------------------------------ WIRE_PREPEND_DUPLICATE_MEMBER


@pytest.mark.parametrize(
    ("name", "member", "value"),
    [(FORMATION, "subject_digest", "EVIL"), (DESCRIPTOR, "schema", "t81.experiment-descriptor.v1")],
)
def test_duplicate_member_is_non_canonical_wire(name: str, member: str, value: str) -> None:
    observation = run(
        name, [{"op": "WIRE_PREPEND_DUPLICATE_MEMBER", "name": member, "value": value}]
    )
    assert observation["resolve"] == {"outcome": "non-canonical-wire"}
    assert verdict(observation) == ("PASS", [])  # the working artifact is checked as well


def test_wire_splices_the_pristine_node_not_the_working_copy() -> None:
    recipe: list[dict[str, Any]] = [
        {"op": "SET", "path": "artifact.root", "value": 0},
        {"op": "WIRE_PREPEND_DUPLICATE_MEMBER", "name": "root", "value": "1"},
    ]
    observation = run(FORMATION, recipe)
    assert observation["resolve"] == {"outcome": "non-canonical-wire"}


def test_wire_on_a_formation_subject_leaf() -> None:
    step = {"op": "WIRE_PREPEND_DUPLICATE_MEMBER", "name": "root", "value": "EVIL"}
    assert run(FORMATION, [step], role="leaf")["resolve"] == {"outcome": "non-canonical-wire"}


def test_wire_on_an_opaque_payload_fails_only_the_root() -> None:
    step = {"op": "WIRE_PREPEND_DUPLICATE_MEMBER", "name": "x", "value": "EVIL"}
    assert run(DESCRIPTOR, [step], role="leaf")["resolve"] == {"outcome": "root-mismatch"}


def _served(name: str) -> tuple[str, bytes]:
    root = CORPUS.case(name).artifact
    return root, CORPUS.read(root)


@pytest.mark.parametrize("name", BOTH)
def test_resolution_vocabulary(name: str) -> None:
    handler = HANDLERS[CORPUS.case(name).mechanism]
    root, data = _served(name)
    other = root_of(b"elsewhere")

    def outcome(served: dict[str, bytes], at: str = root) -> str:
        return resolve_octets(handler, served, at, "artifact")

    assert outcome({root: data}) == "ok"
    assert outcome({root: data}, "root-XYZ") == "bad-root-syntax"
    assert outcome({root: data}, other) == "unresolvable"
    assert outcome({root: b"\xff" + data}) == "invalid-utf8"
    assert outcome({root: b"x" * 300_000}) == "too-large"
    assert outcome({other: data}, other) == "root-mismatch"


def test_formation_resolution_malformed_and_non_canonical() -> None:
    handler = HANDLERS["formation"]
    root, data = _served(FORMATION)
    assert resolve_octets(handler, {root: data[:-1]}, root, "artifact") == "malformed"
    spaced = json.dumps(json.loads(data), indent=1).encode()
    assert resolve_octets(handler, {root: spaced}, root, "artifact") == "non-canonical-wire"


def test_descriptor_resolution_malformed() -> None:
    handler = HANDLERS["descriptor"]
    root, data = _served(DESCRIPTOR)
    assert resolve_octets(handler, {root: data.replace(b"run", b"fly")}, root, "artifact") == (
        "malformed"
    )


# ------------------------------------------------------------------ RECOMPOSE_DAG


def test_formation_recompose_uses_the_real_producer() -> None:
    recipe = [
        {"op": "SET", "path": "leaf.nodes.0.payload_digest", "value": H},
        {"op": "RECOMPOSE_DAG"},
    ]
    observation = run(FORMATION, recipe, role="leaf")
    leaf_root = observation["candidate"]["leaf"]["artifact_root"]
    subject = next(data for data in _all_subject_variants(FORMATION) if root_of(data) == leaf_root)
    expected_root = root_of(produce_formation_certificate(subject))
    assert observation["candidate"]["artifact"]["artifact_root"] == expected_root
    assert verdict(observation) == ("PASS", [])


def _all_subject_variants(name: str) -> list[bytes]:
    from mechanism.canonical import canonical_bytes

    subject = json.loads(CORPUS.read(CORPUS.case(name).leaf))
    subject["nodes"][0]["payload_digest"] = H
    return [canonical_bytes(subject)]


def test_descriptor_recompose_uses_the_real_producer() -> None:
    observation = run(DESCRIPTOR, [{"op": "RECOMPOSE_DAG"}], role="leaf")
    payload = CORPUS.read(CORPUS.case(DESCRIPTOR).leaf)
    assert observation["candidate"]["artifact"]["artifact_root"] == root_of(
        encode_descriptor(payload)
    )
    assert verdict(observation) == ("PASS", [])


def test_recompose_for_a_foreign_payload_cites_it_and_is_refused() -> None:
    recipe = [{"op": "SET", "path": "leaf.hex", "value": "0001"}, {"op": "RECOMPOSE_DAG"}]
    observation = run(DESCRIPTOR, recipe, role="leaf")
    assert observation["candidate"]["artifact"]["cited_digest"] == canonfs_hash(b"\x00\x01")
    assert verdict(observation) == ("FAIL", ["DESCRIPTOR_IDENTITY_MISMATCH"])


def test_recompose_refused_by_the_producer_records_no_artifact() -> None:
    recipe: list[dict[str, Any]] = [
        {"op": "SET", "path": "leaf.root", "value": 99},
        {"op": "RECOMPOSE_DAG"},
    ]
    observation = run(FORMATION, recipe, role="leaf")
    assert set(observation["candidate"]) == {"leaf"}
    assert "refusal_set" not in observation


def test_recompose_clears_the_working_artifact() -> None:
    with pytest.raises(StepError):
        run(
            FORMATION, [{"op": "RECOMPOSE_DAG"}, {"op": "SET", "path": "artifact.root", "value": 1}]
        )


# ------------------------------------------------------------------ fixture resolution and refusal


def _challenge(cid: str, fixture_: dict[str, str], op: str = "IDENTITY") -> dict[str, Any]:
    return {"id": cid, "name": "n", "fixture": fixture_, "recipe": [{"op": op}], "predicates": []}


def test_a_disagreeing_label_is_reported_never_fixed() -> None:
    wrong = {"artifact": "formation-apply", "root": CORPUS.case(FORMATION).artifact}
    as_leaf = {"leaf": FORMATION, "root": CORPUS.case(FORMATION).artifact}
    both = {**fixture(FORMATION), "leaf": FORMATION}
    emission = observe(
        [
            _challenge("S1", wrong),
            _challenge("S2", as_leaf),
            _challenge("S3", both),
            _challenge("S4", fixture(FORMATION)),
        ]
    )
    assert list(emission.document["observations"]) == ["S4"]
    assert [(p["id"], p["code"]) for p in emission.problems] == [
        ("S1", "fixture-label-disagreement"),
        ("S2", "fixture-label-disagreement"),
        ("S3", "fixture-label-disagreement"),
    ]


def test_a_root_outside_the_corpus_has_no_observation() -> None:
    emission = observe([_challenge("S1", {"root": root_of(b"not in the corpus")})])
    assert emission.document["observations"] == {}
    assert emission.problems[0]["code"] == "fixture-unresolvable"


def test_an_unknown_operator_refuses_the_whole_emission() -> None:
    with pytest.raises(EmissionRefused) as refused:
        observe(
            [_challenge("S1", fixture(FORMATION)), _challenge("S2", fixture(FORMATION), "TELEPORT")]
        )
    assert refused.value.code == "challenge-schema"


def test_an_unknown_operator_past_the_schema_is_still_refused() -> None:
    with pytest.raises(EmissionRefused) as refused:
        observe_challenge(_challenge("S1", fixture(FORMATION), "TELEPORT"), CORPUS)
    assert refused.value.code == "unknown-operator"


def test_corpus_bytes_that_do_not_rederive_are_refused(tmp_path: Path) -> None:
    copy_dir = tmp_path / "corpus"
    shutil.copytree(CORPUS.directory, copy_dir)
    root = CORPUS.case(FORMATION).artifact
    (copy_dir / "cas" / root).write_bytes(b"{}")
    emission = observe([_challenge("S1", fixture(FORMATION))], corpus_directory=copy_dir)
    assert emission.problems[0]["code"] == "fixture-root-mismatch"


def test_every_corpus_file_rederives_to_its_root() -> None:
    for path in (CORPUS.directory / "cas").iterdir():
        assert path.name == "root-" + hashlib.sha256(path.read_bytes()).hexdigest()
    assert {root for case in CORPUS.cases for root in (case.artifact, case.leaf)} == {
        path.name for path in (CORPUS.directory / "cas").iterdir()
    }


def test_every_observation_document_validates_against_our_schema(
    s_series: tuple[list[Any], Any],
) -> None:
    _, document = s_series
    assert holdout.validate_observation_document(document, holdout.project_schemas()) is None


def test_honest_corpus_artifacts_are_what_the_producers_make() -> None:
    for case in CORPUS.cases:
        artifact, leaf = CORPUS.read(case.artifact), CORPUS.read(case.leaf)
        if case.mechanism == "descriptor":
            assert encode_descriptor(leaf) == artifact, case.name
        elif case.name != "formation-tampered":
            assert produce_formation_certificate(leaf) == artifact, case.name
