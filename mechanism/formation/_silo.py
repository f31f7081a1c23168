"""Retained-silo formation inspection (``docs/spec/formation.md`` §6).

``inspect_silo_formation(commit_bytes, evidence, *, subject_path, certificate_path,
profile_path, ground_path) -> dict`` is local, pure and non-executing. It never raises for bad
input, never mutates its inputs, never calls a hook of a caller-supplied object, never fetches,
extracts or executes an artifact, and never promotes anything into a silo assessment.

Rules, in the order they are applied:

1. Commit admission (``VSTD-SILO-COMMIT-0.1``): the commit grammar of
   :mod:`mechanism.formation._silo_commit` (exact bytes, size and scan limits, strict canonical
   JSON, then the whole commit validated). A size/scan limit or a foreign schema version
   returns at once with
   ``COMMIT_UNSUPPORTED_OR_LIMITED`` and every facet ``UNKNOWN``; anything else malformed
   returns ``COMMIT_INVALID`` with binding and retention ``INVALID``. Either way
   ``commit_digest`` is null and ``coordinates`` is ``{}``. Declared derivations and relations
   (e.g. a CHECKS link) are validated, never consulted: a link is not proof that checking ran.
2. Each selector (subject, certificate, profile, ground, in that order) must be an exact ``str``
   portable path (``SELECTED_PATH_INVALID``) naming a census path
   (``SELECTED_PATH_NOT_IN_CENSUS``); subject/certificate/profile records must carry their exact
   role declaration (``SELECTED_ROLE_DECLARATION_INVALID``); ground bytes stay opaque.
3. The ground selector must be one of the commit's ``ground_paths``
   (``SELECTED_GROUND_NOT_DECLARED``).
4. The evidence snapshot: exactly a built-in ``dict`` (``EVIDENCE_MAPPING_UNSUPPORTED``), at most
   256 entries (``EVIDENCE_ENTRY_LIMIT``), exact ``str`` keys (``EVIDENCE_MAPPING_UNSUPPORTED``)
   that are strict digests (``EVIDENCE_MAPPING_INVALID``), not changed while it is copied
   (``EVIDENCE_SNAPSHOT_UNAVAILABLE``). Any of these discards the whole snapshot. A value that is
   not exactly ``bytes`` is kept as an invalid value; no value's methods are ever called.
5. Every distinct census digest, once, in ascending order: ``MISSING``; ``INVALID``
   (``OBJECT_BYTES_INVALID``); ``UNKNOWN`` (``SNAPSHOT_BYTE_LIMIT``: the object is over 4 MiB or
   would take the running total over 16 MiB; it is skipped and not counted); else hashed:
   ``INVALID`` (``OBJECT_DIGEST_MISMATCH``) or ``RETAINED``.
6. ``snapshot_retention``: declared sizes are checked per census entry (``OBJECT_SIZE_MISMATCH``);
   INVALID dominates UNKNOWN dominates INCOMPLETE (``CENSUS_OBJECT_MISSING``) dominates COMPLETE.
7. Selected objects: known-invalid bytes or a size mismatch make the binding INVALID; unavailable
   bytes are ``SELECTED_OBJECT_UNAVAILABLE`` (UNKNOWN).
8. The retained subject/certificate bytes are admitted (``FORMATION_RECORD_INVALID`` /
   ``FORMATION_RECORD_UNSUPPORTED_OR_LIMITED``) and, when both are present, the formation report
   is computed afresh by ``check_formation`` from exactly those digest-checked bytes.
9. Agency declaration: foreign version or self-consistent foreign action set →
   ``AGENCY_DECLARATION_UNSUPPORTED`` (UNKNOWN); inconsistent digest →
   ``AGENCY_DECLARATION_DIGEST_MISMATCH`` (INVALID); canonical and subject admitted → ``MATCHED``.
10. Subject context and certificate coordinates are compared with the commit's declarations
    (``SUBJECT_AGENCY_CONTEXT_MISMATCH``, ``SUBJECT_GROUND_CONTEXT_MISMATCH``,
    ``SUBJECT_PROFILE_COORDINATE_MISMATCH``, ``CERTIFICATE_COORDINATE_MISMATCH``), all INVALID;
    no admitted subject leaves the binding UNKNOWN.
11. Retained profile bytes other than the compiled profile are ``FORMATION_PROFILE_UNSUPPORTED``.
12. ``coordinate_binding`` is INVALID over UNKNOWN over BOUND; ``reason_codes`` is sorted and
    de-duplicated, always drawn from :data:`INSPECTION_REASON_CODES`.

The four observations stay independent; the residual obligations are always the fixed eight.
This module also re-exports the commit grammar's public names (``admit_commit``,
``census_digests``, ``is_text``, ``is_portable_path``, ``CommitRefused``, the limits and schema
names) for its existing importers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from mechanism.canonical import canonical_digest, digest_bytes, is_digest
from mechanism.formation._checker import check_formation
from mechanism.formation._silo_commit import (
    COMMIT_SCHEMA,
    MAX_COMMIT_BYTES,
    MAX_OBJECT_BYTES,
    MAX_PATH_CHARS,
    OBJECT_SCHEMA,
    CommitRefused,
    admit_commit,
    census_digests,
    is_portable_path,
    is_text,
)
from mechanism.formation._wire import (
    PROFILE_DIGEST,
    RESIDUAL_OBLIGATIONS,
    FormationError,
    FormationLimitError,
    UnsupportedFormation,
    admit_certificate,
    admit_subject,
    profile_bytes,
)

__all__ = [
    "AGENCY_VERSION",
    "CANONICAL_AGENCY_ACTIONS",
    "CANONICAL_AGENCY_DIGEST",
    "COMMIT_SCHEMA",
    "INSPECTION_REASON_CODES",
    "MAX_COMMIT_BYTES",
    "MAX_EVIDENCE_ENTRIES",
    "MAX_OBJECT_BYTES",
    "MAX_PATH_CHARS",
    "MAX_SNAPSHOT_BYTES",
    "OBJECT_SCHEMA",
    "ROLES",
    "ROLE_DECLARATIONS",
    "CommitRefused",
    "admit_commit",
    "census_digests",
    "inspect_silo_formation",
    "is_portable_path",
    "is_text",
]

AGENCY_VERSION: Final = "VSTD-AUTHORITY-AXIOM-AGENCY-0.1"
CANONICAL_AGENCY_ACTIONS: Final = (
    "CHALLENGE_WITH_COUNTEREVIDENCE",
    "EXIT_COMPOSITION",
    "EXPORT_ACCESSIBLE_SILO",
    "FORK_DERIVATION",
    "INDEPENDENTLY_INSPECT_ACCESSIBLE_ARTIFACTS",
    "PRESERVE_CONFLICT",
    "PRESERVE_UNKNOWN",
    "SELECT_TRUST_ROOTS",
    "WITHDRAW_OWN_AUTHORIZATION",
)
CANONICAL_AGENCY_DIGEST: Final = (
    "sha256:41e3a27c8322874bb5634890d33cff2a9170f2906c83d45d9c7968836d7e482c"
)

MAX_EVIDENCE_ENTRIES: Final = 256
MAX_SNAPSHOT_BYTES: Final = 16_777_216

INSPECTION_REASON_CODES: Final = frozenset(
    {
        "AGENCY_DECLARATION_DIGEST_MISMATCH",
        "AGENCY_DECLARATION_UNSUPPORTED",
        "CENSUS_OBJECT_MISSING",
        "CERTIFICATE_COORDINATE_MISMATCH",
        "COMMIT_INVALID",
        "COMMIT_UNSUPPORTED_OR_LIMITED",
        "EVIDENCE_ENTRY_LIMIT",
        "EVIDENCE_MAPPING_INVALID",
        "EVIDENCE_MAPPING_UNSUPPORTED",
        "EVIDENCE_SNAPSHOT_UNAVAILABLE",
        "FORMATION_PROFILE_UNSUPPORTED",
        "FORMATION_RECORD_INVALID",
        "FORMATION_RECORD_UNSUPPORTED_OR_LIMITED",
        "OBJECT_BYTES_INVALID",
        "OBJECT_DIGEST_MISMATCH",
        "OBJECT_SIZE_MISMATCH",
        "SELECTED_GROUND_NOT_DECLARED",
        "SELECTED_OBJECT_UNAVAILABLE",
        "SELECTED_PATH_INVALID",
        "SELECTED_PATH_NOT_IN_CENSUS",
        "SELECTED_ROLE_DECLARATION_INVALID",
        "SNAPSHOT_BYTE_LIMIT",
        "SUBJECT_AGENCY_CONTEXT_MISMATCH",
        "SUBJECT_GROUND_CONTEXT_MISMATCH",
        "SUBJECT_PROFILE_COORDINATE_MISMATCH",
    }
)

ROLES: Final = ("subject", "certificate", "profile", "ground")
# (artifact_kind, declared_schema_id, media_type) each formation role's census record declares.
ROLE_DECLARATIONS: Final[Mapping[str, tuple[str, str, str]]] = {
    "subject": ("typed-formation-subject", "VSTD-TYPED-FORMATION-0.1", "application/json"),
    "certificate": (
        "typed-formation-certificate",
        "VSTD-TYPED-FORMATION-CERTIFICATE-0.1",
        "application/json",
    ),
    "profile": (
        "typed-formation-profile",
        "VSTD-TYPED-FORMATION-PROFILE-0.1",
        "application/json",
    ),
}


# --------------------------------------------------------------------------------------------
# Evidence snapshot

_INVALID_VALUE: Final = object()


def _snapshot(evidence: object) -> tuple[dict[str, object] | None, str | None]:
    """Copy an exact built-in dict without calling any caller hook.

    Returns ``(snapshot, None)`` or ``(None, reason)``; non-``bytes`` values are replaced by a
    private marker so they can never be used (or have a method called) later.
    """
    if type(evidence) is not dict:
        return None, "EVIDENCE_MAPPING_UNSUPPORTED"
    if len(evidence) > MAX_EVIDENCE_ENTRIES:
        return None, "EVIDENCE_ENTRY_LIMIT"
    captured: dict[str, object] = {}
    try:
        for key, value in evidence.items():
            if type(key) is not str:
                return None, "EVIDENCE_MAPPING_UNSUPPORTED"
            if not is_digest(key):
                return None, "EVIDENCE_MAPPING_INVALID"
            captured[key] = value if type(value) is bytes else _INVALID_VALUE
    except RuntimeError:  # changed size or keys while being copied (another thread)
        return None, "EVIDENCE_SNAPSHOT_UNAVAILABLE"
    return captured, None


# --------------------------------------------------------------------------------------------
# Inspection


def _blank_result() -> dict[str, Any]:
    return {
        "commit_digest": None,
        "profile_digest": PROFILE_DIGEST,
        "coordinates": {},
        "coordinate_binding": "UNKNOWN",
        "snapshot_retention": "UNKNOWN",
        "agency_declaration": "UNKNOWN",
        "formation_report": None,
        "reason_codes": [],
        "residual_obligations": list(RESIDUAL_OBLIGATIONS),
    }


def _dominant(states: set[str], *, valid: str) -> str:
    for state in ("INVALID", "UNKNOWN", "INCOMPLETE"):
        if state in states:
            return state
    return valid


class _Notes:
    """The reason codes and coordinate-binding facets an inspection gathers (order-free sets)."""

    def __init__(self) -> None:
        self.reasons: set[str] = set()
        self.binding: set[str] = set()

    def note(self, code: str, facet: str | None = None) -> None:
        self.reasons.add(code)
        if facet is not None:
            self.binding.add(facet)


def _admit_role(role_bytes: bytes, admit: Any, notes: _Notes) -> dict[str, Any] | None:
    try:
        record: dict[str, Any] = admit(role_bytes)
    except (UnsupportedFormation, FormationLimitError):
        notes.note("FORMATION_RECORD_UNSUPPORTED_OR_LIMITED", "UNKNOWN")
        return None
    except FormationError:
        notes.note("FORMATION_RECORD_INVALID", "INVALID")
        return None
    return record


def _select(
    commit: dict[str, Any], selectors: dict[str, object], notes: _Notes
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Rules 2–3: each role's coordinates, and the census records of the roles selected."""
    records: dict[str, dict[str, Any]] = {}
    by_path = {entry["path"]: entry["object"] for entry in commit["census"]}
    coordinates: dict[str, dict[str, Any]] = {}
    for role in ROLES:
        selector = selectors[role]
        if type(selector) is not str or not is_portable_path(selector):
            coordinates[role] = {"path": None, "object_digest": None}
            notes.note("SELECTED_PATH_INVALID", "INVALID")
            continue
        record = by_path.get(selector)
        coordinates[role] = {
            "path": selector,
            "object_digest": None if record is None else record["object_digest"],
        }
        if record is None:
            notes.note("SELECTED_PATH_NOT_IN_CENSUS", "INVALID")
            continue
        records[role] = record
        declared = ROLE_DECLARATIONS.get(role)
        if declared is not None and declared != (
            record["artifact_kind"],
            record["declared_schema_id"],
            record["media_type"],
        ):
            notes.note("SELECTED_ROLE_DECLARATION_INVALID", "INVALID")
    ground_path = selectors["ground"]
    # An exact-str test first: ``in`` would call a foreign object's ``__eq__``.
    if type(ground_path) is not str or ground_path not in commit["ground_paths"]:
        notes.note("SELECTED_GROUND_NOT_DECLARED", "INVALID")
    return coordinates, records


