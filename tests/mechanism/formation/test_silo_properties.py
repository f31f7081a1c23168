"""Property tests: random valid silos with random subsets of evidence missing, substituted,
resized or aliased give four facets that follow the dominance rules exactly (an independent
oracle below); arbitrary garbage never makes the inspector or the receipt code raise anything
but their documented results/errors."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mechanism.canonical import canonical_bytes, digest_bytes
from mechanism.formation import (
    FormationReceiptError,
    build_formation_receipt,
    check_formation,
    recheck_formation_receipt,
)

from .test_silo_support import (
    OPAQUE_ROLE,
    PATHS,
    SiloObject,
    assert_well_formed,
    commit_bytes,
    evidence_for,
    facets,
    inspect,
    standard_silo,
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FATES = ("present", "missing", "substituted", "invalid_value")
SELECTED = tuple(PATHS.values())


@st.composite
def silo_scenarios(draw: st.DrawFn, *, fates: tuple[str, ...] = FATES) -> dict[str, Any]:
    silo = standard_silo()
    for index in range(draw(st.integers(0, 5))):
        if draw(st.booleans()):  # alias an existing object under a new path
            source = draw(st.sampled_from(sorted(silo)))
            data = silo[source].data
        else:
            data = draw(st.binary(max_size=48))
        silo[f"obj-{index}.bin"] = SiloObject(data, OPAQUE_ROLE)
    for path in sorted(silo):
        if draw(st.booleans()) and draw(st.booleans()):  # ~1/4 of entries declare a wrong size
            item = silo[path]
            silo[path] = SiloObject(item.data, item.role, declared_size=len(item.data) + 1)
    digests = sorted({item.digest for item in silo.values()})
    fate = {digest: draw(st.sampled_from(fates)) for digest in digests}
    return {"silo": silo, "fate": fate}


def _evidence(silo: dict[str, SiloObject], fate: dict[str, str]) -> dict[str, Any]:
    data = {item.digest: item.data for item in silo.values()}
    evidence: dict[str, Any] = {}
    for digest, kind in fate.items():
        if kind == "present":
            evidence[digest] = data[digest]
        elif kind == "substituted":
            evidence[digest] = data[digest] + b"!"
        elif kind == "invalid_value":
            evidence[digest] = bytearray(data[digest])
    return evidence


def _oracle(silo: dict[str, SiloObject], fate: dict[str, str]) -> dict[str, Any]:
    """The dominance rules of docs/spec/formation.md §6.4, restated apart from the code."""
    state = {
        digest: {"present": "RETAINED", "missing": "MISSING"}.get(kind, "INVALID")
        for digest, kind in fate.items()
    }
    resized = {
        path
        for path, item in silo.items()
        if item.declared_size is not None and state[item.digest] == "RETAINED"
    }
    retention_states = set(state.values()) | ({"INVALID"} if resized else set())
    if "INVALID" in retention_states:
        retention = "INVALID"
    elif "MISSING" in retention_states:
        retention = "INCOMPLETE"
    else:
        retention = "COMPLETE"
    selected_states = {state[silo[path].digest] for path in SELECTED}
    subject_ok = state[silo["subject.json"].digest] == "RETAINED"
    certificate_ok = state[silo["certificate.json"].digest] == "RETAINED"
    if "INVALID" in selected_states or resized & set(SELECTED):
        binding = "INVALID"
    elif "MISSING" in selected_states or not subject_ok:
        binding = "UNKNOWN"
    else:
        binding = "BOUND"
    reasons = set()
    if "substituted" in fate.values():
        reasons.add("OBJECT_DIGEST_MISMATCH")
    if "invalid_value" in fate.values():
        reasons.add("OBJECT_BYTES_INVALID")
    if resized:
        reasons.add("OBJECT_SIZE_MISMATCH")
    if "MISSING" in state.values():
        reasons.add("CENSUS_OBJECT_MISSING")
    if "MISSING" in selected_states:
        reasons.add("SELECTED_OBJECT_UNAVAILABLE")
    return {
        "facets": (
            binding,
            retention,
            "MATCHED" if subject_ok else "UNKNOWN",
            "CHECKED" if subject_ok and certificate_ok else None,
        ),
        "reasons": sorted(reasons),
    }


@SETTINGS
@given(silo_scenarios())
def test_facets_follow_the_dominance_rules(scenario: dict[str, Any]) -> None:
    silo, fate = scenario["silo"], scenario["fate"]
    evidence = _evidence(silo, fate)
    before = dict(evidence)
    result = inspect(commit_bytes(silo), evidence)
    assert_well_formed(result)
    expected = _oracle(silo, fate)
    assert facets(result) == expected["facets"]
    assert result["reason_codes"] == expected["reasons"]
    assert evidence == before


@SETTINGS
@given(silo_scenarios(fates=("present", "missing", "substituted")))
def test_receipt_round_trips_whatever_was_observed(scenario: dict[str, Any]) -> None:
    silo, fate = scenario["silo"], scenario["fate"]
    commit = commit_bytes(silo)
    selection = canonical_bytes(
        {
            "schema_version": "VSTD-SILO-FORMATION-SELECTION-0.1",
            "commit_digest": digest_bytes(commit),
            **PATHS,
        }
    )
    evidence = _evidence(silo, fate)
    receipt = build_formation_receipt(selection, commit, evidence)
    inspection = recheck_formation_receipt(receipt, selection, commit, evidence)
    assert inspection == inspect(commit, evidence)
    assert facets(inspection) == _oracle(silo, fate)["facets"]


_TEXTS = st.one_of(st.none(), st.text(max_size=12), st.sampled_from(SELECTED), st.integers())
_VALUES = st.one_of(st.binary(max_size=16), st.none(), st.text(max_size=4), st.integers())
_KEYS = st.one_of(
    st.text(max_size=8),
    st.builds(lambda data: "sha256:" + data.hex().ljust(64, "0")[:64], st.binary(max_size=32)),
    st.integers(),
)


def _commit_variants() -> st.SearchStrategy[object]:
    valid = commit_bytes(standard_silo())
    flipped = st.tuples(st.integers(0, len(valid) - 1), st.integers(0, 255)).map(
        lambda change: valid[: change[0]] + bytes([change[1]]) + valid[change[0] + 1 :]
    )
    truncated = st.integers(0, len(valid)).map(lambda n: valid[:n])
    return st.one_of(
        flipped, truncated, st.binary(max_size=64), st.none(), st.just(bytearray(valid))
    )


@SETTINGS
@given(
    commit=_commit_variants(),
    evidence=st.one_of(st.dictionaries(_KEYS, _VALUES, max_size=6), st.none(), st.lists(_VALUES)),
    selectors=st.fixed_dictionaries({name: _TEXTS for name in PATHS}),
)
def test_inspector_never_raises_on_garbage(
    commit: object, evidence: object, selectors: dict[str, object]
) -> None:
    result = inspect(commit, evidence, **selectors)
    assert_well_formed(result)


@SETTINGS
@given(
    selection=st.one_of(st.binary(max_size=32), st.none(), st.text(max_size=8)),
    commit=_commit_variants(),
    evidence=st.one_of(st.dictionaries(_KEYS, _VALUES, max_size=4), st.none()),
    receipt=st.one_of(st.binary(max_size=32), st.none()),
)
def test_receipt_functions_only_raise_formation_receipt_errors(
    selection: object, commit: object, evidence: object, receipt: object
) -> None:
    for call in (
        lambda: build_formation_receipt(selection, commit, evidence),
        lambda: recheck_formation_receipt(receipt, selection, commit, evidence),
    ):
        try:
            call()
        except FormationReceiptError as error:
            assert error.code == str(error)


def _record_variants(valid: bytes) -> st.SearchStrategy[bytes]:
    flipped = st.tuples(st.integers(0, len(valid) - 1), st.integers(0, 255)).map(
        lambda change: valid[: change[0]] + bytes([change[1]]) + valid[change[0] + 1 :]
    )
    return st.one_of(st.just(valid), flipped, st.binary(max_size=64))


_SUBJECT = standard_silo()["subject.json"].data
_CERTIFICATE = standard_silo()["certificate.json"].data


@SETTINGS
@given(subject=_record_variants(_SUBJECT), certificate=_record_variants(_CERTIFICATE))
def test_report_is_the_fresh_check_of_whatever_role_bytes_are_retained(
    subject: bytes, certificate: bytes
) -> None:
    silo = standard_silo()
    silo["subject.json"] = SiloObject(subject, silo["subject.json"].role)
    silo["certificate.json"] = SiloObject(certificate, silo["certificate.json"].role)
    result = inspect(commit_bytes(silo), evidence_for(silo))
    assert_well_formed(result)
    assert result["snapshot_retention"] == "COMPLETE"
    assert result["formation_report"] == check_formation(subject, certificate)


# --- structure-aware garbage: any admitted JSON value at any position --------------------------
# Byte flips rarely turn a scalar into a container; these replace one node of a valid commit or
# receipt *value* with an arbitrary canonical value (lists/objects included), so every field
# check meets unhashable and wrongly-typed values (§6/§11: never raises; only typed errors).

_JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(0, 2**53 - 1),
    st.text(alphabet="aAzZ09_.-/ :", max_size=6),
    st.sampled_from(["NECESSARY", "CHECKED", "BOUND", "PATH", "ground.txt", "sha256:" + "0" * 64]),
)
_JSON_VALUES = st.recursive(
    _JSON_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "path", "object", "status"]), inner, max_size=2),
    ),
    max_leaves=4,
)


def _positions(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key in sorted(value):
            found += _positions(value[key], (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):
            found += _positions(item, (*prefix, index))
    return found


def _replaced(value: Any, position: tuple[Any, ...], new: Any) -> Any:
    if not position:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[position[0]] = _replaced(value[position[0]], position[1:], new)
    return copy


_SILO = standard_silo()
_COMMIT_VALUE = json.loads(commit_bytes(_SILO))
_COMMIT_POSITIONS = _positions(_COMMIT_VALUE)


@SETTINGS
@given(position=st.sampled_from(_COMMIT_POSITIONS), new=_JSON_VALUES)
def test_inspector_never_raises_on_any_field_replaced_by_any_value(
    position: tuple[Any, ...], new: Any
) -> None:
    data = canonical_bytes(_replaced(_COMMIT_VALUE, position, new))
    result = inspect(data, evidence_for(_SILO))
    assert_well_formed(result)


_SELECTION = canonical_bytes(
    {
        "schema_version": "VSTD-SILO-FORMATION-SELECTION-0.1",
        "commit_digest": digest_bytes(commit_bytes(_SILO)),
        **PATHS,
    }
)
_RECEIPT_VALUE = json.loads(
    build_formation_receipt(_SELECTION, commit_bytes(_SILO), evidence_for(_SILO))
)


@SETTINGS
@given(position=st.sampled_from(_positions(_RECEIPT_VALUE)), new=_JSON_VALUES)
def test_recheck_only_raises_formation_receipt_errors_on_any_field_replaced(
    position: tuple[Any, ...], new: Any
) -> None:
    receipt = canonical_bytes(_replaced(_RECEIPT_VALUE, position, new))
    try:
        recheck_formation_receipt(receipt, _SELECTION, commit_bytes(_SILO), evidence_for(_SILO))
    except FormationReceiptError as error:
        assert error.code == str(error)
