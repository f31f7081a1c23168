"""BoundProposition / EvidenceBounds / EvaluatedProposition rules (docs/spec/formation.md §1.1)."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import subprocess
import sys
from typing import Any

import attrs
import pytest

from session import (
    BoundProposition,
    EvaluatedProposition,
    EvidenceBindingError,
    EvidenceBounds,
    FrozenInstanceError,
    MechanismDecision,
    MechanismOutcome,
    core_digest,
    normalise_digest,
)

HEX_A = "a" * 64
HEX_B = "b" * 64
DIGEST = "sha256:" + "c" * 64


def make(**overrides: object) -> BoundProposition:
    fields: dict[str, object] = {
        "subject_id": "subject",
        "predicate": "p",
        "expected": "CHECKED",
        "mechanism_id": "m",
        "mechanism_digest": DIGEST,
        "evidence_refs": ("sha256:" + HEX_A,),
        "trust_roots": ("root",),
        "bounds": EvidenceBounds(1, 10),
        "parameters": {},
    }
    fields.update(overrides)
    return BoundProposition(**fields)  # type: ignore[arg-type]


def test_outcomes_are_exactly_three_strings() -> None:
    assert [o.value for o in MechanismOutcome] == ["PASS", "FAIL", "UNKNOWN"]
    assert MechanismOutcome("PASS") is MechanismOutcome.PASS


def test_negative_bounds_are_refused_but_types_are_not_checked() -> None:
    with pytest.raises(EvidenceBindingError, match="evidence bounds cannot be negative"):
        EvidenceBounds(-1, 0)
    with pytest.raises(EvidenceBindingError, match="evidence bounds cannot be negative"):
        EvidenceBounds(0, -1)
    assert EvidenceBounds(True, 1.0).to_dict() == {  # type: ignore[arg-type]
        "max_evidence_items": True,
        "max_evidence_bytes": 1.0,
    }


@pytest.mark.parametrize("field", ["subject_id", "predicate", "mechanism_id"])
def test_empty_identity_fields_are_refused(field: str) -> None:
    with pytest.raises(
        EvidenceBindingError, match="subject_id, predicate, and mechanism_id must not be empty"
    ):
        make(**{field: ""})


@pytest.mark.parametrize("digest", ["sha256:" + "A" * 64, "md5:" + "a" * 64, "a" * 63, "", None])
def test_malformed_mechanism_digest_is_refused(digest: object) -> None:
    with pytest.raises(EvidenceBindingError, match="mechanism_digest must be a SHA-256 digest"):
        make(mechanism_digest=digest)


def test_mechanism_digest_is_stored_as_given_and_emitted_normalised() -> None:
    binding = make(mechanism_digest="c" * 64)
    assert binding.mechanism_digest == "c" * 64
    assert binding.to_dict()["mechanism_digest"] == DIGEST


def test_evidence_refs_are_normalised_in_order() -> None:
    binding = make(evidence_refs=(HEX_B, "sha256:" + HEX_A))
    assert binding.evidence_refs == ("sha256:" + HEX_B, "sha256:" + HEX_A)


def test_empty_evidence_is_refused() -> None:
    with pytest.raises(EvidenceBindingError, match="a bound proposition needs evidence"):
        make(evidence_refs=())


def test_duplicate_evidence_after_normalisation_creates_no_extra_support() -> None:
    with pytest.raises(EvidenceBindingError, match="duplicate evidence references"):
        make(evidence_refs=(HEX_A, "sha256:" + HEX_A))


def test_malformed_evidence_reference_is_refused() -> None:
    with pytest.raises(EvidenceBindingError, match="not a SHA-256 evidence reference"):
        make(evidence_refs=("sha256:" + "g" * 64,))


@pytest.mark.parametrize("roots", [(), ("root", "")])
def test_trust_roots_must_be_explicit(roots: tuple[str, ...]) -> None:
    with pytest.raises(EvidenceBindingError, match="at least one explicit trust root"):
        make(trust_roots=roots)


def test_trust_roots_are_sorted_and_deduplicated() -> None:
    assert make(trust_roots=("b", "a", "b")).trust_roots == ("a", "b")


def test_parameters_are_copied_into_a_sorted_plain_dict() -> None:
    caller = {"b": "2", "a": "1"}
    binding = make(parameters=caller)
    caller["c"] = "3"
    assert type(binding.parameters) is dict
    assert list(binding.parameters) == ["a", "b"]


def test_digest_is_bare_hex_over_the_ascii_escaped_core_codec() -> None:
    binding = make(expected="é", parameters={"z": "ü"})
    text = json.dumps(
        binding.to_dict(),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
        allow_nan=False,
    )
    assert "\\u00e9" in text
    assert binding.digest() == hashlib.sha256(text.encode()).hexdigest()
    assert not binding.digest().startswith("sha256:")
    assert core_digest(binding.to_dict()) == binding.digest()


def test_to_dict_field_order_and_round_trip() -> None:
    binding = make(parameters={"k": "v"})
    assert list(binding.to_dict()) == [
        "subject_id",
        "predicate",
        "expected",
        "mechanism_id",
        "mechanism_digest",
        "evidence_refs",
        "trust_roots",
        "bounds",
        "parameters",
    ]
    assert BoundProposition.from_dict(binding.to_dict()) == binding


def test_nan_expected_cannot_be_digested() -> None:
    with pytest.raises(ValueError):
        make(expected=float("nan")).digest()


def test_evaluated_proposition_dict_shape() -> None:
    result = EvaluatedProposition(
        binding_digest="d" * 64,
        outcome=MechanismOutcome.FAIL,
        mechanism_id="m",
        mechanism_digest="c" * 64,
        evidence_refs=("sha256:" + HEX_A,),
        trust_roots=("r",),
        observed_evidence_bytes=3,
        details="x",
    )
    assert not result.passed
    assert result.to_dict() == {
        "binding_digest": "d" * 64,
        "outcome": "FAIL",
        "mechanism_id": "m",
        "mechanism_digest": DIGEST,
        "evidence_refs": ["sha256:" + HEX_A],
        "trust_roots": ["r"],
        "observed_evidence_bytes": 3,
        "details": "x",
        "observations": {},
    }


@pytest.mark.parametrize("value", [None, 5, "sha256:" + "a" * 63, "SHA256:" + HEX_A, HEX_A + "\n"])
def test_normalise_digest_refuses_malformed_references(value: object) -> None:
    with pytest.raises(EvidenceBindingError):
        normalise_digest(value)


# ---- the frozen-dataclass surface of docs/spec/formation.md §1.1 --------------------------------


def test_binding_fields_are_the_dataclass_fields_in_spec_order() -> None:
    binding = make()
    assert dataclasses.is_dataclass(binding)
    assert [field.name for field in dataclasses.fields(binding)] == [
        "subject_id",
        "predicate",
        "expected",
        "mechanism_id",
        "mechanism_digest",
        "evidence_refs",
        "trust_roots",
        "bounds",
        "parameters",
    ]
    assert dataclasses.asdict(binding)["bounds"] == {
        "max_evidence_items": 1,
        "max_evidence_bytes": 10,
    }


def test_dataclasses_replace_reruns_normalisation_and_validation() -> None:
    binding = make()
    replace: Any = dataclasses.replace  # the attrs class is a dataclass only at runtime
    replaced = replace(binding, evidence_refs=(HEX_B,), trust_roots=("z", "a", "z"))
    assert replaced.evidence_refs == ("sha256:" + HEX_B,)
    assert replaced.trust_roots == ("a", "z")
    assert replaced.subject_id == binding.subject_id
    with pytest.raises(EvidenceBindingError):
        replace(binding, evidence_refs=())


@pytest.mark.parametrize(
    "first",
    [
        "dataclasses.fields(Sub(1, 2))",
        "orjson.dumps(EvidenceBounds(1, 2))",
        "EvidenceBounds.__dataclass_params__",
        "dataclasses.is_dataclass(EvidenceBounds)",
    ],
)
def test_the_dataclass_metadata_is_the_same_whichever_way_it_is_first_read(first: str) -> None:
    """The metadata is made on first use: read first through a subclass, an instance, orjson
    or the params, it is the class's own afterwards, as when it was made at import."""
    probe = (
        "import dataclasses, json, orjson\n"
        "from session import EvidenceBounds\n"
        "class Sub(EvidenceBounds): pass\n"
        f"{first}\n"
        "fields = EvidenceBounds.__dict__['__dataclass_fields__']\n"
        "assert Sub.__dataclass_fields__ is fields and type(fields) is dict\n"
        "print(json.dumps([orjson.dumps(EvidenceBounds(1, 2)).decode(),\n"
        "    [f.name for f in dataclasses.fields(EvidenceBounds)],\n"
        "    repr(EvidenceBounds.__dataclass_params__)]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    shadow: Any = dataclasses.make_dataclass("EvidenceBounds", [], frozen=True)
    assert json.loads(done.stdout) == [
        '{"max_evidence_items":1,"max_evidence_bytes":2}',
        ["max_evidence_items", "max_evidence_bytes"],
        repr(shadow.__dataclass_params__),
    ]


@pytest.mark.parametrize(
    "value",
    [
        make(),
        EvidenceBounds(1, 2),
        MechanismDecision(MechanismOutcome.PASS, ""),
        EvaluatedProposition(HEX_A, MechanismOutcome.PASS, "m", DIGEST, (), (), 0, ""),
    ],
)
def test_session_values_are_frozen_like_dataclasses(value: object) -> None:
    field = dataclasses.fields(value)[0].name  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, None)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        delattr(value, field)
    assert isinstance(FrozenInstanceError(field), AttributeError)
    assert copy.deepcopy(value) == value


