"""Portable formation receipts (docs/spec/formation.md §11): what is observed, binds, refuses."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import pytest

from mechanism.canonical import canonical_bytes, digest_bytes
from mechanism.formation import (
    PROFILE_DIGEST,
    FormationReceiptError,
    build_formation_receipt,
    inspect_silo_formation,
    recheck_formation_receipt,
)
from mechanism.formation._receipt import RECEIPT_ERROR_CODES

from .test_silo_support import (
    ATOM_PAYLOAD,
    OPAQUE_ROLE,
    PATHS,
    UNRELATED,
    SiloObject,
    commit_bytes,
    commit_value,
    evidence_for,
    facets,
    standard_silo,
    subject_value,
    with_object,
)

SILO = "mechanism.formation._receipt"


def selection_bytes(commit: bytes, **paths: Any) -> bytes:
    return canonical_bytes(
        {
            "schema_version": "VSTD-SILO-FORMATION-SELECTION-0.1",
            "commit_digest": digest_bytes(commit),
            **PATHS,
            **paths,
        }
    )


def setup(
    silo: dict[str, SiloObject] | None = None,
) -> tuple[bytes, bytes, dict[str, Any], dict[str, SiloObject]]:
    silo = silo if silo is not None else standard_silo()
    commit = commit_bytes(silo)
    return selection_bytes(commit), commit, evidence_for(silo), silo


def receipt_of(selection: bytes, commit: bytes, evidence: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(build_formation_receipt(selection, commit, evidence))
    return value


def refused(call: Callable[[], object]) -> str:
    with pytest.raises(FormationReceiptError) as raised:
        call()
    error = raised.value
    assert error.code == str(error)
    assert error.code in RECEIPT_ERROR_CODES
    assert isinstance(error, ValueError)
    return error.code


# --- what a receipt observes -----------------------------------------------------------------


def test_valid_receipt_observes_every_census_object_and_rechecks_to_a_fresh_inspection() -> None:
    selection, commit, evidence, _silo = setup()
    receipt = build_formation_receipt(selection, commit, evidence)
    value = json.loads(receipt)
    assert value["selection"] == json.loads(selection)
    assert value["selection_digest"] == digest_bytes(selection)
    assert value["rule_profile_digest"] == PROFILE_DIGEST
    assert value["observed_evidence"] == [
        {"requested_digest": digest, "observed_digest": digest, "size_bytes": len(data)}
        for digest, data in sorted(evidence.items())
    ]
    fresh = recheck_formation_receipt(receipt, selection, commit, evidence)
    assert fresh == inspect_silo_formation(commit, evidence, **PATHS) == value["inspection"]
    assert facets(fresh) == ("BOUND", "COMPLETE", "MATCHED", "CHECKED")


def test_substitution_is_recorded_as_actually_observed() -> None:
    selection, commit, evidence, silo = setup()
    unrelated = silo["unrelated.txt"].digest
    evidence[unrelated] = b"substituted, longer than before"
    value = receipt_of(selection, commit, evidence)
    (observation,) = [o for o in value["observed_evidence"] if o["requested_digest"] == unrelated]
    assert observation == {
        "requested_digest": unrelated,
        "observed_digest": digest_bytes(b"substituted, longer than before"),
        "size_bytes": len(b"substituted, longer than before"),
    }
    assert value["inspection"]["reason_codes"] == ["OBJECT_DIGEST_MISMATCH"]


def test_other_equal_size_wrong_bytes_do_not_reproduce() -> None:
    selection, commit, evidence, silo = setup()
    unrelated = silo["unrelated.txt"].digest
    evidence[unrelated] = b"x" * len(UNRELATED)
    receipt = build_formation_receipt(selection, commit, evidence)
    evidence[unrelated] = b"y" * len(UNRELATED)
    code = refused(lambda: recheck_formation_receipt(receipt, selection, commit, evidence))
    assert code == "FORMATION_RECEIPT_NOT_REPRODUCED"


def test_missing_objects_are_absent_from_the_inventory() -> None:
    selection, commit, evidence, silo = setup()
    del evidence[silo["unrelated.txt"].digest]
    value = receipt_of(selection, commit, evidence)
    requested = [o["requested_digest"] for o in value["observed_evidence"]]
    assert silo["unrelated.txt"].digest not in requested
    assert len(requested) == len(silo) - 1
    assert value["inspection"]["snapshot_retention"] == "INCOMPLETE"


def test_aliased_paths_give_one_observation() -> None:
    silo = standard_silo()
    silo["alias.txt"] = SiloObject(UNRELATED, OPAQUE_ROLE)
    selection, commit, evidence, _ = setup(silo)
    value = receipt_of(selection, commit, evidence)
    requested = [o["requested_digest"] for o in value["observed_evidence"]]
    assert requested.count(silo["alias.txt"].digest) == 1
    assert requested == sorted(set(requested))


def test_mapping_order_and_non_census_extras_do_not_change_the_receipt() -> None:
    selection, commit, evidence, _ = setup()
    receipt = build_formation_receipt(selection, commit, evidence)
    shuffled = dict(reversed(list(evidence.items())))
    shuffled[digest_bytes(b"an extra")] = b"an extra"
    shuffled["sha256:" + "0" * 64] = b"bytes that are not even that digest"
    assert build_formation_receipt(selection, commit, shuffled) == receipt
    assert recheck_formation_receipt(receipt, selection, commit, shuffled)["reason_codes"] == []


# --- input refusals --------------------------------------------------------------------------


def _extra(key: object, value: object) -> Callable[[dict[Any, Any]], None]:
    def mutate(evidence: dict[Any, Any]) -> None:
        evidence[key] = value

    return mutate


def _many_entries(evidence: dict[Any, Any]) -> None:
    for index in range(257 - len(evidence)):
        evidence[digest_bytes(b"%d" % index)] = b""


def _big_total(evidence: dict[Any, Any]) -> None:
    for index in range(4):
        evidence[digest_bytes(b"big %d" % index)] = bytes([index]) * 4_194_304


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (_extra("f" * 64, b"x"), "FORMATION_RECEIPT_INPUT_INVALID"),
        (_extra(1, b"x"), "FORMATION_RECEIPT_INPUT_INVALID"),
        (_extra(digest_bytes(b"x"), "x"), "FORMATION_RECEIPT_INPUT_INVALID"),
        (_extra(digest_bytes(b"x"), bytearray(b"x")), "FORMATION_RECEIPT_INPUT_INVALID"),
        (_extra(digest_bytes(b"x"), None), "FORMATION_RECEIPT_INPUT_INVALID"),
        (_many_entries, "FORMATION_RECEIPT_LIMIT_EXCEEDED"),
        (_extra(digest_bytes(b"big"), b"b" * 4_194_305), "FORMATION_RECEIPT_LIMIT_EXCEEDED"),
        (_big_total, "FORMATION_RECEIPT_LIMIT_EXCEEDED"),
    ],
    ids=[
        "key-bare-hex",
        "key-int",
        "value-str",
        "value-bytearray",
        "value-none",
        "entries",
        "object-over-4mib",
        "total-over-16mib",
    ],
)
def test_bad_extras_are_refused_even_outside_the_census(
    mutate: Callable[[dict[Any, Any]], None], code: str
) -> None:
    selection, commit, evidence, _ = setup()
    mutate(evidence)
    assert refused(lambda: build_formation_receipt(selection, commit, evidence)) == code


def test_foreign_mapping_and_value_types_are_refused_without_hooks() -> None:
    class HostileDict(dict[str, bytes]):
        def items(self) -> Any:
            raise AssertionError("hook called")

        def __len__(self) -> int:
            raise AssertionError("hook called")

    class HostileBytes(bytes):
        def __len__(self) -> int:
            raise AssertionError("hook called")

    selection, commit, evidence, silo = setup()
    assert (
        refused(lambda: build_formation_receipt(selection, commit, HostileDict(evidence)))
        == "FORMATION_RECEIPT_INPUT_INVALID"
    )
    evidence[silo["unrelated.txt"].digest] = HostileBytes(UNRELATED)
    assert (
        refused(lambda: build_formation_receipt(selection, commit, evidence))
        == "FORMATION_RECEIPT_INPUT_INVALID"
    )


@pytest.mark.parametrize(
    ("commit", "code"),
    [
        (bytearray(b"{}"), "FORMATION_RECEIPT_INPUT_INVALID"),
        ("{}", "FORMATION_RECEIPT_INPUT_INVALID"),
        (b" " * 262_145, "FORMATION_RECEIPT_LIMIT_EXCEEDED"),
    ],
    ids=["bytearray", "str", "oversized"],
)
def test_commit_must_be_exact_bounded_bytes(commit: Any, code: str) -> None:
    selection = selection_bytes(b"{}")
    assert refused(lambda: build_formation_receipt(selection, commit, {})) == code


def _malformed_commit() -> bytes:
    return commit_bytes(standard_silo()) + b"\n"


def _unsupported_commit() -> bytes:
    return canonical_bytes(commit_value(schema_version="VSTD-SILO-COMMIT-0.2"))


def _deep_commit() -> bytes:
    return b"[" * 17 + b"]" * 17


def _wide_commit() -> bytes:
    return b"[" + b",".join([b"[]"] * 8192) + b"]"


@pytest.mark.parametrize(
    ("make", "facet_values", "reason"),
    [
        (_malformed_commit, ("INVALID", "INVALID", "UNKNOWN", None), "COMMIT_INVALID"),
        (_unsupported_commit, ("UNKNOWN",) * 3 + (None,), "COMMIT_UNSUPPORTED_OR_LIMITED"),
        (_deep_commit, ("UNKNOWN",) * 3 + (None,), "COMMIT_UNSUPPORTED_OR_LIMITED"),
        (_wide_commit, ("UNKNOWN",) * 3 + (None,), "COMMIT_UNSUPPORTED_OR_LIMITED"),
    ],
    ids=["malformed", "unsupported", "depth-17", "8193-containers"],
)
def test_unadmitted_commit_gives_an_empty_inventory_and_the_native_result(
    make: Callable[[], bytes], facet_values: tuple[Any, ...], reason: str
) -> None:
    commit = make()
    silo = standard_silo()
    selection = selection_bytes(commit)
    evidence = evidence_for(silo)
    receipt = build_formation_receipt(selection, commit, evidence)
    value = json.loads(receipt)
    assert value["observed_evidence"] == []
    assert facets(value["inspection"]) == facet_values
    assert value["inspection"]["reason_codes"] == [reason]
    assert recheck_formation_receipt(receipt, selection, commit, evidence) == value["inspection"]


def test_foreign_subject_profile_reproduces_unknown() -> None:
    subject = canonical_bytes(subject_value(profile=digest_bytes(b"a foreign profile")))
    selection, commit, evidence, _ = setup(standard_silo(subject))
    receipt = build_formation_receipt(selection, commit, evidence)
    inspection = recheck_formation_receipt(receipt, selection, commit, evidence)
    assert inspection["formation_report"]["status"] == "UNKNOWN"
    assert inspection["coordinate_binding"] == "INVALID"  # profile coordinate mismatch


# --- binding ---------------------------------------------------------------------------------


def test_changed_commit_is_a_binding_failure_for_build_and_recheck() -> None:
    selection, commit, evidence, silo = setup()
    receipt = build_formation_receipt(selection, commit, evidence)
    other = commit_bytes(with_object(silo, "unrelated.txt", necessity="NECESSARY"))
    code = "FORMATION_RECEIPT_BINDING_INVALID"
    assert refused(lambda: build_formation_receipt(selection, other, evidence)) == code
    assert refused(lambda: recheck_formation_receipt(receipt, selection, other, evidence)) == code


def _rewrite(receipt: bytes, change: Callable[[dict[str, Any]], None]) -> bytes:
    value = json.loads(receipt)
    change(value)
    return canonical_bytes(value)


def _set_selection_path(value: dict[str, Any]) -> None:
    value["selection"]["ground_path"] = "unrelated.txt"


def _set_selection_digest(value: dict[str, Any]) -> None:
    value["selection_digest"] = digest_bytes(b"another selection")


def _set_rule_profile(value: dict[str, Any]) -> None:
    value["rule_profile_digest"] = digest_bytes(b"another profile")


@pytest.mark.parametrize(
    "change",
    [_set_selection_path, _set_selection_digest, _set_rule_profile],
    ids=["selection", "selection_digest", "rule_profile_digest"],
)
def test_binding_field_changes_are_binding_failures(
    change: Callable[[dict[str, Any]], None],
) -> None:
    selection, commit, evidence, _ = setup()
    receipt = _rewrite(build_formation_receipt(selection, commit, evidence), change)
    code = refused(lambda: recheck_formation_receipt(receipt, selection, commit, evidence))
    assert code == "FORMATION_RECEIPT_BINDING_INVALID"


def test_a_receipt_for_another_selection_does_not_bind() -> None:
    selection, commit, evidence, _ = setup()
    receipt = build_formation_receipt(selection, commit, evidence)
    other = selection_bytes(commit, ground_path="unrelated.txt")
    code = refused(lambda: recheck_formation_receipt(receipt, other, commit, evidence))
    assert code == "FORMATION_RECEIPT_BINDING_INVALID"


def _claim_bound(value: dict[str, Any]) -> None:
    value["inspection"]["coordinate_binding"] = "BOUND"
    value["inspection"]["reason_codes"] = []


def _claim_checked_denotation(value: dict[str, Any]) -> None:
    value["inspection"]["formation_report"]["observation"]["denotation_digest"] = ATOM_PAYLOAD


def _claim_observed(value: dict[str, Any]) -> None:
    value["observed_evidence"][0]["size_bytes"] += 1


def _claim_nothing_observed(value: dict[str, Any]) -> None:
    value["observed_evidence"] = []


@pytest.mark.parametrize(
    "change",
    [_claim_bound, _claim_checked_denotation, _claim_observed, _claim_nothing_observed],
    ids=["binding", "denotation", "size", "inventory"],
)
def test_carried_false_claims_are_not_reproduced(change: Callable[[dict[str, Any]], None]) -> None:
    silo = standard_silo()
    silo = with_object(silo, "ground.txt", role=("x", "y", "z/z"))  # still BOUND: opaque
    selection, commit, evidence, _ = setup(silo)
    if change is _claim_bound:
        commit = commit_bytes(silo, ground_paths=["unrelated.txt"])  # really INVALID binding
        selection = selection_bytes(commit)
    receipt = _rewrite(build_formation_receipt(selection, commit, evidence), change)
    code = refused(lambda: recheck_formation_receipt(receipt, selection, commit, evidence))
    assert code == "FORMATION_RECEIPT_NOT_REPRODUCED"


# --- strict grammar --------------------------------------------------------------------------

PATH_SUBJECT = canonical_bytes(
    subject_value(
        nodes=[
            {"tag": "ATOM", "payload_digest": ATOM_PAYLOAD},
            {"tag": "APPLY", "argument": 0},
            {"tag": "APPLY_STEP", "source": 0, "target": 1},
        ],
        root=2,
    )
)


def _path_receipt() -> tuple[bytes, bytes, bytes, dict[str, Any]]:
    selection, commit, evidence, _ = setup(standard_silo(PATH_SUBJECT))
    receipt = build_formation_receipt(selection, commit, evidence)
    assert json.loads(receipt)["inspection"]["formation_report"]["observation"]["type"] == "PATH"
    return receipt, selection, commit, evidence


def _at(*keys: Any) -> Callable[[Any], Any]:
    def walk(value: Any) -> Any:
        for key in keys:
            value = value[key]
        return value

    return walk


def _assign(*keys: Any, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(receipt: dict[str, Any]) -> None:
        _at(*keys[:-1])(receipt)[keys[-1]] = value

    return change


def _delete(*keys: Any) -> Callable[[dict[str, Any]], None]:
    def change(receipt: dict[str, Any]) -> None:
        del _at(*keys[:-1])(receipt)[keys[-1]]

    return change


def _apply(*keys: Any, fn: Callable[[Any], Any]) -> Callable[[dict[str, Any]], None]:
    def change(receipt: dict[str, Any]) -> None:
        parent = _at(*keys[:-1])(receipt)
        parent[keys[-1]] = fn(parent[keys[-1]])

    return change


REPORT = ("inspection", "formation_report")
OBS = (*REPORT, "observation")
GRAMMAR_MUTATIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "receipt-extra-key": _assign("verdict", value="PASS"),
    "receipt-missing-observed": _delete("observed_evidence"),
    "receipt-schema-foreign": _assign("schema_version", value="VSTD-SILO-FORMATION-RECEIPT-0.2"),
    "selection-extra-key": _assign("selection", "status", value="OK"),
    "selection-path-not-portable": _assign("selection", "subject_path", value="../s.json"),
    "selection-digest-bare-hex": _assign("selection_digest", value="a" * 64),
    "rule-profile-not-digest": _assign("rule_profile_digest", value=None),
    "observed-unsorted": _apply("observed_evidence", fn=lambda items: items[::-1]),
    "observed-duplicate": _apply("observed_evidence", fn=lambda items: [items[0], *items]),
    "observed-size-bool": _assign("observed_evidence", 0, "size_bytes", value=True),
    "observed-size-over-4mib": _assign("observed_evidence", 0, "size_bytes", value=4_194_305),
    "observed-extra-key": _assign("observed_evidence", 0, "trusted", value=True),
    "observed-257-entries": _apply(
        "observed_evidence",
        fn=lambda items: [
            {
                "requested_digest": f"sha256:{index:064x}",
                "observed_digest": ATOM_PAYLOAD,
                "size_bytes": 0,
            }
            for index in range(257)
        ],
    ),
    "observed-total-over-16mib": _apply(
        "observed_evidence",
        fn=lambda items: [
            {
                "requested_digest": f"sha256:{index:064x}",
                "observed_digest": ATOM_PAYLOAD,
                "size_bytes": 4_194_304,
            }
            for index in range(5)
        ],
    ),
    "inspection-extra-key": _assign("inspection", "assessment", value="COMPLETE"),
    "inspection-binding-foreign": _assign("inspection", "coordinate_binding", value="VALID"),
    "inspection-retention-foreign": _assign("inspection", "snapshot_retention", value="PARTIAL"),
    "inspection-agency-foreign": _assign("inspection", "agency_declaration", value="OK"),
    # Unhashable carried values are grammar failures, never a TypeError (§11).
    "inspection-binding-list": _assign("inspection", "coordinate_binding", value=["BOUND"]),
    "inspection-retention-object": _assign("inspection", "snapshot_retention", value={}),
    "inspection-agency-list": _assign("inspection", "agency_declaration", value=["MATCHED"]),
    "inspection-reason-list": _assign("inspection", "reason_codes", value=[["TRUSTED"]]),
    "report-status-list": _assign(*REPORT, "status", value=["CHECKED"]),
    "report-reason-list": lambda receipt: _at(*REPORT)(receipt).update(
        status="INVALID", observation=None, reason_codes=[["FORMATION_RULE_INVALID"]]
    ),
    "inspection-reason-outside-vocabulary": _assign(
        "inspection", "reason_codes", value=["TRUSTED"]
    ),
    "inspection-reasons-unsorted": _assign(
        "inspection", "reason_codes", value=["SNAPSHOT_BYTE_LIMIT", "CENSUS_OBJECT_MISSING"]
    ),
    "inspection-residuals-reordered": _apply(
        "inspection", "residual_obligations", fn=lambda items: items[::-1]
    ),
    "inspection-residuals-dropped": _apply(
        "inspection", "residual_obligations", fn=lambda items: items[:-1]
    ),
    "coordinates-role-missing": _delete("inspection", "coordinates", "ground"),
    "coordinates-empty-with-commit": _assign("inspection", "coordinates", value={}),
    "coordinate-extra-key": _assign("inspection", "coordinates", "subject", "ok", value=True),
    "commit-digest-null-with-coordinates": _assign("inspection", "commit_digest", value=None),
    "report-status-pass": _assign(*REPORT, "status", value="PASS"),
    "report-checked-with-reason": _assign(
        *REPORT, "reason_codes", value=["FORMATION_RULE_INVALID"]
    ),
    "report-invalid-with-observation": _assign(*REPORT, "status", value="INVALID"),
    "report-root-bool": _assign(*REPORT, "root", value=False),
    "report-residuals-missing": _assign(*REPORT, "residual_obligations", value=[]),
    "report-extra-key": _assign(*REPORT, "verdict", value="CHECKED"),
    "observation-type-foreign": _assign(*OBS, "type", value="CODE(ATOM)"),
    "observation-type-65-codes": _assign(*OBS, "type", value="CODE(" * 65 + "PATH" + ")" * 65),
    "observation-rank-65": _assign(*OBS, "quote_rank", value=65),
    "observation-depth-0": _assign(*OBS, "required_depth", value=0),
    "observation-depth-65": _assign(*OBS, "required_depth", value=65),
    "observation-dependencies-empty": _assign(*OBS, "dependency_nodes", value=[]),
    "observation-dependencies-unsorted": _assign(*OBS, "dependency_nodes", value=[2, 0, 1]),
    "observation-origin-1024": _assign(*OBS, "quote_origins", value=[1024]),
    "observation-path-null-source": _assign(*OBS, "source_digest", value=None),
    "observation-step-extra-key": _assign(*OBS, "path_steps", 0, "label", value="x"),
    "observation-form-with-endpoints": _assign(*OBS, "type", value="FORM"),
    "observation-extra-key": _assign(*OBS, "verified", value=True),
}


@pytest.mark.parametrize("name", sorted(GRAMMAR_MUTATIONS))
def test_strict_grammar_mutation_is_receipt_invalid(name: str) -> None:
    receipt, selection, commit, evidence = _path_receipt()
    mutated = _rewrite(receipt, GRAMMAR_MUTATIONS[name])
    code = refused(lambda: recheck_formation_receipt(mutated, selection, commit, evidence))
    assert code == "FORMATION_RECEIPT_INVALID"


@pytest.mark.parametrize(
    "make",
    [
        lambda receipt: receipt + b"\n",
        lambda receipt: b" " + receipt,
        lambda receipt: receipt.replace(b'{"inspection":', b'{"inspection": ', 1),
        lambda receipt: bytearray(receipt),
        lambda receipt: receipt.decode(),
        lambda receipt: b"[" * 17 + b"]" * 17,
        lambda receipt: b"null",
        lambda receipt: b'{"x":"' + b"a" * 1_048_576 + b'"}',
    ],
    ids=[
        "newline",
        "leading-space",
        "whitespace",
        "bytearray",
        "str",
        "depth-17",
        "null",
        "over-1mib",
    ],
)
def test_receipt_bytes_must_admit_canonically(make: Callable[[bytes], Any]) -> None:
    receipt, selection, commit, evidence = _path_receipt()
    code = refused(lambda: recheck_formation_receipt(make(receipt), selection, commit, evidence))
    assert code == "FORMATION_RECEIPT_INVALID"


@pytest.mark.parametrize(
    "make",
    [
        lambda selection: selection + b"\n",
        lambda selection: bytearray(selection),
        lambda selection: selection.replace(b"VSTD-SILO-FORMATION-SELECTION-0.1", b"V-0.2"),
        lambda selection: selection.replace(b'"subject.json"', b'"../subject.json"'),
        lambda selection: selection.replace(b'"subject.json"', b'"CON"'),
        lambda selection: selection.replace(b'"subject.json"', b'"a/"'),
        lambda selection: selection.replace(b'"ground_path"', b'"extra":1,"ground_path"'),
        lambda selection: selection.replace(b'"commit_digest":"sha256:', b'"commit_digest":"'),
        lambda selection: b'{"schema_version":"' + b"x" * 4096 + b'"}',
    ],
    ids=[
        "newline",
        "bytearray",
        "schema",
        "parent-path",
        "device-name",
        "trailing-slash",
        "extra-key",
        "bare-digest",
        "over-4096-bytes",
    ],
)
def test_selection_must_admit_canonically_with_portable_paths(
    make: Callable[[bytes], Any],
) -> None:
    selection, commit, evidence, _ = setup()
    receipt = build_formation_receipt(selection, commit, evidence)
    bad = make(selection)
    assert refused(lambda: build_formation_receipt(bad, commit, evidence)) == (
        "FORMATION_SELECTION_INVALID"
    )
    assert refused(lambda: recheck_formation_receipt(receipt, bad, commit, evidence)) == (
        "FORMATION_SELECTION_INVALID"
    )


def test_receipt_is_admitted_before_the_selection() -> None:
    _selection, commit, evidence, _ = setup()
    code = refused(lambda: recheck_formation_receipt(b"null", b"null", commit, evidence))
    assert code == "FORMATION_RECEIPT_INVALID"


def test_evidence_is_captured_before_inspection(monkeypatch: pytest.MonkeyPatch) -> None:
    from mechanism.formation._silo import inspect_silo_formation as real_inspect

    selection, commit, evidence, silo = setup()
    expected = build_formation_receipt(selection, commit, evidence)

    def tampering_inspect(*args: Any, **kwargs: Any) -> dict[str, Any]:
        evidence[silo["subject.json"].digest] = b"swapped after capture"
        return real_inspect(*args, **kwargs)

    monkeypatch.setattr(f"{SILO}.inspect_silo_formation", tampering_inspect)
    assert build_formation_receipt(selection, commit, evidence) == expected


def test_error_codes_are_a_closed_set_and_equal_their_string() -> None:
    assert RECEIPT_ERROR_CODES == (
        "FORMATION_SELECTION_INVALID",
        "FORMATION_RECEIPT_INVALID",
        "FORMATION_RECEIPT_INPUT_INVALID",
        "FORMATION_RECEIPT_LIMIT_EXCEEDED",
        "FORMATION_RECEIPT_BINDING_INVALID",
        "FORMATION_RECEIPT_NOT_REPRODUCED",
    )
    for code in RECEIPT_ERROR_CODES:
        error = FormationReceiptError(code)
        assert error.code == str(error) == code
    with pytest.raises(ValueError):
        FormationReceiptError("SOMETHING_ELSE")


def test_recheck_returns_the_fresh_inspection_not_the_carried_object() -> None:
    receipt, selection, commit, evidence = _path_receipt()
    first = recheck_formation_receipt(receipt, selection, commit, evidence)
    first["coordinate_binding"] = "tampered by the caller"
    second = recheck_formation_receipt(receipt, selection, commit, evidence)
    assert second["coordinate_binding"] == "BOUND"


def test_store_changed_while_being_captured_is_input_invalid() -> None:
    from .test_silo_storage import mutate_during_copy

    selection, commit, evidence, _ = setup()
    tracer, state = mutate_during_copy(evidence, "_capture_evidence")
    previous = sys.gettrace()  # a coverage tracer, when measuring: restored after
    sys.settrace(tracer)
    try:
        code = refused(lambda: build_formation_receipt(selection, commit, evidence))
    finally:
        sys.settrace(previous)
    assert state["fired"]
    assert code == "FORMATION_RECEIPT_INPUT_INVALID"