def _census_states(
    commit: dict[str, Any], snapshot: dict[str, object] | None, notes: _Notes
) -> tuple[dict[str, str], dict[str, bytes]]:
    """Rule 5: each distinct census digest's state, once, ascending, under the byte budget."""
    states: dict[str, str] = {}
    retained: dict[str, bytes] = {}
    spent = 0
    for digest in census_digests(commit):
        if snapshot is None:
            states[digest] = "UNKNOWN"
            continue
        if digest not in snapshot:
            states[digest] = "MISSING"
            continue
        value = snapshot[digest]
        if type(value) is not bytes:
            states[digest] = "INVALID"
            notes.note("OBJECT_BYTES_INVALID")
            continue
        size = len(value)
        if size > MAX_OBJECT_BYTES or spent + size > MAX_SNAPSHOT_BYTES:
            states[digest] = "UNKNOWN"
            notes.note("SNAPSHOT_BYTE_LIMIT")
            continue
        spent += size
        if digest_bytes(value) != digest:
            states[digest] = "INVALID"
            notes.note("OBJECT_DIGEST_MISMATCH")
            continue
        states[digest] = "RETAINED"
        retained[digest] = value
    return states, retained


def _retention(
    commit: dict[str, Any],
    states: dict[str, str],
    retained: dict[str, bytes],
    snapshot_error: str | None,
    notes: _Notes,
) -> str:
    """Rule 6: ``snapshot_retention`` over the whole census."""
    retention = set(states.values())
    if snapshot_error is not None:
        notes.note(snapshot_error)
        retention.add("INVALID" if snapshot_error == "EVIDENCE_MAPPING_INVALID" else "UNKNOWN")
    for entry in commit["census"]:
        record = entry["object"]
        held = retained.get(record["object_digest"])
        if held is not None and len(held) != record["size_bytes"]:
            retention.add("INVALID")
            notes.note("OBJECT_SIZE_MISMATCH")
    if "MISSING" in retention:
        notes.note("CENSUS_OBJECT_MISSING")
        retention.add("INCOMPLETE")
    return _dominant(retention, valid="COMPLETE")


