"""The eight predicate operators, one root each, UNRESOLVED for anything absent, and the
canonical comparison rules (RFC 8785, ES numbers, UTF-16 key order, JS strict equality).

Every scoring run evaluates with ``_evaluate_read`` (exact type tests, no intermediate calls),
valid only for values the strict reader produced; the tests at the end require it to decide
exactly as the reference :func:`holdout.evaluate_predicate` (a faster evaluation that changes
one decision: a path walk, a number equality, a boolean taken for a number, a refusal set
compared in order or by inclusion)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechanism import holdout
from mechanism.holdout import canonical, evaluate_predicate, read_json, resolve_path, strict_equal
from mechanism.holdout._scorer import _evaluate_read, is_absent

ROOT = "root-" + "a" * 64
OBS: dict[str, Any] = {
    "fixture_root": ROOT,
    "baseline": {
        "artifact": {"artifact_root": ROOT, "type": "Nat", "n": 4, "list": [1, 2]},
    },
    "candidate": {
        "artifact": {
            "artifact_root": "root-" + "b" * 64,
            "type": "Nat",
            "n": 4.0,
            "list": [1, 2],
            "verdict": "PASS",
        },
        "leaf": {"size": 7, "flag": True},
    },
    "refusal_set": ["b-code", "a-code"],
    "resolve": {"outcome": "ok"},
    "nothing": None,
}

# (description, predicate, expected result: True pass, False fail, None UNRESOLVED)
TABLE: list[tuple[str, dict[str, Any], bool | None]] = [
    ("HOLDS reads baseline and candidate", {"op": "HOLDS", "path": "artifact.type"}, True),
    ("HOLDS numbers compare as numbers", {"op": "HOLDS", "path": "artifact.n"}, True),
    ("HOLDS fails on a moved root", {"op": "HOLDS", "path": "artifact.artifact_root"}, False),
    ("HOLDS absent on baseline", {"op": "HOLDS", "path": "leaf.size"}, None),
    ("HOLDS does not fall back to the root", {"op": "HOLDS", "path": "fixture_root"}, None),
    ("MOVES on a moved root", {"op": "MOVES", "path": "artifact.artifact_root"}, True),
    ("MOVES on a held value", {"op": "MOVES", "path": "artifact.list"}, False),
    ("MOVES absent", {"op": "MOVES", "path": "artifact.verdict"}, None),
    ("EQ with value", {"op": "EQ", "path": "candidate.leaf.size", "value": 7}, True),
    ("EQ 4.0 equals 4", {"op": "EQ", "path": "candidate.artifact.n", "value": 4}, True),
    ("EQ true is not 1", {"op": "EQ", "path": "candidate.leaf.flag", "value": 1}, False),
    (
        "EQ value null beats right",
        {"op": "EQ", "path": "nothing", "value": None, "right": "candidate.leaf.size"},
        True,
    ),
    (
        "EQ right path",
        {"op": "EQ", "path": "baseline.artifact.type", "right": "candidate.artifact.type"},
        True,
    ),
    (
        "EQ right absent",
        {"op": "EQ", "path": "baseline.artifact.type", "right": "candidate.artifact.type.x"},
        None,
    ),
    ("EQ path is not candidate-relative", {"op": "EQ", "path": "leaf.size", "value": 7}, None),
    ("EQ arrays whole", {"op": "EQ", "path": "candidate.artifact.list", "value": [1, 2]}, True),
    (
        "EQ array order matters",
        {"op": "EQ", "path": "candidate.artifact.list", "value": [2, 1]},
        False,
    ),
    ("EQ without value or right", {"op": "EQ", "path": "candidate.leaf.size"}, None),
    ("NEQ", {"op": "NEQ", "path": "candidate.leaf.size", "value": 8}, True),
    ("NEQ equal", {"op": "NEQ", "path": "candidate.leaf.size", "value": 7.0}, False),
    ("NEQ absent", {"op": "NEQ", "path": "candidate.leaf.nope", "value": 7}, None),
    (
        "VERDICT_EQ reads candidate",
        {"op": "VERDICT_EQ", "path": "artifact.verdict", "value": "PASS"},
        True,
    ),
    ("VERDICT_EQ wrong", {"op": "VERDICT_EQ", "path": "artifact.verdict", "value": "FAIL"}, False),
    (
        "VERDICT_EQ not on baseline",
        {"op": "VERDICT_EQ", "path": "candidate.artifact.verdict", "value": "PASS"},
        None,
    ),
    ("VERDICT_EQ strict type", {"op": "VERDICT_EQ", "path": "leaf.flag", "value": 1}, False),
    (
        "VERDICT_EQ object never ===",
        {"op": "VERDICT_EQ", "path": "artifact.list", "value": [1, 2]},
        False,
    ),
    ("OUTCOME_EQ", {"op": "OUTCOME_EQ", "path": "resolve.outcome", "value": "ok"}, True),
    (
        "OUTCOME_EQ wrong",
        {"op": "OUTCOME_EQ", "path": "resolve.outcome", "value": "non-canonical-wire"},
        False,
    ),
    ("OUTCOME_EQ absent", {"op": "OUTCOME_EQ", "path": "resolve.stage", "value": "ok"}, None),
    (
        "REFUSAL_SET_EQ is set equality",
        {"op": "REFUSAL_SET_EQ", "value": ["a-code", "b-code"]},
        True,
    ),
    ("REFUSAL_SET_EQ never includes", {"op": "REFUSAL_SET_EQ", "value": ["a-code"]}, False),
    ("REFUSAL_SET_EQ missing value is []", {"op": "REFUSAL_SET_EQ"}, False),
    ("LT", {"op": "LT", "left": "candidate.artifact.n", "right": "candidate.leaf.size"}, True),
    (
        "LT false",
        {"op": "LT", "left": "candidate.leaf.size", "right": "candidate.artifact.n"},
        False,
    ),
    (
        "LT booleans are not numbers",
        {"op": "LT", "left": "candidate.leaf.flag", "right": "candidate.leaf.size"},
        None,
    ),
    (
        "LT strings are not numbers",
        {"op": "LT", "left": "resolve.outcome", "right": "candidate.leaf.size"},
        None,
    ),
    ("LT absent", {"op": "LT", "left": "candidate.x", "right": "candidate.leaf.size"}, None),
    ("unknown op", {"op": "GT", "path": "candidate.leaf.size", "value": 1}, None),
]


@pytest.mark.parametrize(("label", "predicate", "expected"), TABLE, ids=[t[0] for t in TABLE])
def test_predicate(label: str, predicate: dict[str, Any], expected: bool | None) -> None:
    assert evaluate_predicate(predicate, OBS) is expected


def test_refusal_set_absent_is_unresolved_and_empty_set_passes_empty() -> None:
    assert evaluate_predicate({"op": "REFUSAL_SET_EQ", "value": []}, {"fixture_root": ROOT}) is None
    assert evaluate_predicate({"op": "REFUSAL_SET_EQ"}, {"refusal_set": []}) is True
    assert evaluate_predicate({"op": "REFUSAL_SET_EQ"}, {"refusal_set": "x"}) is None


@pytest.mark.parametrize(
    "path",
    [
        "candidate.artifact.list.length",
        "candidate.constructor",
        "candidate.artifact.list.01",
        "candidate.artifact.list.2",
        "candidate.artifact.list.-1",
        "resolve.outcome.0",
        "nothing.x",
    ],
)
def test_inherited_names_and_bad_indices_are_absent(path: str) -> None:
    assert is_absent(resolve_path(OBS, path))


def test_array_index_by_canonical_decimal() -> None:
    assert resolve_path(OBS, "candidate.artifact.list.1") == 2


def test_present_null_is_not_absent() -> None:
    assert resolve_path(OBS, "nothing") is None


@pytest.mark.parametrize(
    ("text", "encoded"),
    [
        (b"4.0", b"4"),
        (b"1e-7", b"1e-7"),
        (b"1e20", b"100000000000000000000"),
        (b"100000000000000000000", b"100000000000000000000"),
        (b"1e21", b"1e+21"),
        (b"-0", b"0"),
        (b"0.000001", b"0.000001"),
        (b"123456789012345678901234567890", b"1.2345678901234568e+29"),
    ],
)
def test_numbers_are_formatted_the_es_way(text: bytes, encoded: bytes) -> None:
    assert canonical(read_json(text)) == encoded


def test_keys_sort_by_utf16_code_unit_not_code_point() -> None:
    # The jcs-utf16-code-unit-order vector: U+1F602 (surrogates D83D DE02) sorts before U+FB33.
    value = read_json('{"\ufb33":1,"\U0001f602":2}'.encode())
    assert canonical(value) == '{"\U0001f602":2,"\ufb33":1}'.encode()
    assert sorted(value) == ["\ufb33", "\U0001f602"]  # what a code-point sort would say


def test_strict_equal_is_javascript_triple_equals() -> None:
    assert strict_equal(1, 1.0)
    assert not strict_equal(1, True)
    assert not strict_equal(0, False)
    assert not strict_equal(None, False)
    assert strict_equal("PASS", "PASS")
    assert not strict_equal({}, {})


NAMES = ["baseline", "candidate", "artifact", "leaf", "verdict", "refusal_set", "resolve",
         "outcome", "size", "0", "1", "01", "length", "x"]  # fmt: skip
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, -1, 1.0, 0.5, -0.0, 2**53 - 1, 1e20, 4]),
    st.sampled_from(["PASS", "FAIL", "A_CODE", "B_CODE", "é", "\U0001f602", "\ufb33", "1"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(NAMES), inner, max_size=4)
    ),
    max_leaves=12,
)
PATHS = st.lists(st.sampled_from(NAMES), min_size=1, max_size=4).map(".".join)
OPS = st.sampled_from([*holdout.PREDICATE_OPS, "BOGUS"])


@st.composite
def predicates(draw: st.DrawFn) -> dict[str, Any]:
    predicate: dict[str, Any] = {"op": draw(OPS)}
    for member, strategy in (("path", PATHS), ("left", PATHS), ("right", PATHS), ("value", VALUES)):
        if draw(st.booleans()):
            predicate[member] = draw(strategy)
    return predicate


def _as_read(value: Any) -> Any:
    """The value as the strict reader produces it (exact types, numbers as JavaScript)."""
    return holdout.read_json(json.dumps(value).encode())


@settings(max_examples=600)
@given(predicates(), st.dictionaries(st.sampled_from(NAMES), VALUES, max_size=5))
def test_fast_evaluation_decides_as_the_reference(
    predicate: dict[str, Any], observation: dict[str, Any]
) -> None:
    predicate, observation = _as_read(predicate), _as_read(observation)
    assert _evaluate_read(predicate, observation) is holdout.evaluate_predicate(
        predicate, observation
    )


def test_fast_evaluation_decides_the_predicate_table_as_the_reference() -> None:
    observation = _as_read(OBS)
    for description, predicate, expected in TABLE:
        predicate = _as_read(predicate)
        assert _evaluate_read(predicate, observation) is expected, description
