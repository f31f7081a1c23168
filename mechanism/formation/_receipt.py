"""Portable formation receipts (``docs/spec/formation.md`` §11).

A *selection* (``VSTD-SILO-FORMATION-SELECTION-0.1``, ≤ 4,096 canonical bytes) names exactly
one commit digest and the four role paths. A *receipt* (``VSTD-SILO-FORMATION-RECEIPT-0.1``,
≤ 1,048,576 canonical bytes, scan depth 16 / 16,384 containers) carries that selection, the
digest of its exact bytes, the compiled rule-profile digest, the census evidence actually
observed and the exact silo inspection that evidence produced. A receipt is a claim that can be
recomputed, never a verdict to adopt: :func:`recheck_formation_receipt` rebuilds it from the
caller's own inputs and accepts nothing short of byte equality.

``build_formation_receipt(selection_bytes, commit_bytes, evidence) -> bytes``, in order:

1. admit the selection (canonical record, exact six keys, strict commit digest, portable
   paths) → else ``FORMATION_SELECTION_INVALID``;
2. the commit must be exact ``bytes`` (``FORMATION_RECEIPT_INPUT_INVALID``) of at most 262,144
   bytes (``FORMATION_RECEIPT_LIMIT_EXCEEDED``) whose digest is the selection's commit digest
   (``FORMATION_RECEIPT_BINDING_INVALID``);
3. capture the whole evidence mapping before anything is inspected: an exact built-in ``dict``
   of at most 256 entries, exact-``str`` strict digest keys, exact ``bytes`` values of at most
   4 MiB each and 16 MiB in total, extras included (``FORMATION_RECEIPT_INPUT_INVALID`` /
   ``FORMATION_RECEIPT_LIMIT_EXCEEDED``); no caller hook is invoked;
4. if the commit admits, its distinct census digests, ascending, that the capture holds are
   observed as ``{requested_digest, observed_digest, size_bytes}`` (the digest of the bytes
   actually supplied, so a substitution is recorded as seen); an unadmitted commit observes
   nothing;
5. the inspection runs on exactly the observed entries;
6. the receipt is encoded canonically and must pass its own admission.

``recheck_formation_receipt(receipt_bytes, selection_bytes, commit_bytes, evidence) -> dict``:
admit the receipt under its strict grammar (``FORMATION_RECEIPT_INVALID``), admit the selection,
require the carried selection, ``selection_digest`` and ``rule_profile_digest`` to be the
caller's and the compiled ones (``FORMATION_RECEIPT_BINDING_INVALID``), rebuild, require byte
equality (``FORMATION_RECEIPT_NOT_REPRODUCED``) and return the *fresh* inspection.

Every refusal is a :class:`FormationReceiptError` whose ``code`` equals ``str(error)``.
"""

from __future__ import annotations

import itertools
from typing import Any, Final

from mechanism.canonical import (
    CanonicalError,
    admit_record,
    canonical_bytes,
    digest_bytes,
    is_digest,
)
from mechanism.formation._silo import (
    INSPECTION_REASON_CODES,
    MAX_EVIDENCE_ENTRIES,
    MAX_SNAPSHOT_BYTES,
    ROLES,
    inspect_silo_formation,
)
from mechanism.formation._silo_commit import (
    MAX_COMMIT_BYTES,
    MAX_OBJECT_BYTES,
    CommitRefused,
    admit_commit,
    census_digests,
    is_portable_path,
)
from mechanism.formation._wire import MAX_DEPTH, MAX_NODES, PROFILE_DIGEST, RESIDUAL_OBLIGATIONS
from session.canon import CallerError

__all__ = [
    "RECEIPT_ERROR_CODES",
    "RECEIPT_SCHEMA",
    "SELECTION_SCHEMA",
    "FormationReceiptError",
    "build_formation_receipt",
    "recheck_formation_receipt",
]