def _selected_bytes(
    records: dict[str, dict[str, Any]],
    states: dict[str, str],
    retained: dict[str, bytes],
    notes: _Notes,
) -> dict[str, bytes]:
    """Rule 7: the retained bytes of each selected role (a size mismatch still included)."""
    role_bytes: dict[str, bytes] = {}
    for role, record in records.items():
        state = states[record["object_digest"]]
        if state == "INVALID":
            notes.binding.add("INVALID")
        elif state != "RETAINED":
            notes.note("SELECTED_OBJECT_UNAVAILABLE", "UNKNOWN")
        else:
            held = retained[record["object_digest"]]
            if len(held) != record["size_bytes"]:
                notes.binding.add("INVALID")
            role_bytes[role] = held
    return role_bytes


def _agency(commit: dict[str, Any], subject: dict[str, Any] | None, notes: _Notes) -> str:
    """Rule 9: the agency declaration against the canonical action set."""
    version = commit["authority_axiom_agency_version"]
    actions = commit["authority_axiom_agency"]
    if version != AGENCY_VERSION:
        notes.note("AGENCY_DECLARATION_UNSUPPORTED", "UNKNOWN")
    elif (
        canonical_digest({"schema_version": version, "actions": sorted(actions)})
        != commit["authority_axiom_agency_digest"]
    ):
        notes.note("AGENCY_DECLARATION_DIGEST_MISMATCH", "INVALID")
        return "INVALID"
    elif tuple(actions) != CANONICAL_AGENCY_ACTIONS:
        notes.note("AGENCY_DECLARATION_UNSUPPORTED", "UNKNOWN")
    elif subject is not None:
        return "MATCHED"
    return "UNKNOWN"


