"""The scorer's ``uniqueItems`` rule gives jsonschema's verdict and message, in linear time.

jsonschema sorts an array's items and compares neighbours, and compares every pair when they
cannot be sorted (quadratic: a refusal set of 4,000 objects took 14 s to be refused). The
scorer keeps the sorting route and replaces the pairwise one by a set of texts, equal exactly
when jsonschema's ``equal`` holds. These tests compare the two on generated arrays (plain JSON
values with booleans, integral floats, ``-0.0``, nested arrays and objects, and values outside
plain JSON, which keep the pairwise route), on whole observation documents (the best-matching
message, byte for byte) and on schemas (the meta-schema applies ``uniqueItems`` too). Growth is
measured in ``tests/linear``.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import jsonschema
import jsonschema.validators
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from jsonschema._utils import uniq as reference_uniq

from mechanism import holdout
from mechanism.holdout import Refusal
from mechanism.holdout._scorer import (
    _check_schema,
    _first_error,
    _pattern_rule,
    _unique,
    _Validator,
    _x_sorted_rule,
)

PROJECT = holdout.project_schemas()
ROOT = "root-" + "a" * 64
# The scorer's validator as it was: jsonschema's own uniqueItems.
_Reference = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    validators={"pattern": _pattern_rule, "x-sorted": _x_sorted_rule},
)

# Few distinct leaves, so that generated arrays often hold equal, nearly equal (1, 1.0, True)
# and unsortable (str beside int, objects) items.
LEAVES = st.sampled_from([0, 1, 2, 0.0, -0.0, 1.0, 1.5, 2**53 + 0.0, True, False, None, "", "a"])
PLAIN = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab"), inner),
    max_leaves=6,
)
NOT_PLAIN = st.sampled_from([math.nan, math.inf, (1,), (1, 2), 10**5000, b"a"])
ITEMS = st.lists(PLAIN | NOT_PLAIN, max_size=8) | st.lists(PLAIN, max_size=8)


def _reference_message(schema: Any, instance: Any) -> str | None:
    error = jsonschema.exceptions.best_match(_Reference(schema).iter_errors(instance))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "(root)"
    return f"at {where}: {error.message}"


def _document(refusal_set: Any) -> dict[str, Any]:
    return {
        "type": "EVIDENCED-HOLDOUT-OBSERVATION-v1",
        "implementation": "evidenced-python",
        "spec_release_id": "srel-" + "c" * 64,
        "observations": {"S1": {"fixture_root": ROOT, "refusal_set": refusal_set}},
    }


@settings(max_examples=400, deadline=None)
@given(ITEMS)
@example([[1], [True], [1]])  # sortable (True == 1 for the sort): the reference misses the pair
@example([{"a": 1}, {"a": 1.0}])  # unsortable, equal: 1 == 1.0
@example([{"a": True}, {"a": 1}])  # unsortable, different: True is not 1
@example([{"a": [0.0]}, {"a": [-0.0]}])
@example([{"b": 1, "a": 2}, {"a": 2, "b": 1}])  # member order does not count
@example(["a", 1, "a"])
@example([[{}], [{}]])  # lists of objects sort while their first items are equal
@example([math.nan, math.nan])  # not plain: the pairwise route (distinct NaN objects)
def test_linear_rule_gives_the_reference_verdict(items: list[Any]) -> None:
    before = copy.deepcopy(items)
    assert _unique(items) is reference_uniq(items)
    assert items == before  # (NaN: the same objects, equal by identity)


def test_the_same_nan_object_twice_is_a_repeat_as_for_the_reference() -> None:
    items: list[Any] = [{}, math.nan]
    items.append(items[1])
    assert _unique(items) is reference_uniq(items) is False


@settings(max_examples=150, deadline=None)
@given(st.lists(PLAIN, max_size=6))
def test_refusal_set_with_any_items_gets_the_reference_message(items: list[Any]) -> None:
    document = _document(items)
    assert _first_error(PROJECT.observation, document) == _reference_message(
        PROJECT.observation, document
    )


def test_refusal_set_of_repeated_objects_is_refused_with_the_reference_message() -> None:
    items: list[Any] = [{"code": index} for index in range(300)] + [{"code": 0}]
    document = _document(items)
    message = _first_error(PROJECT.observation, document)
    assert message == _reference_message(PROJECT.observation, document)
    # The repeat is reported only when it is the best match; its own check must say so.
    assert _unique(items) is False and _Validator({"uniqueItems": True}).is_valid(items) is False
    assert jsonschema.Draft202012Validator({"uniqueItems": True}).is_valid(items) is False


def test_repeated_reason_codes_are_refused_as_observation_schema() -> None:
    document = _document(["A_CODE", "A_CODE"])
    report = holdout.score(
        [],
        document,
        schemas=PROJECT,
        expect_release=document["spec_release_id"],
    )
    assert report.refusal == "observation-schema"
    assert report.detail == _reference_message(PROJECT.observation, document)
    assert report.by_challenge == {}


def _reference_schema_problem(schema: Any) -> str | None:
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as error:
        return error.message
    return None


def _schema_problem(schema: Any) -> str | None:
    try:
        _check_schema(schema)
    except Refusal as refusal:
        assert refusal.code == "schemas-invalid"
        return refusal.detail
    return None


KEYWORD_VALUES = st.sampled_from(
    ["type", "required", "enum", "const", "minimum", "items", "properties", "allOf", "$ref",
     "$dynamicRef", "format", "dependentRequired", "contentEncoding", "unevaluatedItems"]
)  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(KEYWORD_VALUES, PLAIN | st.lists(PLAIN | st.sampled_from(["string"]))))
@example({"type": [{"a": 1}, {"a": 1.0}]})
@example({"type": ["string", "string"]})
@example({"required": ["a", "a"]})
@example({"dependentRequired": {"a": ["b", "b"]}})
@example({"properties": {"x": {"type": [{"a": 0}, {"a": 1}]}}})
def test_schema_check_gives_the_reference_message(schema: dict[str, Any]) -> None:
    assert _schema_problem(schema) == _reference_schema_problem(schema)


@pytest.mark.parametrize("schema", [PROJECT.recipe, PROJECT.observation])
def test_this_projects_schemas_still_pass_the_check(schema: Any) -> None:
    assert _schema_problem(schema) is None is _reference_schema_problem(schema)


def test_schema_with_a_type_array_of_objects_is_refused_with_the_reference_message() -> None:
    schema = {"type": [{"a": index} for index in range(200)]}
    problem = _schema_problem(schema)
    assert problem is not None and problem == _reference_schema_problem(schema)
