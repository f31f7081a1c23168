"""TRVM's public synthetic fixture as a conformance suite for the scorer (docs/spec/holdout.md §5).

The scorer, given TRVM's own two schemas as data, must report S1 8/0/0, S2 0/8/0, S3 0/0/3
(read from ``synthetic-expected.json``, not restated here) and refuse each of N1-N16 for the
rule the case names.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

import pytest
import testdata

from mechanism import holdout
from mechanism.holdout._commitment import load_schemas


def synthetic_dir() -> Path:
    """TRVM's synthetic fixture, vendored byte for byte under ``tests/data/``."""
    return testdata.data("holdout/trvm-synthetic", directory=True)


SYNTHETIC_FILES = (
    "holdout-observation-v1.schema.json",
    "holdout-recipe-v1.schema.json",
    "synthetic-challenges.json",
    "synthetic-expected.json",
    "synthetic-negatives.json",
    "synthetic-observations.json",
)

# Which refusal each negative case must produce (the case file names the rule in prose).
EXPECTED_REFUSAL = {
    "N1": "observation-schema",
    "N2": "observation-schema",
    "N3": "observation-schema",
    "N4": "observation-schema",
    "N5": "observation-schema",
    "N6": "observation-schema",
    "N7": "observation-schema",
    "N8": "fixture-root-mismatch",
    "N9": "observation-schema",
    "N10": "release-mismatch",
    "N11": "observation-schema",
    "N12": "observation-schema",
    "N13": "observation-schema",
    "N14": "challenge-schema",
    "N15": "challenge-schema",
    "N16": "challenge-schema",
}


def _read(name: str) -> Any:
    return holdout.read_json((synthetic_dir() / name).read_bytes())


@pytest.fixture(scope="module")
def trvm_schemas() -> holdout.Schemas:
    return load_schemas(synthetic_dir())


@pytest.fixture(scope="module")
def honest() -> tuple[list[Any], Any]:
    challenges = holdout.read_challenge_array(
        (synthetic_dir() / "synthetic-challenges.json").read_bytes()
    )
    return challenges, _read("synthetic-observations.json")


def test_vendored_copy_is_the_recorded_reference_bytes() -> None:
    for name in SYNTHETIC_FILES:
        data = (synthetic_dir() / name).read_bytes()
        recorded = testdata.reference_sha256(f"tests/data/holdout/trvm-synthetic/{name}")
        assert hashlib.sha256(data).hexdigest() == recorded, name


def test_schemas_are_the_released_trvm_schemas() -> None:
    def sha(name: str) -> str:
        return hashlib.sha256((synthetic_dir() / name).read_bytes()).hexdigest()

    assert sha("holdout-recipe-v1.schema.json").startswith("01639f2f")
    assert sha("holdout-observation-v1.schema.json").startswith("1ea768ff")


def test_synthetic_split_matches_expected(
    trvm_schemas: holdout.Schemas, honest: tuple[list[Any], Any]
) -> None:
    challenges, document = honest
    report = holdout.score(
        challenges,
        document,
        schemas=trvm_schemas,
        expect_release=document["spec_release_id"],
        expect_implementation="synthetic-fixture",
    )
    expected = _read("synthetic-expected.json")
    assert report.refusal is None
    assert report.to_dict()["by_challenge"] == expected["by_challenge"]
    # S2 fails and S3 is unresolved, so the harness must not pass.
    assert report.verdict == "FAIL"
    assert report.missing == ()


def test_synthetic_set_exercises_every_predicate_operator(
    honest: tuple[list[Any], Any],
) -> None:
    challenges, _ = honest
    used = {p["op"] for c in challenges for p in c["predicates"]}
    assert used == set(_read("synthetic-expected.json")["operators_exercised"])
    assert used == set(holdout.PREDICATE_OPS)


def _apply(document: Any, mutations: list[dict[str, Any]]) -> Any:
    mutated = copy.deepcopy(document)
    for mutation in mutations:
        *parents, last = mutation["path"].split(".")
        target = mutated
        for part in parents:
            target = target[part]
        if mutation.get("delete"):
            del target[last]
        else:
            target[last] = copy.deepcopy(mutation["value"])
    return mutated


def _negative_cases() -> list[Any]:
    cases: list[Any] = _read("synthetic-negatives.json")["cases"]
    return cases


@pytest.mark.parametrize("case", _negative_cases(), ids=lambda case: case["id"])
def test_every_negative_case_is_refused_for_its_rule(
    case: dict[str, Any], trvm_schemas: holdout.Schemas, honest: tuple[list[Any], Any]
) -> None:
    challenges, document = honest
    report = holdout.score(
        case.get("challenges", challenges),
        _apply(document, case["mutations"]),
        schemas=trvm_schemas,
        expect_release=case.get("expect_release", document["spec_release_id"]),
    )
    assert report.verdict == "REFUSED"
    assert report.refusal == EXPECTED_REFUSAL[case["id"]]
    assert report.by_challenge == {}


def test_negative_table_covers_exactly_the_published_cases() -> None:
    assert [case["id"] for case in _negative_cases()] == list(EXPECTED_REFUSAL)


def test_interop_finds_nothing_between_identical_documents(
    honest: tuple[list[Any], Any],
) -> None:
    _, document = honest
    twin = copy.deepcopy(document)
    twin["implementation"] = "another-producer"  # producer labels are not compared
    report = holdout.interop([document, twin])
    assert report.status == "PASS"
    assert report.findings == ()


def test_interop_finds_a_planted_difference_that_no_predicate_reads(
    honest: tuple[list[Any], Any], trvm_schemas: holdout.Schemas
) -> None:
    challenges, document = honest
    planted = copy.deepcopy(document)
    # Every artifact_root of S1/S2 is read by MOVES or NEQ; S3's planes are read by nothing.
    planted["observations"]["S3"]["baseline"]["D"] = {"artifact_root": "root-" + "d" * 64}
    before = holdout.score(
        challenges, document, schemas=trvm_schemas, expect_release=document["spec_release_id"]
    )
    after = holdout.score(
        challenges, planted, schemas=trvm_schemas, expect_release=document["spec_release_id"]
    )
    assert after.to_dict() == before.to_dict()  # the scorer cannot see it ...
    report = holdout.interop([document, planted])
    assert report.status == "FAIL"  # ... the interop comparer does
    assert [f.path for f in report.findings] == ["observations.S3.baseline.D"]


def test_interop_with_one_implementation_is_not_measured(
    honest: tuple[list[Any], Any],
) -> None:
    _, document = honest
    assert holdout.interop([document]).status == "NOT MEASURED"
    assert holdout.interop([]).status == "NOT MEASURED"


def test_interop_reports_a_changed_leaf_value_at_its_full_path(
    honest: tuple[list[Any], Any], trvm_schemas: holdout.Schemas
) -> None:
    challenges, document = honest
    planted = copy.deepcopy(document)
    # Only candidate.D.structure.unique_artifacts is read (by LT); the baseline copy is not.
    planted["observations"]["S1"]["baseline"]["D"]["structure"]["unique_artifacts"] = 2
    release = document["spec_release_id"]
    assert (
        holdout.score(challenges, planted, schemas=trvm_schemas, expect_release=release).to_dict()
        == holdout.score(
            challenges, document, schemas=trvm_schemas, expect_release=release
        ).to_dict()
    )
    [finding] = holdout.interop([document, planted]).findings
    assert finding.path == "observations.S1.baseline.D.structure.unique_artifacts"
    assert (finding.left, finding.right) == ("3", "2")