def _compare_context(
    commit: dict[str, Any],
    records: dict[str, dict[str, Any]],
    subject: dict[str, Any],
    certificate: dict[str, Any] | None,
    notes: _Notes,
) -> bool:
    """Rule 10 for an admitted subject; ``True`` when its agency context contradicts the commit."""
    context = subject["context"]
    agency_mismatch: bool = (
        context["authority_axiom_agency_digest"] != commit["authority_axiom_agency_digest"]
    )
    if agency_mismatch:
        notes.note("SUBJECT_AGENCY_CONTEXT_MISMATCH", "INVALID")
    ground = records.get("ground")
    if ground is not None and context["ground_artifact_digest"] != ground["object_digest"]:
        notes.note("SUBJECT_GROUND_CONTEXT_MISMATCH", "INVALID")
    profile = records.get("profile")
    if profile is not None and subject["profile_digest"] != profile["object_digest"]:
        notes.note("SUBJECT_PROFILE_COORDINATE_MISMATCH", "INVALID")
    if certificate is not None and (
        certificate["subject_digest"] != records["subject"]["object_digest"]
        or certificate["profile_digest"] != subject["profile_digest"]
        or certificate["root"] != subject["root"]
    ):
        notes.note("CERTIFICATE_COORDINATE_MISMATCH", "INVALID")
    return agency_mismatch