SELECTION_SCHEMA: Final = "VSTD-SILO-FORMATION-SELECTION-0.1"
RECEIPT_SCHEMA: Final = "VSTD-SILO-FORMATION-RECEIPT-0.1"
MAX_SELECTION_BYTES: Final = 4_096
MAX_RECEIPT_BYTES: Final = 1_048_576
MAX_RECEIPT_DEPTH: Final = 16
MAX_RECEIPT_CONTAINERS: Final = 16_384
MAX_TYPE_NESTING: Final = 64
MAX_QUOTE_RANK: Final = 64
MAX_PATH_STEPS_CARRIED: Final = 4_096

SELECTION_INVALID: Final = "FORMATION_SELECTION_INVALID"
RECEIPT_INVALID: Final = "FORMATION_RECEIPT_INVALID"
INPUT_INVALID: Final = "FORMATION_RECEIPT_INPUT_INVALID"
LIMIT_EXCEEDED: Final = "FORMATION_RECEIPT_LIMIT_EXCEEDED"
BINDING_INVALID: Final = "FORMATION_RECEIPT_BINDING_INVALID"
NOT_REPRODUCED: Final = "FORMATION_RECEIPT_NOT_REPRODUCED"
RECEIPT_ERROR_CODES: Final = (
    SELECTION_INVALID,
    RECEIPT_INVALID,
    INPUT_INVALID,
    LIMIT_EXCEEDED,
    BINDING_INVALID,
    NOT_REPRODUCED,
)

_SELECTION_KEYS: Final = frozenset(
    {
        "schema_version",
        "commit_digest",
        "subject_path",
        "certificate_path",
        "profile_path",
        "ground_path",
    }
)
_RECEIPT_KEYS: Final = frozenset(
    {
        "schema_version",
        "selection",
        "selection_digest",
        "rule_profile_digest",
        "observed_evidence",
        "inspection",
    }
)
_OBSERVED_KEYS: Final = frozenset({"requested_digest", "observed_digest", "size_bytes"})
_INSPECTION_KEYS: Final = frozenset(
    {
        "commit_digest",
        "profile_digest",
        "coordinates",
        "coordinate_binding",
        "snapshot_retention",
        "agency_declaration",
        "formation_report",
        "reason_codes",
        "residual_obligations",
    }
)
_REPORT_KEYS: Final = frozenset(
    {
        "status",
        "subject_digest",
        "profile_digest",
        "root",
        "observation",
        "reason_codes",
        "residual_obligations",
    }
)
_OBSERVATION_KEYS: Final = frozenset(
    {
        "type",
        "denotation_digest",
        "source_digest",
        "target_digest",
        "path_steps",
        "quote_rank",
        "required_depth",
        "formation_digest",
        "dependency_nodes",
        "quote_origins",
    }
)
_STEP_KEYS: Final = frozenset({"source_digest", "target_digest"})
_REPORT_REASONS: Final = {
    "INVALID": frozenset(
        {
            "FORMATION_RECORD_INVALID",
            "FORMATION_CERTIFICATE_BINDING_INVALID",
            "FORMATION_CERTIFICATE_STEP_INVALID",
            "FORMATION_RULE_INVALID",
        }
    ),
    "UNKNOWN": frozenset({"FORMATION_PROFILE_UNSUPPORTED", "FORMATION_LIMIT_EXCEEDED"}),
}
_BINDINGS: Final = frozenset({"BOUND", "INVALID", "UNKNOWN"})
_RETENTIONS: Final = frozenset({"COMPLETE", "INCOMPLETE", "INVALID", "UNKNOWN"})
_AGENCIES: Final = frozenset({"MATCHED", "INVALID", "UNKNOWN"})