def test_passed_holds_for_the_pass_outcome_given_as_its_string_value() -> None:
    # The session never inspects a mechanism's outcome, so a plain "PASS" string can arrive.
    result = EvaluatedProposition(HEX_A, "PASS", "m", DIGEST, (), (), 0, "")  # type: ignore[arg-type]
    assert result.passed and result.to_dict()["outcome"] == "PASS"
    failed = EvaluatedProposition(HEX_A, MechanismOutcome.FAIL, "m", DIGEST, (), (), 0, "")
    assert not failed.passed


def test_deepcopy_is_independent_of_every_mutable_part() -> None:
    import copy

    binding = make(expected={"nested": [1, 2]}, parameters={"k": "v"})
    clone = copy.deepcopy(binding)
    assert clone == binding and clone.digest() == binding.digest()
    binding.expected["nested"].append(3)
    binding.parameters["k"] = "changed"  # type: ignore[index]
    assert clone.expected == {"nested": [1, 2]} and clone.parameters == {"k": "v"}


def test_deepcopy_copies_values_swapped_in_after_construction() -> None:
    import copy

    binding = make()
    object.__setattr__(binding, "parameters", {"k": ["mutable"]})
    object.__setattr__(binding, "evidence_refs", ["sha256:" + HEX_A])
    clone = copy.deepcopy(binding)
    binding.parameters["k"].append("x")  # type: ignore[attr-defined]
    binding.evidence_refs.append("y")  # type: ignore[attr-defined]
    assert clone.parameters == {"k": ["mutable"]}  # type: ignore[comparison-overlap]
    assert clone.evidence_refs == ["sha256:" + HEX_A]  # type: ignore[comparison-overlap]
