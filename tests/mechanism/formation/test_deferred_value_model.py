"""Record admission that defers the generic value-model scan answers exactly as before.

The formation grammar refuses every value outside the canonical value model by itself, so
``admit_subject``/``admit_certificate`` run that scan only when the grammar refuses (to give
the refusal step 4 would have given). The reference here is the undeferred pipeline: the full
``admit_record`` (value model included) and then the same grammar. Records are mutated into
canonical-looking bytes (sorted keys, no whitespace) so they reach the value-model scan,
alone and together with the grammar's own INVALID and LIMIT refusals.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mechanism.canonical import (
    CanonicalError,
    CanonicalLimitError,
    CanonicalUnsupportedError,
    admit_record,
)
from mechanism.formation import _wire
from mechanism.formation._wire import FormationError, admit_certificate, admit_subject

from ._builders import CERTIFICATE_SCHEMA, PROFILE, SUBJECT_SCHEMA, digest

GROUND = digest(b"ground")
AGENCY = digest(b"agency")


def _subject(count: int) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = [{"tag": "ATOM", "payload_digest": digest(b"a")}]
    for index in range(1, count):
        nodes.append({"tag": "APPLY", "argument": index - 1})
    return {
        "schema_version": SUBJECT_SCHEMA,
        "profile_digest": PROFILE,
        "context": {"ground_artifact_digest": GROUND, "authority_axiom_agency_digest": AGENCY},
        "nodes": nodes,
        "root": count - 1,
    }


def _certificate(count: int) -> dict[str, Any]:
    steps = [{"node": 0, "premises": [], "rule": "ATOM"}]
    steps += [{"node": i, "premises": [i - 1], "rule": "APPLY"} for i in range(1, count)]
    return {
        "schema_version": CERTIFICATE_SCHEMA,
        "subject_digest": digest(b"subject"),
        "profile_digest": PROFILE,
        "root": count - 1,
        "steps": steps,
    }


# Values outside the model (each also fails the grammar wherever the grammar looks), values
# the grammar refuses although the model allows them, and schema changes.
OUTSIDE_MODEL: list[Any] = [1.5, -1, 2**53, "e\u0301", {"Bad": 1}, {"a": -2}, [0.5], "\u00e9"]
INSIDE_MODEL: list[Any] = [7, "x", [], {}, None, True, 5000]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, member in value.items():
            found += _paths(member, (*prefix, key))
    elif isinstance(value, list):
        for index, member in enumerate(value):
            found += _paths(member, (*prefix, index))
    return found


def _mutated(record: dict[str, Any], data: st.DataObject) -> bytes:
    record = copy.deepcopy(record)
    for _ in range(data.draw(st.integers(1, 2))):
        path = data.draw(st.sampled_from(_paths(record)))
        parent: Any = record
        for step in path[:-1]:
            parent = parent[step]
        choice = data.draw(st.sampled_from(["outside", "inside", "key", "schema"]))
        if choice == "outside":
            parent[path[-1]] = copy.deepcopy(data.draw(st.sampled_from(OUTSIDE_MODEL)))
        elif choice == "inside":
            parent[path[-1]] = copy.deepcopy(data.draw(st.sampled_from(INSIDE_MODEL)))
        elif choice == "key" and isinstance(parent, dict):
            parent[data.draw(st.sampled_from(["B", "zz", "x1", "\u00e9"]))] = 1
        elif choice == "schema":
            record["schema_version"] = data.draw(st.sampled_from(["OTHER-0.1", 3]))
    text = json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return text.encode()


def _reference(
    data: bytes, schema: str, grammar: Callable[[dict[str, Any], int], None], max_nodes: int
) -> dict[str, Any]:
    """The undeferred pipeline: full step 4, then the grammar (as ``_wire._admit`` maps)."""
    try:
        record = admit_record(
            data,
            schema,
            max_bytes=_wire.MAX_RECORD_BYTES,
            max_depth=_wire.MAX_JSON_DEPTH,
            max_containers=_wire.MAX_JSON_CONTAINERS,
        )
    except CanonicalLimitError as error:
        message = f"formation record exceeds a resource bound: {error}"
        raise _wire.FormationLimitError(message) from None
    except CanonicalUnsupportedError as error:
        raise _wire.UnsupportedFormation(f"unsupported formation record: {error}") from None
    except CanonicalError as error:
        raise FormationError(f"formation record is not canonical JSON: {error}") from None
    grammar(record, max_nodes)
    return record


def _outcome(admit: Callable[[], dict[str, Any]]) -> tuple[str, str]:
    try:
        return ("admitted", json.dumps(admit(), sort_keys=True))
    except FormationError as error:
        return (type(error).__name__, str(error))


@settings(max_examples=300, deadline=None)
@given(st.data(), st.integers(1, 4), st.integers(1, 4))
def test_deferred_subject_admission_answers_as_the_full_scan(
    data: st.DataObject, count: int, max_nodes: int
) -> None:
    raw = _mutated(_subject(count), data)
    got = _outcome(lambda: admit_subject(raw, max_nodes=max_nodes))
    expected = _outcome(lambda: _reference(raw, SUBJECT_SCHEMA, _wire._subject_grammar, max_nodes))
    assert got == expected


@settings(max_examples=300, deadline=None)
@given(st.data(), st.integers(1, 4), st.integers(1, 4))
def test_deferred_certificate_admission_answers_as_the_full_scan(
    data: st.DataObject, count: int, max_nodes: int
) -> None:
    raw = _mutated(_certificate(count), data)
    got = _outcome(lambda: admit_certificate(raw, max_nodes=max_nodes))
    expected = _outcome(
        lambda: _reference(raw, CERTIFICATE_SCHEMA, _wire._certificate_grammar, max_nodes)
    )
    assert got == expected


def test_value_outside_the_model_is_invalid_before_the_node_limit() -> None:
    record = _subject(3)
    record["nodes"][2]["argument"] = 1.5  # the model refuses it; the grammar would say LIMIT
    raw = json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
    got = _outcome(lambda: admit_subject(raw, max_nodes=2))
    assert got == ("FormationError", "formation record is not canonical JSON: record holds a "
                   "value outside the canonical model")  # fmt: skip