class FormationReceiptError(CallerError, ValueError):
    """A receipt could not be built or rechecked; ``code`` (== ``str(error)``) says why.

    ``FORMATION_SELECTION_INVALID`` and ``FORMATION_RECEIPT_INVALID`` refuse the caller's
    selection or receipt bytes; ``FORMATION_RECEIPT_INPUT_INVALID`` and
    ``FORMATION_RECEIPT_LIMIT_EXCEEDED`` refuse the commit/evidence inputs (malformed vs. over a
    bound); ``FORMATION_RECEIPT_BINDING_INVALID`` means the inputs are not the ones the selection
    or receipt names; ``FORMATION_RECEIPT_NOT_REPRODUCED`` means the rebuilt receipt differs.
    """

    def __init__(self, code: str) -> None:
        if code not in RECEIPT_ERROR_CODES:
            raise ValueError(f"not a formation receipt error code: {code!r}")
        super().__init__(code)
        self.code: Final = code


class _Grammar(Exception):
    """Internal: a carried value breaks the strict receipt grammar."""


def _require(condition: bool) -> None:
    if not condition:
        raise _Grammar


def _is_one_of(value: object, allowed: frozenset[str]) -> bool:
    # Exact str first: ``in`` on a set would hash a carried list/dict and raise TypeError.
    return type(value) is str and value in allowed


def _is_index(value: object, bound: int) -> bool:
    return type(value) is int and 0 <= value < bound


def _sorted_indices(value: object, *, non_empty: bool) -> bool:
    if type(value) is not list or len(value) > MAX_NODES or (non_empty and not value):
        return False
    if not all(_is_index(item, MAX_NODES) for item in value):
        return False
    return all(left < right for left, right in itertools.pairwise(value))


def _is_type(value: object) -> bool:
    if type(value) is not str:
        return False
    nesting = 0
    while value.startswith("CODE(") and value.endswith(")") and nesting <= MAX_TYPE_NESTING:
        value = value[5:-1]
        nesting += 1
    return nesting <= MAX_TYPE_NESTING and value in ("FORM", "PATH")


def _check_selection_value(selection: object) -> dict[str, Any]:
    _require(type(selection) is dict)
    assert isinstance(selection, dict)
    _require(selection.keys() == _SELECTION_KEYS)
    _require(selection["schema_version"] == SELECTION_SCHEMA)
    _require(is_digest(selection["commit_digest"]))
    for role in ROLES:
        _require(is_portable_path(selection[f"{role}_path"]))
    return selection


def _check_observation(observation: object) -> None:
    _require(type(observation) is dict)
    assert isinstance(observation, dict)
    _require(observation.keys() == _OBSERVATION_KEYS)
    _require(_is_type(observation["type"]))
    _require(is_digest(observation["denotation_digest"]))
    _require(is_digest(observation["formation_digest"]))
    steps = observation["path_steps"]
    _require(type(steps) is list)
    if observation["type"] == "PATH":
        _require(is_digest(observation["source_digest"]))
        _require(is_digest(observation["target_digest"]))
        _require(len(steps) <= MAX_PATH_STEPS_CARRIED)
        for step in steps:
            _require(type(step) is dict and step.keys() == _STEP_KEYS)
            _require(is_digest(step["source_digest"]) and is_digest(step["target_digest"]))
    else:
        _require(observation["source_digest"] is None and observation["target_digest"] is None)
        _require(steps == [])
    rank = observation["quote_rank"]
    _require(type(rank) is int and 0 <= rank <= MAX_QUOTE_RANK)
    depth = observation["required_depth"]
    _require(type(depth) is int and 1 <= depth <= MAX_DEPTH)
    _require(_sorted_indices(observation["dependency_nodes"], non_empty=True))
    _require(_sorted_indices(observation["quote_origins"], non_empty=False))


