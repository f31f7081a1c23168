"""Compiled validation (jsonschema-rs) agrees with the reference (jsonschema), or is not used.

The compiled validator only ever accepts; the reference re-validates and renders whatever it
rejects. So the property that matters is agreement on valid/invalid, tested here on the two
schemas of this project and TRVM's two synthetic schemas, with challenges and observation
documents generated and mutated (ADR 0006). Schemas outside the provable subset must not be
compiled at all, and nothing is ever fetched.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import testdata
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mechanism import holdout
from mechanism.holdout._commitment import load_schemas
from mechanism.holdout._scorer import (
    Refusal,
    _checked,
    _compile,
    _compiled,
    _first_error,
    _safe_pattern,
    _Validator,
    validate_challenge,
    validate_observation_document,
)

TRVM = testdata.data("holdout/trvm-synthetic", directory=True)
PROJECT = holdout.project_schemas()
TRVM_SCHEMAS = load_schemas(TRVM)
ROOT = "root-" + "a" * 64
DIGEST = "sha256:" + "b" * 64


def _read(path: Path) -> Any:
    return holdout.read_json(path.read_bytes())


PUBLIC_CHALLENGES = _read(testdata.fixture("holdout/challenges/public-s.json"))
PROJECT_DOCUMENT: dict[str, Any] = {
    "type": "EVIDENCED-HOLDOUT-OBSERVATION-v1",
    "implementation": "evidenced-python",
    "spec_release_id": "srel-" + "c" * 64,
    "observations": {
        "S1": {
            "fixture_root": ROOT,
            "baseline": {"artifact": {"artifact_root": ROOT, "size": 10, "content_digest": DIGEST}},
            "candidate": {
                "artifact": {"verdict": "PASS", "type": "ATOM_T", "provider": "t81vm"},
                "leaf": {"cited_digest": "c" * 64, "formation_digest": DIGEST},
            },
            "refusal_set": ["A_CODE", "B_CODE"],
            "resolve": {"outcome": "ok"},
        },
        "H2": {"fixture_root": ROOT},
    },
}
CASES = [
    (PROJECT.recipe, PUBLIC_CHALLENGES),
    (PROJECT.observation, [PROJECT_DOCUMENT]),
    (TRVM_SCHEMAS.recipe, _read(TRVM / "synthetic-challenges.json")),
    (TRVM_SCHEMAS.observation, [_read(TRVM / "synthetic-observations.json")]),
]
TRICKY: list[Any] = [
    "S1\n", "S\u0661", "H7", "root-" + "A" * 64, ROOT + "\n", DIGEST, "c" * 64, "", "A_CODE",
    "a_code", "\u00e9", "x" * 129, "\r", 0, -1, 1.0, 2**53, True, None, [], {}, ["B", "A"],
    ["A", "A"], {"op": "IDENTITY"}, {"fixture_root": ROOT},
]  # fmt: skip


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, member in value.items():
            found += _paths(member, (*prefix, key))
    elif isinstance(value, list):
        for index, member in enumerate(value):
            found += _paths(member, (*prefix, index))
    return found


def _mutate(value: Any, data: st.DataObject) -> Any:
    value = copy.deepcopy(value)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(value)))
        parent = value
        for step in path[:-1]:
            parent = parent[step]
        target = parent[path[-1]] if path else value
        action = data.draw(st.sampled_from(["replace", "drop", "add", "newline", "reverse"]))
        replacement: Any = target
        if action == "replace":
            replacement = copy.deepcopy(data.draw(st.sampled_from(TRICKY)))
        elif action == "newline" and isinstance(target, str):
            replacement = target + "\n"
        elif action == "reverse" and isinstance(target, list):
            replacement = [*target[::-1], *target[:1]]
        elif action == "add" and isinstance(target, dict):
            replacement = {**target, data.draw(st.sampled_from(["extra", "H3", "leaf"])): {}}
        elif action == "drop" and path:
            del parent[path[-1]]
            continue
        if path:
            parent[path[-1]] = replacement
        else:
            value = replacement
    return holdout.read_json(json.dumps(value).encode())  # as the scorer sees it


def test_every_schema_of_this_project_and_of_trvm_is_compiled() -> None:
    for schema, _ in CASES:
        assert _checked(schema).compiled is not None


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_compiled_and_reference_agree_on_mutated_instances(data: st.DataObject) -> None:
    schema, instances = data.draw(st.sampled_from(CASES))
    instance = _mutate(data.draw(st.sampled_from(instances)), data)
    compiled = _checked(schema).compiled
    assert compiled is not None
    assert compiled.is_valid(instance) is _Validator(schema).is_valid(instance)


def test_unmutated_instances_are_valid_for_both() -> None:
    for schema, instances in CASES:
        compiled = _checked(schema).compiled
        assert compiled is not None
        for instance in instances:
            assert compiled.is_valid(instance)
            assert _Validator(schema).is_valid(instance)


def test_rejected_instance_gets_the_reference_message() -> None:
    challenge = {**PUBLIC_CHALLENGES[0], "id": "S1\n"}
    message = validate_challenge(challenge, PROJECT)
    assert message is not None and message == _first_error(PROJECT.recipe, challenge)
    document = copy.deepcopy(PROJECT_DOCUMENT)
    document["observations"]["S1"]["refusal_set"] = ["B_CODE", "A_CODE"]
    found = validate_observation_document(document, PROJECT)
    assert found == _first_error(PROJECT.observation, document)
    assert found is not None and "not sorted" in found


PATTERN_PIECES = [
    "^", "$", "a", "b", "0", "\u00e9", r"\d", r"\D", r"\w", r"\W", "[a-c]", "[^a]", "[0-9_]",
    "(?:a|b)", "(a)", ")", "(", "+", "*", "?", "{1,2}", "{2}", "|", r"\.", r"\-", r"\$",
]  # fmt: skip
SUBJECTS = st.text(st.sampled_from([*"ab0_\u00e9\n\r\u2028.-$\u0661"]), max_size=5)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(PATTERN_PIECES), max_size=6), st.lists(SUBJECTS, max_size=8))
@example(pieces=[r"\D", "+", "+", r"\D"], texts=["__"])  # possessive in Python, not in Rust
def test_safe_patterns_match_as_the_reference_matches(pieces: list[str], texts: list[str]) -> None:
    pattern = "".join(pieces)
    try:
        _compiled(pattern)
    except re.error:
        assert not _safe_pattern(pattern)
        return
    compiled = _compile({"type": "string", "pattern": pattern})
    if compiled is None:
        return  # declined (outside the subset, or refused by the regex crate): reference only
    reference = _Validator({"type": "string", "pattern": pattern})
    for text in texts:
        assert compiled.is_valid(text) is reference.is_valid(text), (pattern, text)


@pytest.mark.parametrize(
    "pattern",
    [".", "a.b", r"\s", r"\b", r"\n", r"(?=a)", r"(?i)a", r"(a)\1", "[[a]]", "[a--b]", "a{,2}",
     "{", r"\u0041", "[\\d]", "(?P<n>a)"],
)  # fmt: skip
def test_pattern_whose_engines_may_differ_is_not_compiled(pattern: str) -> None:
    assert not _safe_pattern(pattern)
    assert _compile({"pattern": pattern}) is None


@pytest.mark.parametrize(
    "schema",
    [
        {"patternProperties": {"^a$": {"type": "string"}}},
        {"multipleOf": 0.1},
        {"$ref": "https://example.invalid/remote.json"},
        {"$ref": "#/$defs/missing", "$defs": {}},
        {"properties": {"a": {"$id": "https://example.invalid/inner", "type": "string"}}},
        {"unevaluatedProperties": False},
        {"$schema": "http://json-schema.org/draft-07/schema#"},
        {"$dynamicRef": "#x"},
    ],
)
def test_schema_outside_the_subset_is_validated_by_the_reference_alone(
    schema: dict[str, Any],
) -> None:
    assert _checked(schema).compiled is None


def test_remote_ref_is_never_fetched_and_refuses_as_before() -> None:
    recipe = {"$ref": "https://example.invalid/remote.json"}
    schemas = holdout.Schemas(recipe=recipe, observation=PROJECT.observation)
    with pytest.raises(Refusal) as raised:
        validate_challenge({"id": "S1"}, schemas)
    assert raised.value.code == "schemas-invalid"
    assert raised.value.detail.startswith("the schema cannot be applied: ")


def test_schema_changed_in_place_is_checked_again() -> None:
    schema = copy.deepcopy(dict(PROJECT.recipe))
    assert _checked(schema).problem is None
    schema["type"] = "no-such-type"
    assert _checked(schema).problem is not None
    schemas = holdout.Schemas(recipe=schema, observation=PROJECT.observation)
    report = holdout.score([], PROJECT_DOCUMENT, schemas=schemas, expect_release="x")
    assert report.refusal == "schemas-invalid"


SORTED = {"type": "array", "x-sorted": True}
X_SORTED_SCHEMAS: list[dict[str, Any]] = [
    {"properties": {"a": SORTED}},  # found by walking the instance
    {"additionalProperties": SORTED, "properties": {"skip": {"type": "array"}}},
    {"items": {"$ref": "#/$defs/s"}, "$defs": {"s": SORTED}},
    {"$ref": "#/$defs/tree", "$defs": {"tree": {"x-sorted": True, "items": {"$ref": "#"}}}},
    {"allOf": [{"properties": {"a": SORTED}}]},  # checked inside the compiled validator
    {"if": {"type": "object"}, "then": {"additionalProperties": SORTED}},
    {"prefixItems": [SORTED], "items": SORTED},
    {"properties": {"a": {"items": SORTED, "prefixItems": [{}]}}},
]
X_SORTED_INSTANCES: list[Any] = [
    {"a": ["a", "b"]}, {"a": ["b", "a"]}, {"skip": ["b", "a"], "z": ["a"]}, {"z": ["b", "a"]},
    [["a", "b"], ["b", "a"]], [["a"], ["b"]], ["b", "a"], [[["b", "a"]]],
    [["\U0001f600", "\uffff"]],
    [[1, "1", True]], [["true", True]], {"a": [2, 10]}, {"a": ["10", "2"]}, {"a": [[], None]},
    [["a", ["c", "b"]]],
]  # fmt: skip


@pytest.mark.parametrize("schema", X_SORTED_SCHEMAS, ids=range(len(X_SORTED_SCHEMAS)))
def test_x_sorted_is_applied_where_the_reference_applies_it(schema: dict[str, Any]) -> None:
    compiled = _compile(schema)
    assert compiled is not None
    reference = _Validator(schema)
    for instance in X_SORTED_INSTANCES:
        assert compiled.is_valid(instance) is reference.is_valid(instance), instance


def test_x_sorted_is_found_by_walking_when_only_paths_lead_to_it() -> None:
    compiled = [_compile(schema) for schema in X_SORTED_SCHEMAS]
    assert [c is not None and c.walker is not None for c in compiled] == [
        True, True, True, True, False, False, False, False
    ]  # fmt: skip


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}},
        {"allOf": [{"anyOf": [{"$ref": "#"}]}]},
        {"if": {"not": {"$ref": "#"}}},
        {"dependentSchemas": {"a": {"$ref": "#"}}},
    ],
)
def test_schema_that_loops_in_place_is_refused_as_before_never_compiled(
    schema: dict[str, Any],
) -> None:
    assert _compile(schema) is None
    schemas = holdout.Schemas(recipe=schema, observation=PROJECT.observation)
    with pytest.raises(Refusal) as raised:
        validate_challenge({"id": "S1", "a": 1}, schemas)
    assert raised.value.detail == "the schema cannot be applied: RecursionError"


def test_schema_that_recurses_into_members_is_compiled() -> None:
    tree = {"items": {"$ref": "#"}, "x-sorted": True}
    compiled = _compile(tree)
    assert compiled is not None and compiled.walker is not None
    assert compiled.is_valid(["a", ["b", "c"]]) and not compiled.is_valid(["a", ["c", "b"]])


@pytest.mark.parametrize("pattern", [r"\D++\D", "a*+", "a?+", "a{2}+", "a{1,3}+b", "a+?+", "a??"])
def test_a_quantifier_of_a_quantifier_is_left_to_the_reference(pattern: str) -> None:
    """Python 3.11 reads ``\\D++`` as possessive (``\\D++\\D`` never matches ``__``) and the
    ``regex`` crate as a repeat of ``\\D+`` (it matches): the compiled validator said valid
    where the reference said invalid. Such a pattern is outside the compiled subset now."""
    assert not _safe_pattern(pattern)
    assert _compile({"type": "string", "pattern": pattern}) is None


@pytest.mark.parametrize("pattern", ["a+?", "a*?b", "a{1,2}?", r"\++", "[+]+", "(a+)+", "a+b+"])
def test_lazy_quantifiers_and_escaped_pluses_stay_compiled(pattern: str) -> None:
    assert _safe_pattern(pattern)