def inspect_silo_formation(
    commit_bytes: object,
    evidence: object,
    *,
    subject_path: object,
    certificate_path: object,
    profile_path: object,
    ground_path: object,
) -> dict[str, Any]:
    """Inspect a retained silo's formation coordinates (see the module docstring for rules)."""
    result = _blank_result()
    try:
        commit = admit_commit(commit_bytes)
    except CommitRefused as refusal:
        if refusal.limited:
            result["reason_codes"] = ["COMMIT_UNSUPPORTED_OR_LIMITED"]
        else:
            result["coordinate_binding"] = "INVALID"
            result["snapshot_retention"] = "INVALID"
            result["reason_codes"] = ["COMMIT_INVALID"]
        return result
    assert type(commit_bytes) is bytes
    notes = _Notes()

    # 1–3. Coordinates.
    result["commit_digest"] = digest_bytes(commit_bytes)
    selectors = {
        "subject": subject_path,
        "certificate": certificate_path,
        "profile": profile_path,
        "ground": ground_path,
    }
    result["coordinates"], records = _select(commit, selectors, notes)

    # 4–6. Snapshot, each distinct census digest, retention over the whole census.
    snapshot, snapshot_error = _snapshot(evidence)
    states, retained = _census_states(commit, snapshot, notes)
    result["snapshot_retention"] = _retention(commit, states, retained, snapshot_error, notes)

    # 7–8. Selected objects, their bytes, and the fresh formation report.
    role_bytes = _selected_bytes(records, states, retained, notes)
    subject = certificate = None
    if "subject" in role_bytes:
        subject = _admit_role(role_bytes["subject"], admit_subject, notes)
    if "certificate" in role_bytes:
        certificate = _admit_role(role_bytes["certificate"], admit_certificate, notes)
    if "subject" in role_bytes and "certificate" in role_bytes:
        result["formation_report"] = check_formation(
            role_bytes["subject"], role_bytes["certificate"]
        )

    # 9–10. Agency declaration; subject context and certificate coordinates.
    agency = _agency(commit, subject, notes)
    if subject is None:
        notes.binding.add("UNKNOWN")
    elif _compare_context(commit, records, subject, certificate, notes):
        agency = "INVALID"
    result["agency_declaration"] = agency

    # 11. The profile bytes must be the compiled profile.
    if "profile" in role_bytes and role_bytes["profile"] != profile_bytes():
        notes.note("FORMATION_PROFILE_UNSUPPORTED", "UNKNOWN")

    # 12. Outcome.
    result["coordinate_binding"] = _dominant(notes.binding, valid="BOUND")
    result["reason_codes"] = sorted(notes.reasons)
    return result