def _check_report(report: object) -> None:
    _require(type(report) is dict)
    assert isinstance(report, dict)
    _require(report.keys() == _REPORT_KEYS)
    _require(report["residual_obligations"] == list(RESIDUAL_OBLIGATIONS))
    _require(is_digest(report["profile_digest"]))
    subject_digest = report["subject_digest"]
    root = report["root"]
    _require(subject_digest is None or is_digest(subject_digest))
    _require(root is None or _is_index(root, MAX_NODES))
    reasons = report["reason_codes"]
    _require(type(reasons) is list)
    status = report["status"]
    if status == "CHECKED":
        _require(reasons == [] and subject_digest is not None and root is not None)
        _check_observation(report["observation"])
    else:
        _require(type(status) is str and status in _REPORT_REASONS)
        _require(report["observation"] is None)
        _require(len(reasons) == 1 and _is_one_of(reasons[0], _REPORT_REASONS[status]))


def _check_inspection(inspection: object) -> None:
    _require(type(inspection) is dict)
    assert isinstance(inspection, dict)
    _require(inspection.keys() == _INSPECTION_KEYS)
    commit_digest = inspection["commit_digest"]
    _require(commit_digest is None or is_digest(commit_digest))
    _require(is_digest(inspection["profile_digest"]))
    _require(_is_one_of(inspection["coordinate_binding"], _BINDINGS))
    _require(_is_one_of(inspection["snapshot_retention"], _RETENTIONS))
    _require(_is_one_of(inspection["agency_declaration"], _AGENCIES))
    _require(inspection["residual_obligations"] == list(RESIDUAL_OBLIGATIONS))
    reasons = inspection["reason_codes"]
    _require(
        type(reasons) is list and all(_is_one_of(code, INSPECTION_REASON_CODES) for code in reasons)
    )
    _require(all(left < right for left, right in itertools.pairwise(reasons)))
    coordinates = inspection["coordinates"]
    report = inspection["formation_report"]
    _require(type(coordinates) is dict)
    if coordinates == {}:
        _require(commit_digest is None and report is None)
    else:
        _require(commit_digest is not None)
        _require(coordinates.keys() == set(ROLES))
        for coordinate in coordinates.values():
            _require(type(coordinate) is dict and coordinate.keys() == {"path", "object_digest"})
            path = coordinate["path"]
            object_digest = coordinate["object_digest"]
            _require(path is None or is_portable_path(path))
            _require(object_digest is None or is_digest(object_digest))
            _require(path is not None or object_digest is None)
    if report is not None:
        _check_report(report)


def _check_observed(observed: object) -> None:
    _require(type(observed) is list and len(observed) <= MAX_EVIDENCE_ENTRIES)
    assert isinstance(observed, list)
    total = 0
    previous = ""
    for item in observed:
        _require(type(item) is dict and item.keys() == _OBSERVED_KEYS)
        requested = item["requested_digest"]
        _require(is_digest(requested) and is_digest(item["observed_digest"]))
        _require(requested > previous)
        previous = requested
        size = item["size_bytes"]
        _require(type(size) is int and 0 <= size <= MAX_OBJECT_BYTES)
        total += size
        _require(total <= MAX_SNAPSHOT_BYTES)


def _admit_selection(data: object) -> dict[str, Any]:
    try:
        value = admit_record(data, SELECTION_SCHEMA, max_bytes=MAX_SELECTION_BYTES)
        return _check_selection_value(value)
    except (CanonicalError, _Grammar):
        raise FormationReceiptError(SELECTION_INVALID) from None


def _admit_receipt(data: object) -> dict[str, Any]:
    try:
        receipt = admit_record(
            data,
            RECEIPT_SCHEMA,
            max_bytes=MAX_RECEIPT_BYTES,
            max_depth=MAX_RECEIPT_DEPTH,
            max_containers=MAX_RECEIPT_CONTAINERS,
        )
        _require(receipt.keys() == _RECEIPT_KEYS)
        _check_selection_value(receipt["selection"])
        _require(is_digest(receipt["selection_digest"]))
        _require(is_digest(receipt["rule_profile_digest"]))
        _check_observed(receipt["observed_evidence"])
        _check_inspection(receipt["inspection"])
    except (CanonicalError, _Grammar):
        raise FormationReceiptError(RECEIPT_INVALID) from None
    return receipt


def _capture_evidence(evidence: object) -> dict[str, bytes]:
    """Copy the whole evidence mapping (extras included) without invoking any caller hook."""
    if type(evidence) is not dict:
        raise FormationReceiptError(INPUT_INVALID)
    if len(evidence) > MAX_EVIDENCE_ENTRIES:
        raise FormationReceiptError(LIMIT_EXCEEDED)
    captured: dict[str, bytes] = {}
    total = 0
    try:
        for key, value in evidence.items():
            if type(key) is not str or not is_digest(key) or type(value) is not bytes:
                raise FormationReceiptError(INPUT_INVALID)
            size = len(value)
            total += size
            if size > MAX_OBJECT_BYTES or total > MAX_SNAPSHOT_BYTES:
                raise FormationReceiptError(LIMIT_EXCEEDED)
            captured[key] = value
    except RuntimeError:  # the mapping changed while it was being captured
        raise FormationReceiptError(INPUT_INVALID) from None
    return captured


def _build(
    selection_bytes: object, commit_bytes: object, evidence: object
) -> tuple[bytes, dict[str, Any]]:
    selection = _admit_selection(selection_bytes)
    if type(commit_bytes) is not bytes:
        raise FormationReceiptError(INPUT_INVALID)
    if len(commit_bytes) > MAX_COMMIT_BYTES:
        raise FormationReceiptError(LIMIT_EXCEEDED)
    if digest_bytes(commit_bytes) != selection["commit_digest"]:
        raise FormationReceiptError(BINDING_INVALID)
    captured = _capture_evidence(evidence)
    try:
        requested = census_digests(admit_commit(commit_bytes))
    except CommitRefused:
        requested = []
    observed = {digest: captured[digest] for digest in requested if digest in captured}
    inspection = inspect_silo_formation(
        commit_bytes,
        dict(observed),
        subject_path=selection["subject_path"],
        certificate_path=selection["certificate_path"],
        profile_path=selection["profile_path"],
        ground_path=selection["ground_path"],
    )
    assert type(selection_bytes) is bytes
    receipt = {
        "schema_version": RECEIPT_SCHEMA,
        "selection": selection,
        "selection_digest": digest_bytes(selection_bytes),
        "rule_profile_digest": PROFILE_DIGEST,
        "observed_evidence": [
            {
                "requested_digest": digest,
                "observed_digest": digest_bytes(data),
                "size_bytes": len(data),
            }
            for digest, data in observed.items()
        ],
        "inspection": inspection,
    }
    data = canonical_bytes(receipt)
    _admit_receipt(data)
    return data, inspection


def build_formation_receipt(
    selection_bytes: object, commit_bytes: object, evidence: object
) -> bytes:
    """Build the canonical receipt bytes for one selection (rules in the module docstring)."""
    return _build(selection_bytes, commit_bytes, evidence)[0]


def recheck_formation_receipt(
    receipt_bytes: object, selection_bytes: object, commit_bytes: object, evidence: object
) -> dict[str, Any]:
    """Recompute a receipt from the caller's inputs; return the fresh inspection if identical."""
    receipt = _admit_receipt(receipt_bytes)
    selection = _admit_selection(selection_bytes)
    assert type(selection_bytes) is bytes
    if (
        receipt["selection"] != selection
        or receipt["selection_digest"] != digest_bytes(selection_bytes)
        or receipt["rule_profile_digest"] != PROFILE_DIGEST
    ):
        raise FormationReceiptError(BINDING_INVALID)
    rebuilt, inspection = _build(selection_bytes, commit_bytes, evidence)
    if rebuilt != receipt_bytes:
        raise FormationReceiptError(NOT_REPRODUCED)
    return inspection
